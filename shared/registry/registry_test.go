package registry_test

import (
	"context"
	"crypto/ed25519"
	"errors"
	"fmt"
	"os"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/a2awire/a2awire/shared/apierror"
	"github.com/a2awire/a2awire/shared/auth"
	"github.com/a2awire/a2awire/shared/registry"
	"github.com/a2awire/a2awire/shared/store"
	"github.com/a2awire/a2awire/shared/store/dynamo/dynamolocal"
	"github.com/a2awire/a2awire/shared/store/memory"
	"github.com/a2awire/a2awire/shared/store/storetest/stores"
)

// local is the DynamoDB Local server of this package's tests.
var local *dynamolocal.Server

func TestMain(m *testing.M) {
	os.Exit(dynamolocal.Main(m, func(s *dynamolocal.Server) { local = s }))
}

// key returns a deterministic Ed25519 public key numbered n.
func key(n int) ed25519.PublicKey {
	seed := make([]byte, ed25519.SeedSize)
	copy(seed, fmt.Sprintf("registry-test-key-%d", n))
	return ed25519.NewKeyFromSeed(seed).Public().(ed25519.PublicKey)
}

func agent(name string, k int, caps ...string) registry.Agent {
	return registry.Agent{Name: name, Description: "test agent " + name, Endpoint: "https://" + name + ".example/invoke",
		Capabilities: caps, PublicKey: key(k)}
}

var t0 = time.Date(2026, 12, 1, 7, 0, 0, 0, time.UTC)

// clock is a settable clock.
type clock struct {
	mu  sync.Mutex
	now time.Time
}

func (c *clock) Now() time.Time { c.mu.Lock(); defer c.mu.Unlock(); return c.now }
func (c *clock) Advance(d time.Duration) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.now = c.now.Add(d)
}

func wantKind(t *testing.T, err error, kind apierror.Kind, code string) *apierror.Error {
	t.Helper()
	if err == nil {
		t.Fatalf("no error, want %v", kind)
	}
	e := apierror.From(err)
	if e.Kind != kind || (code != "" && e.RegistryCode() != code) {
		t.Fatalf("error %v (kind %v code %q), want kind %v code %q", err, e.Kind, e.RegistryCode(), kind, code)
	}
	return e
}

func names(as []registry.Agent) []string {
	out := make([]string, len(as))
	for i, a := range as {
		out[i] = a.Name
	}
	return out
}

// everyEngine runs f on memory, bolt and DynamoDB Local.
func everyEngine(t *testing.T, f func(t *testing.T, st store.Store)) {
	for _, e := range stores.All(local) {
		t.Run(e.Name, func(t *testing.T) { f(t, e.Open(t)) })
	}
}

func TestValidation(t *testing.T) {
	ctx := context.Background()
	r := registry.New(memory.New())
	long := strings.Repeat("a", 64)
	manyCaps := make([]string, 33)
	for i := range manyCaps {
		manyCaps[i] = fmt.Sprintf("c%d", i)
	}
	cases := []struct {
		name   string
		change func(a *registry.Agent)
		word   string
	}{
		{"one-char name", func(a *registry.Agent) { a.Name = "a" }, "name"},
		{"64-char name", func(a *registry.Agent) { a.Name = long }, "name"},
		{"upper-case name", func(a *registry.Agent) { a.Name = "Agent" }, "name"},
		{"name starting with -", func(a *registry.Agent) { a.Name = "-agent" }, "name"},
		{"name with #", func(a *registry.Agent) { a.Name = "a#b" }, "name"},
		{"http endpoint", func(a *registry.Agent) { a.Endpoint = "http://x.example/invoke" }, "endpoint"},
		{"relative endpoint", func(a *registry.Agent) { a.Endpoint = "/invoke" }, "endpoint"},
		{"ftp endpoint", func(a *registry.Agent) { a.Endpoint = "ftp://x.example/" }, "endpoint"},
		{"endpoint without host", func(a *registry.Agent) { a.Endpoint = "https:///x" }, "endpoint"},
		{"endpoint with userinfo", func(a *registry.Agent) { a.Endpoint = "https://u:p@x.example/" }, "endpoint"},
		{"endpoint over 2048", func(a *registry.Agent) { a.Endpoint = "https://x.example/" + strings.Repeat("a", 2048) }, "endpoint"},
		{"no capabilities", func(a *registry.Agent) { a.Capabilities = nil }, "capabilities"},
		{"33 capabilities", func(a *registry.Agent) { a.Capabilities = manyCaps }, "capabilities"},
		{"duplicate capability", func(a *registry.Agent) { a.Capabilities = []string{"x", "y", "x"} }, "distinct"},
		{"bad capability", func(a *registry.Agent) { a.Capabilities = []string{"Word_Count"} }, "capability"},
		{"65-char capability", func(a *registry.Agent) { a.Capabilities = []string{long + "b"} }, "capability"},
		{"1025-char description", func(a *registry.Agent) { a.Description = strings.Repeat("é", 1025) }, "description"},
		{"invalid UTF-8 description", func(a *registry.Agent) { a.Description = "\xff" }, "description"},
		{"31-byte key", func(a *registry.Agent) { a.PublicKey = a.PublicKey[:31] }, "public key"},
		{"no key", func(a *registry.Agent) { a.PublicKey = nil }, "public key"},
	}
	for _, c := range cases {
		a := agent("valid-agent", 1, "word-count")
		c.change(&a)
		_, _, err := r.Register(ctx, a)
		e := wantKind(t, err, apierror.Invalid, "")
		if !strings.Contains(e.Message, c.word) {
			t.Errorf("%s: message %q does not name %q", c.name, e.Message, c.word)
		}
		if strings.Contains(e.Message, strings.Repeat("a", 100)) {
			t.Errorf("%s: message echoes the whole value", c.name)
		}
	}
	// Limits that just fit are accepted.
	ok := agent("ab", 2, manyCaps[:32]...)
	ok.Description = strings.Repeat("é", 1024)
	ok.Endpoint = "https://x.example/" + strings.Repeat("a", 2048-len("https://x.example/"))
	if _, _, err := r.Register(ctx, ok); err != nil {
		t.Fatalf("register at the limits: %v", err)
	}
	if _, _, err := r.Register(ctx, agent(long[:63], 3, long)); err != nil {
		t.Fatalf("63-char name, 64-char capability: %v", err)
	}
	// http:// only with AllowInsecureEndpoints.
	insecure := registry.New(memory.New(), registry.AllowInsecureEndpoints())
	a := agent("local-agent", 4, "x")
	a.Endpoint = "http://127.0.0.1:8080/agents/local-agent/invoke"
	if _, _, err := insecure.Register(ctx, a); err != nil {
		t.Fatalf("http endpoint with AllowInsecureEndpoints: %v", err)
	}
	a.Endpoint = "ftp://127.0.0.1/"
	_, _, err := insecure.Register(ctx, a)
	wantKind(t, err, apierror.Invalid, "")
}

func TestRegisterAndUpdate(t *testing.T) {
	everyEngine(t, func(t *testing.T, st store.Store) {
		ctx := context.Background()
		c := &clock{now: t0}
		r := registry.New(st, registry.WithClock(c.Now))
		a, created, err := r.Register(ctx, agent("alpha", 1, "word-count", "ping"))
		if err != nil || !created {
			t.Fatalf("first registration: created=%v err=%v", created, err)
		}
		if a.Status != registry.Online || a.KeyID != auth.KeyID(key(1)) || a.AWNID != auth.AWNID(key(1)) ||
			!a.RegisteredAt.Equal(t0) || !a.UpdatedAt.Equal(t0) {
			t.Fatalf("registered %+v", a)
		}
		got, err := r.Get(ctx, "alpha")
		if err != nil {
			t.Fatal(err)
		}
		if got.Name != "alpha" || got.Description != a.Description || got.Endpoint != a.Endpoint ||
			!slices.Equal(got.Capabilities, []string{"word-count", "ping"}) || !got.PublicKey.Equal(key(1)) ||
			got.KeyID != a.KeyID || got.AWNID != a.AWNID || got.Status != registry.Online ||
			!got.RegisteredAt.Equal(t0) || !got.UpdatedAt.Equal(t0) {
			t.Fatalf("Get = %+v, want %+v", got, a)
		}

		// The owner updates: ping is dropped, translation added.
		c.Advance(time.Minute)
		upd := agent("alpha", 1, "word-count", "translation")
		upd.Endpoint = "https://alpha.example/v2"
		a2, created, err := r.Register(ctx, upd)
		if err != nil || created {
			t.Fatalf("owner update: created=%v err=%v", created, err)
		}
		if !a2.RegisteredAt.Equal(t0) || !a2.UpdatedAt.Equal(t0.Add(time.Minute)) || a2.Endpoint != upd.Endpoint {
			t.Fatalf("updated %+v", a2)
		}
		for capability, want := range map[string][]string{"ping": {}, "word-count": {"alpha"}, "translation": {"alpha"}} {
			p, err := r.Discover(ctx, registry.Filter{Capability: capability})
			if err != nil {
				t.Fatal(err)
			}
			if !slices.Equal(names(p.Agents), want) {
				t.Errorf("after update, capability %s lists %v, want %v", capability, names(p.Agents), want)
			}
			if len(p.Agents) == 1 && p.Agents[0].Endpoint != upd.Endpoint {
				t.Errorf("capability %s lists a stale profile: %+v", capability, p.Agents[0])
			}
		}

		// Another key: the name is taken; nothing changes.
		_, _, err = r.Register(ctx, agent("alpha", 2, "evil"))
		wantKind(t, err, apierror.Conflict, "name_taken")
		if g, _ := r.Get(ctx, "alpha"); !g.PublicKey.Equal(key(1)) || g.Endpoint != upd.Endpoint {
			t.Fatalf("name_taken changed the profile: %+v", g)
		}
		// The same key under a second name: one key is one agent.
		_, _, err = r.Register(ctx, agent("alpha-two", 1, "x"))
		wantKind(t, err, apierror.Conflict, "key_taken")
		_, err = r.Get(ctx, "alpha-two")
		wantKind(t, err, apierror.NotFound, "")

		_, err = r.Get(ctx, "nobody")
		wantKind(t, err, apierror.NotFound, "")
		_, err = r.Get(ctx, "Not A Name")
		wantKind(t, err, apierror.NotFound, "")
	})
}

func TestRaceForOneName(t *testing.T) {
	everyEngine(t, func(t *testing.T, st store.Store) {
		ctx := context.Background()
		r := registry.New(st)
		const n = 20
		var wg sync.WaitGroup
		created := make([]bool, n)
		errs := make([]error, n)
		for i := range n {
			wg.Add(1)
			go func() {
				defer wg.Done()
				_, created[i], errs[i] = r.Register(ctx, agent("contested", 100+i, fmt.Sprintf("cap-%d", i)))
			}()
		}
		wg.Wait()
		winner := -1
		for i := range n {
			switch {
			case errs[i] == nil && created[i]:
				if winner >= 0 {
					t.Fatalf("two winners: %d and %d", winner, i)
				}
				winner = i
			case errs[i] == nil:
				t.Fatalf("racer %d updated a name it never owned", i)
			default:
				wantKind(t, errs[i], apierror.Conflict, "name_taken")
			}
		}
		if winner < 0 {
			t.Fatal("no winner")
		}
		g, err := r.Get(ctx, "contested")
		if err != nil || !g.PublicKey.Equal(key(100+winner)) {
			t.Fatalf("Get = %+v, %v; want racer %d's key", g, err, winner)
		}
		// Only the winner's capability is discoverable; losers left nothing.
		for i := range n {
			p, err := r.Discover(ctx, registry.Filter{Capability: fmt.Sprintf("cap-%d", i)})
			if err != nil {
				t.Fatal(err)
			}
			if want := i == winner; (len(p.Agents) == 1) != want || len(p.Agents) > 1 {
				t.Errorf("cap-%d lists %v (winner %d)", i, names(p.Agents), winner)
			}
			if _, err := r.LookupKey(ctx, auth.KeyID(key(100+i))); (err == nil) != (i == winner) {
				t.Errorf("racer %d's key: LookupKey err %v (winner %d)", i, err, winner)
			}
		}
	})
}

func TestRacingOwnerUpdates(t *testing.T) {
	everyEngine(t, func(t *testing.T, st store.Store) {
		ctx := context.Background()
		r := registry.New(st)
		if _, _, err := r.Register(ctx, agent("busy", 1, "base")); err != nil {
			t.Fatal(err)
		}
		// Racing updates each with a capability of its own: whichever
		// lands last, no other update's capability item may survive.
		const n = 6
		var wg sync.WaitGroup
		for i := range n {
			wg.Add(1)
			go func() {
				defer wg.Done()
				_, _, err := r.Register(ctx, agent("busy", 1, "base", fmt.Sprintf("only-%d", i)))
				if err != nil && apierror.KindOf(err) != apierror.Unavailable {
					t.Errorf("update %d: %v", i, err)
				}
			}()
		}
		wg.Wait()
		g, err := r.Get(ctx, "busy")
		if err != nil {
			t.Fatal(err)
		}
		for i := range n {
			c := fmt.Sprintf("only-%d", i)
			p, err := r.Discover(ctx, registry.Filter{Capability: c})
			if err != nil {
				t.Fatal(err)
			}
			if has := slices.Contains(g.Capabilities, c); has != (len(p.Agents) == 1) {
				t.Errorf("profile capabilities %v, but %s lists %v", g.Capabilities, c, names(p.Agents))
			}
		}
	})
}

func TestPresence(t *testing.T) {
	everyEngine(t, func(t *testing.T, st store.Store) {
		ctx := context.Background()
		c := &clock{now: t0}
		r := registry.New(st, registry.WithClock(c.Now))
		for i, n := range []string{"p-one", "p-two", "p-three"} {
			if _, _, err := r.Register(ctx, agent(n, 10+i, "shared", n+"-own")); err != nil {
				t.Fatal(err)
			}
		}
		c.Advance(time.Second)
		a, err := r.SetPresence(ctx, "p-two", key(11), registry.Offline)
		if err != nil || a.Status != registry.Offline || !a.UpdatedAt.Equal(t0.Add(time.Second)) {
			t.Fatalf("SetPresence = %+v, %v", a, err)
		}
		if g, _ := r.Get(ctx, "p-two"); g.Status != registry.Offline {
			t.Fatalf("Get after offline: %+v", g)
		}
		for _, c := range []struct {
			f    registry.Filter
			want []string
		}{
			{registry.Filter{Capability: "shared"}, []string{"p-one", "p-three"}},
			{registry.Filter{Capability: "shared", Status: "online"}, []string{"p-one", "p-three"}},
			{registry.Filter{Capability: "shared", Status: "offline"}, []string{"p-two"}},
			{registry.Filter{Capability: "shared", Status: "any"}, []string{"p-one", "p-three", "p-two"}},
			{registry.Filter{Capability: "p-two-own"}, []string{}},
			{registry.Filter{Capability: "p-two-own", Status: "any"}, []string{"p-two"}},
			{registry.Filter{}, []string{"p-one", "p-three"}},
			{registry.Filter{Status: "offline"}, []string{"p-two"}},
		} {
			p, err := r.Discover(ctx, c.f)
			if err != nil {
				t.Fatal(err)
			}
			if !slices.Equal(names(p.Agents), c.want) || p.Next != "" {
				t.Errorf("Discover(%+v) = %v next %q, want %v", c.f, names(p.Agents), p.Next, c.want)
			}
			for _, a := range p.Agents {
				if want := registry.Online; a.Name == "p-two" && a.Status != registry.Offline || a.Name != "p-two" && a.Status != want {
					t.Errorf("listed %s with status %s", a.Name, a.Status)
				}
			}
		}
		_, err = r.SetPresence(ctx, "p-two", key(10), registry.Online)
		wantKind(t, err, apierror.Forbidden, "")
		_, err = r.SetPresence(ctx, "p-two", key(11), "away")
		wantKind(t, err, apierror.Invalid, "")
		_, err = r.SetPresence(ctx, "nobody", key(11), registry.Online)
		wantKind(t, err, apierror.NotFound, "")
		// Back online; an owner update keeps the presence it finds.
		if _, err := r.SetPresence(ctx, "p-two", key(11), registry.Online); err != nil {
			t.Fatal(err)
		}
		if _, err := r.SetPresence(ctx, "p-one", key(10), registry.Offline); err != nil {
			t.Fatal(err)
		}
		u, created, err := r.Register(ctx, agent("p-one", 10, "shared"))
		if err != nil || created || u.Status != registry.Offline {
			t.Fatalf("update of an offline agent: %+v created=%v err=%v", u, created, err)
		}
		p, _ := r.Discover(ctx, registry.Filter{Capability: "shared", Status: "offline"})
		if !slices.Equal(names(p.Agents), []string{"p-one"}) {
			t.Fatalf("offline after update: %v", names(p.Agents))
		}
	})
}

func TestPaging(t *testing.T) {
	everyEngine(t, func(t *testing.T, st store.Store) {
		ctx := context.Background()
		r := registry.New(st)
		want := map[string][]string{}
		for i := range 23 {
			n := fmt.Sprintf("pager-%02d", i)
			caps := []string{"all"}
			if i%3 == 0 {
				caps = append(caps, "third")
			}
			if _, _, err := r.Register(ctx, agent(n, 200+i, caps...)); err != nil {
				t.Fatal(err)
			}
			status := "online"
			if i%4 == 0 {
				status = "offline"
				if _, err := r.SetPresence(ctx, n, key(200+i), registry.Offline); err != nil {
					t.Fatal(err)
				}
			}
			for _, c := range caps {
				want[c+"/"+status] = append(want[c+"/"+status], n)
			}
		}
		for _, capability := range []string{"all", "third"} {
			for _, status := range []string{"online", "offline", "any"} {
				for _, limit := range []int{1, 4, 5, 50} {
					var exp []string
					if status == "any" {
						exp = append(slices.Clone(want[capability+"/online"]), want[capability+"/offline"]...)
					} else {
						exp = want[capability+"/"+status]
					}
					f := registry.Filter{Capability: capability, Status: status, Limit: limit}
					var got []string
					for pages := 0; ; pages++ {
						if pages > 30 {
							t.Fatal("paging does not end")
						}
						p, err := r.Discover(ctx, f)
						if err != nil {
							t.Fatal(err)
						}
						if len(p.Agents) > limit || (p.Next != "" && len(p.Agents) != limit) {
							t.Fatalf("%+v: page of %d agents, next %q", f, len(p.Agents), p.Next)
						}
						got = append(got, names(p.Agents)...)
						if p.Next == "" {
							break
						}
						f.Cursor = p.Next
					}
					if !slices.Equal(got, exp) {
						t.Errorf("%s/%s limit %d: got %v, want %v", capability, status, limit, got, exp)
					}
				}
			}
		}
		p, err := r.Discover(ctx, registry.Filter{Capability: "all", Status: "any", Limit: 3})
		if err != nil || p.Next == "" {
			t.Fatalf("first page: %v next %q", err, p.Next)
		}
		bad := []registry.Filter{
			{Capability: "all", Status: "any", Cursor: tamper(p.Next)},
			{Capability: "all", Status: "any", Cursor: "x" + p.Next},
			{Capability: "all", Status: "any", Cursor: "not a cursor"},
			{Capability: "third", Status: "any", Cursor: p.Next},  // another capability's listing
			{Capability: "all", Status: "online", Cursor: p.Next}, // another status's listing
		}
		for _, f := range bad {
			_, err := r.Discover(ctx, f)
			wantKind(t, err, apierror.Invalid, "")
		}
		for _, f := range []registry.Filter{{Status: "away"}, {Limit: -1}, {Capability: "Bad Cap"}} {
			_, err := r.Discover(ctx, f)
			wantKind(t, err, apierror.Invalid, "")
		}
		// Limit 0 is the default 50; over 100 is 100.
		p, err = r.Discover(ctx, registry.Filter{Capability: "all", Status: "any", Limit: 1000})
		if err != nil || len(p.Agents) != 23 || p.Next != "" {
			t.Fatalf("limit 1000: %d agents, next %q, %v", len(p.Agents), p.Next, err)
		}
	})
}

// tamper changes one character in the middle of a cursor.
func tamper(c string) string {
	i := len(c) / 2
	x := byte('A')
	if c[i] == 'A' {
		x = 'B'
	}
	return c[:i] + string(x) + c[i+1:]
}

func TestKeys(t *testing.T) {
	everyEngine(t, func(t *testing.T, st store.Store) {
		ctx := context.Background()
		r := registry.New(st)
		if _, _, err := r.Register(ctx, agent("keyed", 7, "x")); err != nil {
			t.Fatal(err)
		}
		pub, err := r.LookupKey(ctx, auth.KeyID(key(7)))
		if err != nil || !pub.Equal(key(7)) {
			t.Fatalf("LookupKey = %x, %v", pub, err)
		}
		name, err := r.NameForKey(ctx, key(7))
		if err != nil || name != "keyed" {
			t.Fatalf("NameForKey = %q, %v", name, err)
		}
		_, err = r.LookupKey(ctx, auth.KeyID(key(8)))
		wantKind(t, err, apierror.NotFound, "")
		_, err = r.LookupKey(ctx, "not-a-keyid")
		wantKind(t, err, apierror.NotFound, "")
		_, err = r.LookupKey(ctx, "")
		wantKind(t, err, apierror.NotFound, "")
		_, err = r.NameForKey(ctx, key(8))
		wantKind(t, err, apierror.NotFound, "")
		_, err = r.NameForKey(ctx, key(8)[:5])
		wantKind(t, err, apierror.NotFound, "")
	})
}

// failing is a store whose every call fails with err.
type failing struct{ err error }

func (f failing) Get(context.Context, store.Key) (store.Item, error)     { return nil, f.err }
func (f failing) Query(context.Context, store.Query) (store.Page, error) { return store.Page{}, f.err }
func (f failing) Write(context.Context, ...store.Action) ([]store.Item, error) {
	return nil, f.err
}

func TestStoreErrors(t *testing.T) {
	ctx := context.Background()
	secret := errors.New("disk on fire at /secret/path")
	for _, c := range []struct {
		err  error
		kind apierror.Kind
	}{
		{fmt.Errorf("dynamo: throttled: %w", store.ErrUnavailable), apierror.Unavailable},
		{context.DeadlineExceeded, apierror.Unavailable},
		{secret, apierror.Internal},
	} {
		r := registry.New(failing{c.err})
		calls := map[string]func() error{
			"Register": func() error { _, _, err := r.Register(ctx, agent("x-agent", 1, "x")); return err },
			"Get":      func() error { _, err := r.Get(ctx, "x-agent"); return err },
			"Discover": func() error { _, err := r.Discover(ctx, registry.Filter{Capability: "x"}); return err },
			"SetPresence": func() error {
				_, err := r.SetPresence(ctx, "x-agent", key(1), registry.Offline)
				return err
			},
			"LookupKey":  func() error { _, err := r.LookupKey(ctx, auth.KeyID(key(1))); return err },
			"NameForKey": func() error { _, err := r.NameForKey(ctx, key(1)); return err },
		}
		for op, call := range calls {
			e := wantKind(t, call(), c.kind, "")
			if c.kind == apierror.Unavailable && e.RetryAfter != time.Second {
				t.Errorf("%s: RetryAfter %v", op, e.RetryAfter)
			}
			if strings.Contains(e.Message, "fire") || !errors.Is(e, c.err) {
				t.Errorf("%s: message %q leaks or cause %v lost", op, e.Message, e.Err)
			}
		}
	}
}
