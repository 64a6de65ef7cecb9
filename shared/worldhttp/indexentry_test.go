package worldhttp_test

import (
	"fmt"
	"testing"

	"github.com/a2awire/a2awire/shared/store"
	"github.com/a2awire/a2awire/shared/world"
)

// TestMembershipsOlderThanTheIndexThroughHarness: members without their
// entries in the agents' index of worlds (memberships from before it) still
// send, are sent to and act through HTTP, both on instances meeting their
// keys for the first time and on instances that know them (the request's
// guard then rides in the write, which fails its check: the guard is
// written alone, the entry restored, the write goes again). Each write
// restores what it checked, and the recipient reads every message.
func TestMembershipsOlderThanTheIndexThroughHarness(t *testing.T) {
	srv, _, st := harnessServer(t)
	owner, a, b := newAgent(t, srv.URL, 40), newAgent(t, srv.URL, 41), newAgent(t, srv.URL, 42)
	owner.call("PUT", "/v0/worlds/old", fmt.Sprintf(`{"publicKey":%q}`, b64(owner.key)), 201)
	for _, m := range []*agent{a, b} {
		m.call("POST", "/v0/worlds/old/join", fmt.Sprintf(`{"publicKey":%q}`, b64(m.key)), 201)
	}
	entry := func(m *agent) store.Key { return store.Key{PK: world.AgentPK(m.awnID()), SK: "JOINED#old"} }
	forget := func(ms ...*agent) {
		t.Helper()
		for _, m := range ms {
			if _, err := st.Write(t.Context(), store.Delete(entry(m))); err != nil {
				t.Fatal(err)
			}
		}
	}
	restored := func(what string, ms ...*agent) {
		t.Helper()
		for _, m := range ms {
			if _, err := st.Get(t.Context(), entry(m)); err != nil {
				t.Fatalf("%s: the entry of %s: %v", what, m.awnID(), err)
			}
		}
	}
	for i, round := range []string{"keys new to the instances", "keys the instances know"} {
		forget(a, b)
		a.call("POST", "/v0/worlds/old/messages", fmt.Sprintf(`{"to":%q,"content":%d}`, b.awnID(), i), 201)
		restored(round+": send", a, b)
		forget(a)
		a.call("POST", "/v0/worlds/old/actions", `{"action":"wave"}`, 201)
		restored(round+": action", a)
	}
	got := b.call("GET", "/v0/worlds/old/messages", "", 200)
	if got["count"] != float64(2) {
		t.Fatalf("the recipient read %v, want both messages", got)
	}
}
