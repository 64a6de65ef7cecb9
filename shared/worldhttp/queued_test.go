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

// TestBatchedMessagesThroughHarness: in a world created with batchMessages
// (and 4 event shards, so the recipient's inbox and private events are
// spread), POST …/messages answers 202 with the message and queued: true
// and the inbox holds nothing yet; the harness's queue mapping hands the
// queued messages to world-commit and the recipient reads every one once.
// A non-member is refused at once (401 NOT_JOINED). With batchMessages
// turned off by a PUT, the same route answers 201 and the message is
// there at once.
func TestBatchedMessagesThroughHarness(t *testing.T) {
	srv, h, _ := harnessServer(t)
	stop := h.Start(context.Background())
	t.Cleanup(func() {
		if err := stop(); err != nil {
			t.Errorf("harness triggers: %v", err)
		}
	})

	owner := newAgent(t, srv.URL, 50)
	m := owner.call("PUT", "/v0/worlds/chatty", fmt.Sprintf(`{"publicKey":%q,"batchMessages":true,"eventShards":4}`, b64(owner.key)), 201)
	if m["batchMessages"] != true || m["batchActions"] != false {
		t.Fatalf("created with batchMessages: manifest %v", m)
	}
	var members []*agent
	for seed := byte(51); seed <= 54; seed++ {
		a := newAgent(t, srv.URL, seed)
		a.call("POST", "/v0/worlds/chatty/join", fmt.Sprintf(`{"publicKey":%q}`, b64(a.key)), 201)
		members = append(members, a)
	}
	to, senders := members[0], members[1:]
	body := fmt.Sprintf(`{"to":%q,"content":{"text":"hi"}}`, to.awnID())
	stranger := newAgent(t, srv.URL, 55)
	if e := stranger.call("POST", "/v0/worlds/chatty/messages", body, 401); e["code"] != "NOT_JOINED" {
		t.Fatalf("a stranger's message: %v, want NOT_JOINED", e)
	}
	var want []string
	for range 2 {
		for _, a := range senders {
			got := a.call("POST", "/v0/worlds/chatty/messages", body, 202)
			id, _ := got["messageId"].(string)
			if got["queued"] != true || id == "" || got["from"] != a.awnID() || got["to"] != to.awnID() {
				t.Fatalf("queued message: %v", got)
			}
			want = append(want, id)
		}
	}
	slices.Sort(want)
	if page := to.call("GET", "/v0/worlds/chatty/messages?peek=true", "", 200); page["count"] != 0.0 {
		t.Fatalf("the inbox before the commit: %v", page)
	}

	// The committer runs after its batching window: wait for the
	// recipient's message.received events, long-polling, up to a deadline
	// far past the window; then read the inbox.
	deadline := time.Now().Add(15 * time.Second)
	received, cursor := 0, ""
	for received < len(want) && time.Now().Before(deadline) {
		path := "/v0/worlds/chatty/events?wait=2"
		if cursor != "" {
			path += "&after=" + cursor
		}
		page := to.call("GET", path, "", 200)
		evs, _ := page["events"].([]any)
		for _, e := range evs {
			if e.(map[string]any)["type"] == world.MessageReceived {
				received++
			}
		}
		if c, _ := page["cursor"].(string); c != "" {
			cursor = c
		}
	}
	var got []string
	page := to.call("GET", "/v0/worlds/chatty/messages?limit=100", "", 200)
	for _, m := range page["messages"].([]any) {
		got = append(got, m.(map[string]any)["messageId"].(string))
	}
	slices.Sort(got)
	if !slices.Equal(got, want) {
		t.Fatalf("read messages %v, want the queued %v once each", got, want)
	}

	owner.call("PUT", "/v0/worlds/chatty", `{"batchMessages":false}`, 200)
	now := senders[0].call("POST", "/v0/worlds/chatty/messages", body, 201)
	if now["queued"] != nil || now["messageId"] == "" {
		t.Fatalf("a message in a world that stopped batching: %v", now)
	}
	if page := to.call("GET", "/v0/worlds/chatty/messages", "", 200); page["count"] != 1.0 {
		t.Fatalf("the unbatched message is not there at once: %v", page)
	}
}
