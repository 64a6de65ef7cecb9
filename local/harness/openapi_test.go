package harness_test

import (
	"bytes"
	"context"
	"crypto/ed25519"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"sync"
	"testing"

	"github.com/a2awire/a2awire/local/harness"
	"github.com/a2awire/a2awire/shared/auth"
	"github.com/a2awire/a2awire/shared/logging"
	"github.com/a2awire/a2awire/shared/openapi/spec"
	"github.com/a2awire/a2awire/shared/routes"
	"github.com/a2awire/a2awire/shared/store/memory"
)

// exchangeRecorder sits in front of the harness and keeps every request
// and its answer as they crossed the wire, for validation afterwards. The
// answer is passed through as the handler writes it (flushes included), so
// a Server-Sent Events stream reaches the client while it runs; the
// exchange is kept when the handler returns.
type exchangeRecorder struct {
	next    http.Handler
	mu      sync.Mutex
	log     []spec.Exchange
	running sync.WaitGroup
}

func (rec *exchangeRecorder) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	rec.running.Add(1)
	defer rec.running.Done()
	body, err := io.ReadAll(r.Body)
	if err != nil {
		http.Error(w, "recorder: read body", http.StatusBadRequest)
		return
	}
	r.Body = io.NopCloser(bytes.NewReader(body))
	x := spec.Exchange{Method: r.Method, URL: "http://" + r.Host + r.URL.RequestURI(), Header: r.Header.Clone(), Body: body}
	tw := &teeWriter{ResponseWriter: w}
	rec.next.ServeHTTP(tw, r)
	if tw.status == 0 {
		tw.WriteHeader(http.StatusOK)
	}
	x.Status, x.RespHeader, x.RespBody = tw.status, tw.header, tw.body.Bytes()
	rec.mu.Lock()
	rec.log = append(rec.log, x)
	rec.mu.Unlock()
}

// exchanges waits for the handlers still running (a stream whose client
// has gone ends on its context) and returns every exchange.
func (rec *exchangeRecorder) exchanges() []spec.Exchange {
	rec.running.Wait()
	rec.mu.Lock()
	defer rec.mu.Unlock()
	return slices.Clone(rec.log)
}

// teeWriter writes through and keeps a copy of the status, the headers as
// sent and the body.
type teeWriter struct {
	http.ResponseWriter
	status int
	header http.Header
	body   bytes.Buffer
}

func (t *teeWriter) WriteHeader(code int) {
	if t.status == 0 {
		t.status, t.header = code, t.ResponseWriter.Header().Clone()
	}
	t.ResponseWriter.WriteHeader(code)
}

func (t *teeWriter) Write(p []byte) (int, error) {
	if t.status == 0 {
		t.WriteHeader(http.StatusOK)
	}
	t.body.Write(p)
	return t.ResponseWriter.Write(p)
}

// Unwrap lets http.ResponseController reach the server's writer (flushes,
// the stream's deadlines).
func (t *teeWriter) Unwrap() http.ResponseWriter { return t.ResponseWriter }

// TestEveryRouteMatchesTheDocument drives every route of the route table
// through the harness over real HTTP — successes, and the errors each
// surface answers — records each request and answer, and validates them
// with libopenapi-validator against the document the harness itself
// serves at /openapi.json. A route of the table that no call here reaches
// fails the test by name: a new route adds its types to
// shared/openapi/spec/ops.go and a call to the walk below.
func TestEveryRouteMatchesTheDocument(t *testing.T) {
	st := memory.New()
	t.Cleanup(func() { _ = st.Close() })
	h := mustHarness(t, harness.Options{Log: logging.Discard(), Store: st})
	rec := &exchangeRecorder{next: h}
	srv := httptest.NewServer(rec)
	t.Cleanup(srv.Close)
	base := srv.URL
	// The fixtures registered at this server: the A2A bridge and escrow
	// verification invoke them through it (those calls are recorded too).
	if _, err := harness.SeedFixtures(context.Background(), st, base, h.NetworkKey()); err != nil {
		t.Fatal(err)
	}
	hooks := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) { w.WriteHeader(http.StatusNoContent) }))
	t.Cleanup(hooks.Close)

	anon := signer{c: http.DefaultClient}
	call := func(s signer, method, path, body string, want int) []byte {
		t.Helper()
		req, err := http.NewRequest(method, base+path, strings.NewReader(body))
		if err != nil {
			t.Fatal(err)
		}
		if body != "" {
			req.Header.Set("Content-Type", "application/json")
		}
		resp, err := s.c.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		raw, _ := io.ReadAll(resp.Body)
		if resp.StatusCode != want {
			t.Errorf("%s %s: %d %s, want %d", method, path, resp.StatusCode, raw, want)
		}
		return raw
	}

	doc := call(anon, "GET", "/openapi.json", "", 200)
	checker, err := spec.NewChecker(doc)
	if err != nil {
		t.Fatal(err)
	}

	// The invocation surface: each fixture provider, a success and an error.
	for _, inv := range []struct{ agent, body string }{
		{"a2awire-punctual", `{"task":"ping","input":{"echo":"hi"}}`},
		{"a2awire-clean", `{"task":"word-count","input":{"text":"Hello, wide world!"}}`},
		{"a2awire-messy", `{"task":"messy-echo","input":{"hello":"world"}}`},
		{"a2awire-translator", `{"task":"translation","input":{"text":"Thank you","target_lang":"es"}}`},
		{"a2awire-ledger", `{"task":"balance","input":{"account":"acct-demo"}}`},
	} {
		call(anon, "POST", "/agents/"+inv.agent+"/invoke", inv.body, 200)
		call(anon, "POST", "/agents/"+inv.agent+"/invoke", `{"task":"no-such-capability"}`, 400)
	}

	// The registry and the key directories.
	owner, member, other, stranger := newSigner(t, 11), newSigner(t, 12), newSigner(t, 13), newSigner(t, 14)
	reg := func(s signer, name string) string {
		return fmt.Sprintf(`{"name":%q,"description":"a test provider","endpoint":"https://%s.example/invoke","capabilities":["ping"],"public_key":%q}`, name, name, s.pub())
	}
	call(owner, "POST", "/api/v1/agents", reg(owner, "owner-agent"), 201)
	call(owner, "POST", "/api/v1/agents", reg(owner, "owner-agent"), 200)
	call(anon, "POST", "/api/v1/agents", reg(owner, "owner-agent"), 401)
	call(owner, "POST", "/api/v1/agents", `{"name":"x"`, 400)
	call(anon, "GET", "/api/v1/agents?capability=ping&status=any&limit=10", "", 200)
	call(anon, "GET", "/api/v1/agents/owner-agent", "", 200)
	call(anon, "GET", "/api/v1/agents/nobody-here", "", 404)
	call(owner, "PUT", "/api/v1/agents/owner-agent/presence", `{"status":"offline"}`, 200)
	call(anon, "GET", "/api/v1/keys/"+auth.KeyID(owner.key.Public().(ed25519.PublicKey)), "", 200)
	call(anon, "GET", "/api/v1/keys/"+auth.KeyID(stranger.key.Public().(ed25519.PublicKey)), "", 404)
	call(anon, "GET", "/.well-known/http-message-signatures-directory", "", 200)
	call(anon, "GET", "/.well-known/agent-card.json", "", 200)
	call(anon, "GET", "/.well-known/agent.json", "", 200)
	call(owner, "DELETE", "/api/v1/agents/owner-agent", "", 200)

	// The worlds: the owner's routes, the members' routes, their errors.
	w := "/v0/worlds/arena"
	call(owner, "PUT", w, fmt.Sprintf(`{"publicKey":%q,"name":"Arena","category":"games","actions":[{"name":"move","description":"play a move"}],"maxMembers":10}`, owner.pub()), 201)
	call(owner, "PUT", w, `{"description":"a place to play"}`, 200)
	call(member, "PUT", w, fmt.Sprintf(`{"publicKey":%q,"description":"mine now"}`, member.pub()), 403)
	call(owner, "PUT", w, `{"name":`, 400)
	call(anon, "GET", w, "", 200)
	call(anon, "GET", "/v0/worlds/nowhere", "", 404)
	call(anon, "GET", "/v0/worlds?category=games&q=arena&sort=members&status=any&limit=5", "", 200)
	call(anon, "GET", w+"/.well-known/agent-card.json", "", 200)
	call(anon, "GET", "/v0/worlds/nowhere/.well-known/agent-card.json", "", 404)
	call(anon, "GET", w+"/.well-known/agent.json", "", 200)
	call(member, "POST", w+"/join", fmt.Sprintf(`{"publicKey":%q,"metadata":{"role":"player"}}`, member.pub()), 201)
	call(member, "POST", w+"/join", fmt.Sprintf(`{"publicKey":%q}`, member.pub()), 200)
	call(other, "POST", w+"/join", fmt.Sprintf(`{"publicKey":%q}`, other.pub()), 201)
	call(other, "POST", "/v0/worlds/nowhere/join", fmt.Sprintf(`{"publicKey":%q}`, other.pub()), 404)
	call(member, "GET", w+"/agents?limit=10", "", 200)
	call(stranger, "GET", w+"/agents", "", 401)
	call(anon, "GET", w+"/agents", "", 401)
	call(member, "POST", w+"/messages", fmt.Sprintf(`{"to":%q,"content":{"text":"hello"}}`, other.awnID()), 201)
	call(member, "POST", w+"/messages", `{"to":`, 400)
	call(member, "POST", w+"/messages", `{"to":"nobody","content":{}}`, 404)
	call(other, "GET", w+"/messages?peek=true&limit=10", "", 200)
	call(other, "GET", w+"/messages", "", 200)
	call(member, "POST", w+"/ping", fmt.Sprintf(`{"target":%q}`, other.awnID()), 200)
	call(member, "POST", w+"/actions", `{"action":"move","params":{"to":"e4"}}`, 201)
	call(member, "GET", w+"/events?limit=10", "", 200)
	call(anon, "GET", w+"/events?visibility=public&limit=10", "", 200)
	// The event stream: refusals are the world's JSON errors; a member's
	// stream is text/event-stream, read only to its headers here (the
	// validator checks its status and content type; it cannot parse SSE
	// bodies, documented as a string).
	call(anon, "GET", w+"/events/stream", "", 401)
	call(member, "GET", w+"/events/stream?after=not-an-event-id", "", 400)
	func() {
		ctx, cancel := context.WithCancel(context.Background())
		defer cancel() // ends the stream: the recorder keeps it when its handler returns
		req, err := http.NewRequestWithContext(ctx, "GET", base+w+"/events/stream", nil)
		if err != nil {
			t.Fatal(err)
		}
		resp, err := member.c.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		if ct := resp.Header.Get("Content-Type"); resp.StatusCode != 200 || !strings.HasPrefix(ct, "text/event-stream") {
			t.Errorf("GET %s/events/stream: %d %s, want 200 text/event-stream", w, resp.StatusCode, ct)
		}
	}()
	call(member, "PUT", w+"/webhook", fmt.Sprintf(`{"url":%q}`, hooks.URL+"/hook"), 200)
	call(member, "GET", w+"/webhook", "", 200)
	call(member, "POST", w+"/webhook/replay", `{"since":"2026-01-01T00:00:00Z"}`, 200)
	call(member, "DELETE", w+"/webhook", "", 200)
	call(member, "GET", w+"/webhook", "", 404)
	call(member, "GET", "/v0/agents/"+member.awnID()+"/worlds?limit=10", "", 200)
	call(owner, "GET", "/v0/agents/"+owner.awnID()+"/worlds", "", 200)
	call(owner, "POST", w+"/close", "", 200)
	call(member, "POST", w+"/close", "", 403)
	call(owner, "POST", w+"/reopen", "", 200)
	call(member, "POST", w+"/members/"+other.awnID()+"/kick", "", 403)
	call(owner, "POST", w+"/members/"+other.awnID()+"/kick", "", 200)
	call(owner, "PUT", w+"/bans/"+other.awnID(), `{"reason":"spam"}`, 201)
	call(owner, "PUT", w+"/bans/"+other.awnID(), "", 200)
	call(owner, "GET", w+"/bans?limit=10", "", 200)
	call(owner, "DELETE", w+"/bans/"+other.awnID(), "", 200)
	call(member, "POST", w+"/leave", "", 200)
	call(owner, "DELETE", w, "", 202)
	call(stranger, "DELETE", "/v0/worlds/nowhere", "", 404)

	// The A2A bridge: a fixture's cards, JSON-RPC results and errors.
	a2a := "/a2a/a2awire-punctual"
	call(anon, "GET", a2a+"/.well-known/agent-card.json", "", 200)
	call(anon, "GET", a2a+"/.well-known/agent.json", "", 200)
	call(anon, "GET", "/a2a/nobody-here/.well-known/agent-card.json", "", 404)
	call(anon, "GET", "/a2a/nobody-here/.well-known/agent.json", "", 404)
	send := func(method string) string {
		return `{"jsonrpc":"2.0","id":1,"method":"` + method + `","params":{"message":{"messageId":"m-` + method + `","role":"ROLE_USER","parts":[{"data":{"task":"ping","input":{"echo":"hi"}}}]}}}`
	}
	rpc := func(path, body, contentType, version string, want int, wantType string) []byte {
		t.Helper()
		req, err := http.NewRequest("POST", base+path, strings.NewReader(body))
		if err != nil {
			t.Fatal(err)
		}
		req.Header.Set("Content-Type", contentType)
		if version != "" {
			req.Header.Set("A2A-Version", version)
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		raw, _ := io.ReadAll(resp.Body)
		if ct := resp.Header.Get("Content-Type"); resp.StatusCode != want || !strings.HasPrefix(ct, wantType) {
			t.Errorf("POST %s: %d %s %s, want %d %s", path, resp.StatusCode, ct, raw, want, wantType)
		}
		return raw
	}
	if raw := rpc(a2a, send("SendMessage"), "application/json", "1.0", 200, "application/json"); !bytes.Contains(raw, []byte(`"result"`)) {
		t.Errorf("SendMessage: %s, want a result", raw)
	}
	// The streamed answer is text/event-stream: the validator checks its
	// status and content type, not the events (it cannot parse SSE).
	rpc(a2a, send("SendStreamingMessage"), "application/json", "1.0", 200, "text/event-stream")
	if raw := rpc(a2a, send("SendMessage"), "application/json", "", 200, "application/json"); !bytes.Contains(raw, []byte(`"code":-32009`)) {
		t.Errorf("SendMessage without A2A-Version: %s, want the -32009 error", raw)
	}
	rpc(a2a, `{"jsonrpc":"2.0","id":2,"method":"GetTask","params":{"id":"no-such-task"}}`, "application/json", "1.0", 200, "application/json")
	rpc("/a2a/nobody-here", send("SendMessage"), "application/json", "1.0", 404, "application/json")
	rpc(a2a, send("SendMessage"), "text/plain", "1.0", 415, "application/json")

	// Credits and escrow: the operator (the network key) grants, a
	// registered buyer hires the punctual fixture.
	sg, err := auth.NewSigner(h.NetworkKey())
	if err != nil {
		t.Fatal(err)
	}
	operator := signer{key: h.NetworkKey(), c: &http.Client{Transport: &auth.Transport{Signer: sg}}}
	buyer := newSigner(t, 15)
	call(buyer, "POST", "/api/v1/agents", reg(buyer, "escrow-buyer"), 201)
	acct := "/api/v1/accounts/" + buyer.awnID()
	call(operator, "POST", acct+"/grant", `{"amount":100,"memo":"start"}`, 200)
	call(operator, "POST", acct+"/grant", `{"amount":0}`, 400)
	call(buyer, "POST", acct+"/grant", `{"amount":100}`, 403)
	call(buyer, "GET", acct+"?limit=10", "", 200)
	call(buyer, "GET", "/api/v1/accounts/"+auth.AWNID(h.NetworkKey().Public().(ed25519.PublicKey)), "", 403)
	call(anon, "GET", acct, "", 401)
	escrowID := func(raw []byte) string {
		t.Helper()
		var e struct{ ID string }
		if err := json.Unmarshal(raw, &e); err != nil || e.ID == "" {
			t.Fatalf("no escrow id in %s", raw)
		}
		return e.ID
	}
	hire := func(amount int) string {
		t.Helper()
		return escrowID(call(buyer, "POST", "/api/v1/escrows", fmt.Sprintf(`{"provider":"a2awire-punctual","capability":"ping","input":{"echo":"hi"},"amount":%d}`, amount), 201))
	}
	call(buyer, "POST", "/api/v1/escrows", `{"provider":"a2awire-punctual","capability":"ping","input":{},"amount":5,"deadline":"tomorrow"}`, 400)
	call(buyer, "POST", "/api/v1/escrows", `{"provider":"nobody-here","capability":"ping","input":{},"amount":5}`, 404)
	paid, disputed, broke := hire(10), hire(10), hire(1000)
	e := "/api/v1/escrows/"
	call(buyer, "POST", e+paid+"/fund", "", 200)
	call(buyer, "POST", e+broke+"/fund", "", 402)
	call(buyer, "POST", e+paid+"/verify", "", 200)
	call(buyer, "POST", e+broke+"/verify", "", 409)
	call(buyer, "POST", e+paid+"/release", "{}", 200)
	call(buyer, "POST", e+paid+"/refund", "", 409)
	call(buyer, "POST", e+broke+"/refund", "", 200)
	call(buyer, "POST", e+disputed+"/fund", "", 200)
	call(buyer, "POST", e+disputed+"/dispute", "", 409)
	call(buyer, "POST", e+disputed+"/verify", "", 200)
	call(buyer, "POST", e+disputed+"/dispute", "", 200)
	call(buyer, "POST", e+disputed+"/release", "", 409)
	call(operator, "POST", e+disputed+"/refund", "", 200)
	call(buyer, "GET", e+paid, "", 200)
	call(buyer, "GET", e+"NOPE", "", 404)
	call(buyer, "GET", "/api/v1/escrows?role=buyer&state=released&limit=10", "", 200)
	call(buyer, "GET", "/api/v1/escrows?role=judge", "", 400)

	xs := rec.exchanges()
	seen := map[string]int{}
	answers := map[string]bool{} // route key and status
	var failures []string
	for _, x := range xs {
		req, _ := http.NewRequest(x.Method, x.URL, nil)
		route, _, ok := routes.Match(x.Method, req.URL.Path)
		if !ok {
			failures = append(failures, fmt.Sprintf("%s %s: no route", x.Method, x.URL))
			continue
		}
		seen[route.Key()]++
		answers[fmt.Sprintf("%s %d", route.Key(), x.Status)] = true
		if err := checker.Check(x); err != nil {
			failures = append(failures, fmt.Sprintf("%s %s → %d %s:\n\t%v", x.Method, req.URL.RequestURI(), x.Status, x.RespBody, err))
		}
	}
	for _, f := range failures {
		t.Error(f)
	}
	if missing := spec.Unexercised(routes.All(), seen); len(missing) > 0 {
		t.Errorf("%d route(s) of the table exercised by no call: add a call for each to TestEveryRouteMatchesTheDocument (local/harness/openapi_test.go):\n\t%s",
			len(missing), strings.Join(missing, "\n\t"))
	}
	t.Logf("libopenapi-validator: %d exchanges (%d distinct route and status pairs) over %d of %d routes checked against /openapi.json, %d failed",
		len(xs), len(answers), len(seen), len(routes.All()), len(failures))
}
