package worldhttp_test

import (
	"bytes"
	"context"
	"crypto/ed25519"
	"encoding/base64"
	"encoding/json"
	"errors"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/a2awire/a2awire/shared/apierror"
	"github.com/a2awire/a2awire/shared/auth"
	"github.com/a2awire/a2awire/shared/lambdahttp"
	"github.com/a2awire/a2awire/shared/routes"
	"github.com/a2awire/a2awire/shared/store/memory"
	"github.com/a2awire/a2awire/shared/world"
	"github.com/a2awire/a2awire/shared/worldhttp"
)

func key(seed byte) ed25519.PrivateKey {
	return ed25519.NewKeyFromSeed(bytes.Repeat([]byte{seed}, ed25519.SeedSize))
}

func pub(k ed25519.PrivateKey) ed25519.PublicKey { return k.Public().(ed25519.PublicKey) }

func b64(k ed25519.PrivateKey) string { return base64.StdEncoding.EncodeToString(pub(k)) }

var (
	alice    = key(1) // a member of lobby, and its owner
	bob      = key(2) // a member of lobby
	outsider = key(3) // a member of nothing
)

// testTable is the world routes as the route table lists them.
var testTable = []routes.Route{
	{Method: "PUT", Path: "/v0/worlds/{world}", Function: "world-put", Auth: routes.Signed},
	{Method: "GET", Path: "/v0/worlds/{world}", Function: "world-get", Auth: routes.Public},
	{Method: "POST", Path: "/v0/worlds/{world}/join", Function: "world-join", Auth: routes.Signed},
	{Method: "POST", Path: "/v0/worlds/{world}/leave", Function: "world-leave", Auth: routes.Member},
	{Method: "GET", Path: "/v0/worlds/{world}/agents", Function: "world-agents", Auth: routes.Member},
	{Method: "POST", Path: "/v0/worlds/{world}/messages", Function: "world-send", Auth: routes.Member},
	{Method: "GET", Path: "/v0/worlds/{world}/messages", Function: "world-messages", Auth: routes.Member},
	{Method: "POST", Path: "/v0/worlds/{world}/ping", Function: "world-ping", Auth: routes.Member},
	{Method: "POST", Path: "/v0/worlds/{world}/actions", Function: "world-act", Auth: routes.Member},
	{Method: "GET", Path: "/v0/worlds/{world}/events", Function: "world-events", Auth: routes.Member},
	{Method: "GET", Path: "/v0/worlds/{world}/.well-known/agent-card.json", Function: "world-card", Auth: routes.Public},
	{Method: "GET", Path: "/v0/worlds/{world}/.well-known/agent.json", Function: "world-card", Auth: routes.Public},
}

var created = time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)

// lobby is the manifest the fake world service holds.
func lobby() world.Manifest {
	return world.Manifest{
		ID: "lobby", Name: "Lobby", Description: "Where agents meet.", Category: "social",
		Actions:  []world.ActionSpec{{Name: "wave", Description: "Wave at everyone."}},
		OwnerKey: pub(alice), OwnerKeyID: auth.KeyID(pub(alice)), Members: 2, CreatedAt: created, UpdatedAt: created,
	}
}

// newFake is a world where alice and bob are members of lobby.
func newFake() *fake {
	return &fake{
		GetWorldFn: func(_ context.Context, w string) (world.Manifest, error) {
			if w != "lobby" {
				return world.Manifest{}, apierror.New(apierror.NotFound, "no world %s", w)
			}
			return lobby(), nil
		},
		MemberKeyFn: func(_ context.Context, w, keyID string) (ed25519.PublicKey, string, error) {
			for _, k := range []ed25519.PrivateKey{alice, bob} {
				if w == "lobby" && keyID == auth.KeyID(pub(k)) {
					return pub(k), auth.AWNID(pub(k)), nil
				}
			}
			return nil, "", apierror.New(apierror.NotJoined, "not a member of this world")
		},
	}
}

type api struct {
	t        *testing.T
	f        *fake
	o        worldhttp.Options
	handlers map[string]http.Handler
}

// options are the options the handlers were built with.
func (a *api) options() worldhttp.Options { return a.o }

// newAPI builds every world function's handler over f; tune adjusts the
// shared options.
func newAPI(t *testing.T, f *fake, tune func(*worldhttp.Options)) *api {
	t.Helper()
	st := memory.New()
	t.Cleanup(func() { _ = st.Close() })
	o := worldhttp.Options{
		Verifier: auth.NewVerifier(auth.NewNonces(st), nil),
		Members:  f,
		Limiter:  f,
		Now:      func() time.Time { return created.Add(time.Hour) },
		Table:    testTable,
		BaseURL:  "https://net.example",
	}
	if tune != nil {
		tune(&o)
	}
	f.Now = o.Now
	a := &api{t: t, f: f, o: o, handlers: map[string]http.Handler{}}
	add := func(fn string, h http.Handler, err error) {
		if err != nil {
			t.Fatalf("%s: %v", fn, err)
		}
		a.handlers[fn] = h
	}
	h, err := worldhttp.NewPut(fn(o, "world-put"), f)
	add("world-put", h, err)
	h, err = worldhttp.NewGet(fn(o, "world-get"), f)
	add("world-get", h, err)
	h, err = worldhttp.NewJoin(fn(o, "world-join"), f, f)
	add("world-join", h, err)
	h, err = worldhttp.NewLeave(fn(o, "world-leave"), f)
	add("world-leave", h, err)
	h, err = worldhttp.NewAgents(fn(o, "world-agents"), f)
	add("world-agents", h, err)
	h, err = worldhttp.NewSend(fn(o, "world-send"), f)
	add("world-send", h, err)
	h, err = worldhttp.NewMessages(fn(o, "world-messages"), f)
	add("world-messages", h, err)
	h, err = worldhttp.NewPing(fn(o, "world-ping"), f, nil)
	add("world-ping", h, err)
	h, err = worldhttp.NewAct(fn(o, "world-act"), f)
	add("world-act", h, err)
	h, err = worldhttp.NewEvents(fn(o, "world-events"), f)
	add("world-events", h, err)
	h, err = worldhttp.NewCard(fn(o, "world-card"), f)
	add("world-card", h, err)
	return a
}

// fn is o for the handler of function name.
func fn(o worldhttp.Options, name string) worldhttp.Options {
	o.Function = name
	return o
}

type response struct {
	status int
	header http.Header
	body   []byte
}

// envelope decodes the world envelope.
func (r response) envelope(t *testing.T) (ok bool, data map[string]any, code, msg string) {
	t.Helper()
	var e struct {
		OK    bool           `json:"ok"`
		Data  map[string]any `json:"data"`
		Error struct {
			Code    string `json:"code"`
			Message string `json:"message"`
		} `json:"error"`
	}
	if err := json.Unmarshal(r.body, &e); err != nil {
		t.Fatalf("body %q: %v", r.body, err)
	}
	return e.OK, e.Data, e.Error.Code, e.Error.Message
}

// do sends a request (signed by k unless nil) to the function whose route
// of testTable matches, as the gateway would.
func (a *api) do(k ed25519.PrivateKey, method, path, body string, headers ...string) response {
	a.t.Helper()
	var fn string
	best := -1
	bare, _, _ := strings.Cut(path, "?")
	for _, rt := range testTable {
		if rt.Method != method {
			continue
		}
		if _, score, ok := routes.MatchPattern(rt.Path, bare); ok && score > best {
			fn, best = rt.Function, score
		}
	}
	if fn == "" {
		a.t.Fatalf("no test route for %s %s", method, path)
	}
	r := httptest.NewRequest(method, "http://api.test"+path, strings.NewReader(body))
	if k != nil {
		s, err := auth.NewSigner(k)
		if err != nil {
			a.t.Fatal(err)
		}
		out, _ := http.NewRequest(method, "http://api.test"+path, strings.NewReader(body))
		if err := s.Sign(out); err != nil {
			a.t.Fatal(err)
		}
		for name, v := range out.Header {
			r.Header[name] = v
		}
	}
	for i := 0; i+1 < len(headers); i += 2 {
		r.Header.Set(headers[i], headers[i+1])
	}
	w := httptest.NewRecorder()
	a.handlers[fn].ServeHTTP(w, r)
	return response{status: w.Code, header: w.Header(), body: w.Body.Bytes()}
}

// expectError asserts status and code, and that the message does not leak
// the fakes' internal text.
func expectError(t *testing.T, r response, status int, code, msgPart string) {
	t.Helper()
	ok, _, gotCode, msg := r.envelope(t)
	if r.status != status || ok || gotCode != code || !strings.Contains(msg, msgPart) {
		t.Errorf("%d %s, want %d %s containing %q", r.status, r.body, status, code, msgPart)
	}
	if strings.Contains(msg, errUnexpected.Error()) || strings.Contains(msg, "secret") {
		t.Errorf("internal text reached the client: %q", msg)
	}
}

// TestAgentsListRequiresMembership (US-001): a key that is no member of the
// world gets 401 NOT_JOINED and the member list is never read; a member of
// the world gets the list.
func TestAgentsListRequiresMembership(t *testing.T) {
	f := newFake()
	f.MembersFn = func(context.Context, string) ([]world.Member, error) {
		return []world.Member{{AWNID: auth.AWNID(pub(alice)), Slot: 1, JoinedAt: created}}, nil
	}
	a := newAPI(t, f, nil)
	expectError(t, a.do(outsider, "GET", "/v0/worlds/lobby/agents", ""), 401, "NOT_JOINED", "")
	// A member of lobby is no member of another world.
	expectError(t, a.do(alice, "GET", "/v0/worlds/arena/agents", ""), 401, "NOT_JOINED", "")
	expectError(t, a.do(nil, "GET", "/v0/worlds/lobby/agents", ""), 401, "UNAUTHORIZED", "Signature-Input")
	if n := f.Calls("Members"); n != 0 {
		t.Fatalf("Members read %d times for refused requests", n)
	}
	r := a.do(alice, "GET", "/v0/worlds/lobby/agents", "")
	if ok, data, _, _ := r.envelope(t); r.status != 200 || !ok || data["count"] != 1.0 {
		t.Errorf("member: %d %s", r.status, r.body)
	}
}

// TestAgentsShape: every field in camelCase, subjectId and metadata null
// when absent, presence from the rule at the handler's clock.
func TestAgentsShape(t *testing.T) {
	f := newFake()
	now := created.Add(time.Hour)
	f.MembersFn = func(_ context.Context, w string) ([]world.Member, error) {
		return []world.Member{
			{AWNID: "aw:sha256:aa", Slot: 1, SubjectID: "alice-agent", JoinedAt: created, Metadata: json.RawMessage(`{"role":"host"}`), LastPollAt: now.Add(-5 * time.Second)},
			{AWNID: "aw:sha256:bb", Slot: 2, JoinedAt: created},
		}, nil
	}
	r := newAPI(t, f, nil).do(bob, "GET", "/v0/worlds/lobby/agents", "")
	want := `{"ok":true,"data":{"agents":[` +
		`{"awnId":"aw:sha256:aa","subjectId":"alice-agent","slot":1,"joinedAt":"2026-01-02T03:04:05Z","presence":"online","metadata":{"role":"host"}},` +
		`{"awnId":"aw:sha256:bb","subjectId":null,"slot":2,"joinedAt":"2026-01-02T03:04:05Z","presence":"offline","metadata":null}],"count":2,"cursor":null}}`
	if r.status != 200 || strings.TrimSpace(string(r.body)) != want {
		t.Errorf("%d\n got %s\nwant %s", r.status, r.body, want)
	}
	if r.header.Get("Content-Type") != "application/json" {
		t.Errorf("Content-Type %q", r.header.Get("Content-Type"))
	}
}

// TestPutWorld: create with publicKey (201, the signer owns it), update
// by the owner without publicKey (200), refusals by status.
func TestPutWorld(t *testing.T) {
	f := newFake()
	var gotSigner ed25519.PublicKey
	var gotManifest world.Manifest
	f.PutWorldFn = func(_ context.Context, m world.Manifest, signer ed25519.PublicKey) (world.Manifest, bool, error) {
		gotSigner, gotManifest = signer, m
		if m.ID == "lobby" && !signer.Equal(pub(alice)) {
			return world.Manifest{}, false, apierror.New(apierror.Forbidden, "only the owner may update this world")
		}
		out := m
		out.OwnerKey, out.OwnerKeyID, out.CreatedAt, out.UpdatedAt = signer, auth.KeyID(signer), created, created
		return out, m.ID != "lobby", nil
	}
	a := newAPI(t, f, nil)

	body := `{"publicKey":"` + b64(bob) + `","name":"Arena","description":"Fights.","category":"games","actions":[{"name":"hit","description":"Hit."}]}`
	r := a.do(bob, "PUT", "/v0/worlds/arena", body)
	ok, data, _, _ := r.envelope(t)
	if r.status != 201 || !ok || data["worldId"] != "arena" || data["ownerKeyId"] != auth.KeyID(pub(bob)) || data["createdAt"] != "2026-01-02T03:04:05Z" {
		t.Fatalf("create: %d %s", r.status, r.body)
	}
	if !gotSigner.Equal(pub(bob)) || gotManifest.Name != "Arena" || len(gotManifest.Actions) != 1 || gotManifest.Actions[0].Name != "hit" {
		t.Errorf("PutWorld got %+v signed by %x", gotManifest, gotSigner)
	}
	for _, k := range []string{"worldId", "name", "description", "category", "actions", "ownerKeyId", "members", "createdAt", "updatedAt"} {
		if _, ok := data[k]; !ok {
			t.Errorf("manifest lacks %s: %s", k, r.body)
		}
	}

	// The owner updates without publicKey: its stored key verifies.
	r = a.do(alice, "PUT", "/v0/worlds/lobby", `{"name":"Lobby 2"}`)
	if ok, data, _, _ := r.envelope(t); r.status != 200 || !ok || data["name"] != "Lobby 2" || data["actions"] == nil {
		t.Errorf("owner update: %d %s", r.status, r.body)
	}

	expectError(t, a.do(bob, "PUT", "/v0/worlds/lobby", `{"name":"x"}`), 401, "UNAUTHORIZED", "owner")
	expectError(t, a.do(bob, "PUT", "/v0/worlds/lobby", `{"publicKey":"`+b64(bob)+`","name":"x"}`), 403, "FORBIDDEN", "owner")
	expectError(t, a.do(bob, "PUT", "/v0/worlds/new", `{"name":"x"}`), 400, "INVALID_REQUEST", "publicKey is required")
	expectError(t, a.do(bob, "PUT", "/v0/worlds/new", `{"publicKey":"nope","name":"x"}`), 400, "INVALID_REQUEST", "publicKey")
	expectError(t, a.do(bob, "PUT", "/v0/worlds/new", `{"publicKey":"`+b64(alice)+`"}`), 401, "UNAUTHORIZED", "keyid")
	expectError(t, a.do(bob, "PUT", "/v0/worlds/new", `{"publicKey":"`+b64(bob)+`","nmae":"x"}`), 400, "INVALID_REQUEST", `unknown field "nmae"`)
	expectError(t, a.do(bob, "PUT", "/v0/worlds/new", `{"publicKey":"`+b64(bob)+`","actions":[{"name":"a","desc":"x"}]}`), 400, "INVALID_REQUEST", `unknown field "actions[0].desc"`)
	expectError(t, a.do(bob, "PUT", "/v0/worlds/new", `{"publicKey":"`+b64(bob)+`","name":"a","name":"b"}`), 400, "INVALID_REQUEST", "")
	expectError(t, a.do(nil, "PUT", "/v0/worlds/new", `{"publicKey":"`+b64(bob)+`"}`), 401, "UNAUTHORIZED", "")
}

// TestGetWorld: public, the manifest with its count; unknown is 404.
func TestGetWorld(t *testing.T) {
	a := newAPI(t, newFake(), nil)
	r := a.do(nil, "GET", "/v0/worlds/lobby", "")
	if ok, data, _, _ := r.envelope(t); r.status != 200 || !ok || data["members"] != 2.0 || data["name"] != "Lobby" {
		t.Errorf("%d %s", r.status, r.body)
	}
	expectError(t, a.do(nil, "GET", "/v0/worlds/nowhere", ""), 404, "NOT_FOUND", "")
}

// TestJoin: 201 when new, 200 when already joined, with the first page of
// players; the key in the body must sign; metadata must be an object.
func TestJoin(t *testing.T) {
	f := newFake()
	var gotMeta json.RawMessage
	f.JoinFn = func(_ context.Context, w string, p ed25519.PublicKey, meta json.RawMessage) (world.Member, bool, error) {
		if w != "lobby" {
			return world.Member{}, false, apierror.New(apierror.NotFound, "no such world")
		}
		gotMeta = meta
		return world.Member{AWNID: auth.AWNID(p), Slot: 3, JoinedAt: created}, p.Equal(pub(outsider)), nil
	}
	f.MembersFn = func(context.Context, string) ([]world.Member, error) {
		return []world.Member{{AWNID: "aw:sha256:aa", Slot: 3, JoinedAt: created}}, nil
	}
	a := newAPI(t, f, nil)
	r := a.do(outsider, "POST", "/v0/worlds/lobby/join", `{"publicKey":"`+b64(outsider)+`","metadata":{"x":1}}`)
	want := `{"ok":true,"data":{"awnId":"` + auth.AWNID(pub(outsider)) + `","slot":3,"joinedAt":"2026-01-02T03:04:05Z",` +
		`"players":{"agents":[{"awnId":"aw:sha256:aa","subjectId":null,"slot":3,"joinedAt":"2026-01-02T03:04:05Z","presence":"offline","metadata":null},` +
		// The page is read beside the join: the new member is put into
		// it, in its awnId's place.
		`{"awnId":"` + auth.AWNID(pub(outsider)) + `","subjectId":null,"slot":3,"joinedAt":"2026-01-02T03:04:05Z","presence":"offline","metadata":null}],"count":2,"cursor":null}}}`
	if r.status != 201 || strings.TrimSpace(string(r.body)) != want || string(gotMeta) != `{"x":1}` {
		t.Errorf("new join: %d %s (metadata %s)", r.status, r.body, gotMeta)
	}
	// null is handed on as sent: the world reads it as no metadata.
	if r := a.do(bob, "POST", "/v0/worlds/lobby/join", `{"publicKey":"`+b64(bob)+`","metadata":null}`); r.status != 200 || string(gotMeta) != "null" {
		t.Errorf("rejoin: %d %s (metadata %s)", r.status, r.body, gotMeta)
	}
	expectError(t, a.do(bob, "POST", "/v0/worlds/lobby/join", `{}`), 400, "INVALID_REQUEST", "publicKey is required")
	// metadata that is no object is the world's to refuse (world's
	// TestJoinValidation).
	expectError(t, a.do(bob, "POST", "/v0/worlds/lobby/join", `{"publicKey":"`+b64(alice)+`"}`), 401, "UNAUTHORIZED", "keyid")
	expectError(t, a.do(bob, "POST", "/v0/worlds/nowhere/join", `{"publicKey":"`+b64(bob)+`"}`), 404, "NOT_FOUND", "")
	expectError(t, a.do(bob, "POST", "/v0/worlds/lobby/join", `{"publicKey":"`+b64(bob)+`","extra":1}`), 400, "INVALID_REQUEST", `unknown field "extra"`)
}

// TestLeave: a member leaves; a body other than {} is refused.
func TestLeave(t *testing.T) {
	f := newFake()
	var left string
	f.LeaveFn = func(_ context.Context, w, awnID string) error { left = w + "/" + awnID; return nil }
	a := newAPI(t, f, nil)
	r := a.do(bob, "POST", "/v0/worlds/lobby/leave", "")
	if strings.TrimSpace(string(r.body)) != `{"ok":true,"data":{"left":true}}` || left != "lobby/"+auth.AWNID(pub(bob)) {
		t.Errorf("%d %s (left %s)", r.status, r.body, left)
	}
	if r := a.do(bob, "POST", "/v0/worlds/lobby/leave", "{}"); r.status != 200 {
		t.Errorf("{}: %d %s", r.status, r.body)
	}
	expectError(t, a.do(bob, "POST", "/v0/worlds/lobby/leave", `{"now":true}`), 400, "INVALID_REQUEST", "unknown field")
	expectError(t, a.do(outsider, "POST", "/v0/worlds/lobby/leave", ""), 401, "NOT_JOINED", "")
}

// TestSend: 201 with the stored message; refusals; the domain's NotFound
// (recipient not a member) passes through.
func TestSend(t *testing.T) {
	f := newFake()
	f.SendFn = func(_ context.Context, w, from, to string, content json.RawMessage, ct string) (worldhttp.Message, error) {
		if to != auth.AWNID(pub(bob)) {
			return worldhttp.Message{}, apierror.New(apierror.NotFound, "the recipient is not a member of this world")
		}
		if ct == "" {
			ct = "application/json"
		}
		return worldhttp.Message{ID: "01KB0000000000000000000000", From: from, To: to, Content: content, ContentType: ct, SentAt: created}, nil
	}
	a := newAPI(t, f, func(o *worldhttp.Options) { o.MaxBody = 512 })
	to := auth.AWNID(pub(bob))
	r := a.do(alice, "POST", "/v0/worlds/lobby/messages", `{"to":"`+to+`","content":{"text":"hi"}}`)
	want := `{"ok":true,"data":{"messageId":"01KB0000000000000000000000","from":"` + auth.AWNID(pub(alice)) + `","to":"` + to +
		`","content":{"text":"hi"},"contentType":"application/json","sentAt":"2026-01-02T03:04:05Z"}}`
	if r.status != 201 || strings.TrimSpace(string(r.body)) != want {
		t.Errorf("%d\n got %s\nwant %s", r.status, r.body, want)
	}
	if r := a.do(alice, "POST", "/v0/worlds/lobby/messages", `{"to":"`+to+`","content":"plain","contentType":"text/plain"}`); r.status != 201 {
		t.Errorf("string content: %d %s", r.status, r.body)
	}
	// A missing to or content is the inbox's to refuse (inbox's
	// TestValidation); the handler hands the domain what was sent.
	expectError(t, a.do(alice, "POST", "/v0/worlds/lobby/messages", `{"to":"`+to+`","content":1,"cc":"x"}`), 400, "INVALID_REQUEST", `unknown field "cc"`)
	expectError(t, a.do(alice, "POST", "/v0/worlds/lobby/messages", `{"to":"aw:sha256:00","content":1}`), 404, "NOT_FOUND", "recipient")
	expectError(t, a.do(alice, "POST", "/v0/worlds/lobby/messages", `{"to":"`+to+`","content":"`+strings.Repeat("x", 600)+`"}`), 413, "PAYLOAD_TOO_LARGE", "")
	expectError(t, a.do(alice, "POST", "/v0/worlds/lobby/messages", `not json`), 400, "INVALID_REQUEST", "")
}

// TestMessagesQuery: each query parameter is validated and named when
// wrong; good ones reach the inbox as ReadOptions.
func TestMessagesQuery(t *testing.T) {
	f := newFake()
	// got is what the route passed but its budget (Size, MaxBytes), as a
	// comparable value.
	type readOptions struct {
		Peek  bool
		Since time.Time
		Limit int
	}
	var got readOptions
	f.ReadFn = func(_ context.Context, w, awnID string, o worldhttp.ReadOptions) ([]worldhttp.Message, error) {
		if o.Size == nil || o.MaxBytes <= 0 || o.MaxBytes > lambdahttp.MaxResponse {
			t.Errorf("the route passed no response budget: MaxBytes %d", o.MaxBytes)
		}
		got = readOptions{Peek: o.Peek, Since: o.Since, Limit: o.Limit}
		return []worldhttp.Message{{ID: "m1", From: "aw:sha256:aa", To: awnID, Content: json.RawMessage(`"hi"`), ContentType: "text/plain", SentAt: created}}, nil
	}
	a := newAPI(t, f, nil)
	r := a.do(bob, "GET", "/v0/worlds/lobby/messages", "")
	if ok, data, _, _ := r.envelope(t); r.status != 200 || !ok || data["count"] != 1.0 || got != (readOptions{Limit: 50}) {
		t.Errorf("defaults: %d %s %+v", r.status, r.body, got)
	}
	r = a.do(bob, "GET", "/v0/worlds/lobby/messages?peek=true&since=2026-01-02T03:04:05Z&limit=100", "")
	if r.status != 200 || got != (readOptions{Peek: true, Since: created, Limit: 100}) {
		t.Errorf("all set: %d %s %+v", r.status, r.body, got)
	}
	for q, name := range map[string]string{
		"peek=yes": "peek", "peek=true&peek=false": "repeated", "limit=0": "limit", "limit=101": "limit", "limit=ten": "limit",
		"since=yesterday": "since", "since=2026-01-02": "since", "limit=%zz": "malformed",
	} {
		expectError(t, a.do(bob, "GET", "/v0/worlds/lobby/messages?"+q, ""), 400, "INVALID_REQUEST", name)
	}
}

// TestPing: the target's reachability with latencyMs null; a target that
// is no member is 404 NOT_FOUND.
func TestPing(t *testing.T) {
	f := newFake()
	f.ReachableFn = func(_ context.Context, w, target string) (bool, error) {
		if target != auth.AWNID(pub(bob)) {
			return false, apierror.New(apierror.NotFound, "the target is not a member of this world")
		}
		return true, nil
	}
	a := newAPI(t, f, nil)
	target := auth.AWNID(pub(bob))
	r := a.do(alice, "POST", "/v0/worlds/lobby/ping", `{"target":"`+target+`"}`)
	if strings.TrimSpace(string(r.body)) != `{"ok":true,"data":{"latencyMs":null,"reachable":true,"target":"`+target+`"}}` {
		t.Errorf("%d %s", r.status, r.body)
	}
	expectError(t, a.do(alice, "POST", "/v0/worlds/lobby/ping", `{"target":"aw:sha256:00"}`), 404, "NOT_FOUND", "target")
	expectError(t, a.do(alice, "POST", "/v0/worlds/lobby/ping", `{}`), 400, "INVALID_REQUEST", "target is required")
}

// TestAct: 201 {actionId}; params must be an object; the domain's
// refusals keep their status.
func TestAct(t *testing.T) {
	f := newFake()
	f.SubmitActionFn = func(_ context.Context, w, awnID, action string, params json.RawMessage) (string, error) {
		switch action {
		case "wave":
			return "01KB0000000000000000000001", nil
		case "busy":
			return "", apierror.New(apierror.Conflict, "the world is busy")
		}
		return "", apierror.New(apierror.Invalid, "unknown action; allowed: wave")
	}
	a := newAPI(t, f, nil)
	r := a.do(alice, "POST", "/v0/worlds/lobby/actions", `{"action":"wave","params":{"to":"all"}}`)
	if r.status != 201 || strings.TrimSpace(string(r.body)) != `{"ok":true,"data":{"actionId":"01KB0000000000000000000001"}}` {
		t.Errorf("%d %s", r.status, r.body)
	}
	// params that are no object are the world's to refuse (world's
	// TestSubmitAction).
	expectError(t, a.do(alice, "POST", "/v0/worlds/lobby/actions", `{"action":"dance"}`), 400, "INVALID_REQUEST", "allowed: wave")
	expectError(t, a.do(alice, "POST", "/v0/worlds/lobby/actions", `{"action":"busy"}`), 409, "CONFLICT", "")
	expectError(t, a.do(alice, "POST", "/v0/worlds/lobby/actions", `{}`), 400, "INVALID_REQUEST", "action is required")
}

// TestEvents: events in the client's shape with the cursor of the last
// one (or the after given when none); wait and limit passed on; bad
// parameters named.
func TestEvents(t *testing.T) {
	f := newFake()
	const after = "01KB0000000000000000000000"
	var gotAfter string
	var gotLimit int
	var gotWait time.Duration
	f.WaitEventsFn = func(_ context.Context, w, awnID, a string, limit int, wait time.Duration) ([]world.Event, error) {
		gotAfter, gotLimit, gotWait = a, limit, wait
		if a == after {
			return nil, nil
		}
		return []world.Event{
			{ID: "01KB0000000000000000000001", Type: world.AgentJoined, World: w, Data: json.RawMessage(`{"awnId":"x"}`), Visibility: world.Public, CreatedAt: created},
			{ID: "01KB0000000000000000000002", Type: world.MessageReceived, World: w, Data: json.RawMessage(`{}`), Visibility: world.Private, Recipient: awnID, CreatedAt: created},
		}, nil
	}
	a := newAPI(t, f, nil)
	r := a.do(bob, "GET", "/v0/worlds/lobby/events?wait=20&limit=2", "")
	ok, data, _, _ := r.envelope(t)
	evs, _ := data["events"].([]any)
	if r.status != 200 || !ok || data["count"] != 2.0 || data["cursor"] != "01KB0000000000000000000002" || len(evs) != 2 || gotWait != 20*time.Second || gotLimit != 2 || gotAfter != "" {
		t.Fatalf("%d %s (wait %v limit %d)", r.status, r.body, gotWait, gotLimit)
	}
	first, _ := evs[0].(map[string]any)
	for k, v := range map[string]any{"eventId": "01KB0000000000000000000001", "type": "agent.joined", "worldId": "lobby", "visibility": "public", "createdAt": "2026-01-02T03:04:05Z"} {
		if first[k] != v {
			t.Errorf("event %s = %v, want %v", k, first[k], v)
		}
	}
	if _, hasRecipient := evs[1].(map[string]any)["recipient"]; hasRecipient {
		t.Error("an event shows its recipient")
	}
	r = a.do(bob, "GET", "/v0/worlds/lobby/events?after="+strings.ToLower(after), "")
	if _, data, _, _ := r.envelope(t); r.status != 200 || data["cursor"] != after || data["count"] != 0.0 || gotWait != 0 || gotLimit != 50 {
		t.Errorf("empty poll: %d %s", r.status, r.body)
	}
	for q, name := range map[string]string{"after=notaulid": "after", "wait=21": "wait", "wait=-1": "wait", "wait=1.5": "wait", "limit=0": "limit", "after=" + after + "&after=" + after: "repeated"} {
		expectError(t, a.do(bob, "GET", "/v0/worlds/lobby/events?"+q, ""), 400, "INVALID_REQUEST", name)
	}
}

// TestRateLimits: each limited route asks the limiter exactly once, with
// its own op, after auth and before the domain; RATE_LIMITED is 429 with
// Retry-After and the domain is not called.
func TestRateLimits(t *testing.T) {
	cases := []struct {
		op           worldhttp.RateOp
		method, path string
		body         string
		domain       string
	}{
		{worldhttp.OpAgents, "GET", "/v0/worlds/lobby/agents", "", "Members"},
		{worldhttp.OpSend, "POST", "/v0/worlds/lobby/messages", `{"to":"x","content":1}`, "Send"},
		{worldhttp.OpRead, "GET", "/v0/worlds/lobby/messages", "", "Read"},
		{worldhttp.OpPing, "POST", "/v0/worlds/lobby/ping", `{"target":"x"}`, "Reachable"},
		{worldhttp.OpActions, "POST", "/v0/worlds/lobby/actions", `{"action":"wave"}`, "SubmitAction"},
	}
	for _, c := range cases {
		t.Run(string(c.op), func(t *testing.T) {
			f := newFake()
			var who string
			f.AllowFn = func(_ context.Context, w, awnID string, op worldhttp.RateOp) error {
				who = w + "/" + awnID
				return &apierror.Error{Kind: apierror.RateLimited, Message: "rate limit of " + string(op) + " reached", RetryAfter: 7 * time.Second}
			}
			a := newAPI(t, f, nil)
			r := a.do(alice, c.method, c.path, c.body)
			expectError(t, r, 429, "RATE_LIMITED", string(c.op))
			if r.header.Get("Retry-After") != "7" {
				t.Errorf("Retry-After %q, want 7", r.header.Get("Retry-After"))
			}
			if f.Calls("Allow:"+string(c.op)) != 1 || f.Calls(c.domain) != 0 || who != "lobby/"+auth.AWNID(pub(alice)) {
				t.Errorf("calls %v (limited %s), want one Allow and no %s", f.calls, who, c.domain)
			}
			// A non-member is refused before the limiter counts it.
			expectError(t, a.do(outsider, c.method, c.path, c.body), 401, "NOT_JOINED", "")
			if f.Calls("Allow:"+string(c.op)) != 1 {
				t.Errorf("a refused non-member was counted by the limiter")
			}
		})
	}
	// Routes without a limit never ask.
	f := newFake()
	f.LeaveFn = func(context.Context, string, string) error { return nil }
	f.WaitEventsFn = func(context.Context, string, string, string, int, time.Duration) ([]world.Event, error) {
		return nil, nil
	}
	a := newAPI(t, f, nil)
	a.do(alice, "GET", "/v0/worlds/lobby/events", "")
	a.do(alice, "POST", "/v0/worlds/lobby/leave", "")
	for name := range f.calls {
		if strings.HasPrefix(name, "Allow:") {
			t.Errorf("%s asked on an unlimited route", name)
		}
	}
}

// TestInternalErrorsHidden: a domain failure that is not an apierror is
// 500 INTERNAL with a generic message; a busy store 503 with Retry-After.
func TestInternalErrorsHidden(t *testing.T) {
	f := newFake()
	f.MembersFn = func(context.Context, string) ([]world.Member, error) {
		return nil, errors.New("secret table name t-123 exploded")
	}
	f.ReadFn = func(context.Context, string, string, worldhttp.ReadOptions) ([]worldhttp.Message, error) {
		return nil, apierror.FromStore("read inbox", context.DeadlineExceeded)
	}
	a := newAPI(t, f, nil)
	expectError(t, a.do(alice, "GET", "/v0/worlds/lobby/agents", ""), 500, "INTERNAL", "")
	r := a.do(alice, "GET", "/v0/worlds/lobby/messages", "")
	expectError(t, r, 503, "UNAVAILABLE", "")
	if r.header.Get("Retry-After") == "" {
		t.Error("503 without Retry-After")
	}
}

// TestStartupChecks: a handler without its dependencies is refused at
// start, never at the first request.
func TestStartupChecks(t *testing.T) {
	f := newFake()
	o := worldhttp.Options{Verifier: auth.NewVerifier(auth.NewNonces(memory.New()), nil), Members: f, Limiter: f, Table: testTable}
	noLimiter, noMembers := o, o
	noLimiter.Limiter, noMembers.Members = nil, nil
	for name, err := range map[string]error{
		"agents without limiter": second(worldhttp.NewAgents(fn(noLimiter, "world-agents"), f)),
		"agents without service": second(worldhttp.NewAgents(fn(o, "world-agents"), nil)),
		"send without members":   second(worldhttp.NewSend(fn(noMembers, "world-send"), f)),
		"events without members": second(worldhttp.NewEvents(fn(noMembers, "world-events"), f)),
		"put without service":    second(worldhttp.NewPut(fn(o, "world-put"), nil)),
		"join without verifier":  second(worldhttp.NewJoin(worldhttp.Options{Function: "world-join", Table: testTable}, f, f)),
		"join without players":   second(worldhttp.NewJoin(fn(o, "world-join"), f, nil)),
	} {
		if err == nil {
			t.Errorf("%s: started", name)
		}
	}
	if _, err := worldhttp.NewGet(worldhttp.Options{Function: "world-get", Table: testTable}, f); err != nil {
		t.Errorf("a public route needs no verifier: %v", err)
	}
}

func second(_ http.Handler, err error) error { return err }

// keysOf lists a JSON object's keys, sorted.
func keysOf(m map[string]any) []string {
	var ks []string
	for k := range m {
		ks = append(ks, k)
	}
	slices.Sort(ks)
	return ks
}

// proberFunc is a Prober of a function.
type proberFunc func(ctx context.Context, world, target string) (bool, time.Duration, error)

func (f proberFunc) Probe(ctx context.Context, world, target string) (bool, time.Duration, error) {
	return f(ctx, world, target)
}

// TestPingProbe: a target that answers the live probe is reachable with
// the probe's latency; one that does not falls back to the poll rule; a
// non-member gets 404 before any probe goes out; a probe's store failure is
// a 500 without its text.
func TestPingProbe(t *testing.T) {
	target := auth.AWNID(pub(bob))
	for _, c := range []struct {
		name    string
		polled  bool
		live    bool
		latency time.Duration
		err     error
		want    string
	}{
		{"live", false, true, 42 * time.Millisecond, nil, `"latencyMs":42,"reachable":true`},
		{"no webhook, polled", true, false, 0, nil, `"latencyMs":null,"reachable":true`},
		{"no webhook, not polled", false, false, 0, nil, `"latencyMs":null,"reachable":false`},
	} {
		t.Run(c.name, func(t *testing.T) {
			f := newFake()
			f.ReachableFn = func(context.Context, string, string) (bool, error) { return c.polled, nil }
			probed := 0
			p := proberFunc(func(_ context.Context, w, tg string) (bool, time.Duration, error) {
				probed++
				if w != "lobby" || tg != target {
					t.Errorf("probe(%q, %q)", w, tg)
				}
				return c.live, c.latency, c.err
			})
			a := newAPI(t, f, nil)
			h, err := worldhttp.NewPing(fn(a.options(), "world-ping"), f, p)
			if err != nil {
				t.Fatal(err)
			}
			a.handlers["world-ping"] = h
			r := a.do(alice, "POST", "/v0/worlds/lobby/ping", `{"target":"`+target+`"}`)
			if r.status != 200 || !strings.Contains(string(r.body), c.want) || probed != 1 {
				t.Errorf("%d %s (probed %d), want %s", r.status, r.body, probed, c.want)
			}
		})
	}
	f := newFake()
	f.ReachableFn = func(context.Context, string, string) (bool, error) {
		return false, apierror.New(apierror.NotFound, "the target is not a member of this world")
	}
	a := newAPI(t, f, nil)
	h, err := worldhttp.NewPing(fn(a.options(), "world-ping"), f, proberFunc(func(context.Context, string, string) (bool, time.Duration, error) {
		t.Error("a non-member was probed")
		return false, 0, nil
	}))
	if err != nil {
		t.Fatal(err)
	}
	a.handlers["world-ping"] = h
	expectError(t, a.do(alice, "POST", "/v0/worlds/lobby/ping", `{"target":"`+target+`"}`), 404, "NOT_FOUND", "target")
}
