package harness_test

import (
	"context"
	"crypto/ed25519"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/a2awire/a2awire/local/cloud"
	"github.com/a2awire/a2awire/local/harness"
	"github.com/a2awire/a2awire/shared/auth"
	"github.com/a2awire/a2awire/shared/logging"
	"github.com/a2awire/a2awire/shared/registry"
	"github.com/a2awire/a2awire/shared/routes"
	"github.com/a2awire/a2awire/shared/store/memory"
)

// escrowNet is a served harness with the fixtures seeded, a registered
// buyer and the operator (the network key).
type escrowNet struct {
	t        *testing.T
	url      string
	buyer    signer
	operator signer
	reg      *registry.Registry
}

func newEscrowNet(t *testing.T) *escrowNet {
	t.Helper()
	n, _ := newEscrowNetWith(t, harness.Options{})
	return n
}

// newEscrowNetWith is newEscrowNet over o (its Store and Log are set
// here); it returns the harness too, for its triggers.
func newEscrowNetWith(t *testing.T, o harness.Options) (*escrowNet, *harness.Harness) {
	t.Helper()
	st := memory.New()
	t.Cleanup(func() { _ = st.Close() })
	o.Log, o.Store = logging.Discard(), st
	h := mustHarness(t, o)
	srv := httptest.NewServer(h)
	t.Cleanup(srv.Close)
	ctx := context.Background()
	if _, err := harness.SeedFixtures(ctx, st, srv.URL, h.NetworkKey()); err != nil {
		t.Fatal(err)
	}
	n := &escrowNet{t: t, url: srv.URL, buyer: newSigner(t, 41), reg: registry.New(st, registry.AllowInsecureEndpoints())}
	sg, err := auth.NewSigner(h.NetworkKey())
	if err != nil {
		t.Fatal(err)
	}
	n.operator = signer{key: h.NetworkKey(), c: &http.Client{Transport: &auth.Transport{Signer: sg}}}
	n.register("escrow-buyer", srv.URL+"/nowhere", n.buyer)
	return n, h
}

func (n *escrowNet) register(name, endpoint string, s signer) {
	n.t.Helper()
	if _, _, err := n.reg.Register(context.Background(), registry.Agent{Name: name, Endpoint: endpoint,
		Capabilities: []string{"work"}, PublicKey: s.key.Public().(ed25519.PublicKey)}); err != nil {
		n.t.Fatal(err)
	}
}

func (n *escrowNet) do(s signer, method, path, body string, want int) map[string]any {
	n.t.Helper()
	code, m := send(n.t, s.c, method, n.url+path, body)
	if code != want {
		n.t.Fatalf("%s %s: %d %v, want %d", method, path, code, m, want)
	}
	return m
}

func (n *escrowNet) balance(s signer) (balance, held float64) {
	n.t.Helper()
	m := n.do(s, "GET", "/api/v1/accounts/"+s.awnID(), "", 200)
	return m["balance"].(float64), m["held"].(float64)
}

// hire creates and funds an escrow for provider's capability.
func (n *escrowNet) hire(provider, capability, input string, amount int) string {
	n.t.Helper()
	e := n.do(n.buyer, "POST", "/api/v1/escrows", fmt.Sprintf(`{"provider":%q,"capability":%q,"input":%s,"amount":%d}`,
		provider, capability, input, amount), 201)
	if e["state"] != "created" {
		n.t.Fatalf("create: %v", e)
	}
	id := e["id"].(string)
	if e := n.do(n.buyer, "POST", "/api/v1/escrows/"+id+"/fund", "", 200); e["state"] != "funded" {
		n.t.Fatalf("fund: %v", e)
	}
	return id
}

// TestEscrowVerifiesEveryFixture: through the harness's gateway, an
// escrow on each of the five fixtures is created, funded, verified (the
// network invokes the fixture with the escrow id as task id) and
// released into the network key's account; messy's simulated upstream
// failure verifies as failed with its reason and refunds; the ledger
// fixture books once across three verify calls (its balance counts one
// entry); a provider answering 200 with an error body verifies as failed.
func TestEscrowVerifiesEveryFixture(t *testing.T) {
	n := newEscrowNet(t)
	n.do(n.buyer, "POST", "/api/v1/accounts/"+n.buyer.awnID()+"/grant", `{"amount":100,"memo":"x"}`, 403)
	n.do(n.operator, "POST", "/api/v1/accounts/escrow:01M90NN8H3P00B29F1GETNZQJD/grant", `{"amount":100,"memo":"x"}`, 400)
	n.do(n.operator, "POST", "/api/v1/accounts/mint/grant", `{"amount":100,"memo":"x"}`, 400)
	n.do(n.operator, "POST", "/api/v1/accounts/"+n.buyer.awnID()+"/grant", `{"amount":0,"memo":"x"}`, 400)
	n.do(n.operator, "POST", "/api/v1/accounts/"+n.buyer.awnID()+"/grant", `{"amount":1000,"memo":"start"}`, 200)
	if b, h := n.balance(n.buyer); b != 1000 || h != 0 {
		t.Fatalf("after the grant: balance %v held %v", b, h)
	}
	opBefore, _ := n.balance(n.operator)
	cases := []struct{ provider, capability, input string }{
		{"a2awire-punctual", "ping", `{}`},
		{"a2awire-clean", "word-count", `{"text":"one two three"}`},
		{"a2awire-messy", "messy-echo", `{"hello":"world"}`},
		{"a2awire-translator", "translation", `{"text":"hello","target_lang":"fr"}`},
		{"a2awire-ledger", "record-entry", `{"account":"escrow-test","amount_cents":250,"memo":"hire"}`},
	}
	var paid float64
	for _, c := range cases {
		id := n.hire(c.provider, c.capability, c.input, 10)
		for range 3 { // repeats: the ledger must book once
			e := n.do(n.buyer, "POST", "/api/v1/escrows/"+id+"/verify", "", 200)
			if e["state"] != "delivered" || e["outputSha256"] == nil {
				t.Fatalf("%s: verify: %v", c.provider, e)
			}
		}
		e := n.do(n.buyer, "POST", "/api/v1/escrows/"+id+"/release", "", 200)
		if e["state"] != "released" {
			t.Fatalf("%s: release: %v", c.provider, e)
		}
		again := n.do(n.buyer, "POST", "/api/v1/escrows/"+id+"/release", "", 200)
		if len(again["transitions"].([]any)) != len(e["transitions"].([]any)) {
			t.Errorf("%s: a repeated release changed the escrow: %v", c.provider, again)
		}
		n.do(n.buyer, "POST", "/api/v1/escrows/"+id+"/refund", "", 409)
		paid += 10
	}
	bal := n.do(n.buyer, "POST", "/agents/a2awire-ledger/invoke", `{"task":"balance","input":{"account":"escrow-test"}}`, 200)
	if out := bal["output"].(map[string]any); out["entries"] != float64(1) || out["balance_cents"] != float64(250) {
		t.Errorf("the ledger booked %v across three verifies, want one entry of 250", out)
	}
	if op, _ := n.balance(n.operator); op-opBefore != paid {
		t.Errorf("the network key's account gained %v, want %v", op-opBefore, paid)
	}

	// messy's simulated upstream failure: failed, with its reason; refund.
	id := n.hire("a2awire-messy", "messy-echo", `{"simulate":"upstream_error"}`, 7)
	e := n.do(n.buyer, "POST", "/api/v1/escrows/"+id+"/verify", "", 200)
	if reason, _ := e["reason"].(string); e["state"] != "failed" || !strings.Contains(reason, "simulated upstream failure") {
		t.Fatalf("messy upstream failure: %v", e)
	}
	n.do(n.buyer, "POST", "/api/v1/escrows/"+id+"/release", "", 409)
	if e := n.do(n.buyer, "POST", "/api/v1/escrows/"+id+"/refund", "", 200); e["state"] != "refunded" {
		t.Fatalf("refund: %v", e)
	}

	// A provider that answers 200 with an error inside.
	var mu sync.Mutex
	var taskIDs []string
	liar := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		taskIDs = append(taskIDs, r.Header.Get("X-A2AWire-Task-Id"))
		mu.Unlock()
		w.Header().Set("Content-Type", "application/json")
		_, _ = w.Write([]byte(`{"error":"upstream_error","message":"it broke"}`))
	}))
	defer liar.Close()
	n.register("escrow-liar", liar.URL, newSigner(t, 42))
	id = n.hire("escrow-liar", "work", `{}`, 5)
	e = n.do(n.buyer, "POST", "/api/v1/escrows/"+id+"/verify", "", 200)
	if e["state"] != "failed" || e["reason"] == nil {
		t.Fatalf("200 with an error inside: %v", e)
	}
	mu.Lock()
	if len(taskIDs) == 0 || taskIDs[0] != id {
		t.Errorf("the provider was invoked with task ids %v, want the escrow id %s", taskIDs, id)
	}
	mu.Unlock()

	// The books: 1000 granted, 50 paid, 5 held in the failed escrow.
	if b, h := n.balance(n.buyer); b != 1000-paid-5 || h != 5 {
		t.Errorf("buyer: balance %v held %v, want %v and 5", b, h, 1000-paid-5)
	}
	list := n.do(n.buyer, "GET", "/api/v1/escrows?role=buyer&state=released", "", 200)
	if got := len(list["escrows"].([]any)); got != len(cases) {
		t.Errorf("listed %d released escrows, want %d", got, len(cases))
	}
}

// TestEscrowRoutesRefuse: the exact statuses and error codes of the
// escrow routes' refusals.
func TestEscrowRoutesRefuse(t *testing.T) {
	n := newEscrowNet(t)
	stranger := newSigner(t, 43)
	n.register("escrow-stranger", n.url+"/nowhere", stranger)
	code := func(m map[string]any) string { s, _ := m["error"].(string); return s }
	// Unsigned.
	if c, _ := send(t, http.DefaultClient, "GET", n.url+"/api/v1/accounts/"+n.buyer.awnID(), ""); c != 401 {
		t.Errorf("unsigned account read: %d", c)
	}
	// Another agent's account.
	n.do(stranger, "GET", "/api/v1/accounts/"+n.buyer.awnID(), "", 403)
	// Bad bodies.
	for _, body := range []string{`{"provider":"a2awire-clean","capability":"word-count","input":{},"amount":0}`,
		`{"provider":"a2awire-clean","capability":"word-count","input":{},"amount":5,"deadline":"tomorrow"}`,
		`{"provider":"a2awire-clean","capability":"word-count","input":{},"amount":5,"amount":6}`,
		`not json`} {
		m := n.do(n.buyer, "POST", "/api/v1/escrows", body, 400)
		if code(m) == "" || m["message"] == nil {
			t.Errorf("%s: answer %v is not {error, message}", body, m)
		}
	}
	n.do(n.buyer, "POST", "/api/v1/escrows", `{"provider":"no-such-agent","capability":"word-count","input":{},"amount":5}`, 404)
	e := n.do(n.buyer, "POST", "/api/v1/escrows", `{"provider":"a2awire-clean","capability":"word-count","input":{"text":"a"},"amount":5}`, 201)
	id := e["id"].(string)
	// No money: 402 insufficient_funds.
	if m := n.do(n.buyer, "POST", "/api/v1/escrows/"+id+"/fund", "", 402); code(m) != "insufficient_funds" {
		t.Errorf("fund without money: %v", m)
	}
	// Illegal transition: 409 invalid_transition.
	if m := n.do(n.buyer, "POST", "/api/v1/escrows/"+id+"/release", "", 409); code(m) != "invalid_transition" {
		t.Errorf("release of a created escrow: %v", m)
	}
	// Not the buyer.
	n.do(stranger, "POST", "/api/v1/escrows/"+id+"/fund", "", 403)
	n.do(stranger, "GET", "/api/v1/escrows/"+id, "", 403)
	n.do(n.buyer, "GET", "/api/v1/escrows/NOPE", "", 404)
	// Operator reads it; the buyer refunds it twice, the second a repeat.
	n.do(n.operator, "GET", "/api/v1/escrows/"+id, "", 200)
	first := n.do(n.buyer, "POST", "/api/v1/escrows/"+id+"/refund", "", 200)
	second := n.do(n.buyer, "POST", "/api/v1/escrows/"+id+"/refund", "", 200)
	if first["state"] != "refunded" || fmt.Sprint(first) != fmt.Sprint(second) {
		t.Errorf("refund repeated: %v then %v", first, second)
	}
}

// TestEscrowScheduleThroughHarness: the harness drives escrow-schedule
// from the route table's schedule. On the harness's clock, a funded
// escrow past its deadline is refunded by "schedule" and its money is
// back; a delivered one past the dispute window (24 h) is released to
// the network key's account.
func TestEscrowScheduleThroughHarness(t *testing.T) {
	if kinds := fmt.Sprint(harnessKinds(t)); kinds != "[schedule]" {
		t.Fatalf("escrow-schedule's triggers: %s", kinds)
	}
	c := &clock{now: time.Now().Truncate(time.Second)}
	tick := make(chanTicker)
	n, h := newEscrowNetWith(t, harness.Options{Now: c.Now, NewTicker: func(time.Duration) cloud.Ticker { return tick }})
	_, stop := run(t, h)
	defer stop()
	n.do(n.operator, "POST", "/api/v1/accounts/"+n.buyer.awnID()+"/grant", `{"amount":100,"memo":"start"}`, 200)
	late := n.hire("a2awire-clean", "word-count", `{"text":"never verified"}`, 30)
	kept := n.hire("a2awire-clean", "word-count", `{"text":"verified"}`, 20)
	n.do(n.buyer, "POST", "/api/v1/escrows/"+kept+"/verify", "", 200)
	opBefore, _ := n.balance(n.operator)
	// Ticks before the deadline move nothing.
	for range 3 {
		tick <- c.Now()
	}
	if e := n.do(n.buyer, "GET", "/api/v1/escrows/"+late, "", 200); e["state"] != "funded" {
		t.Fatalf("before the deadline: %v", e)
	}
	c.Advance(25 * time.Hour)
	state := func(id string) any { return n.do(n.buyer, "GET", "/api/v1/escrows/"+id, "", 200)["state"] }
	// Every schedule of the table shares the ticker: tick until both
	// moved, at most 50 times.
	for i := 0; i < 50 && (state(late) != "refunded" || state(kept) != "released"); i++ {
		tick <- c.Now()
	}
	e := n.do(n.buyer, "GET", "/api/v1/escrows/"+late, "", 200)
	trs := e["transitions"].([]any)
	if e["state"] != "refunded" || trs[len(trs)-1].(map[string]any)["by"] != "schedule" {
		t.Fatalf("past the deadline: %v", e)
	}
	if state(kept) != "released" {
		t.Fatalf("past the dispute window: %v", state(kept))
	}
	if b, held := n.balance(n.buyer); b != 80 || held != 0 {
		t.Errorf("buyer: balance %v held %v, want 80 and 0", b, held)
	}
	if op, _ := n.balance(n.operator); op-opBefore != 20 {
		t.Errorf("the network key's account gained %v, want 20", op-opBefore)
	}
}

// harnessKinds are escrow-schedule's trigger kinds in a plain harness.
func harnessKinds(t *testing.T) []routes.TriggerKind {
	h := mustHarness(t, harness.Options{Log: logging.Discard()})
	return h.TriggerKinds("escrow-schedule")
}
