package worldhttp_test

import (
	"context"
	"crypto/ed25519"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/a2awire/a2awire/local/harness"
	"github.com/a2awire/a2awire/shared/auth"
	"github.com/a2awire/a2awire/shared/lambdahttp"
	"github.com/a2awire/a2awire/shared/logging"
	"github.com/a2awire/a2awire/shared/store"
	"github.com/a2awire/a2awire/shared/store/memory"
	"github.com/a2awire/a2awire/shared/world"
)

// governHarness is a harness over a fresh memory store with env as the
// functions' environment.
func governHarness(t *testing.T, env map[string]string) (string, store.Store) {
	t.Helper()
	return governHarnessAt(t, env, nil)
}

// governHarnessAt is governHarness with the functions' clock now (nil:
// time.Now).
func governHarnessAt(t *testing.T, env map[string]string, now func() time.Time) (string, store.Store) {
	t.Helper()
	st := memory.New()
	t.Cleanup(func() { _ = st.Close() })
	h, err := harness.New(harness.Options{Log: logging.Discard(), Store: st, Now: now, Getenv: func(k string) string { return env[k] }})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = h.Close() })
	srv := httptest.NewServer(h)
	t.Cleanup(srv.Close)
	return srv.URL, st
}

// raw sends an unsigned request: status and body.
func raw(t *testing.T, method, url string) (int, []byte) {
	t.Helper()
	req, _ := http.NewRequest(method, url, nil)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, b
}

// TestModerationThroughHarness: the owner routes answer the owner, 403
// FORBIDDEN to a member and 401 to a key that is neither; a kick ends the
// membership; a ban kicks and keeps the key out (403 BANNED) until unban;
// the public feed shows the kick to anyone unsigned, the other events need
// a member; the agent's own view is that agent's only.
func TestModerationThroughHarness(t *testing.T) {
	base, _ := governHarness(t, nil)
	owner, a, b, x := newAgent(t, base, 40), newAgent(t, base, 41), newAgent(t, base, 42), newAgent(t, base, 43)
	owner.call("PUT", "/v0/worlds/arena", fmt.Sprintf(`{"publicKey":%q,"name":"Arena"}`, b64(owner.key)), 201)
	a.call("POST", "/v0/worlds/arena/join", fmt.Sprintf(`{"publicKey":%q}`, b64(a.key)), 201)
	jb := b.call("POST", "/v0/worlds/arena/join", fmt.Sprintf(`{"publicKey":%q}`, b64(b.key)), 201)
	if players, _ := jb["players"].(map[string]any); players == nil || players["count"] != 2.0 {
		t.Fatalf("join's players: %v", jb["players"])
	}

	kickB := "/v0/worlds/arena/members/" + b.awnID() + "/kick"
	if e := a.call("POST", kickB, "", 403); e["code"] != "FORBIDDEN" {
		t.Fatalf("a member kicking: %v", e)
	}
	if e := x.call("POST", kickB, "", 401); e["code"] != "UNAUTHORIZED" {
		t.Fatalf("a stranger kicking: %v", e)
	}
	if k := owner.call("POST", kickB, "", 200); k["awnId"] != b.awnID() {
		t.Fatalf("kick: %v", k)
	}
	b.call("GET", "/v0/worlds/arena/agents", "", 401)
	owner.call("POST", kickB, "", 404)

	banA := "/v0/worlds/arena/bans/" + a.awnID()
	if bn := owner.call("PUT", banA, `{"reason":"spam"}`, 201); bn["reason"] != "spam" {
		t.Fatalf("ban: %v", bn)
	}
	owner.call("PUT", banA, "", 200)
	if e := a.call("POST", "/v0/worlds/arena/join", fmt.Sprintf(`{"publicKey":%q}`, b64(a.key)), 403); e["code"] != "BANNED" {
		t.Fatalf("a banned key joining: %v", e)
	}
	bans := owner.call("GET", "/v0/worlds/arena/bans?limit=10", "", 200)
	if bans["count"] != 1.0 || bans["cursor"] != nil {
		t.Fatalf("bans: %v", bans)
	}
	a.call("GET", "/v0/worlds/arena/bans", "", 401) // no longer a member
	owner.call("DELETE", banA, "", 200)
	owner.call("DELETE", banA, "", 404)
	a.call("POST", "/v0/worlds/arena/join", fmt.Sprintf(`{"publicKey":%q}`, b64(a.key)), 201)
	owner.call("PUT", "/v0/worlds/arena/bans/aw:sha256:nope", "", 404)

	// The public feed: unsigned, public events only.
	status, body := raw(t, "GET", base+"/v0/worlds/arena/events?visibility=public&limit=100")
	if status != 200 || !strings.Contains(string(body), world.AgentKicked) || strings.Contains(string(body), `"visibility":"agents"`) {
		t.Fatalf("public feed: %d %s", status, body)
	}
	if status, body := raw(t, "GET", base+"/v0/worlds/arena/events"); status != 401 {
		t.Fatalf("unsigned events without visibility=public: %d %s", status, body)
	}
	if status, _ := raw(t, "GET", base+"/v0/worlds/nowhere/events?visibility=public"); status != 404 {
		t.Fatalf("public feed of no world: %d", status)
	}

	// The agent's own view.
	view := a.call("GET", "/v0/agents/"+a.awnID()+"/worlds", "", 200)
	rows, _ := view["worlds"].([]any)
	if len(rows) != 1 || rows[0].(map[string]any)["worldId"] != "arena" || rows[0].(map[string]any)["role"] != "member" {
		t.Fatalf("a's view: %v", view)
	}
	if v := owner.call("GET", "/v0/agents/"+owner.awnID()+"/worlds", "", 200); v["count"] != 1.0 {
		t.Fatalf("the owner's view: %v", v)
	}
	b.call("GET", "/v0/agents/"+a.awnID()+"/worlds", "", 401) // b's key is not a's
	x.call("GET", "/v0/agents/"+x.awnID()+"/worlds", "", 401) // joined, owns and registers nothing
}

// quotes is metadata of about 4 KiB of double quotes, each 2 bytes of JSON
// and 4 once the body is escaped into Lambda's proxy response.
func quotes() json.RawMessage {
	return json.RawMessage(`{"q":"` + strings.Repeat(`\"`, (world.MaxMetadataBytes-10)/2) + `"}`)
}

// TestAgentsListBounded: a world of 500 members with 4 KiB metadata of
// quotes (the join-flood's): the agents list pages through all of them,
// each page's Lambda response (the body escaped into the proxy response)
// under 6 MB, and join answers its first page of players within it too.
// 250 members are two full pages and a partial one: the largest page (100
// members, the limit) is what the bound is about, and two cursors to
// follow show the paging as well as five did (500 members cost twice the
// CPU under -race for the same pages); BenchmarkAgentsList10k pages 10,000
// the same way.
func TestAgentsListBounded(t *testing.T) {
	base, st := governHarness(t, nil)
	member := newAgent(t, base, 50)
	ctx := context.Background()
	w := world.New(st)
	if _, _, err := w.PutWorld(ctx, world.Manifest{ID: "crowd"}, pub(member.key)); err != nil {
		t.Fatal(err)
	}
	fill(t, w, "crowd", 250)
	member.call("POST", "/v0/worlds/crowd/join", fmt.Sprintf(`{"publicKey":%q,"metadata":%s}`, b64(member.key), quotes()), 201)
	seen, pages, largest := pageAll(t, member, "crowd", 100)
	if len(seen) != 251 || pages != 3 {
		t.Fatalf("paged %d members in %d pages, want 251 in 3", len(seen), pages)
	}
	t.Logf("251 members in %d pages, the largest page %d bytes as a Lambda response", pages, largest)
}

// fill joins n members with quotes() metadata through the domain.
func fill(t testing.TB, w *world.Service, id string, n int) {
	t.Helper()
	var wg sync.WaitGroup
	sem := make(chan struct{}, 8)
	for i := range n {
		wg.Go(func() {
			sem <- struct{}{}
			defer func() { <-sem }()
			if _, _, err := w.Join(context.Background(), id, pub(keyN(i)), quotes()); err != nil {
				t.Error(err)
			}
		})
	}
	wg.Wait()
}

// pageAll pages world's agents list with limit, checking each page's size
// as a Lambda response; it returns the awnIds seen, the pages and the
// largest response.
func pageAll(t testing.TB, a *agent, id string, limit int) (map[string]bool, int, int) {
	seen := map[string]bool{}
	pages, largest := 0, 0
	cursor := ""
	for {
		path := fmt.Sprintf("/v0/worlds/%s/agents?limit=%d", id, limit)
		if cursor != "" {
			path += "&cursor=" + cursor
		}
		status, header, body := a.rawCall("GET", path, "")
		if status != 200 {
			t.Fatalf("page %d: %d %s", pages, status, body)
		}
		size := lambdahttp.ResponseSize(status, header, body)
		if size > lambdahttp.MaxResponse {
			t.Fatalf("page %d is %d bytes as a Lambda response, over %d", pages, size, lambdahttp.MaxResponse)
		}
		largest = max(largest, size)
		var env struct {
			Data struct {
				Agents []struct {
					AWNID string `json:"awnId"`
				} `json:"agents"`
				Cursor *string `json:"cursor"`
			} `json:"data"`
		}
		if err := json.Unmarshal(body, &env); err != nil {
			t.Fatal(err)
		}
		pages++
		for _, m := range env.Data.Agents {
			if seen[m.AWNID] {
				t.Fatalf("%s listed twice", m.AWNID)
			}
			seen[m.AWNID] = true
		}
		if env.Data.Cursor == nil {
			return seen, pages, largest
		}
		cursor = *env.Data.Cursor
	}
}

// TestJoinFlood: fresh keys join as fast as they can; the world's join
// limit (RATE_LIMIT_JOIN, 20 a minute here; 300 by default) admits the
// first and answers the rest 429 with Retry-After, and every route of the
// world keeps answering. The flood is 60 joins of 4 KiB of quotes each,
// 8 at a time (the 900 at the default limit is the same property,
// three times over: a flood beyond the limit costs one conditional write
// each). 8 joins in flight race the limit's count at its boundary whether
// the limit is 20 or 40; 120 joins at 40 cost twice the CPU under -race.
// The functions' clock stands still: on the wall clock the flood could
// straddle the limit's minute and be admitted twice over.
func TestJoinFlood(t *testing.T) {
	frozen := time.Now()
	base, _ := governHarnessAt(t, map[string]string{"RATE_LIMIT_JOIN": "20"}, func() time.Time { return frozen })
	owner := newAgent(t, base, 60)
	owner.call("PUT", "/v0/worlds/flood", fmt.Sprintf(`{"publicKey":%q}`, b64(owner.key)), 201)
	var mu sync.Mutex
	codes := map[int]int{}
	var wg sync.WaitGroup
	sem := make(chan struct{}, 8)
	for i := range 60 {
		wg.Go(func() {
			sem <- struct{}{}
			defer func() { <-sem }()
			a := newAgentKey(t, base, keyN(1000+i))
			status, header, _ := a.rawCall("POST", "/v0/worlds/flood/join", fmt.Sprintf(`{"publicKey":%q,"metadata":%s}`, b64(a.key), quotes()))
			if status == 429 && header.Get("Retry-After") == "" {
				t.Error("429 without Retry-After")
			}
			mu.Lock()
			codes[status]++
			mu.Unlock()
		})
	}
	wg.Wait()
	if codes[201] != 20 || codes[429] != 40 {
		t.Fatalf("join answers %v, want 20 × 201 and 40 × 429", codes)
	}
	owner.call("POST", "/v0/worlds/flood/join", fmt.Sprintf(`{"publicKey":%q}`, b64(owner.key)), 429)
	// Every route still answers its caller.
	m := newAgentKey(t, base, keyN(1003)) // joined in the flood, or not
	status, _, _ := m.rawCall("GET", "/v0/worlds/flood/agents", "")
	if status != 200 && status != 401 {
		t.Fatalf("agents: %d", status)
	}
	if status, _ := raw(t, "GET", base+"/v0/worlds/flood"); status != 200 {
		t.Fatalf("get world: %d", status)
	}
	if status, _ := raw(t, "GET", base+"/v0/worlds/flood/events?visibility=public"); status != 200 {
		t.Fatalf("public feed: %d", status)
	}
	if bans := owner.call("GET", "/v0/worlds/flood/bans", "", 200); bans["count"] != 0.0 {
		t.Fatalf("bans: %v", bans)
	}
}

// keyN is a deterministic key numbered n (any number of them).
func keyN(n int) ed25519.PrivateKey {
	seed := make([]byte, ed25519.SeedSize)
	copy(seed, fmt.Sprintf("govern-%d", n))
	return ed25519.NewKeyFromSeed(seed)
}

// newAgentKey is newAgent with a key of its own.
func newAgentKey(t *testing.T, base string, k ed25519.PrivateKey) *agent {
	t.Helper()
	s, err := auth.NewSigner(k)
	if err != nil {
		t.Fatal(err)
	}
	return &agent{t: t, base: base, key: k, c: &http.Client{Transport: &auth.Transport{Signer: s}}}
}

// rawCall sends a signed request: status, header and body as they came.
func (a *agent) rawCall(method, path, body string) (int, http.Header, []byte) {
	a.t.Helper()
	req, err := http.NewRequest(method, a.base+path, strings.NewReader(body))
	if err != nil {
		a.t.Fatal(err)
	}
	req.Header.Set("Content-Type", "application/json")
	resp, err := a.c.Do(req)
	if err != nil {
		a.t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, resp.Header, b
}

// BenchmarkAgentsList10k is the scale of the issue: a world of 10,000
// members with 4 KiB metadata of quotes; the agents list pages through all
// of them, each page's Lambda response under 6 MB (pageAll checks it), and
// the owner kicks and bans members of it. TestAgentsListBounded proves
// the same at 500 members within the test budget.
func BenchmarkAgentsList10k(b *testing.B) {
	st := memory.New()
	b.Cleanup(func() { _ = st.Close() })
	h, err := harness.New(harness.Options{Log: logging.Discard(), Store: st})
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { _ = h.Close() })
	srv := httptest.NewServer(h)
	b.Cleanup(srv.Close)
	ctx := context.Background()
	w := world.New(st)
	ownerKey := keyN(-1)
	if _, _, err := w.PutWorld(ctx, world.Manifest{ID: "huge"}, pub(ownerKey)); err != nil {
		b.Fatal(err)
	}
	const n = 10_000
	fill(b, w, "huge", n)
	s, err := auth.NewSigner(keyN(0))
	if err != nil {
		b.Fatal(err)
	}
	member := &agent{t: b, base: srv.URL, key: keyN(0), c: &http.Client{Transport: &auth.Transport{Signer: s}}}
	so, _ := auth.NewSigner(ownerKey)
	owner := &agent{t: b, base: srv.URL, key: ownerKey, c: &http.Client{Transport: &auth.Transport{Signer: so}}}
	b.ResetTimer()
	for range b.N {
		seen, pages, largest := pageAll(b, member, "huge", 100)
		if len(seen) != n {
			b.Fatalf("paged %d members, want %d", len(seen), n)
		}
		b.ReportMetric(float64(pages), "pages")
		b.ReportMetric(float64(largest), "largest-page-bytes")
	}
	b.StopTimer()
	for i, path := range []string{"/v0/worlds/huge/members/" + auth.AWNID(pub(keyN(1))) + "/kick", "/v0/worlds/huge/bans/" + auth.AWNID(pub(keyN(2)))} {
		method := []string{"POST", "PUT"}[i]
		if status, _, body := owner.rawCall(method, path, ""); status/100 != 2 {
			b.Fatalf("%s %s: %d %s", method, path, status, body)
		}
	}
	if m, err := w.GetWorld(ctx, "huge"); err != nil || m.Members != n-2 {
		b.Fatalf("members %d, %v; want %d after a kick and a ban", m.Members, err, n-2)
	}
}

// TestRegistryPresenceReachesWorlds: an agent registered and joined polls
// (online); its registration set offline overrides that in the world's
// agents list and in ping, with presence.changed announced; online lifts
// it; unregistering is the owner's alone (403 for another key).
func TestRegistryPresenceReachesWorlds(t *testing.T) {
	base, _ := governHarness(t, nil)
	a, b := newAgent(t, base, 70), newAgent(t, base, 71)
	a.call("PUT", "/v0/worlds/town", fmt.Sprintf(`{"publicKey":%q}`, b64(a.key)), 201)
	for _, m := range []*agent{a, b} {
		m.call("POST", "/v0/worlds/town/join", fmt.Sprintf(`{"publicKey":%q}`, b64(m.key)), 201)
	}
	reg := fmt.Sprintf(`{"name":"town-a","endpoint":"https://a.example/invoke","capabilities":["chat"],"public_key":%q}`, b64(a.key))
	if status, _, body := a.rawCall("POST", "/api/v1/agents", reg); status != 201 {
		t.Fatalf("register: %d %s", status, body)
	}
	a.call("GET", "/v0/worlds/town/events", "", 200) // a polls: online
	presenceOf := func() string {
		list := b.call("GET", "/v0/worlds/town/agents", "", 200)
		for _, x := range list["agents"].([]any) {
			if m := x.(map[string]any); m["awnId"] == a.awnID() {
				return m["presence"].(string)
			}
		}
		return "absent"
	}
	if p := presenceOf(); p != "online" {
		t.Fatalf("after polling: %s", p)
	}
	if status, _, body := a.rawCall("PUT", "/api/v1/agents/town-a/presence", `{"status":"offline"}`); status != 200 {
		t.Fatalf("offline: %d %s", status, body)
	}
	if p := presenceOf(); p != "offline" {
		t.Fatalf("registered offline, just polled: %s", p)
	}
	if pg := b.call("POST", "/v0/worlds/town/ping", fmt.Sprintf(`{"target":%q}`, a.awnID()), 200); pg["reachable"] != false {
		t.Fatalf("ping of an agent registered offline: %v", pg)
	}
	if status, _, body := a.rawCall("PUT", "/api/v1/agents/town-a/presence", `{"status":"online"}`); status != 200 {
		t.Fatalf("online: %d %s", status, body)
	}
	if p := presenceOf(); p != "online" {
		t.Fatalf("registered online again: %s", p)
	}
	evs := b.call("GET", "/v0/worlds/town/events?limit=100", "", 200)
	var changes []string
	for _, x := range evs["events"].([]any) {
		e := x.(map[string]any)
		if d := e["data"].(map[string]any); e["type"] == world.PresenceChanged && d["awnId"] == a.awnID() {
			changes = append(changes, d["presence"].(string))
		}
	}
	if fmt.Sprint(changes) != "[online offline online]" {
		t.Fatalf("a's presence.changed: %v, want [online offline online]", changes)
	}
	if status, _, _ := b.rawCall("DELETE", "/api/v1/agents/town-a", ""); status != 401 && status != 403 {
		t.Fatalf("another key unregistering: %d", status)
	}
	if status, _, body := a.rawCall("DELETE", "/api/v1/agents/town-a", ""); status != 200 {
		t.Fatalf("unregister: %d %s", status, body)
	}
	if status, _ := raw(t, "GET", base+"/api/v1/agents/town-a"); status != 404 {
		t.Fatalf("profile after unregister: %d", status)
	}
}
