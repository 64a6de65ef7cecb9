package function_test

import (
	"crypto/ed25519"
	"encoding/base64"
	"errors"
	"strings"
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

// TestParseNetworkKeyJSON covers the JSON form a key/value secret takes when
// the dynamic reference hands over its whole SecretString.
func TestParseNetworkKeyJSON(t *testing.T) {
	seed := []byte("function-test-network-key-seed-3")
	want := ed25519.NewKeyFromSeed(seed)
	b64 := base64.StdEncoding.EncodeToString(seed)
	for _, ok := range []string{
		`{"seed":"` + b64 + `"}`,
		`{"anything":"` + b64 + `"}`,
		`{"NETWORK_SIGNING_KEY":"` + b64 + `","note":"rotated in May"}`,
		` {"seed": " ` + b64 + ` "} `,
		b64 + "\n",
	} {
		got, err := function.ParseNetworkKey(ok)
		if err != nil || !got.Equal(want) {
			t.Errorf("%q: %v", ok, err)
		}
	}
	for _, bad := range []string{
		`{"a":"` + b64 + `","b":"x"}`,
		`{"seed":5}`,
		`{}`,
		`{"seed":"c2hvcnQ="}`,
		`{not json`,
	} {
		_, err := function.ParseNetworkKey(bad)
		if err == nil {
			t.Errorf("%q accepted", bad)
			continue
		}
		if strings.Contains(err.Error(), b64) {
			t.Errorf("%q: error shows the secret: %v", bad, err)
		}
	}
}

// TestKeysFromEnvBadSigningKey: an unusable signing key is a
// SigningKeyError that leaves the public key usable, and a key that is not
// the published public key's private half is refused.
func TestKeysFromEnvBadSigningKey(t *testing.T) {
	seed := []byte("function-test-network-key-seed-3")
	pub := ed25519.NewKeyFromSeed(seed).Public().(ed25519.PublicKey)
	other := ed25519.NewKeyFromSeed([]byte("function-test-other-key-seed-000"))
	env := func(m map[string]string) func(string) string { return func(k string) string { return m[k] } }
	for name, signing := range map[string]string{
		"garbage":  "not a key",
		"mismatch": base64.StdEncoding.EncodeToString(other.Seed()),
	} {
		priv, p, err := function.KeysFromEnv(env(map[string]string{
			function.NetworkKeyEnv: signing, function.NetworkPublicKeyEnv: base64.StdEncoding.EncodeToString(pub)}))
		var bad *function.SigningKeyError
		if !errors.As(err, &bad) || priv != nil || !p.Equal(pub) {
			t.Errorf("%s: priv %v pub %v err %v, want a SigningKeyError with the public key", name, priv != nil, p, err)
		}
	}
	priv, p, err := function.KeysFromEnv(env(map[string]string{
		function.NetworkKeyEnv: base64.StdEncoding.EncodeToString(seed), function.NetworkPublicKeyEnv: base64.StdEncoding.EncodeToString(pub)}))
	if err != nil || priv == nil || !p.Equal(pub) {
		t.Errorf("pair: %v %v %v", priv != nil, p, err)
	}
}
