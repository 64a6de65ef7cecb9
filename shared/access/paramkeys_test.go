package access_test

import (
	"context"
	"crypto/ed25519"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/a2awire/a2awire/shared/access"
	"github.com/a2awire/a2awire/shared/apierror"
	"github.com/a2awire/a2awire/shared/auth"
	"github.com/a2awire/a2awire/shared/httperr"
	"github.com/a2awire/a2awire/shared/routes"
	"github.com/a2awire/a2awire/shared/store"
)

// worldTable is a private table shaped like the worlds': a member route
// and the signed PUT whose body may carry the key.
var worldTable = []routes.Route{
	{Method: "GET", Path: "/w/{world}/agents", Function: "w", Auth: routes.Member},
	{Method: "PUT", Path: "/w/{world}", Function: "w", Auth: routes.Signed},
}

// worldKeys is a path-aware lookup: known is a member of lobby only,
// unknown of nothing; lobby's owner key is known too (for the PUT
// fallback). It records the parameters it was asked with.
type worldKeys struct{ seen []map[string]string }

func (k *worldKeys) lookup(_ context.Context, params map[string]string, keyID string) (ed25519.PublicKey, error) {
	k.seen = append(k.seen, params)
	if params["world"] == "down" {
		return nil, apierror.FromStore("member key", store.ErrUnavailable)
	}
	if params["world"] == "lobby" && keyID == auth.KeyID(pub(known)) {
		return pub(known), nil
	}
	return nil, apierror.New(apierror.NotJoined, "the signing key is not a member of this world")
}

// bodyKey reads {"publicKey"} (std base64); absent is ErrNoBodyKey.
func bodyKey(r *http.Request) (ed25519.PublicKey, error) {
	var in struct {
		PublicKey *string `json:"publicKey"`
	}
	if err := access.DecodeKey(r, &in, "publicKey"); err != nil {
		return nil, err
	}
	if in.PublicKey == nil {
		return nil, access.ErrNoBodyKey
	}
	return auth.DecodePublicKey(*in.PublicKey)
}

func worldDispatcher(t *testing.T, keys *worldKeys, members access.MemberLookup) *access.Dispatcher {
	t.Helper()
	d, err := access.New(access.Config{
		Function: "w",
		Table:    worldTable,
		Routes: map[string]access.Route{
			"GET /w/{world}/agents": {Handler: probe("agents")},
			"PUT /w/{world}":        {Handler: probe("put"), BodyKey: bodyKey},
		},
		Verifier:  verifier(t, time.Now),
		ParamKeys: keys.lookup,
		Members:   members,
		Render:    httperr.WriteWorld,
	})
	if err != nil {
		t.Fatal(err)
	}
	return d
}

type worldError struct {
	OK    bool `json:"ok"`
	Error struct {
		Code    string `json:"code"`
		Message string `json:"message"`
	} `json:"error"`
}

func decodeWorldError(t *testing.T, w *httptest.ResponseRecorder) worldError {
	t.Helper()
	var e worldError
	if err := json.Unmarshal(w.Body.Bytes(), &e); err != nil {
		t.Fatalf("error body %q: %v", w.Body, err)
	}
	return e
}

// TestParamKeysMembership: on a member route the path-aware lookup decides
// membership of the world in the path — a member passes with its identity,
// a key that is no member of that world (known elsewhere or not at all)
// gets 401 NOT_JOINED, a member whose signature does not verify 401
// UNAUTHORIZED, and a busy store behind the lookup 503 with Retry-After.
func TestParamKeysMembership(t *testing.T) {
	keys := &worldKeys{}
	d := worldDispatcher(t, keys, nil)
	tampered := func() *http.Request {
		// Signed for /w/lobby/agents, sent with a query: the member's key
		// is found, the signature over another @query does not verify.
		r := request(t, signer(t, known), "GET", "/w/lobby/agents", "")
		r.URL.RawQuery = "limit=5"
		return r
	}
	cases := []struct {
		name   string
		req    func() *http.Request
		status int
		code   string
		msg    string
	}{
		{"member", func() *http.Request { return request(t, signer(t, known), "GET", "/w/lobby/agents", "") }, 200, "", ""},
		{"member of another world", func() *http.Request { return request(t, signer(t, known), "GET", "/w/arena/agents", "") }, 401, "NOT_JOINED", "the signing key is not a member of this world"},
		{"no member anywhere", func() *http.Request { return request(t, signer(t, unknown), "GET", "/w/lobby/agents", "") }, 401, "NOT_JOINED", "the signing key is not a member of this world"},
		{"bad signature by a member", tampered, 401, "UNAUTHORIZED", "signature does not verify"},
		{"unsigned", func() *http.Request { return request(t, nil, "GET", "/w/lobby/agents", "") }, 401, "UNAUTHORIZED", "missing Signature-Input header"},
		{"store busy", func() *http.Request { return request(t, signer(t, known), "GET", "/w/down/agents", "") }, 503, "UNAVAILABLE", ""},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			w := httptest.NewRecorder()
			d.ServeHTTP(w, c.req())
			if c.status == 200 {
				var got map[string]any
				_ = json.Unmarshal(w.Body.Bytes(), &got)
				if w.Code != 200 || got["keyid"] != auth.KeyID(pub(known)) || got["route"] != "agents" {
					t.Fatalf("member: %d %s", w.Code, w.Body)
				}
				return
			}
			e := decodeWorldError(t, w)
			if w.Code != c.status || e.OK || e.Error.Code != c.code || c.msg != "" && e.Error.Message != c.msg {
				t.Errorf("%d %+v, want %d %s %q", w.Code, e, c.status, c.code, c.msg)
			}
			if c.status == 503 && w.Header().Get("Retry-After") == "" {
				t.Error("503 without Retry-After")
			}
		})
	}
	// The lookup saw the world of each path, unescaped.
	for _, p := range keys.seen {
		if p["world"] == "" {
			t.Errorf("lookup called without the world parameter: %v", keys.seen)
		}
	}
}

// TestParamKeysWithMembers: when Members is configured as well, both
// decide — a key the lookup finds but Members refuses is NOT_JOINED.
func TestParamKeysWithMembers(t *testing.T) {
	d := worldDispatcher(t, &worldKeys{}, refuseAll{})
	w := httptest.NewRecorder()
	d.ServeHTTP(w, request(t, signer(t, known), "GET", "/w/lobby/agents", ""))
	if e := decodeWorldError(t, w); w.Code != 401 || e.Error.Code != "NOT_JOINED" {
		t.Errorf("%d %+v, want 401 NOT_JOINED from Members", w.Code, e)
	}
}

type refuseAll struct{}

func (refuseAll) IsMember(context.Context, map[string]string, access.Identity) (bool, error) {
	return false, nil
}

// TestBodyKeyFallback: a signed route whose body carries publicKey
// verifies against it (whoever that is); a body without one falls back to
// the path-aware lookup (the world's owner updating it), where another key
// is refused as the lookup says; a malformed body is 400 as BodyKey says.
func TestBodyKeyFallback(t *testing.T) {
	d := worldDispatcher(t, &worldKeys{}, nil)
	withKey := func(k ed25519.PrivateKey) string {
		return fmt.Sprintf(`{"publicKey":%q}`, encodeKey(pub(k)))
	}
	cases := []struct {
		name, path, body string
		k                ed25519.PrivateKey
		status           int
		code             string
	}{
		{"body key of a stranger", "/w/new", withKey(unknown), unknown, 200, ""},
		{"body key not the signer's", "/w/new", withKey(known), unknown, 401, "UNAUTHORIZED"},
		{"owner without body key", "/w/lobby", `{"name":"x"}`, known, 200, ""},
		{"other key without body key", "/w/lobby", `{"name":"x"}`, unknown, 401, "NOT_JOINED"},
		{"malformed body", "/w/lobby", `{"publicKey":`, known, 400, "INVALID_REQUEST"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			w := httptest.NewRecorder()
			d.ServeHTTP(w, request(t, signer(t, c.k), "PUT", c.path, c.body))
			if c.status == 200 {
				var got map[string]any
				_ = json.Unmarshal(w.Body.Bytes(), &got)
				if w.Code != 200 || got["keyid"] != auth.KeyID(pub(c.k)) {
					t.Fatalf("%d %s", w.Code, w.Body)
				}
				return
			}
			if e := decodeWorldError(t, w); w.Code != c.status || e.Error.Code != c.code {
				t.Errorf("%d %+v, want %d %s", w.Code, e, c.status, c.code)
			}
		})
	}
}

// TestBodyKeyFallbackWithoutLookup: with neither ParamKeys nor Keys a body
// without a key is 401 naming the missing publicKey, not a 500.
func TestBodyKeyFallbackWithoutLookup(t *testing.T) {
	d, err := access.New(access.Config{
		Function: "w",
		Table:    worldTable[1:],
		Routes:   map[string]access.Route{"PUT /w/{world}": {Handler: probe("put"), BodyKey: bodyKey}},
		Verifier: verifier(t, time.Now),
		Render:   httperr.WriteWorld,
	})
	if err != nil {
		t.Fatal(err)
	}
	w := httptest.NewRecorder()
	d.ServeHTTP(w, request(t, signer(t, known), "PUT", "/w/lobby", `{}`))
	if e := decodeWorldError(t, w); w.Code != 401 || e.Error.Code != "UNAUTHORIZED" || !strings.Contains(e.Error.Message, "publicKey") {
		t.Errorf("%d %+v, want 401 naming publicKey", w.Code, e)
	}
}

// TestMemberRouteNeedsALookup: a member route with ParamKeys alone starts;
// with neither ParamKeys nor Keys+Members it is refused at start.
func TestMemberRouteNeedsALookup(t *testing.T) {
	cfg := access.Config{
		Function: "w",
		Table:    worldTable[:1],
		Routes:   map[string]access.Route{"GET /w/{world}/agents": {Handler: probe("agents")}},
		Verifier: verifier(t, time.Now),
	}
	if _, err := access.New(cfg); err == nil {
		t.Error("member route without any lookup started")
	}
	cfg.Keys = staticKeys(pub(known))
	if _, err := access.New(cfg); err == nil {
		t.Error("member route with Keys but no Members started")
	}
	cfg.Keys = nil
	cfg.ParamKeys = (&worldKeys{}).lookup
	if _, err := access.New(cfg); err != nil {
		t.Errorf("member route with ParamKeys: %v", err)
	}
}

func encodeKey(k ed25519.PublicKey) string { return base64.StdEncoding.EncodeToString(k) }
