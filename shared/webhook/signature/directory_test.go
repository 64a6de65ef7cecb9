package signature_test

import (
	"crypto/ed25519"
	"encoding/base64"
	"encoding/json"
	"errors"
	"net/http/httptest"
	"testing"
	"time"

	"github.com/a2awire/a2awire/local/harness"
	"github.com/a2awire/a2awire/shared/logging"
	"github.com/a2awire/a2awire/shared/webhook/signature"
)

// TestV1aVerifiesWithDirectoryKey: a receiver that knows no secret fetches
// the network's key from /.well-known/http-message-signatures-directory (here
// through the local harness, HTTP → gateway event → the registry's Lambda
// entry), decodes the JWK's base64url x, and checks the v1a signature of a
// delivery signed with the harness's network key.
func TestV1aVerifiesWithDirectoryKey(t *testing.T) {
	h, err := harness.New(harness.Options{Log: logging.Discard()})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = h.Close() })

	w := httptest.NewRecorder()
	h.ServeHTTP(w, httptest.NewRequest("GET", "http://127.0.0.1:8080/.well-known/http-message-signatures-directory", nil))
	if w.Code != 200 {
		t.Fatalf("directory: %d %s", w.Code, w.Body)
	}
	// Read the directory as any receiver would, without this repo's types.
	var dir struct {
		Keys []struct {
			Kty, Crv, X, Kid string
		} `json:"keys"`
	}
	if err := json.Unmarshal(w.Body.Bytes(), &dir); err != nil || len(dir.Keys) != 1 {
		t.Fatalf("directory body %s: %v", w.Body, err)
	}
	k := dir.Keys[0]
	if k.Kty != "OKP" || k.Crv != "Ed25519" {
		t.Fatalf("directory key is %s/%s", k.Kty, k.Crv)
	}
	raw, err := base64.RawURLEncoding.DecodeString(k.X)
	if err != nil || len(raw) != ed25519.PublicKeySize {
		t.Fatalf("x %q is not base64url of 32 bytes: %v", k.X, err)
	}
	pub := ed25519.PublicKey(raw)

	secret, _ := signature.NewSecret()
	body := []byte(`{"worldId":"lobby","eventId":"01JZ0000000000000000000001","event":"ping","payload":{},"timestamp":"2026-12-01T12:00:00Z"}`)
	hdr, err := signature.Headers("01JZ0000000000000000000001", time.Now(), body, secret, h.NetworkKey())
	if err != nil {
		t.Fatal(err)
	}
	if err := signature.VerifyV1a(hdr, body, pub, 0); err != nil {
		t.Fatalf("v1a with the directory's key: %v", err)
	}
	// Signed by any other key, the directory's key refuses it.
	_, other, _ := ed25519.GenerateKey(nil)
	hdr, _ = signature.Headers("01JZ0000000000000000000001", time.Now(), body, secret, other)
	if err := signature.VerifyV1a(hdr, body, pub, 0); !errors.Is(err, signature.ErrNoMatch) {
		t.Fatalf("v1a by another key: %v", err)
	}
}
