package harness_test

import (
	"bytes"
	"context"
	"crypto/ed25519"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"net/url"
	"testing"

	"github.com/a2awire/a2awire/local/harness"
	"github.com/a2awire/a2awire/shared/logging"
	"github.com/a2awire/a2awire/shared/store/memory"
)

// TestRegistryCursorKeyedByNetworkKey: the harness keys the registry's
// discovery cursors from its network key (the key file), so a harness
// restarted over the same data with the same key file continues a
// listing, and one with another key answers 400.
func TestRegistryCursorKeyedByNetworkKey(t *testing.T) {
	st := memory.New()
	t.Cleanup(func() { _ = st.Close() })
	netKey := ed25519.NewKeyFromSeed(bytes.Repeat([]byte{5}, ed25519.SeedSize))
	other := ed25519.NewKeyFromSeed(bytes.Repeat([]byte{6}, ed25519.SeedSize))
	first := mustHarness(t, harness.Options{Log: logging.Discard(), Store: st, NetworkKey: netKey})
	if _, err := harness.SeedFixtures(context.Background(), st, "http://127.0.0.1:8080", netKey); err != nil {
		t.Fatal(err)
	}
	get := func(h *harness.Harness, path string) (int, map[string]any) {
		w := httptest.NewRecorder()
		h.ServeHTTP(w, httptest.NewRequest("GET", "http://127.0.0.1:8080"+path, nil))
		var body map[string]any
		_ = json.Unmarshal(w.Body.Bytes(), &body)
		return w.Code, body
	}
	status, body := get(first, "/api/v1/agents?limit=1")
	next, _ := body["next_cursor"].(string)
	if status != http.StatusOK || next == "" {
		t.Fatalf("first page: %d %v", status, body)
	}
	path := "/api/v1/agents?limit=1&cursor=" + url.QueryEscape(next)
	restarted := mustHarness(t, harness.Options{Log: logging.Discard(), Store: st, NetworkKey: netKey})
	if status, body := get(restarted, path); status != http.StatusOK {
		t.Errorf("same key file: %d %v", status, body)
	}
	rekeyed := mustHarness(t, harness.Options{Log: logging.Discard(), Store: st, NetworkKey: other})
	if status, body := get(rekeyed, path); status != http.StatusBadRequest {
		t.Errorf("another key file: %d %v, want 400", status, body)
	}
}
