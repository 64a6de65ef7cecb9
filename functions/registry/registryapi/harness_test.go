package registryapi_test

import (
	"crypto/ed25519"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/a2awire/a2awire/local/harness"
	"github.com/a2awire/a2awire/shared/auth"
	"github.com/a2awire/a2awire/shared/logging"
)

// TestHarnessServesRegistry: the local harness mounts the registry from
// the route table, with the network key it generated at start, and lets a
// signed registration with an http:// endpoint through, as the registry
// allows locally (the cloud wants https).
func TestHarnessServesRegistry(t *testing.T) {
	h, err := harness.New(harness.Options{Log: logging.Discard()})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = h.Close() })
	if len(h.NetworkKey()) != ed25519.PrivateKeySize {
		t.Fatal("the harness generated no network key")
	}

	w := httptest.NewRecorder()
	h.ServeHTTP(w, httptest.NewRequest("GET", "http://127.0.0.1:8080/.well-known/http-message-signatures-directory", nil))
	var d auth.Directory
	if err := json.Unmarshal(w.Body.Bytes(), &d); w.Code != 200 || err != nil || len(d.Keys) != 1 {
		t.Fatalf("network directory: %d %s", w.Code, w.Body)
	}
	if got, _ := d.Keys[0].PublicKey(); !got.Equal(h.NetworkKey().Public()) {
		t.Errorf("directory key %x is not the harness's network key", got)
	}

	k := key(5)
	body := registration("local-agent", k, "word-count")
	req := httptest.NewRequest("POST", "http://127.0.0.1:8080/api/v1/agents", strings.NewReader(body))
	req.Header.Set("Content-Type", "application/json")
	s, err := auth.NewSigner(k)
	if err != nil {
		t.Fatal(err)
	}
	out, _ := http.NewRequest("POST", "http://127.0.0.1:8080/api/v1/agents", strings.NewReader(body))
	if err := s.Sign(out); err != nil {
		t.Fatal(err)
	}
	for name, v := range out.Header {
		req.Header[name] = v
	}
	w = httptest.NewRecorder()
	h.ServeHTTP(w, req)
	if w.Code != http.StatusCreated {
		t.Fatalf("register through the harness: %d %s", w.Code, w.Body)
	}
	w = httptest.NewRecorder()
	h.ServeHTTP(w, httptest.NewRequest("GET", "http://127.0.0.1:8080/api/v1/agents/local-agent", nil))
	if w.Code != 200 || !strings.Contains(w.Body.String(), `"endpoint":"http://127.0.0.1:9/local-agent"`) {
		t.Errorf("profile through the harness: %d %s", w.Code, w.Body)
	}
}
