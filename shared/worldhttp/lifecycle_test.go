package worldhttp_test

import (
	"fmt"
	"testing"

	"github.com/a2awire/a2awire/shared/store"
	"github.com/a2awire/a2awire/shared/world"
)

// TestOwnerRoutesThroughHarness: close, reopen and delete answer the owner
// (200, 200, 202), a member 403 FORBIDDEN and a stranger 401 NOT_JOINED; a
// closed world refuses joins 409 WORLD_CLOSED; a full one 409 WORLD_FULL;
// once deleted every route of the world answers 404 — the manifest, its
// card, a member route, join, the owner routes, a message and an action
// from a key the instance knew (no message written) — and the name cannot
// be created again while the deletion is under way (409).
func TestOwnerRoutesThroughHarness(t *testing.T) {
	srv, _, st := harnessServer(t)
	owner, member, stranger := newAgent(t, srv.URL, 30), newAgent(t, srv.URL, 31), newAgent(t, srv.URL, 32)
	owner.call("PUT", "/v0/worlds/town", fmt.Sprintf(`{"publicKey":%q,"maxMembers":2}`, b64(owner.key)), 201)
	member.call("POST", "/v0/worlds/town/join", fmt.Sprintf(`{"publicKey":%q}`, b64(member.key)), 201)

	for _, verb := range []string{"close", "reopen"} {
		if e := member.call("POST", "/v0/worlds/town/"+verb, "", 403); e["code"] != "FORBIDDEN" {
			t.Fatalf("%s by a member: %v", verb, e)
		}
		if e := stranger.call("POST", "/v0/worlds/town/"+verb, "", 401); e["code"] != "UNAUTHORIZED" {
			t.Fatalf("%s by a stranger: %v", verb, e)
		}
	}
	if m := owner.call("POST", "/v0/worlds/town/close", "{}", 200); m["status"] != "closed" {
		t.Fatalf("close: %v", m)
	}
	if e := stranger.call("POST", "/v0/worlds/town/join", fmt.Sprintf(`{"publicKey":%q}`, b64(stranger.key)), 409); e["code"] != "WORLD_CLOSED" {
		t.Fatalf("join a closed world: %v", e)
	}
	if m := owner.call("POST", "/v0/worlds/town/reopen", "", 200); m["status"] != "open" {
		t.Fatalf("reopen: %v", m)
	}
	stranger.call("POST", "/v0/worlds/town/join", fmt.Sprintf(`{"publicKey":%q}`, b64(stranger.key)), 201)
	late := newAgent(t, srv.URL, 33)
	if e := late.call("POST", "/v0/worlds/town/join", fmt.Sprintf(`{"publicKey":%q}`, b64(late.key)), 409); e["code"] != "WORLD_FULL" {
		t.Fatalf("join a full world: %v", e)
	}

	// The stranger's key is known to the messages and actions functions
	// before the delete: their guards then check what the write holds.
	memberID := member.awnID()
	stranger.call("POST", "/v0/worlds/town/messages", fmt.Sprintf(`{"to":%q,"content":"before"}`, memberID), 201)
	stranger.call("POST", "/v0/worlds/town/actions", `{"action":"wave"}`, 201)

	if e := member.call("DELETE", "/v0/worlds/town", "", 403); e["code"] != "FORBIDDEN" {
		t.Fatalf("delete by a member: %v", e)
	}
	if d := owner.call("DELETE", "/v0/worlds/town", "", 202); d["status"] != "deleting" {
		t.Fatalf("delete: %v", d)
	}
	for _, c := range []struct {
		a            *agent
		method, path string
		body         string
	}{
		{owner, "GET", "/v0/worlds/town", ""},
		{owner, "GET", "/v0/worlds/town/.well-known/agent-card.json", ""},
		{member, "GET", "/v0/worlds/town/agents", ""},
		{member, "POST", "/v0/worlds/town/leave", ""},
		{late, "POST", "/v0/worlds/town/join", fmt.Sprintf(`{"publicKey":%q}`, b64(late.key))},
		{owner, "POST", "/v0/worlds/town/close", ""},
		{owner, "DELETE", "/v0/worlds/town", ""},
		// Writes that commit an event do not check the manifest: the
		// event head's mark refuses them, and the request's guard,
		// written alone after, answers as it would have.
		{stranger, "POST", "/v0/worlds/town/messages", fmt.Sprintf(`{"to":%q,"content":"after"}`, memberID)},
		{stranger, "POST", "/v0/worlds/town/actions", `{"action":"wave"}`},
	} {
		if e := c.a.call(c.method, c.path, c.body, 404); e["code"] != "NOT_FOUND" {
			t.Errorf("%s %s after delete: %v", c.method, c.path, e)
		}
	}
	if page, err := st.Query(t.Context(), store.Query{PK: world.InboxPK("town", memberID)}); err != nil || len(page.Items) != 1 {
		t.Fatalf("the inbox holds %d messages, want the 1 sent before the delete (%v)", len(page.Items), err)
	}
	if e := owner.call("PUT", "/v0/worlds/town", fmt.Sprintf(`{"publicKey":%q}`, b64(owner.key)), 409); e["code"] != "CONFLICT" {
		t.Fatalf("create while deleting: %v", e)
	}
}
