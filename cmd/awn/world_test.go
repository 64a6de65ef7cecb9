package main

import (
	"context"
	"crypto/ed25519"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"net/url"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/a2awire/a2awire/shared/auth"
	"github.com/a2awire/a2awire/shared/capture"
	"github.com/a2awire/a2awire/shared/store/memory"
)

// fakeWorlds is the world surface of the network (the /v0/worlds routes) in
// memory: it answers the documented shapes in the world envelope and
// verifies every signed request with the real verifier and nonce guard —
// join and world PUT with the key in the body, member routes with the key
// of a membership — so the CLI's signatures are checked as the network
// checks them. It records every request it accepted or refused.
type fakeWorlds struct {
	t   *testing.T
	url string
	v   *auth.Verifier
	mux *http.ServeMux

	mu     sync.Mutex
	worlds map[string]*fakeWorld
	// known are the keys that ever created or joined a world: as on the
	// network, a member route first authenticates the key among all it
	// knows, then checks the membership.
	known map[string]ed25519.PublicKey
	seq   int
	reqs  []fakeRequest
}

// fakeRequest is one request the fake received.
type fakeRequest struct {
	Method, Path string
	Query        url.Values
	Body         map[string]json.RawMessage
	// KeyID is the key that signed it, "" when unsigned or refused.
	KeyID, SignatureAgent string
}

type fakeWorld struct {
	owner   ed25519.PublicKey
	doc     map[string]any
	actions []string
	members map[string]*fakeMember // by awnId
	slots   int
	events  []map[string]any
	inbox   map[string][]map[string]any // by recipient awnId
	hooks   map[string]string           // webhook URL by awnId
}

type fakeMember struct {
	pub  ed25519.PublicKey
	doc  map[string]any
	slot int
}

func newFakeWorlds(t *testing.T) *fakeWorlds {
	st := memory.New()
	t.Cleanup(func() { _ = st.Close() })
	f := &fakeWorlds{t: t, v: auth.NewVerifier(auth.NewNonces(st), time.Now), worlds: map[string]*fakeWorld{}, known: map[string]ed25519.PublicKey{}, mux: http.NewServeMux()}
	f.mux.HandleFunc("PUT /v0/worlds/{world}", f.put)
	f.mux.HandleFunc("GET /v0/worlds/{world}", f.get)
	f.mux.HandleFunc("POST /v0/worlds/{world}/join", f.join)
	f.mux.HandleFunc("POST /v0/worlds/{world}/leave", f.member(f.leave))
	f.mux.HandleFunc("GET /v0/worlds/{world}/agents", f.member(f.agents))
	f.mux.HandleFunc("POST /v0/worlds/{world}/messages", f.member(f.send))
	f.mux.HandleFunc("GET /v0/worlds/{world}/messages", f.member(f.messages))
	f.mux.HandleFunc("POST /v0/worlds/{world}/ping", f.member(f.ping))
	f.mux.HandleFunc("POST /v0/worlds/{world}/actions", f.member(f.act))
	f.mux.HandleFunc("GET /v0/worlds/{world}/events", f.member(f.eventsPage))
	f.mux.HandleFunc("PUT /v0/worlds/{world}/webhook", f.member(f.setHook))
	f.mux.HandleFunc("DELETE /v0/worlds/{world}/webhook", f.member(f.removeHook))
	srv := httptest.NewServer(f.mux)
	t.Cleanup(srv.Close)
	f.url = srv.URL
	return f
}

func worldOK(w http.ResponseWriter, status int, data any) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	_ = json.NewEncoder(w).Encode(map[string]any{"ok": true, "data": data})
}

func worldErr(w http.ResponseWriter, status int, code, msg string) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	_ = json.NewEncoder(w).Encode(map[string]any{"ok": false, "error": map[string]string{"code": code, "message": msg}})
}

// record notes r (with its JSON body, if any) and returns the body.
func (f *fakeWorlds) record(r *http.Request, body []byte, v *auth.Verified) {
	fr := fakeRequest{Method: r.Method, Path: r.URL.Path, Query: r.URL.Query()}
	_ = json.Unmarshal(body, &fr.Body)
	if v != nil {
		fr.KeyID, fr.SignatureAgent = v.KeyID, v.SignatureAgent
	}
	f.mu.Lock()
	f.reqs = append(f.reqs, fr)
	f.mu.Unlock()
}

// requests returns what the fake received since the last call.
func (f *fakeWorlds) requests() []fakeRequest {
	f.mu.Lock()
	defer f.mu.Unlock()
	r := f.reqs
	f.reqs = nil
	return r
}

// verify checks r's signature with keys, answering 401 UNAUTHORIZED when
// it fails.
func (f *fakeWorlds) verify(w http.ResponseWriter, r *http.Request, body []byte, keys auth.KeyLookup) (*auth.Verified, bool) {
	v, err := f.v.Verify(r.Context(), r, body, keys)
	f.record(r, body, v)
	if err != nil {
		var ae *auth.Error
		errors.As(err, &ae)
		worldErr(w, http.StatusUnauthorized, "UNAUTHORIZED", ae.Message)
		return nil, false
	}
	return v, true
}

func (f *fakeWorlds) now() string {
	f.seq++
	return time.Date(2026, 12, 1, 20, 0, f.seq, 0, time.UTC).Format(time.RFC3339)
}

// emit appends an event; f.mu is held.
func (fw *fakeWorld) emit(f *fakeWorlds, world, typ, vis, recipient string, data any) {
	at := f.now()
	fw.events = append(fw.events, map[string]any{"eventId": fmt.Sprintf("01EV%04d", f.seq), "type": typ, "worldId": world,
		"data": data, "visibility": vis, "createdAt": at, "recipient": recipient})
}

func (f *fakeWorlds) put(w http.ResponseWriter, r *http.Request) {
	body, _ := io.ReadAll(r.Body)
	var req struct {
		PublicKey   string `json:"publicKey"`
		Name        string `json:"name"`
		Description string `json:"description"`
		Category    string `json:"category"`
		Actions     []struct {
			Name        string `json:"name"`
			Description string `json:"description"`
		} `json:"actions"`
	}
	if err := json.Unmarshal(body, &req); err != nil {
		worldErr(w, 400, "INVALID_REQUEST", "body is not JSON")
		return
	}
	pub, err := auth.DecodePublicKey(req.PublicKey)
	if err != nil {
		worldErr(w, 400, "INVALID_REQUEST", "publicKey: "+err.Error())
		return
	}
	if _, ok := f.verify(w, r, body, auth.BodyKey(pub)); !ok {
		return
	}
	name := r.PathValue("world")
	f.mu.Lock()
	defer f.mu.Unlock()
	f.known[auth.KeyID(pub)] = pub
	fw, exists := f.worlds[name]
	if exists && !fw.owner.Equal(pub) {
		worldErr(w, 403, "FORBIDDEN", "only the world's owner may update it")
		return
	}
	if !exists {
		fw = &fakeWorld{owner: pub, members: map[string]*fakeMember{}, inbox: map[string][]map[string]any{}, hooks: map[string]string{}}
		f.worlds[name] = fw
	}
	fw.actions = nil
	for _, a := range req.Actions {
		fw.actions = append(fw.actions, a.Name)
	}
	fw.doc = map[string]any{"worldId": name, "name": req.Name, "description": req.Description, "category": req.Category,
		"actions": req.Actions, "ownerKeyId": auth.KeyID(pub), "createdAt": "2026-12-01T20:00:00Z", "updatedAt": "2026-12-01T20:00:00Z"}
	status := 200
	if !exists {
		status = 201
	}
	worldOK(w, status, fw.manifest())
}

// manifest is the world's public document; f.mu is held.
func (fw *fakeWorld) manifest() map[string]any {
	m := map[string]any{"members": len(fw.members)}
	for k, v := range fw.doc {
		m[k] = v
	}
	return m
}

func (f *fakeWorlds) get(w http.ResponseWriter, r *http.Request) {
	f.record(r, nil, nil)
	f.mu.Lock()
	defer f.mu.Unlock()
	fw, ok := f.worlds[r.PathValue("world")]
	if !ok {
		worldErr(w, 404, "NOT_FOUND", "no world named "+r.PathValue("world"))
		return
	}
	worldOK(w, 200, fw.manifest())
}

func (f *fakeWorlds) join(w http.ResponseWriter, r *http.Request) {
	body, _ := io.ReadAll(r.Body)
	var req struct {
		PublicKey string          `json:"publicKey"`
		Metadata  json.RawMessage `json:"metadata"`
	}
	if err := json.Unmarshal(body, &req); err != nil {
		worldErr(w, 400, "INVALID_REQUEST", "body is not JSON")
		return
	}
	pub, err := auth.DecodePublicKey(req.PublicKey)
	if err != nil {
		worldErr(w, 400, "INVALID_REQUEST", "publicKey: "+err.Error())
		return
	}
	v, ok := f.verify(w, r, body, auth.BodyKey(pub))
	if !ok {
		return
	}
	world := r.PathValue("world")
	f.mu.Lock()
	defer f.mu.Unlock()
	fw, ok := f.worlds[world]
	if !ok {
		worldErr(w, 404, "NOT_FOUND", "no world named "+world)
		return
	}
	f.known[v.KeyID] = pub
	if m, ok := fw.members[v.AWNID]; ok {
		worldOK(w, 200, map[string]any{"awnId": v.AWNID, "slot": m.slot, "joinedAt": m.doc["joinedAt"]})
		return
	}
	fw.slots++
	var meta any
	if req.Metadata != nil {
		meta = req.Metadata
	}
	m := &fakeMember{pub: pub, slot: fw.slots, doc: map[string]any{"awnId": v.AWNID, "subjectId": nil, "slot": fw.slots,
		"joinedAt": f.now(), "presence": "online", "metadata": meta}}
	fw.members[v.AWNID] = m
	fw.emit(f, world, "agent.joined", "public", "", map[string]any{"awnId": v.AWNID, "slot": m.slot})
	worldOK(w, 201, map[string]any{"awnId": v.AWNID, "slot": m.slot, "joinedAt": m.doc["joinedAt"]})
}

// memberHandler serves a member route: body is the request body, me the
// caller's awnId; f.mu is held.
type memberHandler func(w http.ResponseWriter, r *http.Request, body []byte, world string, fw *fakeWorld, me string)

// member verifies a member route's signature with a key the fake knows,
// then checks the membership (401 NOT_JOINED) and runs h under the lock.
func (f *fakeWorlds) member(h memberHandler) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		world := r.PathValue("world")
		keys := func(_ context.Context, keyID string) (ed25519.PublicKey, error) {
			f.mu.Lock()
			defer f.mu.Unlock()
			if pub, ok := f.known[keyID]; ok {
				return pub, nil
			}
			return nil, auth.ErrUnknownKey
		}
		v, ok := f.verify(w, r, body, keys)
		if !ok {
			return
		}
		f.mu.Lock()
		defer f.mu.Unlock()
		fw := f.worlds[world]
		if fw == nil || fw.members[v.AWNID] == nil {
			worldErr(w, http.StatusUnauthorized, "NOT_JOINED", "you are not a member of this world")
			return
		}
		h(w, r, body, world, fw, v.AWNID)
	}
}

func (f *fakeWorlds) leave(w http.ResponseWriter, _ *http.Request, _ []byte, world string, fw *fakeWorld, me string) {
	delete(fw.members, me)
	delete(fw.inbox, me)
	delete(fw.hooks, me)
	fw.emit(f, world, "agent.left", "public", "", map[string]any{"awnId": me})
	worldOK(w, 200, map[string]any{"left": true})
}

func (f *fakeWorlds) agents(w http.ResponseWriter, _ *http.Request, _ []byte, _ string, fw *fakeWorld, _ string) {
	list := []map[string]any{}
	for _, m := range fw.members {
		list = append(list, m.doc)
	}
	slices.SortFunc(list, func(a, b map[string]any) int { return a["slot"].(int) - b["slot"].(int) })
	worldOK(w, 200, map[string]any{"agents": list, "count": len(list)})
}

func (f *fakeWorlds) send(w http.ResponseWriter, _ *http.Request, body []byte, world string, fw *fakeWorld, me string) {
	var req struct {
		To          string          `json:"to"`
		Content     json.RawMessage `json:"content"`
		ContentType string          `json:"contentType"`
	}
	if err := json.Unmarshal(body, &req); err != nil || req.Content == nil {
		worldErr(w, 400, "INVALID_REQUEST", "to and content are required")
		return
	}
	if _, ok := fw.members[req.To]; !ok {
		worldErr(w, 404, "NOT_FOUND", "the recipient is not a member of this world")
		return
	}
	if req.ContentType == "" {
		req.ContentType = "application/json"
	}
	at := f.now()
	msg := map[string]any{"messageId": fmt.Sprintf("01MSG%04d", f.seq), "from": me, "to": req.To, "content": req.Content,
		"contentType": req.ContentType, "sentAt": at}
	fw.inbox[req.To] = append(fw.inbox[req.To], msg)
	fw.emit(f, world, "message.received", "private", req.To, map[string]any{"messageId": msg["messageId"], "from": me})
	worldOK(w, 201, msg)
}

func (f *fakeWorlds) messages(w http.ResponseWriter, r *http.Request, _ []byte, _ string, fw *fakeWorld, me string) {
	msgs := fw.inbox[me]
	if r.URL.Query().Get("peek") != "true" {
		delete(fw.inbox, me)
	}
	if msgs == nil {
		msgs = []map[string]any{}
	}
	worldOK(w, 200, map[string]any{"messages": msgs, "count": len(msgs)})
}

func (f *fakeWorlds) ping(w http.ResponseWriter, _ *http.Request, body []byte, _ string, fw *fakeWorld, _ string) {
	var req struct {
		Target string `json:"target"`
	}
	_ = json.Unmarshal(body, &req)
	if _, ok := fw.members[req.Target]; !ok {
		worldErr(w, 404, "NOT_FOUND", "the target is not a member of this world")
		return
	}
	var latency any
	if _, ok := fw.hooks[req.Target]; ok {
		latency = 12
	}
	worldOK(w, 200, map[string]any{"target": req.Target, "reachable": true, "latencyMs": latency})
}

func (f *fakeWorlds) act(w http.ResponseWriter, _ *http.Request, body []byte, world string, fw *fakeWorld, me string) {
	var req struct {
		Action string          `json:"action"`
		Params json.RawMessage `json:"params"`
	}
	_ = json.Unmarshal(body, &req)
	if len(fw.actions) > 0 && !slices.Contains(fw.actions, req.Action) {
		worldErr(w, 400, "INVALID_REQUEST", "this world has no action "+req.Action)
		return
	}
	id := fmt.Sprintf("01ACT%04d", f.seq+1)
	fw.emit(f, world, "action.submitted", "agents", "", map[string]any{"actionId": id, "awnId": me, "action": req.Action, "params": req.Params})
	worldOK(w, 201, map[string]any{"actionId": id})
}

func (f *fakeWorlds) eventsPage(w http.ResponseWriter, r *http.Request, _ []byte, _ string, fw *fakeWorld, me string) {
	after := r.URL.Query().Get("after")
	list := []map[string]any{}
	for _, e := range fw.events {
		if e["eventId"].(string) <= after || (e["visibility"] == "private" && e["recipient"] != me) {
			continue
		}
		out := map[string]any{}
		for k, v := range e {
			if k != "recipient" {
				out[k] = v
			}
		}
		list = append(list, out)
	}
	cursor := after
	if len(list) > 0 {
		cursor = list[len(list)-1]["eventId"].(string)
	}
	worldOK(w, 200, map[string]any{"events": list, "count": len(list), "cursor": cursor})
}

func (f *fakeWorlds) setHook(w http.ResponseWriter, _ *http.Request, body []byte, _ string, fw *fakeWorld, me string) {
	var req struct {
		URL string `json:"url"`
	}
	_ = json.Unmarshal(body, &req)
	fw.hooks[me] = req.URL
	worldOK(w, 200, map[string]any{"url": req.URL, "secret": "whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw"})
}

func (f *fakeWorlds) removeHook(w http.ResponseWriter, _ *http.Request, _ []byte, _ string, fw *fakeWorld, me string) {
	delete(fw.hooks, me)
	worldOK(w, 200, map[string]any{"removed": true})
}

// agentID is an identity made with `awn init` in its own AWN_HOME.
type agentID struct {
	env map[string]string
	identityJSON
}

func newAgentID(t *testing.T, base string) agentID {
	t.Helper()
	env := withHome(t, base)
	r := awn(t, env, "--json", "init")
	if r.code != 0 {
		t.Fatalf("init: %v", r)
	}
	var id identityJSON
	decodeStrict(t, r.stdout, &id)
	return agentID{env: env, identityJSON: id}
}

// want checks that the fake got exactly one request, with method and path,
// signed by id's key with the Signature-Agent naming its directory entry
// (id nil: unsigned), and returns it.
func (f *fakeWorlds) want(t *testing.T, method, path string, id *agentID) fakeRequest {
	t.Helper()
	reqs := f.requests()
	if len(reqs) != 1 {
		t.Fatalf("want one request %s %s, got %+v", method, path, reqs)
	}
	r := reqs[0]
	if r.Method != method || r.Path != path {
		t.Errorf("request %s %s, want %s %s", r.Method, r.Path, method, path)
	}
	switch {
	case id == nil && r.KeyID != "":
		t.Errorf("%s %s is signed, want a public request", method, path)
	case id != nil && r.KeyID != id.KeyID:
		t.Errorf("%s %s signed by %q, want %q", method, path, r.KeyID, id.KeyID)
	case id != nil && r.SignatureAgent != `sig1="`+f.url+"/api/v1/keys/"+id.KeyID+`"`:
		t.Errorf("%s %s Signature-Agent %q", method, path, r.SignatureAgent)
	}
	return r
}

func rawString(t *testing.T, raw json.RawMessage) string {
	t.Helper()
	var s string
	if err := json.Unmarshal(raw, &s); err != nil {
		t.Fatalf("%s is not a JSON string", raw)
	}
	return s
}

// TestWorldCommands drives every world command against the fake network
// and checks each request (method, path, body, signer) and both outputs.
func TestWorldCommands(t *testing.T) {
	t.Parallel()
	f := newFakeWorlds(t)
	a, b := newAgentID(t, f.url), newAgentID(t, f.url)
	f.requests()

	r := awn(t, a.env, "world", "create", "arena", "--name", "The Arena", "--description", "a test world",
		"--category", "game", "--action", "move=move one square", "--action", "resign")
	if r.code != 0 || !strings.HasPrefix(r.stdout, "created world arena\n") || !strings.Contains(r.stdout, "actions:       move — move one square\n") ||
		!strings.Contains(r.stdout, "resign") || !strings.Contains(r.stdout, "members:       0\n") {
		t.Fatalf("world create: %v", r)
	}
	req := f.want(t, "PUT", "/v0/worlds/arena", &a)
	if rawString(t, req.Body["publicKey"]) != a.PublicKey || rawString(t, req.Body["name"]) != "The Arena" ||
		rawString(t, req.Body["category"]) != "game" || string(req.Body["actions"]) != `[{"name":"move","description":"move one square"},{"name":"resign"}]` {
		t.Errorf("world create body %s", req.Body)
	}
	if _, ok := req.Body["eventShards"]; ok {
		t.Errorf("world create without --event-shards sent eventShards: %s", req.Body)
	}
	// Again: an update by the owner, raising the event shards.
	r = awn(t, a.env, "world", "create", "arena", "--name", "The Arena", "--action", "move", "--action", "resign", "--event-shards", "4")
	if r.code != 0 || !strings.HasPrefix(r.stdout, "updated world arena\n") {
		t.Fatalf("world create again: %v", r)
	}
	if req := f.want(t, "PUT", "/v0/worlds/arena", &a); string(req.Body["eventShards"]) != "4" {
		t.Errorf("world create --event-shards 4 sent %s", req.Body)
	}
	f.requests()
	// Another key may not.
	r = awn(t, b.env, "world", "create", "arena")
	if r.code != 1 || r.stdout != "" || r.stderr != "error: FORBIDDEN: only the world's owner may update it\n" {
		t.Errorf("world create by another key: %v", r)
	}
	f.requests()

	r = awn(t, b.env, "world", "show", "arena")
	if r.code != 0 || !strings.Contains(r.stdout, "name:          The Arena\n") || !strings.Contains(r.stdout, "owner_key_id:  "+a.KeyID+"\n") {
		t.Errorf("world show: %v", r)
	}
	f.want(t, "GET", "/v0/worlds/arena", nil)
	r = awn(t, b.env, "world", "show", "arena", "--json")
	var shown map[string]json.RawMessage
	decodeStrict(t, r.stdout, &shown)
	if r.code != 0 || string(shown["worldId"]) != `"arena"` || string(shown["members"]) != "0" {
		t.Errorf("world show --json: %v", r)
	}
	f.requests()

	r = awn(t, a.env, "join", "arena", "--metadata", `{"role":"scout"}`)
	if r.code != 0 || r.stdout != "joined arena as "+a.AWNID+" (slot 1, since 2026-12-01T20:00:01Z)\n" {
		t.Errorf("join: %v", r)
	}
	req = f.want(t, "POST", "/v0/worlds/arena/join", &a)
	if rawString(t, req.Body["publicKey"]) != a.PublicKey || string(req.Body["metadata"]) != `{"role":"scout"}` {
		t.Errorf("join body %s", req.Body)
	}
	r = awn(t, a.env, "join", "arena")
	if r.code != 0 || !strings.HasPrefix(r.stdout, "already a member of arena as "+a.AWNID+" (slot 1") {
		t.Errorf("join again: %v", r)
	}
	if req := f.want(t, "POST", "/v0/worlds/arena/join", &a); req.Body["metadata"] != nil {
		t.Errorf("join without --metadata sent %s", req.Body)
	}
	r = awn(t, b.env, "--json", "join", "arena")
	var joined struct {
		AWNID string `json:"awnId"`
		Slot  int    `json:"slot"`
	}
	decodeStrict(t, r.stdout, &joined)
	if r.code != 0 || joined.AWNID != b.AWNID || joined.Slot != 2 {
		t.Errorf("join --json: %v", r)
	}
	f.requests()

	r = awn(t, a.env, "agents", "arena")
	lines := strings.Split(strings.TrimSuffix(r.stdout, "\n"), "\n")
	if r.code != 0 || len(lines) != 3 || strings.Fields(lines[0])[0] != "SLOT" ||
		!slices.Equal(strings.Fields(lines[1]), []string{"1", a.AWNID, "-", "online", "2026-12-01T20:00:01Z", `{"role":"scout"}`}) ||
		!slices.Equal(strings.Fields(lines[2])[:2], []string{"2", b.AWNID}) {
		t.Errorf("agents: %v", r)
	}
	f.want(t, "GET", "/v0/worlds/arena/agents", &a)
	r = awn(t, a.env, "agents", "arena", "--json")
	var listed struct {
		Agents []map[string]json.RawMessage `json:"agents"`
		Count  int                          `json:"count"`
	}
	decodeStrict(t, r.stdout, &listed)
	if r.code != 0 || listed.Count != 2 || len(listed.Agents) != 2 {
		t.Errorf("agents --json: %v", r)
	}
	f.requests()

	// Text goes as a text/plain JSON string, JSON as itself.
	r = awn(t, a.env, "send", "arena", b.AWNID, "hello there")
	if r.code != 0 || !strings.HasPrefix(r.stdout, "sent 01MSG") || !strings.Contains(r.stdout, " to "+b.AWNID+" at ") {
		t.Errorf("send: %v", r)
	}
	req = f.want(t, "POST", "/v0/worlds/arena/messages", &a)
	if rawString(t, req.Body["to"]) != b.AWNID || string(req.Body["content"]) != `"hello there"` || string(req.Body["contentType"]) != `"text/plain"` {
		t.Errorf("send text body %s", req.Body)
	}
	r = awn(t, a.env, "send", "arena", b.AWNID, `{"move": "e4"}`)
	if r.code != 0 {
		t.Errorf("send JSON: %v", r)
	}
	req = f.want(t, "POST", "/v0/worlds/arena/messages", &a)
	if string(req.Body["content"]) != `{"move":"e4"}` || req.Body["contentType"] != nil {
		t.Errorf("send JSON body %s", req.Body)
	}

	r = awn(t, b.env, "messages", "arena", "--peek", "--since", "2026-12-01T19:00:00Z", "--limit", "10")
	lines = strings.Split(strings.TrimSuffix(r.stdout, "\n"), "\n")
	if r.code != 0 || len(lines) != 2 || !strings.HasSuffix(lines[0], "from "+a.AWNID+": hello there") ||
		!strings.HasSuffix(lines[1], "from "+a.AWNID+`: {"move":"e4"}`) {
		t.Errorf("messages --peek: %v", r)
	}
	req = f.want(t, "GET", "/v0/worlds/arena/messages", &b)
	if req.Query.Get("peek") != "true" || req.Query.Get("since") != "2026-12-01T19:00:00Z" || req.Query.Get("limit") != "10" {
		t.Errorf("messages query %v", req.Query)
	}
	r = awn(t, b.env, "messages", "arena", "--json")
	var msgs struct {
		Messages []struct {
			Content     json.RawMessage `json:"content"`
			ContentType string          `json:"contentType"`
		} `json:"messages"`
		Count int `json:"count"`
	}
	decodeStrict(t, r.stdout, &msgs)
	if r.code != 0 || msgs.Count != 2 || msgs.Messages[0].ContentType != "text/plain" || compactJSON(msgs.Messages[1].Content, false) != `{"move":"e4"}` {
		t.Errorf("messages --json: %v", r)
	}
	if req := f.want(t, "GET", "/v0/worlds/arena/messages", &b); len(req.Query) != 0 {
		t.Errorf("messages without flags sent the query %v", req.Query)
	}
	// Consumed.
	r = awn(t, b.env, "messages", "arena")
	if r.code != 0 || r.stdout != "no messages in arena\n" {
		t.Errorf("messages after reading: %v", r)
	}
	f.requests()

	r = awn(t, b.env, "ping", "arena", a.AWNID)
	if r.code != 0 || r.stdout != a.AWNID+" is reachable (polled events recently)\n" {
		t.Errorf("ping: %v", r)
	}
	if req := f.want(t, "POST", "/v0/worlds/arena/ping", &b); rawString(t, req.Body["target"]) != a.AWNID {
		t.Errorf("ping body %s", req.Body)
	}
	r = awn(t, b.env, "ping", "arena", a.AWNID, "--json")
	var pong map[string]json.RawMessage
	decodeStrict(t, r.stdout, &pong)
	if r.code != 0 || string(pong["reachable"]) != "true" || string(pong["latencyMs"]) != "null" {
		t.Errorf("ping --json: %v", r)
	}
	f.requests()

	r = awn(t, a.env, "act", "arena", "move", "--params", `{"to":"e4"}`)
	if r.code != 0 || !strings.HasPrefix(r.stdout, "submitted move in arena: 01ACT") {
		t.Errorf("act: %v", r)
	}
	if req := f.want(t, "POST", "/v0/worlds/arena/actions", &a); rawString(t, req.Body["action"]) != "move" || string(req.Body["params"]) != `{"to":"e4"}` {
		t.Errorf("act body %s", req.Body)
	}
	r = awn(t, a.env, "act", "arena", "resign")
	if r.code != 0 {
		t.Errorf("act without params: %v", r)
	}
	if req := f.want(t, "POST", "/v0/worlds/arena/actions", &a); string(req.Body["params"]) != `{}` {
		t.Errorf("act without --params sent %s", req.Body)
	}

	// B sees the joins, its private message events and the actions; A
	// does not see B's private events.
	r = awn(t, b.env, "events", "arena")
	lines = strings.Split(strings.TrimSuffix(r.stdout, "\n"), "\n")
	var types []string
	for _, l := range lines {
		types = append(types, strings.Fields(l)[2])
	}
	if r.code != 0 || !slices.Equal(types, []string{"agent.joined", "agent.joined", "message.received", "message.received", "action.submitted", "action.submitted"}) ||
		!strings.HasSuffix(lines[2], "(private)") || !strings.HasPrefix(lines[0], "01EV0002  2026-12-01T20:00:02Z  agent.joined  {") {
		t.Errorf("events: %v", r)
	}
	f.want(t, "GET", "/v0/worlds/arena/events", &b)
	r = awn(t, a.env, "events", "arena", "--json", "--after", "01EV0004", "--limit", "5")
	var page struct {
		Events []event `json:"events"`
	}
	decodeStrict(t, r.stdout, &page)
	if r.code != 0 || len(page.Events) != 2 || page.Events[0].Type != "action.submitted" {
		t.Errorf("events --json --after: %v", r)
	}
	if req := f.want(t, "GET", "/v0/worlds/arena/events", &a); req.Query.Get("after") != "01EV0004" || req.Query.Get("limit") != "5" || req.Query.Has("wait") {
		t.Errorf("events query %v", req.Query)
	}

	r = awn(t, b.env, "leave", "arena")
	if r.code != 0 || r.stdout != "left arena\n" {
		t.Errorf("leave: %v", r)
	}
	f.want(t, "POST", "/v0/worlds/arena/leave", &b)
	// B is no longer a member: the fake cannot find its key.
	r = awn(t, b.env, "agents", "arena")
	if r.code != 1 || r.stdout != "" || r.stderr != "error: NOT_JOINED: you are not a member of this world\n" {
		t.Errorf("agents after leave: %v", r)
	}
}

// TestWorldRefusals: the error envelope is printed as "error: CODE:
// message" on stderr with exit 1, and answers outside the envelope are
// reported in words.
func TestWorldRefusals(t *testing.T) {
	t.Parallel()
	f := newFakeWorlds(t)
	f.mux.HandleFunc("GET /v0/worlds/busy", func(w http.ResponseWriter, _ *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(503)
		_, _ = io.WriteString(w, `{"message":"Service Unavailable"}`)
	})
	f.mux.HandleFunc("GET /v0/worlds/limited", func(w http.ResponseWriter, _ *http.Request) {
		w.Header().Set("Retry-After", "12")
		worldErr(w, 429, "RATE_LIMITED", "too many requests")
	})
	f.mux.HandleFunc("GET /v0/worlds/bare", func(w http.ResponseWriter, _ *http.Request) {
		_, _ = io.WriteString(w, `{"name":"no envelope"}`)
	})
	a := newAgentID(t, f.url)
	// A signing key the network does not know.
	r := awn(t, a.env, "agents", "arena")
	if r.code != 1 || r.stdout != "" || r.stderr != "error: UNAUTHORIZED: unknown key\n" {
		t.Errorf("agents by an unknown key: %v", r)
	}
	awn(t, a.env, "world", "create", "arena", "--action", "move")
	awn(t, a.env, "join", "arena")
	for _, c := range []struct {
		args   []string
		stderr string
	}{
		{[]string{"world", "show", "nowhere"}, "error: NOT_FOUND: no world named nowhere\n"},
		{[]string{"join", "nowhere"}, "error: NOT_FOUND: no world named nowhere\n"},
		{[]string{"agents", "nowhere"}, "error: NOT_JOINED: you are not a member of this world\n"},
		{[]string{"events", "nowhere", "--json"}, "error: NOT_JOINED: you are not a member of this world\n"},
		{[]string{"world", "show", "busy"}, `error: 503 Service Unavailable: {"message":"Service Unavailable"}` + "\n"},
		{[]string{"world", "show", "limited"}, "error: RATE_LIMITED: too many requests (retry after 12s)\n"},
		{[]string{"world", "show", "bare"}, `awn: the answer to GET /v0/worlds/bare is not the world envelope {"ok": true, "data": …}: {"name":"no envelope"}` + "\n"},
	} {
		r = awn(t, a.env, c.args...)
		if r.code != 1 || r.stdout != "" || r.stderr != c.stderr {
			t.Errorf("%v: %v\nwant stderr %q", c.args, r, c.stderr)
		}
	}
	// An action the manifest does not list.
	r = awn(t, a.env, "act", "arena", "fly")
	if r.code != 1 || r.stderr != "error: INVALID_REQUEST: this world has no action fly\n" {
		t.Errorf("act fly: %v", r)
	}
	// A known key that is not a member.
	stranger := newAgentID(t, f.url)
	awn(t, stranger.env, "world", "create", "elsewhere")
	r = awn(t, stranger.env, "send", "arena", a.AWNID, "hi")
	if r.code != 1 || r.stderr != "error: NOT_JOINED: you are not a member of this world\n" {
		t.Errorf("send by a stranger: %v", r)
	}
}

// TestWorldUsage: bad command lines exit 2 before any request is made.
func TestWorldUsage(t *testing.T) {
	t.Parallel()
	f := newFakeWorlds(t)
	a := newAgentID(t, f.url)
	f.requests()
	id := a.AWNID
	for _, c := range []struct {
		args []string
		want string // in stderr
	}{
		{[]string{"world"}, "world needs a subcommand"},
		{[]string{"world", "show"}, "accepts 1 arg(s)"},
		{[]string{"world", "show", "Lobby"}, `"Lobby" is not a world name`},
		{[]string{"world", "create", "-x"}, "unknown shorthand flag"},
		{[]string{"world", "create", "arena", "--action", "=flying"}, "has no name"},
		{[]string{"world", "create", "arena", "--action", "a", "--action", "a=again"}, `--action "a" is given twice`},
		{[]string{"join", "lobby", "--metadata", "[1]"}, `--metadata "[1]" must be a JSON object`},
		{[]string{"join", "lobby", "--metadata", "{"}, "is not valid JSON"},
		{[]string{"join", "-lobby"}, "unknown shorthand flag"},
		{[]string{"leave"}, "accepts 1 arg(s)"},
		{[]string{"send", "lobby", "bob", "hi"}, `"bob" is not an agent id`},
		{[]string{"send", "lobby", id}, "accepts 3 arg(s)"},
		{[]string{"send", "lobby", id + "0", "hi"}, "is not an agent id"},
		{[]string{"messages", "lobby", "--limit", "101"}, "--limit must be 1 to 100"},
		{[]string{"messages", "lobby", "--limit", "x"}, "invalid argument"},
		{[]string{"messages", "lobby", "--since", "yesterday"}, `--since "yesterday" is not an RFC 3339 time`},
		{[]string{"ping", "lobby", "aw:sha256:ABC"}, "is not an agent id"},
		{[]string{"act", "lobby", "move", "--params", `"e4"`}, "must be a JSON object"},
		{[]string{"act", "lobby", " "}, "the action must be named"},
		{[]string{"events", "lobby", "--limit", "0", "--follow"}, "--limit must be 1 to 100"},
		{[]string{"events", "lobby", "--after"}, "flag needs an argument"},
		{[]string{"agent", "set-handler", "lobby"}, "give --webhook URL to set the handler or --remove"},
		{[]string{"agent", "set-handler", "lobby", "--remove", "--webhook", "https://x.example"}, "not both"},
		{[]string{"agent", "set-handler", "lobby", "--webhook", "ftp://x.example"}, "is not an absolute http(s) URL"},
		{[]string{"webhook"}, "webhook needs a subcommand"},
		{[]string{"webhook", "serve", "--secret", "hunter2"}, "--secret is not a webhook secret"},
		{[]string{"webhook", "serve", "--params", "{}"}, "--params needs --action"},
		{[]string{"webhook", "serve", "--action", "move", "--params", "[]"}, "must be a JSON object"},
		{[]string{"webhook", "serve", "--network-key-url", "keys.json"}, "is not an absolute http(s) URL"},
	} {
		r := awn(t, a.env, c.args...)
		if r.code != 2 || r.stdout != "" || !strings.Contains(r.stderr, c.want) || !strings.Contains(r.stderr, "--help' for usage") {
			t.Errorf("%v: %v\nwant exit 2 and %q", c.args, r, c.want)
		}
	}
	if reqs := f.requests(); len(reqs) != 0 {
		t.Errorf("usage mistakes reached the server: %+v", reqs)
	}
	// Without a key, signed commands say to run init (exit 2).
	r := awn(t, withHome(t, f.url), "join", "lobby")
	if r.code != 2 || !strings.Contains(r.stderr, "run 'awn init' first") {
		t.Errorf("join without a key: %v", r)
	}
}

// TestSetHandler: set-handler PUTs the URL (signed), prints the secret once
// with the note, records the handler in the state file; --remove DELETEs
// and forgets it.
func TestSetHandler(t *testing.T) {
	t.Parallel()
	f := newFakeWorlds(t)
	a := newAgentID(t, f.url)
	awn(t, a.env, "world", "create", "lobby")
	awn(t, a.env, "join", "lobby")
	f.requests()

	r := awn(t, a.env, "agent", "set-handler", "lobby", "--webhook", "https://agent.example/hook")
	if r.code != 0 || r.stdout != "webhook for lobby: https://agent.example/hook\nsecret: whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw\n" ||
		!strings.Contains(r.stderr, "it is not shown again") {
		t.Fatalf("set-handler: %v", r)
	}
	if req := f.want(t, "PUT", "/v0/worlds/lobby/webhook", &a); rawString(t, req.Body["url"]) != "https://agent.example/hook" || len(req.Body) != 1 {
		t.Errorf("set-handler body %s", req.Body)
	}
	st := readState(t, a.env)
	if h := st.Handlers["lobby"]; h.Webhook != "https://agent.example/hook" || h.URL != f.url || h.SetAt.IsZero() {
		t.Errorf("state after set-handler: %+v", st)
	}
	r = awn(t, a.env, "--json", "agent", "set-handler", "lobby", "--webhook", "https://agent.example/other")
	var set map[string]string
	decodeStrict(t, r.stdout, &set)
	if r.code != 0 || set["secret"] == "" || set["url"] != "https://agent.example/other" {
		t.Errorf("set-handler --json: %v", r)
	}
	f.requests()

	r = awn(t, a.env, "agent", "set-handler", "lobby", "--remove")
	if r.code != 0 || r.stdout != "removed the webhook for lobby\n" {
		t.Errorf("set-handler --remove: %v", r)
	}
	f.want(t, "DELETE", "/v0/worlds/lobby/webhook", &a)
	if st := readState(t, a.env); len(st.Handlers) != 0 {
		t.Errorf("state after --remove: %+v", st)
	}
	// leave forgets a handler too.
	awn(t, a.env, "agent", "set-handler", "lobby", "--webhook", "https://agent.example/hook")
	if r := awn(t, a.env, "leave", "lobby"); r.code != 0 {
		t.Fatalf("leave: %v", r)
	}
	if st := readState(t, a.env); len(st.Handlers) != 0 {
		t.Errorf("state after leave: %+v", st)
	}
	// Not a member any more: refused, and nothing recorded.
	r = awn(t, a.env, "agent", "set-handler", "lobby", "--webhook", "https://agent.example/hook")
	if r.code != 1 || r.stderr != "error: NOT_JOINED: you are not a member of this world\n" || r.stdout != "" {
		t.Errorf("set-handler when not joined: %v", r)
	}
	if st := readState(t, a.env); len(st.Handlers) != 0 {
		t.Errorf("state after a refused set-handler: %+v", st)
	}
}

func readState(t *testing.T, env map[string]string) localState {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(env["AWN_HOME"], stateFile))
	if err != nil {
		t.Fatal(err)
	}
	var st localState
	if err := json.Unmarshal(b, &st); err != nil {
		t.Fatalf("state file: %v\n%s", err, b)
	}
	return st
}

// running is a CLI run in the background, stopped by cancelling its
// context as Ctrl-C does.
type running struct {
	stdout, stderr *capture.Buffer
	cancel         context.CancelFunc
	done           chan int
	// sleeps are the waits the command asked for, in order.
	mu     sync.Mutex
	sleeps []time.Duration
}

func start(t *testing.T, env map[string]string, args ...string) *running {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	rn := &running{stdout: &capture.Buffer{}, stderr: &capture.Buffer{}, cancel: cancel, done: make(chan int, 1)}
	a := &app{stdout: rn.stdout, stderr: rn.stderr, getenv: func(k string) string { return env[k] },
		sleep: func(ctx context.Context, d time.Duration) error {
			rn.mu.Lock()
			rn.sleeps = append(rn.sleeps, d)
			rn.mu.Unlock()
			return ctx.Err()
		}}
	go func() { rn.done <- a.run(ctx, args) }()
	t.Cleanup(func() {
		cancel()
		<-rn.done
	})
	return rn
}

// wait returns the exit code once the run ends (within a bound).
func (rn *running) wait(t *testing.T) int {
	t.Helper()
	select {
	case code := <-rn.done:
		rn.done <- code // for the cleanup
		return code
	case <-time.After(30 * time.Second):
		t.Fatalf("the command did not end; stderr:\n%s", rn.stderr.String())
		return -1
	}
}

// TestEventsFollow: --follow long-polls with wait=20, prints two batches as
// they come, keeps the cursor, waits out a 429 for its Retry-After and a
// 503 with backoff, shows that it waits on stderr, and exits 0 with no
// error line on Ctrl-C.
func TestEventsFollow(t *testing.T) {
	t.Parallel()
	for _, jsonOut := range []bool{false, true} {
		t.Run(fmt.Sprintf("json=%v", jsonOut), func(t *testing.T) {
			t.Parallel()
			f := newFakeWorlds(t)
			a := newAgentID(t, f.url)
			awn(t, a.env, "world", "create", "lobby")
			awn(t, a.env, "join", "lobby")
			polls := make(chan url.Values, 10)
			blocked := make(chan struct{})
			pub, err := auth.DecodePublicKey(a.PublicKey)
			if err != nil {
				t.Fatal(err)
			}
			var n int // polls so far; the client polls one at a time
			// The events route of the fake, scripted: batch, 429, 503,
			// batch, empty, then a poll that waits until the client goes.
			scripted := func(w http.ResponseWriter, r *http.Request) {
				if _, ok := f.verify(w, r, nil, auth.BodyKey(pub)); !ok {
					return
				}
				n++
				polls <- r.URL.Query()
				ev := func(id, typ string) map[string]any {
					return map[string]any{"eventId": id, "type": typ, "worldId": "lobby", "data": map[string]any{"n": id}, "visibility": "public", "createdAt": "2026-12-01T20:00:00Z"}
				}
				switch n {
				case 1:
					worldOK(w, 200, map[string]any{"events": []any{ev("01A", "agent.joined"), ev("01B", "action.submitted")}})
				case 2:
					w.Header().Set("Retry-After", "7")
					worldErr(w, 429, "RATE_LIMITED", "slow down")
				case 3:
					w.WriteHeader(503)
					_, _ = io.WriteString(w, `{"message":"Service Unavailable"}`)
				case 4:
					worldOK(w, 200, map[string]any{"events": []any{ev("01C", "agent.left")}})
				case 5:
					// Nothing to see, but the server moves the cursor on.
					worldOK(w, 200, map[string]any{"events": []any{}, "cursor": "01Z"})
				default:
					close(blocked)
					<-r.Context().Done()
				}
			}
			srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				if r.URL.Path == "/v0/worlds/lobby/events" {
					scripted(w, r)
					return
				}
				f.mux.ServeHTTP(w, r)
			}))
			t.Cleanup(srv.Close)
			env := map[string]string{"AWN_HOME": a.env["AWN_HOME"], "AWN_URL": srv.URL}
			args := []string{"events", "lobby", "--follow", "--after", "01"}
			if jsonOut {
				args = append(args, "--json")
			}
			rn := start(t, env, args...)
			select {
			case <-blocked:
			case <-time.After(30 * time.Second):
				t.Fatalf("the sixth poll never came; stderr:\n%s", rn.stderr.String())
			}
			rn.cancel()
			if code := rn.wait(t); code != 0 {
				t.Errorf("exit %d after Ctrl-C, want 0", code)
			}
			close(polls)
			var afters []string
			for q := range polls {
				if q.Get("wait") != "20" {
					t.Errorf("poll without wait=20: %v", q)
				}
				afters = append(afters, q.Get("after"))
			}
			if want := []string{"01", "01B", "01B", "01B", "01C", "01Z"}; !slices.Equal(afters, want) {
				t.Errorf("after cursors %v, want %v", afters, want)
			}
			rn.mu.Lock()
			sleeps := slices.Clone(rn.sleeps)
			rn.mu.Unlock()
			if !slices.Equal(sleeps, []time.Duration{7 * time.Second, 2 * time.Second}) {
				t.Errorf("waits %v, want Retry-After's 7s then the doubled backoff 2s", sleeps)
			}
			stderr := rn.stderr.String()
			if !strings.HasPrefix(stderr, "waiting for events in lobby… (Ctrl-C to stop)\n") ||
				!strings.Contains(stderr, "RATE_LIMITED: slow down; polling again in 7s") || strings.Contains(stderr, "error") {
				t.Errorf("stderr:\n%s", stderr)
			}
			lines := strings.Split(strings.TrimSuffix(rn.stdout.String(), "\n"), "\n")
			if len(lines) != 3 {
				t.Fatalf("stdout, want three events:\n%s", rn.stdout.String())
			}
			for i, id := range []string{"01A", "01B", "01C"} {
				if jsonOut {
					var e event
					decodeStrict(t, lines[i], &e)
					if e.EventID != id {
						t.Errorf("line %d: %s", i, lines[i])
					}
				} else if !strings.HasPrefix(lines[i], id+"  2026-12-01T20:00:00Z  ") {
					t.Errorf("line %d: %s", i, lines[i])
				}
			}
		})
	}
}

// TestEventsFollowRefused: a refusal other than 429/503 ends --follow with
// exit 1 and the server's code.
func TestEventsFollowRefused(t *testing.T) {
	t.Parallel()
	f := newFakeWorlds(t)
	a := newAgentID(t, f.url)
	awn(t, a.env, "world", "create", "elsewhere")
	rn := start(t, a.env, "events", "lobby", "--follow")
	if code := rn.wait(t); code != 1 || !strings.HasSuffix(rn.stderr.String(), "error: NOT_JOINED: you are not a member of this world\n") {
		t.Errorf("exit %d, stderr:\n%s", code, rn.stderr.String())
	}
	// A server that is not there is reported at once, not waited for.
	rn = start(t, withHome(t, "http://127.0.0.1:1"), "events", "lobby", "--follow")
	if code := rn.wait(t); code != 2 {
		t.Errorf("follow without a key: exit %d", code)
	}
	env := map[string]string{"AWN_HOME": a.env["AWN_HOME"], "AWN_URL": "http://127.0.0.1:1"}
	rn = start(t, env, "events", "lobby", "--follow")
	if code := rn.wait(t); code != 1 || !strings.Contains(rn.stderr.String(), "connection refused") {
		t.Errorf("follow of no server: exit %d, stderr:\n%s", code, rn.stderr.String())
	}
}

func TestRetryAfter(t *testing.T) {
	t.Parallel()
	now := time.Date(2026, 12, 1, 20, 0, 0, 0, time.UTC)
	for v, want := range map[string]time.Duration{
		"":                              0,
		"3":                             3 * time.Second,
		"-1":                            0,
		"soon":                          0,
		"Tue, 01 Dec 2026 20:00:30 GMT": 30 * time.Second,
		"Tue, 01 Dec 2026 19:00:00 GMT": 0,
	} {
		if got := retryAfter(v, now); got != want {
			t.Errorf("retryAfter(%q) = %s, want %s", v, got, want)
		}
	}
}
