package main

import (
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
)

// TestNamedIdentities: --as NAME keeps a separate key (and state) under
// $AWN_HOME/profiles/NAME, so one person runs several agents from one
// AWN_HOME; and a second registration with one key says the rule and the
// way out.
func TestNamedIdentities(t *testing.T) {
	t.Parallel()
	base := network(t)
	env := withHome(t, base)
	ids := map[string]identityJSON{}
	for _, as := range []string{"", "scout", "trader"} {
		args := []string{"--json", "init"}
		if as != "" {
			args = append([]string{"--as", as}, args...)
		}
		r := awn(t, env, args...)
		if r.code != 0 {
			t.Fatalf("init --as %q: %v", as, r)
		}
		var id identityJSON
		decodeStrict(t, r.stdout, &id)
		ids[as] = id
		if as != "" && id.KeyFile != filepath.Join(env["AWN_HOME"], "profiles", as, "key.pem") {
			t.Errorf("--as %s wrote %s", as, id.KeyFile)
		}
	}
	if ids[""].AWNID == ids["scout"].AWNID || ids["scout"].AWNID == ids["trader"].AWNID {
		t.Fatalf("identities not distinct: %+v", ids)
	}
	r := awn(t, env, "--json", "--as", "scout", "whoami")
	var who identityJSON
	decodeStrict(t, r.stdout, &who)
	if who.AWNID != ids["scout"].AWNID {
		t.Errorf("whoami --as scout: %s, want %s", who.AWNID, ids["scout"].AWNID)
	}
	if r := awn(t, env, "--as", "nobody", "whoami"); r.code != 2 || !strings.Contains(r.stderr, "run 'awn --as nobody init' first") {
		t.Errorf("an unknown identity: %v", r)
	}
	if r := awn(t, env, "--as", "../x", "whoami"); r.code != 2 || !strings.Contains(r.stderr, "not a profile name") {
		t.Errorf("a bad profile name: %v", r)
	}

	// Two agents, two identities: both register. A second name on one key
	// is refused, and the refusal says what to do.
	endpoint := base + "/agents/a2awire-clean/invoke"
	for _, as := range []string{"scout", "trader"} {
		if r := awn(t, env, "--as", as, "register", "--name", "my-"+as, "--endpoint", endpoint, "--capability", "word-count"); r.code != 0 {
			t.Fatalf("register --as %s: %v", as, r)
		}
	}
	r = awn(t, env, "--as", "scout", "register", "--name", "my-other", "--endpoint", endpoint, "--capability", "word-count")
	if r.code != 1 || !strings.Contains(r.stderr, "error: key_taken") || !strings.Contains(r.stderr, "awn --as NAME init") {
		t.Errorf("a second name on one key: %v", r)
	}
}

// TestWebhookShowReplay: `awn webhook show` prints the webhook's URL and
// delivery stats, `awn webhook replay` the dead letters it queued again.
func TestWebhookShowReplay(t *testing.T) {
	t.Parallel()
	base := network(t)
	env := withHome(t, base)
	for _, args := range [][]string{{"init"}, {"join", "lobby"}, {"agent", "set-handler", "lobby", "--webhook", "http://127.0.0.1:9/hooks"}} {
		if r := awn(t, env, args...); r.code != 0 {
			t.Fatalf("%q: %v", args, r)
		}
	}
	r := awn(t, env, "webhook", "show", "lobby")
	if r.code != 0 || !strings.Contains(r.stdout, "http://127.0.0.1:9/hooks") || !strings.Contains(r.stdout, "enabled:") ||
		!strings.Contains(r.stdout, "dead-lettered:") {
		t.Errorf("webhook show: %v", r)
	}
	var view struct {
		URL   string
		Stats struct{ Delivered, DeadLettered int64 }
	}
	r = awn(t, env, "--json", "webhook", "show", "lobby")
	decodeStrict(t, r.stdout, &view)
	if view.URL != "http://127.0.0.1:9/hooks" {
		t.Errorf("webhook show --json: %v", r)
	}
	r = awn(t, env, "webhook", "replay", "lobby", "--since", "2026-01-01T00:00:00Z")
	if r.code != 0 || r.stdout != "replayed 0 dead-lettered deliveries in lobby\n" {
		t.Errorf("webhook replay: %v", r)
	}
	if r := awn(t, env, "webhook", "replay", "lobby", "--since", "yesterday"); r.code != 2 {
		t.Errorf("replay --since yesterday: %v", r)
	}
	if r := awn(t, env, "webhook", "show", "elsewhere"); r.code != 1 || !strings.Contains(r.stderr, "error: ") {
		t.Errorf("show in a world not joined: %v", r)
	}
}

// TestReadableDialErrors: a command that reaches no server says so in one
// line and how to start one, not Go's transport error alone.
func TestReadableDialErrors(t *testing.T) {
	t.Parallel()
	closed := httptest.NewServer(http.NotFoundHandler())
	closed.Close()
	env := withHome(t, closed.URL)
	for _, args := range [][]string{{"worlds"}, {"world", "show", "lobby"}, {"discover"}} {
		r := awn(t, env, args...)
		if r.code != 1 || !strings.HasPrefix(r.stderr, "awn: cannot reach "+closed.URL) ||
			!strings.Contains(r.stderr, "is the server running?") || strings.Count(r.stderr, "\n") != 2 {
			t.Errorf("awn %q: %v", args, r)
		}
	}
}

// TestVersionAndGroupedHelp: --version prints awn's version and exits 0;
// the help lists the commands under what they are for.
func TestVersionAndGroupedHelp(t *testing.T) {
	t.Parallel()
	r := awn(t, nil, "--version")
	if r.code != 0 || !strings.HasPrefix(r.stdout, "awn ") || !strings.Contains(r.stdout, "go1.") {
		t.Errorf("--version: %v", r)
	}
	r = awn(t, nil, "--help")
	for _, group := range []string{"Identity and registry:", "Providers:", "Worlds:", "World owners:", "Credits and escrow:"} {
		if !strings.Contains(r.stdout, group) {
			t.Errorf("help without the group %q:\n%s", group, r.stdout)
		}
	}
	if strings.Contains(r.stdout, "Available Commands:") {
		t.Errorf("help still has the flat list:\n%s", r.stdout)
	}
}

// TestMembersBySlotAndName: where an agent id is taken, the slot or the
// registered name (@name) that `awn agents` shows names the member too.
func TestMembersBySlotAndName(t *testing.T) {
	t.Parallel()
	base := network(t)
	env := withHome(t, base)
	endpoint := base + "/agents/a2awire-clean/invoke"
	var slot struct {
		AWNID string `json:"awnId"`
		Slot  int64  `json:"slot"`
	}
	for _, as := range []string{"scout", "trader"} {
		for _, args := range [][]string{{"init"}, {"register", "--name", "my-" + as, "--endpoint", endpoint, "--capability", "word-count"}} {
			if r := awn(t, env, append([]string{"--as", as}, args...)...); r.code != 0 {
				t.Fatalf("--as %s %q: %v", as, args, r)
			}
		}
		r := awn(t, env, "--as", as, "--json", "join", "lobby")
		if r.code != 0 {
			t.Fatalf("join --as %s: %v", as, r)
		}
		decodeStrict(t, r.stdout, &slot) // the trader's, last
	}
	for _, ref := range []string{"@my-trader", strconv.FormatInt(slot.Slot, 10)} {
		r := awn(t, env, "--as", "scout", "send", "lobby", ref, "hi "+ref)
		if r.code != 0 || !strings.Contains(r.stdout, " to "+slot.AWNID) {
			t.Errorf("send to %s: %v", ref, r)
		}
	}
	r := awn(t, env, "--as", "trader", "--json", "messages", "lobby")
	if r.code != 0 || !strings.Contains(r.stdout, "hi @my-trader") || !strings.Contains(r.stdout, "hi "+strconv.FormatInt(slot.Slot, 10)) {
		t.Errorf("the trader's messages: %v", r)
	}
	if r := awn(t, env, "--as", "scout", "ping", "lobby", "@my-nobody"); r.code != 1 || !strings.Contains(r.stderr, "no member of lobby has the name") {
		t.Errorf("ping @my-nobody: %v", r)
	}
}

// TestDoctor: doctor names the URL, whether it answers, the identity and
// its worlds; with no network it exits 1 and says how to start one.
func TestDoctor(t *testing.T) {
	t.Parallel()
	base := network(t)
	env := withHome(t, base)
	r := awn(t, env, "doctor")
	if r.code != 0 || !strings.Contains(r.stdout, "answers:   yes") || !strings.Contains(r.stdout, "none yet (run 'awn init')") {
		t.Errorf("doctor before init: %v", r)
	}
	for _, args := range [][]string{{"init"}, {"join", "lobby"}} {
		if r := awn(t, env, args...); r.code != 0 {
			t.Fatalf("%q: %v", args, r)
		}
	}
	var rep struct {
		URL       string
		Reachable bool
		Identity  *struct{ AWNID string }
		Worlds    []struct{ WorldID string }
	}
	r = awn(t, env, "--json", "doctor")
	decodeStrict(t, r.stdout, &rep)
	if r.code != 0 || rep.URL != base || !rep.Reachable || rep.Identity == nil || len(rep.Worlds) != 1 || rep.Worlds[0].WorldID != "lobby" {
		t.Errorf("doctor after joining: %+v %v", rep, r)
	}
	closed := httptest.NewServer(http.NotFoundHandler())
	closed.Close()
	r = awn(t, withHome(t, closed.URL), "doctor")
	if r.code != 1 || !strings.Contains(r.stdout, "answers:   no: ") || !strings.Contains(r.stderr, "is the server running?") {
		t.Errorf("doctor with no network: %v", r)
	}
}
