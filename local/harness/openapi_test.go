package harness_test

import (
	"bytes"
	"crypto/ed25519"
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
// and its answer as they crossed the wire, for validation afterwards.
type exchangeRecorder struct {
	next http.Handler
	mu   sync.Mutex
	log  []spec.Exchange
}

func (rec *exchangeRecorder) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	body, err := io.ReadAll(r.Body)
	if err != nil {
		http.Error(w, "recorder: read body", http.StatusBadRequest)
		return
	}
	r.Body = io.NopCloser(bytes.NewReader(body))
	x := spec.Exchange{Method: r.Method, URL: "http://" + r.Host + r.URL.RequestURI(), Header: r.Header.Clone(), Body: body}
	cw := httptest.NewRecorder()
	rec.next.ServeHTTP(cw, r)
	for k, v := range cw.Header() {
		w.Header()[k] = v
	}
	w.WriteHeader(cw.Code)
	_, _ = w.Write(cw.Body.Bytes())
	x.Status, x.RespHeader, x.RespBody = cw.Code, cw.Header().Clone(), cw.Body.Bytes()
	rec.mu.Lock()
	rec.log = append(rec.log, x)
	rec.mu.Unlock()
}

func (rec *exchangeRecorder) exchanges() []spec.Exchange {
	rec.mu.Lock()
	defer rec.mu.Unlock()
	return slices.Clone(rec.log)
}

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
