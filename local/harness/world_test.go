package harness_test

import (
	"bytes"
	"context"
	"crypto/ed25519"
	"encoding/json"
	"net/http/httptest"
	"path/filepath"
	"strings"
	"testing"

	"github.com/a2awire/a2awire/local/harness"
	"github.com/a2awire/a2awire/shared/auth"
	"github.com/a2awire/a2awire/shared/logging"
	"github.com/a2awire/a2awire/shared/store/bolt"
)

// TestSeedLobbyAcrossRestarts: on a bolt data directory the first start
// creates lobby owned by the network key, a restart with the same key
// keeps it (same createdAt), another key is refused with the reason, and
// the harness serves the lobby publicly with its card.
func TestSeedLobbyAcrossRestarts(t *testing.T) {
	path := filepath.Join(t.TempDir(), "data.db")
	key := ed25519.NewKeyFromSeed(bytes.Repeat([]byte{7}, ed25519.SeedSize))
	ctx := context.Background()

	st, err := bolt.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	first, created, err := harness.SeedLobby(ctx, st, key)
	if err != nil || !created || first.ID != harness.LobbyWorld || first.OwnerKeyID != auth.KeyID(key.Public().(ed25519.PublicKey)) {
		t.Fatalf("first start: %+v created %v: %v", first, created, err)
	}
	if err := st.Close(); err != nil {
		t.Fatal(err)
	}

	st, err = bolt.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = st.Close() })
	again, created, err := harness.SeedLobby(ctx, st, key)
	if err != nil || created || !again.CreatedAt.Equal(first.CreatedAt) {
		t.Fatalf("restart: %+v created %v: %v", again, created, err)
	}
	other := ed25519.NewKeyFromSeed(bytes.Repeat([]byte{8}, ed25519.SeedSize))
	if _, _, err := harness.SeedLobby(ctx, st, other); err == nil || !strings.Contains(err.Error(), "not the network key") {
		t.Errorf("another key: %v", err)
	}

	h := mustHarness(t, harness.Options{Log: logging.Discard(), Store: st, NetworkKey: key})
	for _, path := range []string{"/v0/worlds/lobby", "/v0/worlds/lobby/.well-known/agent-card.json"} {
		w := httptest.NewRecorder()
		h.ServeHTTP(w, httptest.NewRequest("GET", "http://127.0.0.1:8080"+path, nil))
		var body map[string]any
		if err := json.Unmarshal(w.Body.Bytes(), &body); w.Code != 200 || err != nil {
			t.Errorf("%s: %d %s", path, w.Code, w.Body)
		}
	}
}
