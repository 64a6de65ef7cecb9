package main

import (
	"context"
	"encoding/json"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/a2awire/a2awire/shared/capture"
)

// profile reads GET /api/v1/agents/{name} from the running harness.
func (h *harnessRun) profile(t *testing.T, name string) map[string]any {
	t.Helper()
	resp, err := http.Get(h.url + "/api/v1/agents/" + name)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var m map[string]any
	if err := json.NewDecoder(resp.Body).Decode(&m); err != nil {
		t.Fatal(err)
	}
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("GET /api/v1/agents/%s: %d %v", name, resp.StatusCode, m)
	}
	if a, ok := m["agent"].(map[string]any); ok {
		return a
	}
	return m
}

func TestFixturesRegisteredAtStart(t *testing.T) {
	h := startHarness(t)
	p := h.profile(t, "a2awire-clean")
	if p["endpoint"] != h.url+"/agents/a2awire-clean/invoke" || p["status"] != "online" {
		t.Errorf("a2awire-clean: %v, want endpoint %s/agents/a2awire-clean/invoke, online", p, h.url)
	}
	caps, _ := p["capabilities"].([]any)
	if len(caps) != 1 || caps[0] != "word-count" {
		t.Errorf("capabilities %v", p["capabilities"])
	}
}

// checkSeedAcrossRestarts starts twice on the same data: the second start
// updates the one registration (same key, same registered_at, the new
// address) instead of failing with name_taken.
func checkSeedAcrossRestarts(t *testing.T, args ...string) {
	h := startHarness(t, args...)
	first := h.profile(t, "a2awire-ledger")
	h.stop(t)
	h = startHarness(t, args...)
	again := h.profile(t, "a2awire-ledger")
	if again["key_id"] != first["key_id"] || again["registered_at"] != first["registered_at"] {
		t.Errorf("restart changed the registration: %v -> %v", first, again)
	}
	if again["endpoint"] != h.url+"/agents/a2awire-ledger/invoke" {
		t.Errorf("endpoint %v, want the new address %s", again["endpoint"], h.url)
	}
}

func TestFixturesSeedAcrossRestartsBolt(t *testing.T) {
	dir := t.TempDir()
	checkSeedAcrossRestarts(t, "-data", dir)
	fi, err := os.Stat(filepath.Join(dir, networkKeyFile))
	if err != nil || fi.Mode().Perm() != 0o600 {
		t.Errorf("network key file: %v, %v", fi, err)
	}
}

func TestFixturesSeedAcrossRestartsDynamoDB(t *testing.T) {
	checkSeedAcrossRestarts(t, "-dynamodb-endpoint", dynamoLocal.Endpoint(), "-table", "local-seed-test",
		"-network-key", filepath.Join(t.TempDir(), "network.key"))
}

// TestNewNetworkKeyIsReported replaces the network key of a data directory:
// the start fails and says why and what to do.
func TestNewNetworkKeyIsReported(t *testing.T) {
	dir := t.TempDir()
	h := startHarness(t, "-data", dir)
	h.stop(t)
	if err := os.Remove(filepath.Join(dir, networkKeyFile)); err != nil {
		t.Fatal(err)
	}
	var out, errs capture.Buffer
	err := runWith(context.Background(), []string{"-addr", "127.0.0.1:0", "-data", dir}, &out, &errs, extras{})
	if err == nil || !strings.Contains(err.Error(), "registered under another key") || !strings.Contains(err.Error(), "-reset") {
		t.Errorf("start with a new key: %v", err)
	}
	// -reset wipes the registrations along with the rest, so the new key
	// registers the fixtures again.
	h = startHarness(t, "-data", dir, "-reset")
	if p := h.profile(t, "a2awire-clean"); p["endpoint"] != h.url+"/agents/a2awire-clean/invoke" {
		t.Errorf("after -reset: %v", p)
	}
}
