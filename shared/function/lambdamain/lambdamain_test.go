package lambdamain_test

import (
	"bytes"
	"crypto/ed25519"
	"log/slog"
	"strings"
	"testing"

	"github.com/a2awire/a2awire/shared/function"
	"github.com/a2awire/a2awire/shared/function/lambdamain"
)

// TestBadSigningKeyStartsWithoutIt: a signing key that cannot be used is
// logged as an error and the builder still runs, without the key, so a
// bad secret is no init crash loop.
func TestBadSigningKeyStartsWithoutIt(t *testing.T) {
	var logs bytes.Buffer
	log := slog.New(slog.NewJSONHandler(&logs, nil))
	var got function.Env
	b := func(env function.Env) (any, error) { got = env; return func() {}, nil }
	getenv := func(k string) string {
		if k == function.NetworkKeyEnv {
			return `{"a":"x","b":"y"}`
		}
		return ""
	}
	if _, err := lambdamain.Build("world-ping", b, getenv, log, nil); err != nil {
		t.Fatalf("Build: %v", err)
	}
	if got.NetworkKey != nil {
		t.Errorf("builder got a key")
	}
	if !strings.Contains(logs.String(), `"level":"ERROR"`) || !strings.Contains(logs.String(), "signing key refused") {
		t.Errorf("no error logged: %s", logs.String())
	}
	// A good one still arrives.
	seed := make([]byte, ed25519.SeedSize)
	getenv = func(k string) string {
		if k == function.NetworkKeyEnv {
			return `{"seed":"AAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAA="}`
		}
		return ""
	}
	if _, err := lambdamain.Build("world-ping", b, getenv, log, nil); err != nil || !got.NetworkKey.Equal(ed25519.NewKeyFromSeed(seed)) {
		t.Errorf("JSON-form key: %v", err)
	}
}
