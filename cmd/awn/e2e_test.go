package main

import (
	"bytes"
	"context"
	"crypto/ed25519"
	"encoding/json"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"net/http/httputil"
	"net/url"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/a2awire/a2awire/local/harness"
	"github.com/a2awire/a2awire/shared/fixtures/seed"
	"github.com/a2awire/a2awire/shared/registry"
	"github.com/a2awire/a2awire/shared/store/memory"
)

// network serves the whole local system as `go run ./local` does: every
// function behind the in-process API Gateway on loopback over a fresh
// memory store, then the five fixtures registered with their endpoints
// below that URL, owned by the network key (local/main.go's seedFixtures),
// and the world lobby (its seedLobby).
func network(t *testing.T) string {
	t.Helper()
	base, _ := networkHarness(t)
	return base
}

// networkWithTriggers is network with the harness's triggers running too
// (the queue mappings, the stream, the schedules), as `go run ./local` runs
// them.
func networkWithTriggers(t *testing.T) string {
	t.Helper()
	base, h := networkHarness(t)
	stop := h.Start(context.Background())
	t.Cleanup(func() {
		if err := stop(); err != nil {
			t.Errorf("harness triggers: %v", err)
		}
	})
	return base
}

func networkHarness(t *testing.T) (string, *harness.Harness) {
	t.Helper()
	st := memory.New()
	t.Cleanup(func() { _ = st.Close() })
	h, err := harness.New(harness.Options{Log: slog.New(slog.DiscardHandler), Store: st})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = h.Close() })
	srv := httptest.NewServer(h)
	t.Cleanup(srv.Close)
	pub := h.NetworkKey().Public().(ed25519.PublicKey)
	if _, err := seed.Seed(context.Background(), seed.OverStore(st, registry.AllowInsecureEndpoints())(pub), srv.URL, pub); err != nil {
		t.Fatal(err)
	}
	if _, _, err := harness.SeedLobby(context.Background(), st, h.NetworkKey()); err != nil {
		t.Fatal(err)
	}
	return srv.URL, h
}

// TestBatchedActionsEndToEnd: awn world create --batch-actions makes a
// world whose actions are queued; awn act says so, and the action's event
// shows in awn events once world-commit has run (the harness's queue
// mapping, after its batching window).
func TestBatchedActionsEndToEnd(t *testing.T) {
	t.Parallel()
	base := networkWithTriggers(t)
	a := newAgentID(t, base)
	if r := awn(t, a.env, "world", "create", "busy", "--batch-actions"); r.code != 0 || !strings.Contains(r.stdout, "batch_actions:") {
		t.Fatalf("world create --batch-actions: %v", r)
	}
	if r := awn(t, a.env, "join", "busy"); r.code != 0 {
		t.Fatalf("join busy: %v", r)
	}
	r := awn(t, a.env, "act", "busy", "move", "--params", `{"to":"e4"}`)
	if r.code != 0 || !strings.HasPrefix(r.stdout, "queued move in busy: ") {
		t.Fatalf("act in a batching world: %v", r)
	}
	id := strings.TrimSpace(strings.TrimPrefix(r.stdout, "queued move in busy: "))
	deadline := time.Now().Add(15 * time.Second)
	for {
		r = awn(t, a.env, "events", "busy")
		if r.code == 0 && strings.Contains(r.stdout, "action.submitted") && strings.Contains(r.stdout, id) {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("the queued action %s never showed in the events: %v", id, r)
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// TestBatchedMessagesEndToEnd: awn world create --batch-messages makes a
// world whose direct messages are queued; awn send says so, and the
// message reaches awn messages once world-commit has run.
func TestBatchedMessagesEndToEnd(t *testing.T) {
	t.Parallel()
	base := networkWithTriggers(t)
	a, b := newAgentID(t, base), newAgentID(t, base)
	if r := awn(t, a.env, "world", "create", "chatty", "--batch-messages", "--event-shards", "2"); r.code != 0 || !strings.Contains(r.stdout, "batch_messages:") {
		t.Fatalf("world create --batch-messages: %v", r)
	}
	for _, m := range []agentID{a, b} {
		if r := awn(t, m.env, "join", "chatty"); r.code != 0 {
			t.Fatalf("join chatty: %v", r)
		}
	}
	r := awn(t, a.env, "send", "chatty", b.AWNID, "hello")
	if r.code != 0 || !strings.HasPrefix(r.stdout, "queued ") {
		t.Fatalf("send in a batching world: %v", r)
	}
	id := strings.Fields(r.stdout)[1]
	deadline := time.Now().Add(15 * time.Second)
	for {
		r = awn(t, b.env, "messages", "chatty")
		if r.code == 0 && strings.Contains(r.stdout, "hello") {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("the queued message %s never reached the inbox: %v", id, r)
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// TestRegistryEndToEnd is the must-show against the whole local
// system (the harness `go run ./local` serves, in process): awn init, awn
// register, awn discover --capability word-count, then awn invoke
// a2awire-clean by name — the fixture the harness registered at start,
// resolved through GET /api/v1/agents/{name}.
func TestRegistryEndToEnd(t *testing.T) {
	t.Parallel()
	base := network(t)
	env := withHome(t, base)

	r := awn(t, env, "--json", "init")
	if r.code != 0 {
		t.Fatalf("init: %v", r)
	}
	var id identityJSON
	decodeStrict(t, r.stdout, &id)

	// Our agent serves word-count through the clean fixture's endpoint.
	r = awn(t, env, "--json", "register", "--name", "e2e-counter", "--endpoint", base+"/agents/a2awire-clean/invoke",
		"--capability", "word-count", "--description", "counts words")
	if r.code != 0 {
		t.Fatalf("register: %v", r)
	}
	var reg struct{ Agent profile }
	decodeStrict(t, r.stdout, &reg)
	if reg.Agent.Name != "e2e-counter" || reg.Agent.KeyID != id.KeyID || reg.Agent.AWNID != id.AWNID || reg.Agent.Status != "online" {
		t.Errorf("registered profile %+v, identity %+v", reg.Agent, id)
	}
	// The key directory the Signature-Agent names serves our key.
	resp, err := http.Get(base + "/api/v1/keys/" + id.KeyID)
	if err != nil {
		t.Fatal(err)
	}
	dir, _ := io.ReadAll(resp.Body)
	_ = resp.Body.Close()
	if resp.StatusCode != 200 || !strings.Contains(string(dir), id.KeyID) {
		t.Errorf("key directory: %d %s", resp.StatusCode, dir)
	}

	r = awn(t, env, "discover", "--capability", "word-count")
	if r.code != 0 {
		t.Fatalf("discover: %v", r)
	}
	var names []string
	for _, line := range strings.Split(strings.TrimSpace(r.stdout), "\n")[1:] {
		names = append(names, strings.Fields(line)[0])
	}
	slices.Sort(names)
	if !slices.Equal(names, []string{"a2awire-clean", "e2e-counter"}) {
		t.Errorf("discover --capability word-count lists %v, want a2awire-clean and e2e-counter:\n%s", names, r.stdout)
	}

	// The must-show line as typed, in text mode.
	r = awn(t, env, "invoke", "a2awire-clean", "--task", "word-count", "--input", `{"text":"a b"}`)
	if r.code != 0 || !strings.Contains(r.stdout, `"words": 2`) || !strings.Contains(r.stdout, "agent:        a2awire-clean") {
		t.Fatalf("invoke a2awire-clean: %v", r)
	}
	for _, name := range []string{"a2awire-clean", "e2e-counter"} {
		r = awn(t, env, "--json", "invoke", name, "--task", "word-count", "--input", `{"text":"a b"}`)
		if r.code != 0 {
			t.Fatalf("invoke %s: %v", name, r)
		}
		var out struct {
			Output   map[string]any `json:"output"`
			Metadata map[string]any `json:"metadata"`
		}
		decodeStrict(t, r.stdout, &out)
		if out.Metadata["agent"] != "a2awire-clean" || out.Metadata["capability"] != "word-count" || out.Output["words"] != 2.0 {
			t.Errorf("invoke %s: %s", name, r.stdout)
		}
	}

	// conform resolves a name the same way.
	r = awn(t, env, "conform", "a2awire-clean", "--task", "word-count", "--input", `{"text":"a b"}`)
	if r.code != 0 || !strings.Contains(r.stderr, "conform: checking "+base+"/agents/a2awire-clean/invoke") {
		t.Errorf("conform by name: %v", r)
	}

	// Presence through the signed PUT: offline leaves discovery.
	if r = awn(t, env, "agent", "offline"); r.code != 0 || r.stdout != "e2e-counter is offline\n" {
		t.Fatalf("offline: %v", r)
	}
	r = awn(t, env, "--json", "discover", "--capability", "word-count")
	if r.code != 0 || strings.Contains(r.stdout, "e2e-counter") || !strings.Contains(r.stdout, "a2awire-clean") {
		t.Errorf("discover after offline: %v", r)
	}
	r = awn(t, env, "--json", "agent", "status")
	var st struct {
		Agent  profile           `json:"agent"`
		Local  *localAgent       `json:"local"`
		AWNID  *string           `json:"awnId"`
		Worlds []json.RawMessage `json:"worlds"`
	}
	decodeStrict(t, r.stdout, &st)
	if r.code != 0 || st.Agent.Status != "offline" || st.Local == nil || st.Local.Status != "offline" {
		t.Errorf("agent status: %v", r)
	}
	if r = awn(t, env, "agent", "online"); r.code != 0 {
		t.Fatalf("online: %v", r)
	}

	// Another key cannot take the name: the server's message, exit 1.
	other := withHome(t, base)
	awn(t, other, "init")
	r = awn(t, other, "register", "--name", "e2e-counter", "--endpoint", base+"/x", "--capability", "c")
	if r.code != 1 || r.stdout != "" || !strings.HasPrefix(r.stderr, "error: name_taken: ") {
		t.Errorf("name taken: %v", r)
	}
	// Nor set its presence.
	r = awn(t, other, "agent", "offline", "--name", "e2e-counter")
	if r.code != 1 || r.stdout != "" || !strings.HasPrefix(r.stderr, "error: ") {
		t.Errorf("presence by another key: %v", r)
	}
}

// seenRequest is one request as a recording proxy saw it.
type seenRequest struct {
	method, path string
	header       http.Header
	body         []byte
}

// TestSignedRequestReplayRefused: the network verifies what awn signs — the
// register passing through a recording proxy succeeds — and the same bytes
// sent again are refused (401 unauthorized, the nonce already used).
func TestSignedRequestReplayRefused(t *testing.T) {
	t.Parallel()
	base := network(t)
	target, _ := url.Parse(base)
	var (
		mu   sync.Mutex
		seen []seenRequest
	)
	rp := httputil.NewSingleHostReverseProxy(target)
	proxy := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		b, _ := io.ReadAll(r.Body)
		mu.Lock()
		seen = append(seen, seenRequest{r.Method, r.URL.RequestURI(), r.Header.Clone(), b})
		mu.Unlock()
		r.Body = io.NopCloser(bytes.NewReader(b))
		rp.ServeHTTP(w, r)
	}))
	t.Cleanup(proxy.Close)

	env := withHome(t, proxy.URL)
	awn(t, env, "init")
	r := awn(t, env, "register", "--name", "replayed", "--endpoint", base+"/agents/a2awire-clean/invoke", "--capability", "word-count")
	if r.code != 0 {
		t.Fatalf("register through the proxy: %v", r)
	}
	mu.Lock()
	c := seen[len(seen)-1]
	mu.Unlock()
	if c.method != http.MethodPost || c.header.Get("Signature") == "" {
		t.Fatalf("captured %s %s without a signature", c.method, c.path)
	}
	// The same request, to the same authority it was signed for.
	req, _ := http.NewRequest(c.method, base+c.path, bytes.NewReader(c.body))
	req.Header = c.header.Clone()
	req.Host = strings.TrimPrefix(proxy.URL, "http://")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var e struct{ Error, Message string }
	_ = json.NewDecoder(resp.Body).Decode(&e)
	if resp.StatusCode != http.StatusUnauthorized || e.Error != "unauthorized" || !strings.Contains(e.Message, "nonce") {
		t.Errorf("replay: %d %+v, want 401 unauthorized naming the nonce", resp.StatusCode, e)
	}
}

// TestWorldEndToEnd is the world layer's must-show against the whole local
// system: two identities join lobby (the world the harness creates at
// start), A lists the agents and pings B, sends B hello, and B reads the
// message and the world's events — every request signed by awn and
// verified by the network.
func TestWorldEndToEnd(t *testing.T) {
	t.Parallel()
	base := network(t)
	a, b := newAgentID(t, base), newAgentID(t, base)

	for _, id := range []agentID{a, b} {
		r := awn(t, id.env, "join", "lobby")
		if r.code != 0 || !strings.HasPrefix(r.stdout, "joined lobby as "+id.AWNID+" (slot ") {
			t.Fatalf("join lobby: %v", r)
		}
	}
	r := awn(t, a.env, "agents", "lobby")
	if r.code != 0 || !strings.HasPrefix(r.stdout, "SLOT") || !strings.Contains(r.stdout, a.AWNID) || !strings.Contains(r.stdout, b.AWNID) {
		t.Errorf("agents lobby: %v", r)
	}
	r = awn(t, a.env, "--json", "agents", "lobby")
	var listed struct {
		Agents []struct {
			AWNID string `json:"awnId"`
		} `json:"agents"`
		Count int `json:"count"`
	}
	decodeStrict(t, r.stdout, &listed)
	if r.code != 0 || listed.Count != 2 || len(listed.Agents) != 2 {
		t.Errorf("agents lobby --json: %v", r)
	}
	// B has neither polled nor set a webhook yet.
	r = awn(t, a.env, "ping", "lobby", b.AWNID)
	if r.code != 0 || r.stdout != b.AWNID+" is not reachable\n" {
		t.Errorf("ping lobby B: %v", r)
	}
	r = awn(t, a.env, "send", "lobby", b.AWNID, "hello")
	if r.code != 0 || !strings.HasPrefix(r.stdout, "sent ") {
		t.Fatalf("send lobby B hello: %v", r)
	}

	r = awn(t, b.env, "--json", "messages", "lobby", "--peek")
	var msgs struct {
		Messages []struct {
			From        string          `json:"from"`
			Content     json.RawMessage `json:"content"`
			ContentType string          `json:"contentType"`
		} `json:"messages"`
	}
	decodeStrict(t, r.stdout, &msgs)
	if r.code != 0 || len(msgs.Messages) != 1 || msgs.Messages[0].From != a.AWNID || string(msgs.Messages[0].Content) != `"hello"` ||
		msgs.Messages[0].ContentType != "text/plain" {
		t.Errorf("messages lobby --json --peek: %v", r)
	}
	r = awn(t, b.env, "messages", "lobby")
	if r.code != 0 || !strings.HasSuffix(r.stdout, "from "+a.AWNID+": hello\n") || strings.Count(r.stdout, "\n") != 1 {
		t.Errorf("messages lobby: %v", r)
	}
	// Consumed by the read.
	if r = awn(t, b.env, "messages", "lobby"); r.code != 0 || r.stdout != "no messages in lobby\n" {
		t.Errorf("messages lobby again: %v", r)
	}

	r = awn(t, b.env, "events", "lobby")
	var types []string
	for _, line := range strings.Split(strings.TrimSuffix(r.stdout, "\n"), "\n") {
		if f := strings.Fields(line); len(f) > 2 {
			types = append(types, f[2])
		}
	}
	if r.code != 0 || !slices.Contains(types, "agent.joined") || !slices.Contains(types, "message.received") ||
		!strings.Contains(r.stdout, "(private)") {
		t.Errorf("events lobby: %v", r)
	}
	// A does not see B's private event.
	r = awn(t, a.env, "events", "lobby")
	if r.code != 0 || strings.Contains(r.stdout, "message.received") {
		t.Errorf("events lobby as A: %v", r)
	}
	// Having polled, B is reachable.
	r = awn(t, a.env, "ping", "lobby", b.AWNID)
	if r.code != 0 || r.stdout != b.AWNID+" is reachable (polled events recently)\n" {
		t.Errorf("ping lobby B after its poll: %v", r)
	}
	// B follows the events (a real long poll); A's next message arrives
	// while B waits, then Ctrl-C ends the follow cleanly.
	r = awn(t, b.env, "--json", "events", "lobby")
	var page struct {
		Cursor string `json:"cursor"`
	}
	decodeStrict(t, r.stdout, &page)
	rn := start(t, b.env, "events", "lobby", "--follow", "--json", "--after", page.Cursor)
	deadline := time.Now().Add(20 * time.Second)
	for !strings.Contains(rn.stderr.String(), "waiting for events in lobby") && time.Now().Before(deadline) {
		time.Sleep(10 * time.Millisecond)
	}
	if r = awn(t, a.env, "send", "lobby", b.AWNID, `{"n":2}`); r.code != 0 {
		t.Fatalf("send while B follows: %v", r)
	}
	for !strings.Contains(rn.stdout.String(), "message.received") && time.Now().Before(deadline) {
		time.Sleep(10 * time.Millisecond)
	}
	rn.cancel()
	if code := rn.wait(t); code != 0 || strings.Contains(rn.stderr.String(), "error") {
		t.Errorf("follow: exit %d, stderr:\n%s", code, rn.stderr.String())
	}
	var got event
	decodeStrict(t, rn.stdout.String(), &got)
	if got.Type != "message.received" || got.Visibility != "private" || !strings.Contains(string(got.Data), a.AWNID) {
		t.Errorf("followed: %s", rn.stdout.String())
	}
	// The harness serves the event stream, so --follow read it.
	if strings.Contains(rn.stderr.String(), "long-polling instead") {
		t.Errorf("follow fell back to long-poll with the stream served:\n%s", rn.stderr.String())
	}
	// With --stream-url naming no stream, --follow long-polls from the
	// same cursor and still gets the event.
	rn = start(t, b.env, "events", "lobby", "--follow", "--json", "--after", page.Cursor, "--stream-url", "http://127.0.0.1:1")
	deadline = time.Now().Add(20 * time.Second)
	for !strings.Contains(rn.stdout.String(), "message.received") && time.Now().Before(deadline) {
		time.Sleep(10 * time.Millisecond)
	}
	rn.cancel()
	if code := rn.wait(t); code != 0 || !strings.Contains(rn.stderr.String(), "long-polling instead") || !strings.Contains(rn.stdout.String(), "message.received") {
		t.Errorf("follow without a stream: exit %d, stdout %s, stderr:\n%s", code, rn.stdout.String(), rn.stderr.String())
	}

	// Leaving ends the membership.
	if r = awn(t, b.env, "leave", "lobby"); r.code != 0 || r.stdout != "left lobby\n" {
		t.Errorf("leave lobby: %v", r)
	}
	// Refused: NOT_JOINED, or UNAUTHORIZED once the network no longer
	// knows the key at all.
	r = awn(t, b.env, "agents", "lobby")
	if r.code != 1 || r.stdout != "" || !(strings.HasPrefix(r.stderr, "error: NOT_JOINED: ") || strings.HasPrefix(r.stderr, "error: UNAUTHORIZED: ")) {
		t.Errorf("agents lobby after leave: %v", r)
	}
}
