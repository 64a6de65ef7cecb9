package webhookhttp_test

import (
	"context"
	"crypto/ed25519"
	"encoding/json"
	"github.com/a2awire/a2awire/shared/webhook"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/a2awire/a2awire/shared/access"
	"github.com/a2awire/a2awire/shared/apierror"
	"github.com/a2awire/a2awire/shared/auth"
	"github.com/a2awire/a2awire/shared/egress"
	"github.com/a2awire/a2awire/shared/routes"
	"github.com/a2awire/a2awire/shared/store/memory"
	"github.com/a2awire/a2awire/shared/webhook/signature"
	"github.com/a2awire/a2awire/shared/webhookhttp"
)

func key(seed byte) ed25519.PrivateKey {
	return ed25519.NewKeyFromSeed([]byte(strings.Repeat(string(rune('a'+seed)), ed25519.SeedSize)))
}

func pub(k ed25519.PrivateKey) ed25519.PublicKey { return k.Public().(ed25519.PublicKey) }

var (
	member   = key(1) // a member of "lobby"
	outsider = key(2) // known to the network, member of nothing
)

// table holds the four routes until the real table carries them.
var table = []routes.Route{
	{Method: "PUT", Path: "/v0/worlds/{world}/webhook", Function: "world-webhook-set", Auth: routes.Member},
	{Method: "GET", Path: "/v0/worlds/{world}/webhook", Function: "world-webhook-show", Auth: routes.Member},
	{Method: "DELETE", Path: "/v0/worlds/{world}/webhook", Function: "world-webhook-remove", Auth: routes.Member},
	{Method: "POST", Path: "/v0/worlds/{world}/webhook/replay", Function: "world-webhook-replay", Auth: routes.Member},
}

type members struct{}

func (members) IsMember(_ context.Context, p map[string]string, id access.Identity) (bool, error) {
	return p["world"] == "lobby" && id.KeyID == auth.KeyID(pub(member)), nil
}

// fakeStore keeps one webhook per (world, awnId) in a map.
type fakeStore struct {
	mu     sync.Mutex
	hooks  map[string]webhook.View
	since  time.Time
	secret string
}

func (f *fakeStore) Set(_ context.Context, w, a, url string) (string, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	s, err := signature.NewSecret()
	if err != nil {
		return "", err
	}
	f.secret = s
	f.hooks[w+"|"+a] = webhook.View{URL: url, Enabled: true, CreatedAt: time.Unix(1767225600, 0).UTC()}
	return s, nil
}

func (f *fakeStore) Show(_ context.Context, w, a string) (webhook.View, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	v, ok := f.hooks[w+"|"+a]
	if !ok {
		return v, apierror.New(apierror.NotFound, "no webhook")
	}
	return v, nil
}

func (f *fakeStore) Remove(_ context.Context, w, a string) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	if _, ok := f.hooks[w+"|"+a]; !ok {
		return apierror.New(apierror.NotFound, "no webhook")
	}
	delete(f.hooks, w+"|"+a)
	return nil
}

func (f *fakeStore) Replay(_ context.Context, w, a string, since time.Time) (int, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.since = since
	return 3, nil
}

type api struct {
	t       *testing.T
	store   *fakeStore
	servers map[string]http.Handler
}

func newAPI(t *testing.T, urls egress.Options) *api {
	t.Helper()
	st := memory.New()
	t.Cleanup(func() { _ = st.Close() })
	keys := func(_ context.Context, id string) (ed25519.PublicKey, error) {
		for _, k := range []ed25519.PrivateKey{member, outsider} {
			if auth.KeyID(pub(k)) == id {
				return pub(k), nil
			}
		}
		return nil, auth.ErrUnknownKey
	}
	o := webhookhttp.Options{URLs: urls, Auth: webhookhttp.Auth{
		Verifier: auth.NewVerifier(auth.NewNonces(st), nil), Keys: keys, Members: members{}, Table: table,
	}}
	fs := &fakeStore{hooks: map[string]webhook.View{}}
	a := &api{t: t, store: fs, servers: map[string]http.Handler{}}
	must := func(h http.Handler, err error) http.Handler {
		if err != nil {
			t.Fatal(err)
		}
		return h
	}
	a.servers["PUT"] = must(webhookhttp.NewSet(fn(o, "world-webhook-set"), fs))
	a.servers["GET"] = must(webhookhttp.NewShow(fn(o, "world-webhook-show"), fs))
	a.servers["DELETE"] = must(webhookhttp.NewRemove(fn(o, "world-webhook-remove"), fs))
	a.servers["POST"] = must(webhookhttp.NewReplay(fn(o, "world-webhook-replay"), fs))
	return a
}

// do sends a request signed by k (nil: unsigned) to the function serving
// method.
func (a *api) do(k ed25519.PrivateKey, method, path, body string) (int, map[string]any) {
	a.t.Helper()
	url := "http://api.test" + path
	r := httptest.NewRequest(method, url, strings.NewReader(body))
	if k != nil {
		s, err := auth.NewSigner(k)
		if err != nil {
			a.t.Fatal(err)
		}
		out, _ := http.NewRequest(method, url, strings.NewReader(body))
		if err := s.Sign(out); err != nil {
			a.t.Fatal(err)
		}
		for name, v := range out.Header {
			r.Header[name] = v
		}
	}
	w := httptest.NewRecorder()
	a.servers[method].ServeHTTP(w, r)
	var m map[string]any
	if err := json.Unmarshal(w.Body.Bytes(), &m); err != nil {
		a.t.Fatalf("%s %s: %d %q", method, path, w.Code, w.Body)
	}
	return w.Code, m
}

func code(m map[string]any) string {
	e, _ := m["error"].(map[string]any)
	c, _ := e["code"].(string)
	return c
}

func TestWebhookLifecycle(t *testing.T) {
	a := newAPI(t, egress.Options{})
	st, m := a.do(member, "PUT", "/v0/worlds/lobby/webhook", `{"url":"https://agent.example.com/hook"}`)
	data, _ := m["data"].(map[string]any)
	if st != 200 || m["ok"] != true || data["url"] != "https://agent.example.com/hook" || data["secret"] != a.store.secret {
		t.Fatalf("PUT: %d %v", st, m)
	}
	if _, err := signature.ParseSecret(data["secret"].(string)); err != nil {
		t.Errorf("secret: %v", err)
	}
	st, m = a.do(member, "GET", "/v0/worlds/lobby/webhook", "")
	data, _ = m["data"].(map[string]any)
	if st != 200 || data["url"] != "https://agent.example.com/hook" || data["secret"] != nil || data["stats"] == nil {
		t.Fatalf("GET: %d %v", st, m)
	}
	st, m = a.do(member, "POST", "/v0/worlds/lobby/webhook/replay", `{"since":"2026-12-01T00:00:00Z"}`)
	data, _ = m["data"].(map[string]any)
	if st != 200 || data["replayed"] != float64(3) || !a.store.since.Equal(time.Date(2026, 12, 1, 0, 0, 0, 0, time.UTC)) {
		t.Fatalf("replay: %d %v since %v", st, m, a.store.since)
	}
	st, m = a.do(member, "DELETE", "/v0/worlds/lobby/webhook", "")
	if st != 200 || m["ok"] != true {
		t.Fatalf("DELETE: %d %v", st, m)
	}
	st, m = a.do(member, "GET", "/v0/worlds/lobby/webhook", "")
	if st != 404 || code(m) != "NOT_FOUND" {
		t.Fatalf("GET after DELETE: %d %v", st, m)
	}
	st, m = a.do(member, "DELETE", "/v0/worlds/lobby/webhook", "")
	if st != 404 || code(m) != "NOT_FOUND" {
		t.Fatalf("DELETE again: %d %v", st, m)
	}
}

func TestWebhookAuth(t *testing.T) {
	a := newAPI(t, egress.Options{})
	for _, c := range []struct {
		method, body string
	}{{"PUT", `{"url":"https://agent.example.com/hook"}`}, {"GET", ""}, {"DELETE", ""}, {"POST", `{"since":"2026-12-01T00:00:00Z"}`}} {
		path := "/v0/worlds/lobby/webhook"
		if c.method == "POST" {
			path += "/replay"
		}
		if st, m := a.do(nil, c.method, path, c.body); st != 401 || code(m) != "UNAUTHORIZED" {
			t.Errorf("%s unsigned: %d %v", c.method, st, m)
		}
		if st, m := a.do(outsider, c.method, path, c.body); st != 401 || code(m) != "NOT_JOINED" {
			t.Errorf("%s by a non-member: %d %v", c.method, st, m)
		}
	}
	if len(a.store.hooks) != 0 {
		t.Fatal("a refused request stored a webhook")
	}
}

func TestSetValidatesURL(t *testing.T) {
	a := newAPI(t, egress.Options{})
	for _, body := range []string{
		`{"url":"http://agent.example.com/hook"}`,
		`{"url":"https://127.0.0.1:9000/hook"}`,
		`{"url":"https://169.254.169.254/latest"}`,
		`{"url":"https://[::ffff:10.0.0.1]/"}`,
		`{"url":"https://localhost/"}`,
		`{"url":"https://u:p@agent.example.com/"}`,
		`{"url":""}`,
		`{}`,
		`{"url":1}`,
		`{"url":"https://a.example.com/","url":"https://b.example.com/"}`,
		`not json`,
	} {
		if st, m := a.do(member, "PUT", "/v0/worlds/lobby/webhook", body); st != 400 || code(m) != "INVALID_REQUEST" {
			t.Errorf("%s: %d %v", body, st, m)
		}
	}
	if len(a.store.hooks) != 0 {
		t.Fatal("an invalid URL was stored")
	}
	// The harness policy takes http and loopback.
	h := newAPI(t, egress.Options{AllowHTTP: true, AllowLoopback: true})
	if st, m := h.do(member, "PUT", "/v0/worlds/lobby/webhook", `{"url":"http://127.0.0.1:9000/hook"}`); st != 200 {
		t.Errorf("harness policy: %d %v", st, m)
	}
	if st, m := h.do(member, "PUT", "/v0/worlds/lobby/webhook", `{"url":"http://10.0.0.1/hook"}`); st != 400 {
		t.Errorf("harness policy, private address: %d %v", st, m)
	}
}

func TestReplayValidatesSince(t *testing.T) {
	a := newAPI(t, egress.Options{})
	for _, body := range []string{`{}`, `{"since":"yesterday"}`, `{"since":1}`, `{"since":"2026-12-01"}`} {
		if st, m := a.do(member, "POST", "/v0/worlds/lobby/webhook/replay", body); st != 400 || code(m) != "INVALID_REQUEST" {
			t.Errorf("%s: %d %v", body, st, m)
		}
	}
}

// fn is o for the handler of function name.
func fn(o webhookhttp.Options, name string) webhookhttp.Options {
	o.Function = name
	return o
}
