package auth_test

import (
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/a2awire/a2awire/shared/auth"
	"github.com/a2awire/a2awire/shared/store/memory"
)

// TestTransportSignsEachAttempt: an http.Client with auth.Transport reaches a
// verifying server on 127.0.0.1; every request carries a fresh nonce, and
// the caller's request is left untouched.
func TestTransportSignsEachAttempt(t *testing.T) {
	key := interopKey()
	st := memory.New()
	t.Cleanup(func() { _ = st.Close() })
	v := auth.NewVerifier(auth.NewNonces(st), time.Now)
	srv := httptest.NewServer(verifying(v, keyOf(key)))
	t.Cleanup(srv.Close)

	s, err := auth.NewSigner(key, auth.WithSignatureAgent(srv.URL+"/api/v1/keys/"+auth.KeyID(keyOf(key))))
	if err != nil {
		t.Fatal(err)
	}
	client := &http.Client{Transport: &auth.Transport{Signer: s}}
	for i, body := range []string{`{"a":1}`, `{"a":1}`, ""} {
		req, _ := http.NewRequest("POST", srv.URL+"/api/v1/agents?q=1", strings.NewReader(body))
		resp, err := client.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		_ = resp.Body.Close()
		if resp.StatusCode != http.StatusNoContent {
			t.Fatalf("request %d: status %d", i, resp.StatusCode)
		}
		if req.Header.Get("Signature") != "" {
			t.Fatal("Transport modified the caller's request")
		}
	}
}
