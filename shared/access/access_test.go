package access_test

import (
	"bytes"
	"context"
	"crypto/ed25519"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/a2awire/a2awire/local/cloud"
	"github.com/a2awire/a2awire/shared/access"
	"github.com/a2awire/a2awire/shared/apierror"
	"github.com/a2awire/a2awire/shared/auth"
	"github.com/a2awire/a2awire/shared/httperr"
	"github.com/a2awire/a2awire/shared/lambdahttp"
	"github.com/a2awire/a2awire/shared/routes"
	"github.com/a2awire/a2awire/shared/store"
	"github.com/a2awire/a2awire/shared/store/memory"
)

func key(seed byte) ed25519.PrivateKey {
	return ed25519.NewKeyFromSeed(bytes.Repeat([]byte{seed}, ed25519.SeedSize))
}

func pub(k ed25519.PrivateKey) ed25519.PublicKey { return k.Public().(ed25519.PublicKey) }

var (
	known   = key(1)
	unknown = key(2)
)

// testTable is a private table with one route of each kind the tests
// exercise outside the real table.
var testTable = []routes.Route{
	{Method: "POST", Path: "/t/items", Function: "t", Auth: routes.Signed},
	{Method: "GET", Path: "/t/items", Function: "t", Auth: routes.Public},
	{Method: "GET", Path: "/t/items/{name}", Function: "t", Auth: routes.Public},
	{Method: "PUT", Path: "/t/items/{name}/owned", Function: "t", Auth: routes.Owner},
	{Method: "GET", Path: "/t/keys/{keyid}", Function: "t", Auth: routes.Public},
}

// staticKeys knows exactly the given keys.
func staticKeys(keys ...ed25519.PublicKey) auth.KeyLookup {
	return func(_ context.Context, id string) (ed25519.PublicKey, error) {
		for _, k := range keys {
			if auth.KeyID(k) == id {
				return k, nil
			}
		}
		return nil, auth.ErrUnknownKey
	}
}

func verifier(t *testing.T, now func() time.Time) *auth.Verifier {
	t.Helper()
	st := memory.New()
	t.Cleanup(func() { _ = st.Close() })
	return auth.NewVerifier(auth.NewNonces(st), now)
}

// members says yes to the known key.
type members struct{}

func (members) IsMember(_ context.Context, params map[string]string, id access.Identity) (bool, error) {
	return id.KeyID == auth.KeyID(pub(known)) && params["world"] != "", nil
}

// probe is a route handler that reports what it saw.
func probe(name string) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		id, _ := access.IdentityFrom(r.Context())
		again, _ := io.ReadAll(r.Body)
		w.Header().Set("Content-Type", "application/json")
		_ = json.NewEncoder(w).Encode(map[string]any{
			"route": name, "keyid": id.KeyID, "awn_id": id.AWNID, "params": access.Params(r),
			"body": string(access.Body(r)), "body_again": string(again), "matched": access.RouteOf(r).Key(),
		})
	})
}

// config serves table (nil: fn's routes of the real table) with a probe per
// route, owner routes owned by the known key.
func config(t *testing.T, fn string, table []routes.Route, now func() time.Time) access.Config {
	t.Helper()
	served := table
	if served == nil {
		served = routes.ForFunction(fn)
	}
	rs := map[string]access.Route{}
	for _, r := range served {
		rs[r.Key()] = access.Route{Handler: probe(r.Key()), Owns: func(_ context.Context, _ map[string]string, id access.Identity) (bool, error) {
			return id.KeyID == auth.KeyID(pub(known)), nil
		}}
	}
	cfg := access.Config{Function: fn, Routes: rs, Verifier: verifier(t, now), Keys: staticKeys(pub(known)), Members: members{}}
	if table != nil {
		cfg.Table = table
	}
	return cfg
}

// concrete fills a route's path parameters.
func concrete(r routes.Route) (method, path string) {
	path = strings.NewReplacer("{", "p-", "}", "", "+", "").Replace(r.Path)
	method = r.Method
	if method == "ANY" {
		method = http.MethodPost
	}
	return method, path
}

func request(t *testing.T, signer *auth.Signer, method, path, body string) *http.Request {
	t.Helper()
	r := httptest.NewRequest(method, "http://api.test"+path, strings.NewReader(body))
	if signer != nil {
		out, _ := http.NewRequest(method, "http://api.test"+path, strings.NewReader(body))
		if err := signer.Sign(out); err != nil {
			t.Fatal(err)
		}
		for k, v := range out.Header {
			r.Header[k] = v
		}
	}
	return r
}

func signer(t *testing.T, k ed25519.PrivateKey, opts ...auth.SignerOption) *auth.Signer {
	t.Helper()
	s, err := auth.NewSigner(k, opts...)
	if err != nil {
		t.Fatal(err)
	}
	return s
}

type errorBody struct {
	Error   string `json:"error"`
	Message string `json:"message"`
}

func decodeError(t *testing.T, w *httptest.ResponseRecorder) errorBody {
	t.Helper()
	var e errorBody
	if err := json.Unmarshal(w.Body.Bytes(), &e); err != nil {
		t.Fatalf("error body %q: %v", w.Body, err)
	}
	return e
}

// TestEveryRouteWrappedByItsKind walks the real route table: for every
// function and route, an unsigned request passes exactly the public routes
// and gets 401 on the others, and a request signed by the known key passes
// every route, reaching the route's own handler with its identity.
func TestEveryRouteWrappedByItsKind(t *testing.T) {
	served := 0
	for _, fn := range routes.Functions() {
		if len(routes.ForFunction(fn)) == 0 {
			continue
		}
		d, err := access.New(config(t, fn, nil, time.Now))
		if err != nil {
			t.Fatalf("%s: %v", fn, err)
		}
		s := signer(t, known)
		for _, rt := range routes.ForFunction(fn) {
			served++
			method, path := concrete(rt)
			w := httptest.NewRecorder()
			d.ServeHTTP(w, request(t, nil, method, path, ""))
			if rt.Auth == routes.Public {
				if w.Code != http.StatusOK || !strings.Contains(w.Body.String(), `"route":"`+rt.Key()+`"`) {
					t.Errorf("%s (public) unsigned: %d %s", rt.Key(), w.Code, w.Body)
				}
			} else if e := decodeError(t, w); w.Code != http.StatusUnauthorized || e.Error != "unauthorized" || e.Message != "missing Signature-Input header" {
				t.Errorf("%s (%s) unsigned: %d %+v, want 401 unauthorized naming the missing header", rt.Key(), rt.Auth, w.Code, e)
			}

			w = httptest.NewRecorder()
			d.ServeHTTP(w, request(t, s, method, path, `{"a":1}`))
			var got map[string]any
			_ = json.Unmarshal(w.Body.Bytes(), &got)
			if w.Code != http.StatusOK || got["route"] != rt.Key() || got["matched"] != rt.Key() {
				t.Errorf("%s (%s) signed: %d %s", rt.Key(), rt.Auth, w.Code, w.Body)
				continue
			}
			wantID := ""
			if rt.Auth != routes.Public {
				wantID = auth.KeyID(pub(known))
			}
			if got["keyid"] != wantID || got["body"] != `{"a":1}` || got["body_again"] != `{"a":1}` {
				t.Errorf("%s (%s): handler saw keyid %v body %v/%v, want %q and the body twice", rt.Key(), rt.Auth, got["keyid"], got["body"], got["body_again"], wantID)
			}
		}
	}
	if served == 0 {
		t.Fatal("the route table has no routes")
	}
}

// TestMemberAndOwnerKinds uses a private table, since no world route exists
// yet: member passes a member and gives 401 not_joined (the worlds' shape)
// to a signed non-member; owner gives 403 to a signed non-owner.
func TestMemberAndOwnerKinds(t *testing.T) {
	table := []routes.Route{
		{Method: "POST", Path: "/v0/worlds/{world}/leave", Function: "t", Auth: routes.Member},
		{Method: "PUT", Path: "/t/{name}", Function: "t", Auth: routes.Owner},
	}
	cfg := config(t, "t", table, time.Now)
	cfg.Keys = staticKeys(pub(known), pub(unknown))
	cfg.Render = httperr.WriteWorld
	d, err := access.New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	cases := []struct {
		k            ed25519.PrivateKey
		method, path string
		status       int
		code         string
	}{
		{known, "POST", "/v0/worlds/lobby/leave", 200, ""},
		{unknown, "POST", "/v0/worlds/lobby/leave", 401, "NOT_JOINED"},
		{known, "PUT", "/t/x", 200, ""},
		{unknown, "PUT", "/t/x", 403, "FORBIDDEN"},
	}
	for _, c := range cases {
		w := httptest.NewRecorder()
		d.ServeHTTP(w, request(t, signer(t, c.k), c.method, c.path, ""))
		if w.Code != c.status || c.code != "" && !strings.Contains(w.Body.String(), `"code":"`+c.code+`"`) {
			t.Errorf("%s %s by key %x: %d %s, want %d %s", c.method, c.path, c.k[:2], w.Code, w.Body, c.status, c.code)
		}
	}
}

// TestSignedFailuresName401Rules: each broken rule is a 401 unauthorized
// whose message names it, through the middleware.
func TestSignedFailuresName401Rules(t *testing.T) {
	now := time.Now()
	clock := func() time.Time { return now }
	cfg := config(t, "t", testTable, clock)
	d, err := access.New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	const path = "/t/items/x/owned"
	var n atomic.Int64
	fixed := func() (string, error) { return fmt.Sprintf("fixed-nonce-%08d", n.Load()), nil }
	cases := []struct {
		name string
		req  func() *http.Request
		msg  string
	}{
		{"missing signature", func() *http.Request {
			r := request(t, signer(t, known), "PUT", path, "{}")
			r.Header.Del("Signature")
			return r
		}, "missing Signature header"},
		{"digest", func() *http.Request {
			r := request(t, signer(t, known), "PUT", path, "{}")
			r.Body = io.NopCloser(strings.NewReader(`{"x":1}`))
			return r
		}, "content-digest does not match the body"},
		{"unknown key", func() *http.Request { return request(t, signer(t, unknown), "PUT", path, "") }, "unknown key"},
		{"expired", func() *http.Request {
			return request(t, signer(t, known, auth.WithClock(func() time.Time { return now.Add(-10 * time.Minute) })), "PUT", path, "")
		}, "signature expired"},
		{"future", func() *http.Request {
			return request(t, signer(t, known, auth.WithClock(func() time.Time { return now.Add(10 * time.Minute) })), "PUT", path, "")
		}, "signature created in the future"},
		{"authority", func() *http.Request {
			r := request(t, signer(t, known), "PUT", path, "")
			r.Host = "elsewhere.test"
			return r
		}, "signature does not verify"},
		{"replay", func() *http.Request {
			s := signer(t, known, auth.WithNonces(fixed))
			first := httptest.NewRecorder()
			d.ServeHTTP(first, request(t, s, "PUT", path, ""))
			if first.Code != http.StatusOK {
				t.Fatalf("first use of the nonce: %d %s", first.Code, first.Body)
			}
			return request(t, s, "PUT", path, "")
		}, "nonce already used"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			w := httptest.NewRecorder()
			d.ServeHTTP(w, c.req())
			e := decodeError(t, w)
			if w.Code != http.StatusUnauthorized || e.Error != "unauthorized" || e.Message != c.msg {
				t.Errorf("%d %+v, want 401 unauthorized %q", w.Code, e, c.msg)
			}
		})
	}
}

// TestRouteKeyDispatch: behind lambdahttp.Entry the event's routeKey picks
// the route and the event's pathParameters are the parameters — the path
// is not matched again (parameters the path would not give prove it) — and
// a routeKey of another function is 404.
func TestRouteKeyDispatch(t *testing.T) {
	d, err := access.New(config(t, "t", testTable, time.Now))
	if err != nil {
		t.Fatal(err)
	}
	entry := lambdahttp.Entry(d)
	invoke := func(routeKey, path string, params map[string]string) (int, map[string]any) {
		r := httptest.NewRequest("GET", "http://api.test"+path, nil)
		rt := routes.Route{Method: "GET", Path: strings.TrimPrefix(routeKey, "GET ")}
		ev := cloud.BuildEvent(r, rt, params, nil, time.Now())
		resp, err := entry(context.Background(), ev)
		if err != nil {
			t.Fatal(err)
		}
		var m map[string]any
		_ = json.Unmarshal([]byte(resp.Body), &m)
		return resp.StatusCode, m
	}
	status, m := invoke("GET /t/items/{name}", "/t/items/a%20b", map[string]string{"name": "a b"})
	if params, _ := m["params"].(map[string]any); status != 200 || m["matched"] != "GET /t/items/{name}" || params["name"] != "a b" {
		t.Errorf("routeKey dispatch: %d %v", status, m)
	}
	status, m = invoke("GET /t/items/{name}", "/t/items/a%20b", map[string]string{"name": "from-the-event"})
	if params, _ := m["params"].(map[string]any); status != 200 || params["name"] != "from-the-event" {
		t.Errorf("parameters are the event's, not the path's: %d %v", status, m)
	}
	if status, m := invoke("GET /agents/a2awire-clean/invoke", "/agents/a2awire-clean/invoke", nil); status != 404 || m["error"] != "not_found" {
		t.Errorf("another function's routeKey: %d %v, want 404", status, m)
	}
	// Without a routeKey (plain net/http) the table decides: the most
	// specific pattern, and nothing for another method.
	w := httptest.NewRecorder()
	d.ServeHTTP(w, request(t, nil, "GET", "/t/keys/abc", ""))
	if !strings.Contains(w.Body.String(), `"matched":"GET /t/keys/{keyid}"`) {
		t.Errorf("table match: %d %s", w.Code, w.Body)
	}
	w = httptest.NewRecorder()
	d.ServeHTTP(w, request(t, nil, "DELETE", "/t/items", ""))
	if w.Code != http.StatusNotFound {
		t.Errorf("unknown method: %d %s", w.Code, w.Body)
	}
	// The real table: a route of another function is not served here.
	clean, err := access.New(config(t, "fixture-clean", nil, time.Now))
	if err != nil {
		t.Fatal(err)
	}
	for path, want := range map[string]int{"/agents/a2awire-clean/invoke": 200, "/agents/a2awire-messy/invoke": 404} {
		w := httptest.NewRecorder()
		clean.ServeHTTP(w, request(t, nil, "POST", path, ""))
		if w.Code != want {
			t.Errorf("fixture-clean dispatcher on %s: %d, want %d", path, w.Code, want)
		}
	}
}

// TestBodyLimit: a body over the limit is 413 payload_too_large before any
// handler or signature check runs.
func TestBodyLimit(t *testing.T) {
	cfg := config(t, "t", testTable, time.Now)
	cfg.MaxBody = 10
	d, err := access.New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	w := httptest.NewRecorder()
	d.ServeHTTP(w, request(t, nil, "POST", "/t/items", strings.Repeat("x", 11)))
	if e := decodeError(t, w); w.Code != http.StatusRequestEntityTooLarge || e.Error != "payload_too_large" {
		t.Errorf("%d %+v, want 413 payload_too_large", w.Code, e)
	}
	w = httptest.NewRecorder()
	d.ServeHTTP(w, request(t, nil, "GET", "/t/items", strings.Repeat("x", 10)))
	if w.Code != http.StatusOK {
		t.Errorf("body at the limit: %d %s", w.Code, w.Body)
	}
}

// TestStartupErrors: a route of the table without a handler, a handler
// for no route, and a kind without its hook are refused at start.
func TestStartupErrors(t *testing.T) {
	base := func() access.Config { return config(t, "t", testTable, time.Now) }
	breakers := map[string]func(*access.Config){
		"route without handler": func(c *access.Config) { delete(c.Routes, "GET /t/items") },
		"handler without route": func(c *access.Config) { c.Routes["GET /nowhere"] = access.Route{Handler: probe("x")} },
		"owner without Owns": func(c *access.Config) {
			r := c.Routes["PUT /t/items/{name}/owned"]
			r.Owns = nil
			c.Routes["PUT /t/items/{name}/owned"] = r
		},
		"signed without verifier": func(c *access.Config) { c.Verifier = nil },
		"signed without keys":     func(c *access.Config) { c.Keys = nil },
		"no routes":               func(c *access.Config) { c.Function, c.Table = "nothing", nil },
		"member without lookup": func(c *access.Config) {
			c.Table = []routes.Route{{Method: "GET", Path: "/w/{world}", Function: "t", Auth: routes.Member}}
			c.Routes = map[string]access.Route{"GET /w/{world}": {Handler: probe("w")}}
			c.Members = nil
		},
	}
	if _, err := access.New(base()); err != nil {
		t.Fatalf("the unbroken config fails: %v", err)
	}
	for name, breakIt := range breakers {
		c := base()
		breakIt(&c)
		if _, err := access.New(c); err == nil {
			t.Errorf("%s: New succeeded", name)
		}
	}
}

// TestDecodeJSON: strict JSON in — duplicate keys, invalid UTF-8, keys
// differing in case and non-objects are refused or ignored as JSON in is
// strict, each as apierror Invalid.
func TestDecodeJSON(t *testing.T) {
	type body struct {
		Name string `json:"name"`
	}
	for _, bad := range []string{`{"name":"a","name":"b"}`, "{\"name\":\"\xff\"}", `[1]`, `{"name":1}`, `{"name":"a"} x`, ``} {
		var b body
		err := access.DecodeJSON([]byte(bad), &b)
		if apierror.KindOf(err) != apierror.Invalid {
			t.Errorf("%q: %v, want Invalid", bad, err)
		}
	}
	var b body
	if err := access.DecodeJSON([]byte(`{"NAME":"x","Name":"y","name":"z"}`), &b); err != nil || b.Name != "z" {
		t.Errorf("case-sensitive keys: %v %q, want z", err, b.Name)
	}
}

// TestDecodeJSONNamesTheField: a value of the wrong JSON kind is refused
// with the field's path and the kind wanted, worded without the invocation
// surface's "input." (the field comes from the strict reader's typed error,
// not from a message's text); a failure with no field says so in general
// terms.
func TestDecodeJSONNamesTheField(t *testing.T) {
	type body struct {
		Name  string `json:"name"`
		Inner struct {
			N int `json:"n"`
		} `json:"inner"`
		Tags []string `json:"tags"`
	}
	for in, want := range map[string]string{
		`{"name":1}`:          "name must be a JSON string",
		`{"inner":{"n":"x"}}`: "inner.n must be a JSON integer",
		`{"tags":"a"}`:        "tags must be a JSON array",
	} {
		var b body
		e := apierror.From(access.DecodeJSON([]byte(in), &b))
		if e.Kind != apierror.Invalid || e.Message != want {
			t.Errorf("%s: %v %q, want Invalid %q", in, e.Kind, e.Message, want)
		}
	}
}

// TestKeyLookupFailures: an overloaded store behind the key lookup is 503
// unavailable with Retry-After; any other failure is 500 with no internal
// text in the message.
func TestKeyLookupFailures(t *testing.T) {
	for _, c := range []struct {
		err    error
		status int
		code   string
	}{
		{fmt.Errorf("lookup: %w", store.ErrUnavailable), http.StatusServiceUnavailable, "unavailable"},
		{errors.New("secret internal detail"), http.StatusInternalServerError, "internal_error"},
	} {
		cfg := config(t, "t", testTable, time.Now)
		cfg.Keys = func(context.Context, string) (ed25519.PublicKey, error) { return nil, c.err }
		d, err := access.New(cfg)
		if err != nil {
			t.Fatal(err)
		}
		w := httptest.NewRecorder()
		d.ServeHTTP(w, request(t, signer(t, known), "PUT", "/t/items/x/owned", ""))
		e := decodeError(t, w)
		if w.Code != c.status || e.Error != c.code || strings.Contains(e.Message, "secret") {
			t.Errorf("%v: %d %+v, want %d %s", c.err, w.Code, e, c.status, c.code)
		}
		if c.status == http.StatusServiceUnavailable && w.Header().Get("Retry-After") == "" {
			t.Errorf("503 without Retry-After")
		}
	}
}

// TestMemoWithinOneRequest: what an owner route's key lookup remembers
// (access.Remember) its ownership check and handler recall, and a second
// request starts with nothing; outside a signed request nothing is kept.
func TestMemoWithinOneRequest(t *testing.T) {
	type seen struct{}
	table := []routes.Route{{Method: "PUT", Path: "/t/{name}", Function: "t", Auth: routes.Owner}}
	cfg := config(t, "t", table, time.Now)
	lookups, recalled := 0, 0
	cfg.Keys = nil
	cfg.ParamKeys = func(ctx context.Context, params map[string]string, keyID string) (ed25519.PublicKey, error) {
		if _, ok := access.Recall(ctx, seen{}); ok {
			t.Error("a new request recalls what an earlier one remembered")
		}
		lookups++
		access.Remember(ctx, seen{}, params["name"])
		return pub(known), nil
	}
	rt := cfg.Routes[table[0].Key()]
	rt.Owns = func(ctx context.Context, params map[string]string, _ access.Identity) (bool, error) {
		v, ok := access.Recall(ctx, seen{})
		if ok && v == params["name"] {
			recalled++
		}
		return true, nil
	}
	cfg.Routes[table[0].Key()] = rt
	d, err := access.New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	for range 2 {
		w := httptest.NewRecorder()
		d.ServeHTTP(w, request(t, signer(t, known), "PUT", "/t/x", ""))
		if w.Code != 200 {
			t.Fatalf("%d %s", w.Code, w.Body)
		}
	}
	if lookups != 2 || recalled != 2 {
		t.Errorf("%d lookups, %d recalled; want 2 and 2", lookups, recalled)
	}
	access.Remember(context.Background(), seen{}, 1)
	if _, ok := access.Recall(context.Background(), seen{}); ok {
		t.Error("a context outside a signed request kept a value")
	}
}
