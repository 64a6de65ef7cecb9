package harness_test

import (
	"context"
	"crypto/ed25519"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"testing"
	"time"

	"github.com/aws/aws-lambda-go/events"

	"github.com/a2awire/a2awire/local/harness"
	"github.com/a2awire/a2awire/shared/auth"
	"github.com/a2awire/a2awire/shared/logging"
	"github.com/a2awire/a2awire/shared/store/memory"
	"github.com/a2awire/a2awire/shared/store/roundtrips"
)

// silentFeed is a change feed with no records.
type silentFeed struct{}

func (silentFeed) Read(ctx context.Context, _ string, _ int) ([]events.DynamoDBEventRecord, error) {
	<-ctx.Done()
	return nil, ctx.Err()
}

func (silentFeed) Commit(context.Context, string, string) error { return nil }

// TestSignedRoutesRoundTrips pins the sequential store round trips of the
// signed routes TestRequestCost (shared/worldhttp) leaves out: a member's
// webhook routes, the registry's owner routes, the accounts and the
// escrows, each on a warm instance (the signing key verified there
// before), through the harness's gateway. Each store call is held 50 ms, so that calls made
// side by side overlap and the count is the code's. The key is not read
// again on a warm instance: that it is still registered rides in the
// request's guard, and a key unregistered since is refused (401). An
// escrow's verify invokes the endpoint the escrow kept, its write holding
// that the registry still names it. A presence change carried to the
// worlds the agent joined is 2 when this instance saw those worlds before
// (it reads their members beside its first read, and writes them beside
// the registry's write), and 3 the first time after a join (the members
// are read once the worlds are listed).
func TestSignedRoutesRoundTrips(t *testing.T) {
	st := memory.New()
	t.Cleanup(func() { _ = st.Close() })
	rt := roundtrips.WithDelay(st, 50*time.Millisecond)
	// The stream triggers get a feed that never delivers: their store calls
	// would otherwise land among the measured requests'.
	h := mustHarness(t, harness.Options{Log: logging.Discard(), Store: rt, Feed: silentFeed{}})
	srv := httptest.NewServer(h)
	t.Cleanup(srv.Close)
	ctx := context.Background()
	if _, err := harness.SeedFixtures(ctx, rt, srv.URL, h.NetworkKey()); err != nil {
		t.Fatal(err)
	}
	if _, _, err := harness.SeedLobby(ctx, rt, h.NetworkKey()); err != nil {
		t.Fatal(err)
	}
	sg, err := auth.NewSigner(h.NetworkKey())
	if err != nil {
		t.Fatal(err)
	}
	operator := signer{key: h.NetworkKey(), c: &http.Client{Transport: &auth.Transport{Signer: sg}}}
	buyer, gone := newSigner(t, 81), newSigner(t, 82)
	reg := func(name string, s signer) string {
		b, _ := json.Marshal(map[string]any{"name": name, "endpoint": "https://example.com/" + name, "capabilities": []string{"work"},
			"public_key": base64.StdEncoding.EncodeToString(s.key.Public().(ed25519.PublicKey))})
		return string(b)
	}
	do := func(s signer, method, path, body string, want int) map[string]any {
		t.Helper()
		code, m := send(t, s.c, method, srv.URL+path, body)
		if code != want {
			t.Fatalf("%s %s: %d %v, want %d", method, path, code, m, want)
		}
		return m
	}
	// measured runs a request and returns its sequential round trips.
	measured := func(s signer, method, path, body string, want int) (int, map[string]any) {
		t.Helper()
		rt.Take()
		m := do(s, method, path, body, want)
		return rt.Take(), m
	}
	do(buyer, "POST", "/api/v1/agents", reg("rt-buyer", buyer), 201) // verifies the key here
	do(operator, "POST", "/api/v1/accounts/"+buyer.awnID()+"/grant", `{"amount":1000,"memo":"start"}`, 200)
	// Each function is its own instance: the accounts and escrows
	// functions verify the buyer's key once before the measured requests.
	do(buyer, "GET", "/api/v1/accounts/"+buyer.awnID(), "", 200)
	do(buyer, "GET", "/api/v1/escrows?role=buyer", "", 200)
	escrowAt := func(state string) string {
		t.Helper()
		e := do(buyer, "POST", "/api/v1/escrows", `{"provider":"a2awire-punctual","capability":"ping","input":{},"amount":1}`, 201)
		id := e["id"].(string)
		for _, step := range []struct{ path, state string }{{"fund", "funded"}, {"verify", "delivered"}} {
			if e["state"] == state {
				break
			}
			e = do(buyer, "POST", "/api/v1/escrows/"+id+"/"+step.path, "", 200)
		}
		if e["state"] != state {
			t.Fatalf("escrow %s is %v, want %s", id, e["state"], state)
		}
		return id
	}
	type step struct {
		name         string
		s            signer
		method, path string
		body         func() string
		status, want int
	}
	fixed := func(b string) func() string { return func() string { return b } }
	steps := []step{
		{"registry update", buyer, "POST", "/api/v1/agents", fixed(reg("rt-buyer", buyer)), 200, 2},
		{"registry presence (no world joined)", buyer, "PUT", "/api/v1/agents/rt-buyer/presence", fixed(`{"status":"offline"}`), 200, 2},
		{"account read", buyer, "GET", "/api/v1/accounts/" + buyer.awnID(), fixed(""), 200, 1},
		{"account grant (the operator)", operator, "POST", "/api/v1/accounts/" + buyer.awnID() + "/grant", fixed(`{"amount":5,"memo":"more"}`), 200, 2},
		{"escrow create", buyer, "POST", "/api/v1/escrows", fixed(`{"provider":"a2awire-punctual","capability":"ping","input":{},"amount":1}`), 201, 2},
	}
	for _, s := range steps {
		if got, _ := measured(s.s, s.method, s.path, s.body(), s.status); got != s.want {
			t.Errorf("%s: %d sequential round trips, want %d", s.name, got, s.want)
		}
	}
	for _, c := range []struct {
		name, from, step string
		want             int
	}{
		{"escrow fund", "created", "fund", 2},
		{"escrow refund", "created", "refund", 2},
		{"escrow verify (the provider invoked between its read and its write)", "funded", "verify", 2},
		{"escrow release", "delivered", "release", 2},
		{"escrow dispute", "delivered", "dispute", 2},
	} {
		id := escrowAt(c.from)
		if got, _ := measured(buyer, "POST", "/api/v1/escrows/"+id+"/"+c.step, "", 200); got != c.want {
			t.Errorf("%s: %d sequential round trips, want %d", c.name, got, c.want)
		}
	}
	id := escrowAt("created")
	if got, _ := measured(buyer, "GET", "/api/v1/escrows/"+id, "", 200); got != 1 {
		t.Errorf("escrow show: %d sequential round trips, want 1", got)
	}
	if got, _ := measured(buyer, "GET", "/api/v1/escrows?role=buyer&limit=20", "", 200); got != 2 {
		t.Errorf("escrow list: %d sequential round trips, want 2", got)
	}

	// A presence change carried to the worlds the agent joined: the
	// first after the join finds a world this instance did not expect.
	for _, w := range []string{"lobby", "rt-second"} {
		if w != "lobby" {
			do(operator, "PUT", "/v0/worlds/"+w, fmt.Sprintf(`{"publicKey":%q,"name":"Second"}`, operator.pub()), 201)
		}
		do(buyer, "POST", "/v0/worlds/"+w+"/join", fmt.Sprintf(`{"publicKey":%q}`, buyer.pub()), 201)
	}
	presenceOf := func(s signer, w string) any {
		t.Helper()
		m := do(buyer, "GET", "/v0/worlds/"+w+"/agents", "", 200)
		for _, a := range m["data"].(map[string]any)["agents"].([]any) {
			if a := a.(map[string]any); a["awnId"] == s.awnID() {
				return a["presence"]
			}
		}
		t.Fatalf("%s is not listed in %s", s.awnID(), w)
		return nil
	}
	presenceIn := func(w string) any { return presenceOf(buyer, w) }
	for i, c := range []struct {
		status string
		want   int
	}{{"online", 3}, {"offline", 2}, {"online", 2}} {
		for _, w := range []string{"lobby", "rt-second"} {
			do(buyer, "GET", "/v0/worlds/"+w+"/events", "", 200) // a poll: online by the rule
		}
		if got, _ := measured(buyer, "PUT", "/api/v1/agents/rt-buyer/presence", fmt.Sprintf(`{"status":%q}`, c.status), 200); got != c.want {
			t.Errorf("registry presence %d (%s, two worlds joined): %d sequential round trips, want %d", i, c.status, got, c.want)
		}
		for _, w := range []string{"lobby", "rt-second"} {
			if got := presenceIn(w); got != c.status {
				t.Errorf("after presence %s the buyer shows %v in %s", c.status, got, w)
			}
		}
	}

	// A member's webhook routes, each function warmed by a first request.
	hook := "/v0/worlds/lobby/webhook"
	do(buyer, "GET", hook, "", 404)
	do(buyer, "DELETE", hook, "", 404)
	do(buyer, "POST", hook+"/replay", `{"since":"2026-01-01T00:00:00Z"}`, 404)
	do(buyer, "PUT", hook, `{"url":"https://example.com/rt-hook"}`, 200)
	for _, c := range []struct {
		name, method, path, body string
		want                     int
	}{
		{"webhook set", "PUT", hook, `{"url":"https://example.com/rt-hook"}`, 1},
		{"webhook show", "GET", hook, "", 2},
		{"webhook replay", "POST", hook + "/replay", `{"since":"2026-01-01T00:00:00Z"}`, 2},
		{"webhook remove", "DELETE", hook, "", 1},
	} {
		if got, _ := measured(buyer, c.method, c.path, c.body, 200); got != c.want {
			t.Errorf("%s: %d sequential round trips, want %d", c.name, got, c.want)
		}
	}

	// Unregistering an agent set offline lifts the override in its
	// worlds: 2 round trips when this instance knows them (the presence
	// change before the delete taught it); the key, remembered, is
	// refused after.
	do(gone, "POST", "/api/v1/agents", reg("rt-gone", gone), 201)
	do(operator, "POST", "/api/v1/accounts/"+gone.awnID()+"/grant", `{"amount":10,"memo":"start"}`, 200)
	do(gone, "GET", "/api/v1/accounts/"+gone.awnID(), "", 200) // the accounts function verifies the key
	do(gone, "POST", "/v0/worlds/lobby/join", fmt.Sprintf(`{"publicKey":%q}`, gone.pub()), 201)
	do(gone, "GET", "/v0/worlds/lobby/events", "", 200) // online by its poll
	do(gone, "PUT", "/api/v1/agents/rt-gone/presence", `{"status":"offline"}`, 200)
	if got := presenceOf(gone, "lobby"); got != "offline" {
		t.Fatalf("set offline, it shows %v in the lobby", got)
	}
	if got, _ := measured(gone, "DELETE", "/api/v1/agents/rt-gone", "", 200); got != 2 {
		t.Errorf("registry delete (set offline, one world joined): %d sequential round trips, want 2", got)
	}
	if got := presenceOf(gone, "lobby"); got != "online" {
		t.Errorf("unregistered, its override should be lifted: it shows %v in the lobby", got)
	}
	do(gone, "GET", "/api/v1/accounts/"+gone.awnID(), "", 401)
	do(gone, "PUT", "/api/v1/agents/rt-gone/presence", `{"status":"online"}`, 401)

	// Cold: a second harness over the same store is a fresh instance of
	// every function. A route that names its first read from its path
	// reads it beside the key (reads ahead), and its write carries the
	// guard: 2 round trips where reading the key first made it 3.
	h2 := mustHarness(t, harness.Options{Log: logging.Discard(), Store: rt, Feed: silentFeed{}, NetworkKey: h.NetworkKey()})
	srv2 := httptest.NewServer(h2)
	t.Cleanup(srv2.Close)
	cold := func(name string, s signer, method, path, body string, status, want int) {
		t.Helper()
		rt.Take()
		if code, m := send(t, s.c, method, srv2.URL+path, body); code != status {
			t.Fatalf("%s (cold): %d %v", name, code, m)
		}
		if got := rt.Take(); got != want {
			t.Errorf("%s on an instance that has not seen the key: %d sequential round trips, want %d", name, got, want)
		}
	}
	cold("escrow fund", buyer, "POST", "/api/v1/escrows/"+escrowAt("created")+"/fund", "", 200, 2)
	late := newSigner(t, 83)
	do(late, "POST", "/api/v1/agents", reg("rt-late", late), 201)
	cold("escrow create (the provider named in the body)", late, "POST", "/api/v1/escrows",
		`{"provider":"a2awire-punctual","capability":"ping","input":{},"amount":1}`, 201, 2)
	cold("registry delete", late, "DELETE", "/api/v1/agents/rt-late", "", 200, 2)
}
