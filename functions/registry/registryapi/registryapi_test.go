package registryapi_test

import (
	"bytes"
	"context"
	"crypto/ed25519"
	"encoding/base64"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/a2awire/a2awire/functions/registry/registryapi"
	"github.com/a2awire/a2awire/local/cloud"
	"github.com/a2awire/a2awire/shared/auth"
	"github.com/a2awire/a2awire/shared/lambdahttp"
	"github.com/a2awire/a2awire/shared/routes"
	"github.com/a2awire/a2awire/shared/store/memory"
)

func key(seed byte) ed25519.PrivateKey {
	return ed25519.NewKeyFromSeed(bytes.Repeat([]byte{seed}, ed25519.SeedSize))
}

func pubOf(k ed25519.PrivateKey) ed25519.PublicKey { return k.Public().(ed25519.PublicKey) }

// api is the registry's Lambda entry, called with API Gateway events built
// from HTTP requests as the gateway builds them.
type api struct {
	t     *testing.T
	entry lambdahttp.Handler
}

// testBaseURL is the public URL the tests' deployment names in its card.
const testBaseURL = "https://api.a2awire.test/"

func newAPI(t *testing.T, network ed25519.PublicKey) *api {
	t.Helper()
	st := memory.New()
	t.Cleanup(func() { _ = st.Close() })
	h, err := registryapi.New(registryapi.Options{Store: st, NetworkKey: network, AllowInsecureEndpoints: true, BaseURL: testBaseURL})
	if err != nil {
		t.Fatal(err)
	}
	return &api{t: t, entry: lambdahttp.Entry(h)}
}

type response struct {
	status int
	header http.Header
	body   []byte
}

func (r response) json(t *testing.T) map[string]any {
	t.Helper()
	var m map[string]any
	if err := json.Unmarshal(r.body, &m); err != nil {
		t.Fatalf("body %q is not a JSON object: %v", r.body, err)
	}
	return m
}

// do sends method path body, signed by k when k is not nil, with extra
// headers, through the gateway's matching and the Lambda entry.
func (a *api) do(k ed25519.PrivateKey, method, path, body string, header ...string) response {
	t := a.t
	t.Helper()
	r := httptest.NewRequest(method, "https://registry.test"+path, strings.NewReader(body))
	if body != "" {
		r.Header.Set("Content-Type", "application/json")
	}
	for i := 0; i+1 < len(header); i += 2 {
		if strings.EqualFold(header[i], "Host") {
			r.Host = header[i+1]
			continue
		}
		r.Header.Set(header[i], header[i+1])
	}
	if k != nil {
		s, err := auth.NewSigner(k)
		if err != nil {
			t.Fatal(err)
		}
		out, _ := http.NewRequest(method, "https://registry.test"+path, strings.NewReader(body))
		if err := s.Sign(out); err != nil {
			t.Fatal(err)
		}
		for name, v := range out.Header {
			r.Header[name] = v
		}
	}
	route, params, ok := routes.Match(method, r.URL.Path)
	if !ok {
		return response{status: http.StatusNotFound}
	}
	ev := cloud.BuildEvent(r, route, params, []byte(body), time.Now())
	resp, err := a.entry(context.Background(), ev)
	if err != nil {
		t.Fatal(err)
	}
	h := http.Header{}
	for k, v := range resp.Headers {
		h.Set(k, v)
	}
	for k, vs := range resp.MultiValueHeaders {
		for _, v := range vs {
			h.Add(k, v)
		}
	}
	b := []byte(resp.Body)
	if resp.IsBase64Encoded {
		b, _ = base64.StdEncoding.DecodeString(resp.Body)
	}
	return response{status: resp.StatusCode, header: h, body: b}
}

func registration(name string, k ed25519.PrivateKey, caps ...string) string {
	b, _ := json.Marshal(map[string]any{
		"name": name, "description": "test agent " + name, "endpoint": "http://127.0.0.1:9/" + name,
		"capabilities": caps, "public_key": base64.StdEncoding.EncodeToString(pubOf(k)),
	})
	return string(b)
}

func wantError(t *testing.T, r response, status int, code string) {
	t.Helper()
	if r.status != status {
		t.Errorf("status %d, want %d; body %s", r.status, status, r.body)
		return
	}
	if m := r.json(t); m["error"] != code || m["message"] == "" {
		t.Errorf("body %s, want error %q with a message", r.body, code)
	}
}

func TestRegisterUpdateAndNameTaken(t *testing.T) {
	a := newAPI(t, nil)
	alice, mallory := key(1), key(2)

	r := a.do(alice, "POST", "/api/v1/agents", registration("alice", alice, "word-count"))
	if r.status != http.StatusCreated {
		t.Fatalf("first registration: %d %s", r.status, r.body)
	}
	agent, _ := r.json(t)["agent"].(map[string]any)
	if agent["name"] != "alice" || agent["key_id"] != auth.KeyID(pubOf(alice)) || agent["awn_id"] != auth.AWNID(pubOf(alice)) ||
		agent["endpoint"] != "http://127.0.0.1:9/alice" || agent["description"] != "test agent alice" {
		t.Errorf("profile %v", agent)
	}
	for _, f := range []string{"registered_at", "updated_at"} {
		if _, err := time.Parse(time.RFC3339, agent[f].(string)); err != nil {
			t.Errorf("%s %v is not RFC 3339", f, agent[f])
		}
	}
	if s := agent["status"]; s != "online" && s != "offline" {
		t.Errorf("status %v", s)
	}

	r = a.do(alice, "POST", "/api/v1/agents", registration("alice", alice, "word-count", "ping"))
	if r.status != http.StatusOK {
		t.Fatalf("update by the owner: %d %s", r.status, r.body)
	}
	if agent, _ := r.json(t)["agent"].(map[string]any); len(agent["capabilities"].([]any)) != 2 {
		t.Errorf("update kept capabilities %v", agent["capabilities"])
	}

	wantError(t, a.do(mallory, "POST", "/api/v1/agents", registration("alice", mallory, "x")), http.StatusConflict, "name_taken")

	// The body's key must be the signing key.
	wantError(t, a.do(mallory, "POST", "/api/v1/agents", registration("bob", alice, "x")), http.StatusUnauthorized, "unauthorized")
	// Unsigned.
	wantError(t, a.do(nil, "POST", "/api/v1/agents", registration("bob", alice, "x")), http.StatusUnauthorized, "unauthorized")
	// Strict JSON: a repeated key, a bad public key.
	wantError(t, a.do(alice, "POST", "/api/v1/agents", `{"name":"bob","name":"eve"}`), http.StatusBadRequest, "invalid_input")
	wantError(t, a.do(alice, "POST", "/api/v1/agents", `{"name":"bob","public_key":"AAAA"}`), http.StatusBadRequest, "invalid_input")
	wantError(t, a.do(alice, "POST", "/api/v1/agents", strings.Replace(registration("bob", alice, "x"), "test agent", "test \xff agent", 1)),
		http.StatusBadRequest, "invalid_input")
	// Keys match case-sensitively: "Name" is not "name", so no name was given.
	wantError(t, a.do(alice, "POST", "/api/v1/agents", strings.Replace(registration("bob", alice, "x"), `"name"`, `"Name"`, 1)),
		http.StatusBadRequest, "invalid_input")
	if r := a.do(nil, "GET", "/api/v1/agents/bob", ""); r.status != http.StatusNotFound {
		t.Errorf("a refused registration left bob registered: %d %s", r.status, r.body)
	}
	// Domain validation (the name's pattern) is the registry's 400.
	wantError(t, a.do(alice, "POST", "/api/v1/agents", registration("Bad_Name", alice, "x")), http.StatusBadRequest, "invalid_input")
}

func TestProfileDiscoveryAndPresence(t *testing.T) {
	a := newAPI(t, nil)
	keys := map[string]ed25519.PrivateKey{"ann": key(1), "ben": key(2), "cat": key(3)}
	caps := map[string][]string{"ann": {"word-count"}, "ben": {"word-count", "ping"}, "cat": {"ping"}}
	for _, name := range []string{"ann", "ben", "cat"} {
		if r := a.do(keys[name], "POST", "/api/v1/agents", registration(name, keys[name], caps[name]...)); r.status != http.StatusCreated {
			t.Fatalf("register %s: %d %s", name, r.status, r.body)
		}
		if r := a.do(keys[name], "PUT", "/api/v1/agents/"+name+"/presence", `{"status":"online"}`); r.status != http.StatusOK {
			t.Fatalf("online %s: %d %s", name, r.status, r.body)
		}
	}

	r := a.do(nil, "GET", "/api/v1/agents/ben", "")
	if p := r.json(t); r.status != 200 || p["name"] != "ben" || p["status"] != "online" || p["key_id"] != auth.KeyID(pubOf(keys["ben"])) {
		t.Errorf("profile: %d %s", r.status, r.body)
	}
	wantError(t, a.do(nil, "GET", "/api/v1/agents/nobody", ""), http.StatusNotFound, "not_found")

	names := func(r response) []string {
		t.Helper()
		if r.status != 200 {
			t.Fatalf("discover: %d %s", r.status, r.body)
		}
		var out []string
		for _, x := range r.json(t)["agents"].([]any) {
			out = append(out, x.(map[string]any)["name"].(string))
		}
		return out
	}
	if got := strings.Join(names(a.do(nil, "GET", "/api/v1/agents?capability=word-count", "")), ","); got != "ann,ben" && got != "ben,ann" {
		t.Errorf("word-count providers %q, want ann and ben", got)
	}

	// Presence: the owner goes offline; discovery leaves it out unless asked.
	r = a.do(keys["ben"], "PUT", "/api/v1/agents/ben/presence", `{"status":"offline"}`)
	if agent, _ := r.json(t)["agent"].(map[string]any); r.status != 200 || agent["status"] != "offline" {
		t.Errorf("offline: %d %s", r.status, r.body)
	}
	if got := names(a.do(nil, "GET", "/api/v1/agents?capability=word-count", "")); strings.Join(got, ",") != "ann" {
		t.Errorf("online word-count providers %v, want [ann]", got)
	}
	if got := names(a.do(nil, "GET", "/api/v1/agents?capability=word-count&status=offline", "")); strings.Join(got, ",") != "ben" {
		t.Errorf("offline word-count providers %v, want [ben]", got)
	}
	if got := names(a.do(nil, "GET", "/api/v1/agents?capability=word-count&status=any", "")); len(got) != 2 {
		t.Errorf("any word-count providers %v, want two", got)
	}
	wantError(t, a.do(keys["ann"], "PUT", "/api/v1/agents/ben/presence", `{"status":"online"}`), http.StatusForbidden, "forbidden")
	wantError(t, a.do(keys["ann"], "PUT", "/api/v1/agents/nobody/presence", `{"status":"online"}`), http.StatusNotFound, "not_found")
	wantError(t, a.do(keys["ben"], "PUT", "/api/v1/agents/ben/presence", `{"status":"away"}`), http.StatusBadRequest, "invalid_input")
	wantError(t, a.do(key(9), "PUT", "/api/v1/agents/ben/presence", `{"status":"online"}`), http.StatusUnauthorized, "unauthorized")

	// Paging: one at a time through the opaque cursor, every agent once.
	var seen []string
	path := "/api/v1/agents?status=any&limit=1"
	for range 10 {
		r := a.do(nil, "GET", path, "")
		seen = append(seen, names(r)...)
		next, _ := r.json(t)["next_cursor"].(string)
		if next == "" {
			break
		}
		path = "/api/v1/agents?status=any&limit=1&cursor=" + next
	}
	if len(seen) != 3 {
		t.Errorf("paged through %v, want the three agents", seen)
	}
	for _, q := range []string{"limit=0", "limit=101", "limit=x", "status=away", "limit=1&limit=2", "cursor=not-a-cursor"} {
		wantError(t, a.do(nil, "GET", "/api/v1/agents?"+q, ""), http.StatusBadRequest, "invalid_input")
	}
}

func TestKeyDirectories(t *testing.T) {
	network := key(7)
	a := newAPI(t, pubOf(network))
	alice := key(1)
	if r := a.do(alice, "POST", "/api/v1/agents", registration("alice", alice, "x")); r.status != http.StatusCreated {
		t.Fatalf("register: %d %s", r.status, r.body)
	}
	check := func(r response, want ed25519.PublicKey) {
		t.Helper()
		if r.status != 200 || r.header.Get("Content-Type") != auth.DirectoryMediaType {
			t.Fatalf("directory: %d %q %s", r.status, r.header.Get("Content-Type"), r.body)
		}
		var d auth.Directory
		if err := json.Unmarshal(r.body, &d); err != nil || len(d.Keys) != 1 {
			t.Fatalf("directory %s: %v", r.body, err)
		}
		got, err := d.Keys[0].PublicKey()
		if err != nil || !got.Equal(want) || d.Keys[0].Kid != auth.KeyID(want) {
			t.Errorf("directory key %+v, want %x", d.Keys[0], want)
		}
	}
	check(a.do(nil, "GET", "/api/v1/keys/"+auth.KeyID(pubOf(alice)), ""), pubOf(alice))
	check(a.do(nil, "GET", "/.well-known/http-message-signatures-directory", ""), pubOf(network))
	wantError(t, a.do(nil, "GET", "/api/v1/keys/"+auth.KeyID(pubOf(key(8))), ""), http.StatusNotFound, "not_found")
	wantError(t, newAPI(t, nil).do(nil, "GET", "/.well-known/http-message-signatures-directory", ""), http.StatusNotFound, "not_found")
}

// TestNetworkKeyRegistersSeveralNames: the network key may hold several
// names (the fixtures); any other key holds one (409 key_taken).
func TestNetworkKeyRegistersSeveralNames(t *testing.T) {
	network, other := key(7), key(8)
	a := newAPI(t, pubOf(network))
	for _, name := range []string{"net-one", "net-two"} {
		if r := a.do(network, "POST", "/api/v1/agents", registration(name, network, "ping")); r.status != http.StatusCreated {
			t.Errorf("network key registers %s: %d %s", name, r.status, r.body)
		}
	}
	if r := a.do(other, "POST", "/api/v1/agents", registration("other-one", other, "ping")); r.status != http.StatusCreated {
		t.Fatalf("other key: %d %s", r.status, r.body)
	}
	wantError(t, a.do(other, "POST", "/api/v1/agents", registration("other-two", other, "ping")), http.StatusConflict, "key_taken")
}
