package worldhttp_test

import (
	"context"
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/a2awire/a2awire/shared/world"
)

// TestBatchedActionsThroughHarness: in a world created with batchActions,
// POST …/actions answers 202 {actionId, queued: true} and writes no event;
// the harness's queue mapping hands the queued actions to world-commit
// (as Lambda's SQS event source mapping would, gathering for the
// trigger's window) and every one shows up once in the members' events.
// A non-member is refused at once (401 NOT_JOINED), nothing queued. With
// batchActions turned off by a PUT, the same route answers 201 and the
// event is there at once.
func TestBatchedActionsThroughHarness(t *testing.T) {
	srv, h, _ := harnessServer(t)
	stop := h.Start(context.Background())
	t.Cleanup(func() {
		if err := stop(); err != nil {
			t.Errorf("harness triggers: %v", err)
		}
	})

	owner := newAgent(t, srv.URL, 40)
	m := owner.call("PUT", "/v0/worlds/busy", fmt.Sprintf(`{"publicKey":%q,"batchActions":true}`, b64(owner.key)), 201)
	if m["batchActions"] != true {
		t.Fatalf("created with batchActions: manifest %v", m)
	}
	var members []*agent
	for seed := byte(41); seed <= 43; seed++ {
		a := newAgent(t, srv.URL, seed)
		a.call("POST", "/v0/worlds/busy/join", fmt.Sprintf(`{"publicKey":%q}`, b64(a.key)), 201)
		members = append(members, a)
	}
	stranger := newAgent(t, srv.URL, 44)
	if e := stranger.call("POST", "/v0/worlds/busy/actions", `{"action":"move"}`, 401); e["code"] != "NOT_JOINED" {
		t.Fatalf("a stranger's action: %v, want NOT_JOINED", e)
	}

	var want []string
	for round := range 2 {
		for _, a := range members {
			got := a.call("POST", "/v0/worlds/busy/actions", fmt.Sprintf(`{"action":"move","params":{"round":%d}}`, round), 202)
			id, _ := got["actionId"].(string)
			if got["queued"] != true || id == "" {
				t.Fatalf("queued action: %v", got)
			}
			want = append(want, id)
		}
	}
	slices.Sort(want)

	// The committer runs after its batching window: wait for the events,
	// long-polling, up to a deadline far past the window.
	deadline := time.Now().Add(15 * time.Second)
	var got []string
	cursor := ""
	for len(got) < len(want) && time.Now().Before(deadline) {
		path := "/v0/worlds/busy/events?wait=2"
		if cursor != "" {
			path += "&after=" + cursor
		}
		page := members[0].call("GET", path, "", 200)
		evs, _ := page["events"].([]any)
		for _, e := range evs {
			e := e.(map[string]any)
			if e["type"] == world.ActionSubmitted {
				got = append(got, e["data"].(map[string]any)["actionId"].(string))
			}
		}
		if c, _ := page["cursor"].(string); c != "" {
			cursor = c
		}
	}
	slices.Sort(got)
	if !slices.Equal(got, want) {
		t.Fatalf("committed actions %v, want the queued %v once each", got, want)
	}

	owner.call("PUT", "/v0/worlds/busy", `{"batchActions":false}`, 200)
	now := members[1].call("POST", "/v0/worlds/busy/actions", `{"action":"wave"}`, 201)
	if now["queued"] != nil || now["actionId"] == "" {
		t.Fatalf("action in a world that stopped batching: %v", now)
	}
	page := members[0].call("GET", "/v0/worlds/busy/events?after="+cursor, "", 200)
	if !hasEvent(page, world.ActionSubmitted) {
		t.Fatalf("the unbatched action's event is not there at once: %v", page)
	}
}
