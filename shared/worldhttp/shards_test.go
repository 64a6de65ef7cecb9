package worldhttp_test

import (
	"fmt"
	"strings"
	"testing"
)

// TestEventShardsThroughHarness: PUT /v0/worlds/{world} takes eventShards
// (1–16) at creation and raises it at an update; the manifest shows it (1
// when never set); out of range or not an integer is 400 INVALID_REQUEST, an
// update to fewer is 409 CONFLICT naming the count, and an update without
// it keeps it.
func TestEventShardsThroughHarness(t *testing.T) {
	srv, _, _ := harnessServer(t)
	owner := newAgent(t, srv.URL, 40)
	put := func(fields string, want int) map[string]any {
		t.Helper()
		return owner.call("PUT", "/v0/worlds/hot", fmt.Sprintf(`{"publicKey":%q%s}`, b64(owner.key), fields), want)
	}
	for _, bad := range []string{`,"eventShards":0`, `,"eventShards":17`, `,"eventShards":"4"`, `,"eventShards":2.5`} {
		if e := put(bad, 400); e["code"] != "INVALID_REQUEST" {
			t.Errorf("create with %s: %v, want INVALID_REQUEST", bad, e)
		}
	}
	if m := put(``, 201); m["eventShards"] != float64(1) {
		t.Fatalf("created without eventShards: %v, want 1", m["eventShards"])
	}
	if m := put(`,"eventShards":8`, 200); m["eventShards"] != float64(8) {
		t.Fatalf("raised to 8: %v", m["eventShards"])
	}
	if m := put(`,"name":"Hot"`, 200); m["eventShards"] != float64(8) {
		t.Fatalf("an update without eventShards: %v, want 8 kept", m["eventShards"])
	}
	e := put(`,"eventShards":4`, 409)
	if msg, _ := e["message"].(string); e["code"] != "CONFLICT" || !strings.Contains(msg, "8 partitions") {
		t.Fatalf("lowered to 4: %v, want CONFLICT naming 8", e)
	}
	if m := owner.call("GET", "/v0/worlds/hot", "", 200); m["eventShards"] != float64(8) {
		t.Fatalf("GET: eventShards %v, want 8", m["eventShards"])
	}
}
