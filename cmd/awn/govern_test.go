package main

import (
	"encoding/json"
	"strings"
	"testing"
)

// TestGovernEndToEnd drives the owner's commands and the agent's own view
// through the whole local system: an owner creates a world, a member joins
// it without ever registering; agent status shows its worlds (and the
// owner's owned one); a member's kick is refused 403, the owner's kick,
// ban (joins refused BANNED), bans, unban and unregister work, in human
// output and --json.
func TestGovernEndToEnd(t *testing.T) {
	t.Parallel()
	base := network(t)
	owner, member := withHome(t, base), withHome(t, base)
	for _, env := range []map[string]string{owner, member} {
		if r := awn(t, env, "init"); r.code != 0 {
			t.Fatalf("init: %v", r)
		}
	}
	var id identityJSON
	decodeStrict(t, awn(t, member, "--json", "whoami").stdout, &id)

	if r := awn(t, owner, "world", "create", "arena"); r.code != 0 {
		t.Fatalf("world create: %v", r)
	}
	if r := awn(t, member, "join", "arena"); r.code != 0 {
		t.Fatalf("join: %v", r)
	}

	// The never-registered member's status: its worlds alone.
	r := awn(t, member, "agent", "status")
	if r.code != 0 || !strings.Contains(r.stdout, "registered:     no") || !strings.Contains(r.stdout, "arena") || !strings.Contains(r.stdout, "member") {
		t.Fatalf("agent status of an unregistered member: %v", r)
	}
	r = awn(t, member, "--json", "agent", "status")
	var st struct {
		Agent  json.RawMessage `json:"agent"`
		Local  *localAgent     `json:"local"`
		AWNID  *string         `json:"awnId"`
		Worlds []struct {
			WorldID  string `json:"worldId"`
			Role     string `json:"role"`
			Slot     *int64 `json:"slot"`
			JoinedAt string `json:"joinedAt"`
			Presence string `json:"presence"`
		} `json:"worlds"`
	}
	decodeStrict(t, r.stdout, &st)
	if r.code != 0 || string(st.Agent) != "null" || st.AWNID == nil || *st.AWNID != id.AWNID || len(st.Worlds) != 1 || st.Worlds[0].WorldID != "arena" || st.Worlds[0].Presence != "offline" {
		t.Fatalf("agent status --json: %v", r)
	}
	r = awn(t, owner, "agent", "status")
	if r.code != 0 || !strings.Contains(r.stdout, "arena") || !strings.Contains(r.stdout, "owner") {
		t.Fatalf("the owner's status: %v", r)
	}

	if r := awn(t, member, "kick", "arena", id.AWNID); r.code != 1 || !strings.Contains(r.stderr, "FORBIDDEN") {
		t.Fatalf("a member kicking: %v", r)
	}
	if r := awn(t, owner, "kick", "arena", "nobody"); r.code != 2 {
		t.Fatalf("kick of a malformed id: %v", r)
	}
	if r := awn(t, owner, "kick", "arena", id.AWNID); r.code != 0 || r.stdout != "kicked "+id.AWNID+" from arena\n" {
		t.Fatalf("kick: %v", r)
	}
	if r := awn(t, member, "join", "arena"); r.code != 0 {
		t.Fatalf("join after a kick: %v", r)
	}
	if r := awn(t, owner, "ban", "arena", id.AWNID, "--reason", "spam"); r.code != 0 || r.stdout != "banned "+id.AWNID+" from arena\n" {
		t.Fatalf("ban: %v", r)
	}
	if r := awn(t, member, "join", "arena"); r.code != 1 || !strings.Contains(r.stderr, "BANNED") {
		t.Fatalf("a banned join: %v", r)
	}
	r = awn(t, owner, "--json", "bans", "arena")
	var bans struct {
		Bans  []banRow `json:"bans"`
		Count int      `json:"count"`
	}
	decodeStrict(t, r.stdout, &bans)
	if r.code != 0 || bans.Count != 1 || bans.Bans[0].AWNID != id.AWNID || bans.Bans[0].Reason != "spam" {
		t.Fatalf("bans: %v", r)
	}
	if r := awn(t, owner, "bans", "arena"); r.code != 0 || !strings.Contains(r.stdout, "spam") {
		t.Fatalf("bans (human): %v", r)
	}
	if r := awn(t, owner, "unban", "arena", id.AWNID); r.code != 0 {
		t.Fatalf("unban: %v", r)
	}
	if r := awn(t, member, "join", "arena"); r.code != 0 {
		t.Fatalf("join after unban: %v", r)
	}

	// Register, then unregister: status falls back to the worlds alone.
	if r := awn(t, member, "register", "--name", "govern-member", "--endpoint", base+"/agents/a2awire-clean/invoke", "--capability", "chat"); r.code != 0 {
		t.Fatalf("register: %v", r)
	}
	if r := awn(t, member, "agent", "status"); r.code != 0 || !strings.Contains(r.stdout, "govern-member") || !strings.Contains(r.stdout, "arena") {
		t.Fatalf("status of the registered member: %v", r)
	}
	if r := awn(t, member, "agent", "unregister"); r.code != 0 || r.stdout != "unregistered govern-member\n" {
		t.Fatalf("unregister: %v", r)
	}
	if r := awn(t, member, "agent", "status"); r.code != 0 || !strings.Contains(r.stdout, "registered:     no") {
		t.Fatalf("status after unregister: %v", r)
	}
	if r := awn(t, member, "agent", "status", "govern-member"); r.code != 1 {
		t.Fatalf("the unregistered name: %v", r)
	}
	// No key and no registration: nothing to ask about.
	if r := awn(t, withHome(t, base), "agent", "status"); r.code != 2 || !strings.Contains(r.stderr, "awn init") {
		t.Fatalf("status without a key: %v", r)
	}
}
