package main

import (
	"bytes"
	"context"
	"crypto/ed25519"
	"encoding/json"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"net/http/httputil"
	"net/url"
	"slices"
	"strings"
	"sync"
	"testing"

	"github.com/a2awire/a2awire/local/harness"
	"github.com/a2awire/a2awire/shared/fixtures/seed"
	"github.com/a2awire/a2awire/shared/registry"
	"github.com/a2awire/a2awire/shared/store/memory"
)

// network serves the whole local system as `go run ./local` does: every
// function behind the in-process API Gateway on loopback over a fresh
// memory store, then the five fixtures registered with their endpoints
// below that URL, owned by the network key (local/main.go's seedFixtures).
func network(t *testing.T) string {
	t.Helper()
	st := memory.New()
	t.Cleanup(func() { _ = st.Close() })
	h, err := harness.New(harness.Options{Log: slog.New(slog.DiscardHandler), Store: st})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = h.Close() })
	srv := httptest.NewServer(h)
	t.Cleanup(srv.Close)
	pub := h.NetworkKey().Public().(ed25519.PublicKey)
	if _, err := seed.Seed(context.Background(), seed.OverStore(st, registry.AllowInsecureEndpoints())(pub), srv.URL, pub); err != nil {
		t.Fatal(err)
	}
	return srv.URL
}

// TestRegistryEndToEnd is the must-show against the whole local
// system (the harness `go run ./local` serves, in process): awn init, awn
// register, awn discover --capability word-count, then awn invoke
// a2awire-clean by name — the fixture the harness registered at start,
// resolved through GET /api/v1/agents/{name}.
func TestRegistryEndToEnd(t *testing.T) {
	t.Parallel()
	base := network(t)
	env := withHome(t, base)

	r := awn(t, env, "--json", "init")
	if r.code != 0 {
		t.Fatalf("init: %v", r)
	}
	var id identityJSON
	decodeStrict(t, r.stdout, &id)

	// Our agent serves word-count through the clean fixture's endpoint.
	r = awn(t, env, "--json", "register", "--name", "e2e-counter", "--endpoint", base+"/agents/a2awire-clean/invoke",
		"--capability", "word-count", "--description", "counts words")
	if r.code != 0 {
		t.Fatalf("register: %v", r)
	}
	var reg struct{ Agent profile }
	decodeStrict(t, r.stdout, &reg)
	if reg.Agent.Name != "e2e-counter" || reg.Agent.KeyID != id.KeyID || reg.Agent.AWNID != id.AWNID || reg.Agent.Status != "online" {
		t.Errorf("registered profile %+v, identity %+v", reg.Agent, id)
	}
	// The key directory the Signature-Agent names serves our key.
	resp, err := http.Get(base + "/api/v1/keys/" + id.KeyID)
	if err != nil {
		t.Fatal(err)
	}
	dir, _ := io.ReadAll(resp.Body)
	_ = resp.Body.Close()
	if resp.StatusCode != 200 || !strings.Contains(string(dir), id.KeyID) {
		t.Errorf("key directory: %d %s", resp.StatusCode, dir)
	}

	r = awn(t, env, "discover", "--capability", "word-count")
	if r.code != 0 {
		t.Fatalf("discover: %v", r)
	}
	var names []string
	for _, line := range strings.Split(strings.TrimSpace(r.stdout), "\n")[1:] {
		names = append(names, strings.Fields(line)[0])
	}
	slices.Sort(names)
	if !slices.Equal(names, []string{"a2awire-clean", "e2e-counter"}) {
		t.Errorf("discover --capability word-count lists %v, want a2awire-clean and e2e-counter:\n%s", names, r.stdout)
	}

	// The must-show line as typed, in text mode.
	r = awn(t, env, "invoke", "a2awire-clean", "--task", "word-count", "--input", `{"text":"a b"}`)
	if r.code != 0 || !strings.Contains(r.stdout, `"words": 2`) || !strings.Contains(r.stdout, "agent:        a2awire-clean") {
		t.Fatalf("invoke a2awire-clean: %v", r)
	}
	for _, name := range []string{"a2awire-clean", "e2e-counter"} {
		r = awn(t, env, "--json", "invoke", name, "--task", "word-count", "--input", `{"text":"a b"}`)
		if r.code != 0 {
			t.Fatalf("invoke %s: %v", name, r)
		}
		var out struct {
			Output   map[string]any `json:"output"`
			Metadata map[string]any `json:"metadata"`
		}
		decodeStrict(t, r.stdout, &out)
		if out.Metadata["agent"] != "a2awire-clean" || out.Metadata["capability"] != "word-count" || out.Output["words"] != 2.0 {
			t.Errorf("invoke %s: %s", name, r.stdout)
		}
	}

	// conform resolves a name the same way.
	r = awn(t, env, "conform", "a2awire-clean", "--task", "word-count", "--input", `{"text":"a b"}`)
	if r.code != 0 || !strings.Contains(r.stderr, "conform: checking "+base+"/agents/a2awire-clean/invoke") {
		t.Errorf("conform by name: %v", r)
	}

	// Presence through the signed PUT: offline leaves discovery.
	if r = awn(t, env, "agent", "offline"); r.code != 0 || r.stdout != "e2e-counter is offline\n" {
		t.Fatalf("offline: %v", r)
	}
	r = awn(t, env, "--json", "discover", "--capability", "word-count")
	if r.code != 0 || strings.Contains(r.stdout, "e2e-counter") || !strings.Contains(r.stdout, "a2awire-clean") {
		t.Errorf("discover after offline: %v", r)
	}
	r = awn(t, env, "--json", "agent", "status")
	var st struct {
		Agent profile     `json:"agent"`
		Local *localAgent `json:"local"`
	}
	decodeStrict(t, r.stdout, &st)
	if r.code != 0 || st.Agent.Status != "offline" || st.Local == nil || st.Local.Status != "offline" {
		t.Errorf("agent status: %v", r)
	}
	if r = awn(t, env, "agent", "online"); r.code != 0 {
		t.Fatalf("online: %v", r)
	}

	// Another key cannot take the name: the server's message, exit 1.
	other := withHome(t, base)
	awn(t, other, "init")
	r = awn(t, other, "register", "--name", "e2e-counter", "--endpoint", base+"/x", "--capability", "c")
	if r.code != 1 || r.stdout != "" || !strings.HasPrefix(r.stderr, "error: name_taken: ") {
		t.Errorf("name taken: %v", r)
	}
	// Nor set its presence.
	r = awn(t, other, "agent", "offline", "--name", "e2e-counter")
	if r.code != 1 || r.stdout != "" || !strings.HasPrefix(r.stderr, "error: ") {
		t.Errorf("presence by another key: %v", r)
	}
}

// capture is one request as a recording proxy saw it.
type capture struct {
	method, path string
	header       http.Header
	body         []byte
}

// TestSignedRequestReplayRefused: the network verifies what awn signs — the
// register passing through a recording proxy succeeds — and the same bytes
// sent again are refused (401 unauthorized, the nonce already used).
func TestSignedRequestReplayRefused(t *testing.T) {
	t.Parallel()
	base := network(t)
	target, _ := url.Parse(base)
	var (
		mu   sync.Mutex
		seen []capture
	)
	rp := httputil.NewSingleHostReverseProxy(target)
	proxy := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		b, _ := io.ReadAll(r.Body)
		mu.Lock()
		seen = append(seen, capture{r.Method, r.URL.RequestURI(), r.Header.Clone(), b})
		mu.Unlock()
		r.Body = io.NopCloser(bytes.NewReader(b))
		rp.ServeHTTP(w, r)
	}))
	t.Cleanup(proxy.Close)

	env := withHome(t, proxy.URL)
	awn(t, env, "init")
	r := awn(t, env, "register", "--name", "replayed", "--endpoint", base+"/agents/a2awire-clean/invoke", "--capability", "word-count")
	if r.code != 0 {
		t.Fatalf("register through the proxy: %v", r)
	}
	mu.Lock()
	c := seen[len(seen)-1]
	mu.Unlock()
	if c.method != http.MethodPost || c.header.Get("Signature") == "" {
		t.Fatalf("captured %s %s without a signature", c.method, c.path)
	}
	// The same request, to the same authority it was signed for.
	req, _ := http.NewRequest(c.method, base+c.path, bytes.NewReader(c.body))
	req.Header = c.header.Clone()
	req.Host = strings.TrimPrefix(proxy.URL, "http://")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var e struct{ Error, Message string }
	_ = json.NewDecoder(resp.Body).Decode(&e)
	if resp.StatusCode != http.StatusUnauthorized || e.Error != "unauthorized" || !strings.Contains(e.Message, "nonce") {
		t.Errorf("replay: %d %+v, want 401 unauthorized naming the nonce", resp.StatusCode, e)
	}
}
