package main

import (
	"strings"
	"testing"
)

// TestWorldsAndOwnerCommandsEndToEnd: through the whole local system,
// `awn worlds` lists the lobby and a new world (text and --json, filtered
// and paged), and the owner's `awn world close|reopen|delete` close the
// world (a join is refused WORLD_CLOSED, exit 1), reopen it, and delete it
// (then `world show` is NOT_FOUND and discovery no longer lists it); a
// member's close is FORBIDDEN.
func TestWorldsAndOwnerCommandsEndToEnd(t *testing.T) {
	t.Parallel()
	base := network(t)
	owner, member := withHome(t, base), withHome(t, base)
	for _, env := range []map[string]string{owner, member} {
		if r := awn(t, env, "init"); r.code != 0 {
			t.Fatalf("init: %v", r)
		}
	}
	if r := awn(t, owner, "world", "create", "plaza", "--name", "The Plaza", "--category", "social"); r.code != 0 {
		t.Fatalf("create: %v", r)
	}
	r := awn(t, owner, "worlds", "--sort", "newest")
	lines := strings.Split(strings.TrimSpace(r.stdout), "\n")
	if r.code != 0 || len(lines) != 3 || !strings.HasPrefix(lines[0], "WORLD") || !strings.HasPrefix(lines[1], "plaza") || !strings.HasPrefix(lines[2], "lobby") {
		t.Fatalf("worlds: %v", r)
	}
	r = awn(t, owner, "worlds", "--sort", "newest", "--limit", "1", "--json")
	var page struct {
		Worlds []struct {
			WorldID     string `json:"worldId"`
			Name        string `json:"name"`
			Description string `json:"description"`
			Category    string `json:"category"`
			Status      string `json:"status"`
			MemberCount int64  `json:"memberCount"`
			CreatedAt   string `json:"createdAt"`
			OwnerAWNID  string `json:"ownerAwnId"`
			CardURL     string `json:"cardUrl"`
		} `json:"worlds"`
		Cursor *string `json:"cursor"`
	}
	decodeStrict(t, r.stdout, &page)
	if r.code != 0 || len(page.Worlds) != 1 || page.Worlds[0].WorldID != "plaza" || page.Cursor == nil {
		t.Fatalf("worlds --json --limit 1: %v", r)
	}
	r = awn(t, owner, "worlds", "--sort", "newest", "--limit", "1", "--cursor", *page.Cursor)
	if r.code != 0 || !strings.Contains(r.stdout, "lobby") || strings.Contains(r.stdout, "plaza") {
		t.Fatalf("worlds --cursor: %v", r)
	}
	if r = awn(t, owner, "worlds", "--q", "PLAZA"); r.code != 0 || !strings.Contains(r.stdout, "plaza") || strings.Contains(r.stdout, "lobby") {
		t.Fatalf("worlds --q: %v", r)
	}

	if r = awn(t, member, "join", "plaza"); r.code != 0 {
		t.Fatalf("join: %v", r)
	}
	if r = awn(t, member, "world", "close", "plaza"); r.code != 1 || !strings.Contains(r.stderr, "FORBIDDEN") {
		t.Fatalf("close by a member: %v", r)
	}
	if r = awn(t, owner, "world", "close", "plaza"); r.code != 0 || !strings.Contains(r.stdout, "closed world plaza") {
		t.Fatalf("close: %v", r)
	}
	if r = awn(t, owner, "join", "plaza"); r.code != 1 || !strings.Contains(r.stderr, "WORLD_CLOSED") {
		t.Fatalf("join a closed world: %v", r)
	}
	if r = awn(t, owner, "worlds", "--status", "closed"); r.code != 0 || !strings.Contains(r.stdout, "plaza") {
		t.Fatalf("worlds --status closed: %v", r)
	}
	if r = awn(t, owner, "--json", "world", "reopen", "plaza"); r.code != 0 || !strings.Contains(r.stdout, `"status": "open"`) {
		t.Fatalf("reopen --json: %v", r)
	}
	if r = awn(t, owner, "world", "delete", "plaza"); r.code != 0 || !strings.Contains(r.stdout, "deleting world plaza") {
		t.Fatalf("delete: %v", r)
	}
	if r = awn(t, owner, "world", "show", "plaza"); r.code != 1 || !strings.Contains(r.stderr, "NOT_FOUND") {
		t.Fatalf("show after delete: %v", r)
	}
	if r = awn(t, owner, "worlds", "--status", "any"); r.code != 0 || strings.Contains(r.stdout, "plaza") {
		t.Fatalf("worlds after delete: %v", r)
	}
	if r = awn(t, owner, "worlds", "--sort", "oldest"); r.code != 2 {
		t.Fatalf("--sort oldest: %v", r)
	}
}
