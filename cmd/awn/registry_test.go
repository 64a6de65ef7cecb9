package main

import (
	"crypto/ed25519"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/a2awire/a2awire/shared/auth"
	"github.com/a2awire/a2awire/shared/store/memory"
)

// fakeRegistry is the registry surface (/api/v1/agents) in memory, verifying
// every signed request with the real verifier (and its nonce guard), so the
// CLI's signatures are checked as the network checks them.
type fakeRegistry struct {
	t   *testing.T
	url string
	v   *auth.Verifier

	mu     sync.Mutex
	agents []fakeAgent // registration order: the listing order
	// agentHeaders holds the Signature-Agent header of each signed request.
	agentHeaders []string
	// pageSizes holds the limit of each listing request.
	pageSizes []int
}

type fakeAgent struct {
	profile
	pub ed25519.PublicKey
}

func newFakeRegistry(t *testing.T) *fakeRegistry {
	st := memory.New()
	t.Cleanup(func() { _ = st.Close() })
	f := &fakeRegistry{t: t, v: auth.NewVerifier(auth.NewNonces(st), time.Now)}
	mux := http.NewServeMux()
	mux.HandleFunc("POST /api/v1/agents", f.register)
	mux.HandleFunc("GET /api/v1/agents", f.list)
	mux.HandleFunc("GET /api/v1/agents/{name}", f.get)
	mux.HandleFunc("PUT /api/v1/agents/{name}/presence", f.presence)
	srv := httptest.NewServer(mux)
	t.Cleanup(srv.Close)
	f.url = srv.URL
	return f
}

func writeErr(w http.ResponseWriter, status int, code, msg string) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	_ = json.NewEncoder(w).Encode(map[string]string{"error": code, "message": msg})
}

func writeDoc(w http.ResponseWriter, status int, v any) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	_ = json.NewEncoder(w).Encode(v)
}

// verify checks r's signature with keys, answering 401 when it fails.
func (f *fakeRegistry) verify(w http.ResponseWriter, r *http.Request, body []byte, keys auth.KeyLookup) bool {
	if _, err := f.v.Verify(r.Context(), r, body, keys); err != nil {
		var ae *auth.Error
		errors.As(err, &ae)
		writeErr(w, http.StatusUnauthorized, "unauthorized", ae.Message)
		return false
	}
	f.mu.Lock()
	f.agentHeaders = append(f.agentHeaders, r.Header.Get("Signature-Agent"))
	f.mu.Unlock()
	return true
}

func (f *fakeRegistry) register(w http.ResponseWriter, r *http.Request) {
	body, _ := io.ReadAll(r.Body)
	var req struct {
		Name         string   `json:"name"`
		Description  string   `json:"description"`
		Endpoint     string   `json:"endpoint"`
		Capabilities []string `json:"capabilities"`
		PublicKey    string   `json:"public_key"`
	}
	if err := json.Unmarshal(body, &req); err != nil {
		writeErr(w, 400, "invalid_request", "body is not JSON")
		return
	}
	pub, err := auth.DecodePublicKey(req.PublicKey)
	if err != nil {
		writeErr(w, 400, "invalid_request", "public_key: "+err.Error())
		return
	}
	if !f.verify(w, r, body, auth.BodyKey(pub)) {
		return
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	now := time.Now().UTC().Format(time.RFC3339)
	p := profile{Name: req.Name, Description: req.Description, Endpoint: req.Endpoint, Capabilities: req.Capabilities,
		AWNID: auth.AWNID(pub), KeyID: auth.KeyID(pub), Status: "online", RegisteredAt: now, UpdatedAt: now}
	for i, a := range f.agents {
		if a.Name == req.Name {
			if !a.pub.Equal(pub) {
				writeErr(w, http.StatusConflict, "name_taken", "the name "+req.Name+" is registered to another key")
				return
			}
			p.RegisteredAt, p.Status = a.RegisteredAt, a.Status
			f.agents[i].profile = p
			writeDoc(w, 200, map[string]any{"agent": p})
			return
		}
	}
	f.agents = append(f.agents, fakeAgent{profile: p, pub: pub})
	writeDoc(w, 201, map[string]any{"agent": p})
}

func (f *fakeRegistry) list(w http.ResponseWriter, r *http.Request) {
	q := r.URL.Query()
	limit, err := strconv.Atoi(q.Get("limit"))
	if err != nil || limit < 1 || limit > 100 {
		writeErr(w, 400, "invalid_request", "limit must be 1 to 100")
		return
	}
	start := 0
	if c := q.Get("cursor"); c != "" {
		if start, err = strconv.Atoi(c); err != nil {
			writeErr(w, 400, "invalid_cursor", "bad cursor")
			return
		}
	}
	status := q.Get("status")
	if status == "" {
		status = "online"
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	f.pageSizes = append(f.pageSizes, limit)
	var match []profile
	for _, a := range f.agents {
		if (q.Get("capability") == "" || slices.Contains(a.Capabilities, q.Get("capability"))) && (status == "any" || a.Status == status) {
			match = append(match, a.profile)
		}
	}
	page := match[min(start, len(match)):min(start+limit, len(match))]
	doc := map[string]any{"agents": page, "next_cursor": nil}
	if start+limit < len(match) {
		doc["next_cursor"] = strconv.Itoa(start + limit)
	}
	writeDoc(w, 200, doc)
}

func (f *fakeRegistry) find(name string) (int, bool) {
	for i, a := range f.agents {
		if a.Name == name {
			return i, true
		}
	}
	return 0, false
}

func (f *fakeRegistry) get(w http.ResponseWriter, r *http.Request) {
	f.mu.Lock()
	defer f.mu.Unlock()
	i, ok := f.find(r.PathValue("name"))
	if !ok {
		writeErr(w, 404, "not_found", "no agent named "+r.PathValue("name"))
		return
	}
	writeDoc(w, 200, f.agents[i].profile)
}

func (f *fakeRegistry) presence(w http.ResponseWriter, r *http.Request) {
	body, _ := io.ReadAll(r.Body)
	f.mu.Lock()
	i, ok := f.find(r.PathValue("name"))
	var pub ed25519.PublicKey
	if ok {
		pub = f.agents[i].pub
	}
	f.mu.Unlock()
	if !ok {
		writeErr(w, 404, "not_found", "no agent named "+r.PathValue("name"))
		return
	}
	// The key of the registration: a request signed by another key fails
	// the signature check, as the owner rule requires.
	if !f.verify(w, r, body, auth.BodyKey(pub)) {
		return
	}
	var req struct {
		Status string `json:"status"`
	}
	if json.Unmarshal(body, &req) != nil || (req.Status != "online" && req.Status != "offline") {
		writeErr(w, 400, "invalid_request", "status must be online or offline")
		return
	}
	f.mu.Lock()
	f.agents[i].Status = req.Status
	p := f.agents[i].profile
	f.mu.Unlock()
	writeDoc(w, 200, map[string]any{"agent": p})
}

// withHome is an environment with a fresh AWN_HOME and AWN_URL.
func withHome(t *testing.T, url string) map[string]string {
	return map[string]string{"AWN_HOME": filepath.Join(t.TempDir(), "awn"), "AWN_URL": url}
}

// TestInitKeyFile: init writes a 0600 key in a 0700 directory, prints the
// identity whoami prints, and refuses to replace it without --force.
func TestInitKeyFile(t *testing.T) {
	t.Parallel()
	env := withHome(t, "http://127.0.0.1:1")
	r := awn(t, env, "--json", "init")
	if r.code != 0 {
		t.Fatalf("%v", r)
	}
	var id identityJSON
	decodeStrict(t, r.stdout, &id)
	path := filepath.Join(env["AWN_HOME"], keyFile)
	if id.KeyFile != path || !strings.HasPrefix(id.AWNID, auth.AWNIDPrefix) || len(id.KeyID) != 43 {
		t.Errorf("identity %+v", id)
	}
	for p, want := range map[string]os.FileMode{path: 0o600, env["AWN_HOME"]: 0o700 | os.ModeDir} {
		fi, err := os.Stat(p)
		if err != nil {
			t.Fatal(err)
		}
		if fi.Mode() != want {
			t.Errorf("%s: mode %v, want %v", p, fi.Mode(), want)
		}
	}
	entries, _ := os.ReadDir(env["AWN_HOME"])
	if len(entries) != 1 {
		t.Errorf("AWN_HOME holds %d entries, want only the key (no temporary file left)", len(entries))
	}
	before, _ := os.ReadFile(path)

	r = awn(t, env, "init")
	if r.code != 2 || r.stdout != "" || !strings.Contains(r.stderr, "already holds a key; pass --force") {
		t.Errorf("second init: %v", r)
	}
	if after, _ := os.ReadFile(path); string(after) != string(before) {
		t.Error("init without --force changed the key")
	}

	r = awn(t, env, "--json", "whoami")
	var who identityJSON
	decodeStrict(t, r.stdout, &who)
	if r.code != 0 || who.AWNID != id.AWNID || who.KeyID != id.KeyID || who.PublicKey != id.PublicKey || who.KeyFile != "" {
		t.Errorf("whoami %+v after init %+v (%v)", who, id, r)
	}
	r = awn(t, env, "whoami")
	if r.code != 0 || r.stdout != "awnId:  "+id.AWNID+"\nkeyId:  "+id.KeyID+"\n" {
		t.Errorf("whoami text: %q", r.stdout)
	}

	r = awn(t, env, "--json", "init", "--force")
	var again identityJSON
	decodeStrict(t, r.stdout, &again)
	if r.code != 0 || again.KeyID == id.KeyID {
		t.Errorf("init --force did not replace the key: %v", r)
	}
	if fi, err := os.Stat(path); err != nil || fi.Mode() != 0o600 {
		t.Errorf("after --force: %v %v", fi.Mode(), err)
	}
}

// TestInitConcurrent: of many inits racing on one AWN_HOME exactly one
// wins; the key on disk is the winner's.
func TestInitConcurrent(t *testing.T) {
	t.Parallel()
	env := withHome(t, "http://127.0.0.1:1")
	const n = 8
	results := make([]result, n)
	var wg sync.WaitGroup
	for i := range n {
		wg.Go(func() { results[i] = awn(t, env, "--json", "init") })
	}
	wg.Wait()
	var winners []identityJSON
	for _, r := range results {
		if r.code == 0 {
			var id identityJSON
			decodeStrict(t, r.stdout, &id)
			winners = append(winners, id)
		} else if r.code != 2 {
			t.Errorf("%v", r)
		}
	}
	if len(winners) != 1 {
		t.Fatalf("%d inits succeeded, want 1", len(winners))
	}
	r := awn(t, env, "--json", "whoami")
	if !strings.Contains(r.stdout, winners[0].KeyID) {
		t.Errorf("key on disk is not the winner's: %v", r)
	}
}

// TestNoKey: commands needing the key say to run awn init.
func TestNoKey(t *testing.T) {
	t.Parallel()
	f := newFakeRegistry(t)
	env := withHome(t, f.url)
	for _, args := range [][]string{
		{"whoami"},
		{"register", "--name", "ab", "--endpoint", "http://x.example/i", "--capability", "c"},
		{"agent", "online", "--name", "ab"},
	} {
		r := awn(t, env, args...)
		if r.code != 2 || !strings.Contains(r.stderr, "run 'awn init' first") {
			t.Errorf("%q: %v", args, r)
		}
	}
	r := awn(t, map[string]string{}, "whoami")
	if r.code != 2 || !strings.Contains(r.stderr, "neither AWN_HOME nor HOME is set") {
		t.Errorf("no home: %v", r)
	}
}

// TestRegistryFlow drives register, discover (paged), agent status and
// presence against the fake, whose verifier checks every signature.
func TestRegistryFlow(t *testing.T) {
	t.Parallel()
	f := newFakeRegistry(t)
	env := withHome(t, f.url)
	if r := awn(t, env, "init"); r.code != 0 {
		t.Fatalf("%v", r)
	}
	who := awn(t, env, "--json", "whoami")
	var id identityJSON
	decodeStrict(t, who.stdout, &id)

	r := awn(t, env, "register", "--name", "counter-1", "--endpoint", "http://127.0.0.1:9/invoke",
		"--capability", "word-count", "--capability", "ping", "--description", "counts")
	if r.code != 0 || !strings.HasPrefix(r.stdout, "registered counter-1\n") || !strings.Contains(r.stdout, "key_id:         "+id.KeyID) {
		t.Fatalf("%v", r)
	}
	r = awn(t, env, "--json", "register", "--name", "counter-1", "--endpoint", "http://127.0.0.1:9/v2", "--capability", "word-count")
	var reg struct{ Agent profile }
	decodeStrict(t, r.stdout, &reg)
	if r.code != 0 || reg.Agent.Endpoint != "http://127.0.0.1:9/v2" || reg.Agent.AWNID != id.AWNID {
		t.Fatalf("update: %v", r)
	}
	f.mu.Lock()
	for _, h := range f.agentHeaders {
		if want := `sig1="` + f.url + "/api/v1/keys/" + id.KeyID + `"`; h != want {
			t.Errorf("Signature-Agent %q, want %q", h, want)
		}
	}
	f.mu.Unlock()

	// Another key cannot take the name: the server's words, exit 1.
	other := withHome(t, f.url)
	awn(t, other, "init")
	r = awn(t, other, "register", "--name", "counter-1", "--endpoint", "http://127.0.0.1:9/x", "--capability", "c")
	if r.code != 1 || r.stdout != "" || r.stderr != "error: name_taken: the name counter-1 is registered to another key\n" {
		t.Errorf("name taken: %v", r)
	}
	// More agents for paging: 250 with word-count, from the second key.
	for i := range 250 {
		n := "bulk-" + strconv.Itoa(i)
		if r := awn(t, other, "register", "--name", n, "--endpoint", "http://127.0.0.1:9/"+n, "--capability", "word-count"); r.code != 0 {
			t.Fatalf("%v", r)
		}
	}
	f.mu.Lock()
	f.pageSizes = nil
	f.mu.Unlock()
	r = awn(t, env, "--json", "discover", "--capability", "word-count")
	var all struct {
		Agents     []profile `json:"agents"`
		NextCursor *string   `json:"next_cursor"`
	}
	decodeStrict(t, r.stdout, &all)
	if r.code != 0 || len(all.Agents) != 251 || all.NextCursor != nil || all.Agents[0].Name != "counter-1" || all.Agents[250].Name != "bulk-249" {
		t.Fatalf("discover all: %d agents, cursor %v: %s", len(all.Agents), all.NextCursor, r.stderr)
	}
	f.mu.Lock()
	if !slices.Equal(f.pageSizes, []int{100, 100, 100}) {
		t.Errorf("page sizes %v", f.pageSizes)
	}
	f.pageSizes = nil
	f.mu.Unlock()
	r = awn(t, env, "--json", "discover", "--capability", "word-count", "--limit", "150")
	decodeStrict(t, r.stdout, &all)
	if r.code != 0 || len(all.Agents) != 150 || all.NextCursor == nil {
		t.Errorf("discover --limit 150: %d agents, cursor %v", len(all.Agents), all.NextCursor)
	}
	f.mu.Lock()
	if !slices.Equal(f.pageSizes, []int{100, 50}) {
		t.Errorf("page sizes with --limit 150: %v", f.pageSizes)
	}
	f.mu.Unlock()
	r = awn(t, env, "discover", "--capability", "ping")
	if r.code != 0 || r.stdout != "no agents found\n" {
		t.Errorf("the update dropped ping, yet: %v", r)
	}
	r = awn(t, env, "discover", "--capability", "word-count", "--limit", "1")
	if r.code != 0 || r.stdout != "NAME       STATUS  CAPABILITIES  ENDPOINT\ncounter-1  online  word-count    http://127.0.0.1:9/v2\n" ||
		!strings.Contains(r.stderr, "more agents than --limit 1") {
		t.Errorf("discover table: %v", r)
	}

	// Presence: the name defaults to the one last registered from this home.
	r = awn(t, env, "agent", "offline")
	if r.code != 0 || r.stdout != "counter-1 is offline\n" {
		t.Fatalf("offline: %v", r)
	}
	r = awn(t, env, "--json", "discover", "--capability", "word-count", "--status", "offline")
	decodeStrict(t, r.stdout, &all)
	if len(all.Agents) != 1 || all.Agents[0].Name != "counter-1" {
		t.Errorf("offline discovery: %+v", all.Agents)
	}
	r = awn(t, env, "--json", "agent", "status")
	var st struct {
		Agent  profile           `json:"agent"`
		Local  *localAgent       `json:"local"`
		AWNID  *string           `json:"awnId"`
		Worlds []json.RawMessage `json:"worlds"`
	}
	decodeStrict(t, r.stdout, &st)
	if r.code != 0 || st.Agent.Status != "offline" || st.Local == nil || st.Local.Status != "offline" || st.Local.URL != f.url {
		t.Errorf("agent status: %v", r)
	}
	r = awn(t, env, "agent", "status", "bulk-3")
	if r.code != 0 || !strings.Contains(r.stdout, "endpoint:       http://127.0.0.1:9/bulk-3") || !strings.Contains(r.stdout, "local:          not registered from this AWN_HOME") {
		t.Errorf("agent status bulk-3: %v", r)
	}
	// Only the owner sets presence: the verifier refuses another key.
	r = awn(t, env, "agent", "online", "--name", "bulk-3")
	if r.code != 1 || !strings.HasPrefix(r.stderr, "error: unauthorized: ") {
		t.Errorf("presence of another's agent: %v", r)
	}
	if r := awn(t, env, "agent", "online"); r.code != 0 {
		t.Fatalf("%v", r)
	}
	r = awn(t, env, "agent", "status")
	if r.code != 0 || !strings.Contains(r.stdout, "status:         online") || !strings.Contains(r.stdout, "local:          online since ") {
		t.Errorf("agent status after online: %v", r)
	}
	b, err := os.ReadFile(filepath.Join(env["AWN_HOME"], stateFile))
	if fi, _ := os.Stat(filepath.Join(env["AWN_HOME"], stateFile)); err != nil || fi.Mode() != 0o600 || !json.Valid(b) {
		t.Errorf("state file: %v %s", err, b)
	}
	r = awn(t, env, "agent", "status", "nobody")
	if r.code != 1 || r.stderr != "error: not_found: no agent named nobody\n" {
		t.Errorf("unknown agent: %v", r)
	}
}

// TestInvokeResolvesName: a bare name is looked up in the registry and
// invoked at its endpoint; an unknown name is the server's not_found.
func TestInvokeResolvesName(t *testing.T) {
	t.Parallel()
	base := gateway(t)
	f := newFakeRegistry(t)
	env := withHome(t, f.url)
	awn(t, env, "init")
	if r := awn(t, env, "register", "--name", "punctual", "--endpoint", punctualURL(base), "--capability", "ping"); r.code != 0 {
		t.Fatalf("%v", r)
	}
	r := awn(t, env, "invoke", "punctual", "--task", "ping")
	if r.code != 0 || !strings.Contains(r.stdout, `"pong": true`) {
		t.Errorf("%v", r)
	}
	r = awn(t, env, "invoke", "nobody", "--task", "ping")
	if r.code != 1 || r.stdout != "" || r.stderr != "error: not_found: no agent named nobody\n" {
		t.Errorf("%v", r)
	}
	// A usage mistake asks no server, so it is exit 2 even with a name.
	r = awn(t, env, "invoke", "nobody", "--task", "ping", "--input", "[]")
	if r.code != 2 {
		t.Errorf("%v", r)
	}
}

// TestRegistryUsage: every mistake names its flag, exits 2, asks no server.
func TestRegistryUsage(t *testing.T) {
	t.Parallel()
	env := withHome(t, "http://127.0.0.1:1")
	awn(t, env, "init")
	reg := func(extra ...string) []string {
		return append([]string{"register", "--name", "ab", "--endpoint", "http://x.example/i", "--capability", "c"}, extra...)
	}
	tests := []struct {
		args   []string
		stderr string
	}{
		{[]string{"register", "--endpoint", "http://x/i", "--capability", "c"}, `required flag(s) "name" not set`},
		{[]string{"register", "--name", "ab", "--endpoint", "http://x/i"}, `required flag(s) "capability" not set`},
		{reg("--name", "Bad Name"), `--name "Bad Name" is not an agent name`},
		{reg("--endpoint", "x.example/i"), `--endpoint "x.example/i" is not an absolute http(s) URL`},
		{reg("--capability", " "), "--capability must name a capability"},
		{[]string{"discover", "--status", "asleep"}, `--status must be online, offline or any, not "asleep"`},
		{[]string{"discover", "--limit", "-1"}, "--limit must be positive"},
		{[]string{"discover", "--capability", ""}, "--capability must name a capability"},
		{[]string{"agent"}, "agent needs a subcommand"},
		{[]string{"agent", "status", "X"}, `"X" is not an agent name`},
		{[]string{"agent", "online"}, "no agent registered from this AWN_HOME; pass --name"},
		{[]string{"agent", "offline", "--name", "X"}, `"X" is not an agent name`},
		{[]string{"whoami", "extra"}, "unknown command"},
		{[]string{"init", "x"}, "unknown command"},
	}
	for _, tc := range tests {
		r := awn(t, env, tc.args...)
		if r.code != 2 || r.stdout != "" || !strings.Contains(r.stderr, tc.stderr) {
			t.Errorf("awn %q: want exit 2 and %q; got %v", tc.args, tc.stderr, r)
		}
	}
}

// TestRegistryUnreachable: a network error is exit 1 naming the URL.
func TestRegistryUnreachable(t *testing.T) {
	t.Parallel()
	closed := httptest.NewServer(http.NotFoundHandler())
	closed.Close()
	env := withHome(t, closed.URL)
	r := awn(t, env, "discover")
	if r.code != 1 || !strings.Contains(r.stderr, closed.URL+"/api/v1/agents") {
		t.Errorf("%v", r)
	}
}
