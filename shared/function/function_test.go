package function_test

import (
	"crypto/ed25519"
	"encoding/base64"
	"testing"

	"github.com/a2awire/a2awire/shared/function"
)

func TestKeysFromEnv(t *testing.T) {
	seed := []byte("function-test-network-key-seed-3")
	want := ed25519.NewKeyFromSeed(seed)
	pub := want.Public().(ed25519.PublicKey)
	env := func(m map[string]string) func(string) string { return func(k string) string { return m[k] } }

	priv, p, err := function.KeysFromEnv(env(map[string]string{function.NetworkKeyEnv: base64.StdEncoding.EncodeToString(seed)}))
	if err != nil || !priv.Equal(want) || !p.Equal(pub) {
		t.Fatalf("seed: %v %v %v", priv, p, err)
	}
	priv, p, err = function.KeysFromEnv(env(map[string]string{function.NetworkPublicKeyEnv: base64.StdEncoding.EncodeToString(pub)}))
	if err != nil || priv != nil || !p.Equal(pub) {
		t.Fatalf("public only: %v %v %v", priv, p, err)
	}
	if priv, p, err := function.KeysFromEnv(env(nil)); priv != nil || p != nil || err != nil {
		t.Fatalf("none: %v %v %v", priv, p, err)
	}
	for _, bad := range []string{"not base64!", "c2hvcnQ=", base64.RawStdEncoding.EncodeToString(seed)} {
		if _, _, err := function.KeysFromEnv(env(map[string]string{function.NetworkKeyEnv: bad})); err == nil {
			t.Errorf("seed %q accepted", bad)
		}
		if _, _, err := function.KeysFromEnv(env(map[string]string{function.NetworkPublicKeyEnv: bad})); err == nil {
			t.Errorf("public key %q accepted", bad)
		}
	}
}
