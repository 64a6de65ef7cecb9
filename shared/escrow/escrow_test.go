package escrow_test

import (
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"math/rand/v2"
	"net/http"
	"os"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/a2awire/a2awire/shared/apierror"
	"github.com/a2awire/a2awire/shared/credits"
	"github.com/a2awire/a2awire/shared/escrow"
	"github.com/a2awire/a2awire/shared/protocol"
	"github.com/a2awire/a2awire/shared/store"
	"github.com/a2awire/a2awire/shared/store/dynamo/dynamolocal"
	"github.com/a2awire/a2awire/shared/store/storetest/stores"
)

var local *dynamolocal.Server

// The randomized workload's sizes: 10,000 operations on memory; on
// DynamoDB Local, where each is a network round trip through Java, a
// smaller count unless -escrow.dynamo-ops raises it (10,000 takes minutes).
var (
	// 4,000 on memory (it was 10,000): the 24 workers interleave from the
	// first operation whatever the count, and 4,000 still run every kind
	// of operation hundreds of times and settle dozens of escrows each way
	// (a run: 22 released, 263 refunded at 3,000); the other 6,000 were
	// most of the package's CPU under -race and added no new interleaving.
	workloadOps       = flag.Int("escrow.ops", 4000, "operations of the randomized escrow workload on memory")
	workloadDynamoOps = flag.Int("escrow.dynamo-ops", 400, "operations of the randomized escrow workload on DynamoDB Local")
)

func TestMain(m *testing.M) {
	os.Exit(dynamolocal.Main(m, func(s *dynamolocal.Server) { local = s }))
}

func awn(n int) string { return fmt.Sprintf("aw:sha256:%064x", n) }

var (
	operator = awn(1)
	provider = awn(2)
)

// clock is a settable clock.
type clock struct{ ns atomic.Int64 }

func newClock() *clock {
	c := &clock{}
	c.ns.Store(time.Date(2026, 12, 1, 12, 0, 0, 0, time.UTC).UnixNano())
	return c
}
func (c *clock) Now() time.Time          { return time.Unix(0, c.ns.Load()) }
func (c *clock) Advance(d time.Duration) { c.ns.Add(int64(d)) }

type providers struct{}

func (providers) Provider(_ context.Context, name string) (escrow.Provider, error) {
	if name != "p" {
		return escrow.Provider{}, apierror.New(apierror.NotFound, "no such agent")
	}
	return escrow.Provider{Endpoint: "http://p.invalid/invoke", Account: provider, Capabilities: []string{"work"}}, nil
}

// invoker answers as a conformant provider unless the input asks it to
// fail; it counts invocations per task id.
type invoker struct {
	mu    sync.Mutex
	calls map[string]int
}

func (i *invoker) Invoke(_ context.Context, _ string, req protocol.Request, taskID string) (int, http.Header, []byte, error) {
	i.mu.Lock()
	if i.calls == nil {
		i.calls = map[string]int{}
	}
	i.calls[taskID]++
	i.mu.Unlock()
	h := http.Header{"Content-Type": {"application/json"}}
	var in struct{ Fail bool }
	_ = json.Unmarshal(req.Input, &in)
	if in.Fail {
		return 502, h, []byte(`{"error":"upstream_error","message":"down"}`), nil
	}
	return 200, h, []byte(`{"output":{"done":true},"metadata":{"agent":"p","capability":"work","duration_ms":1}}`), nil
}

func newService(t testing.TB, st store.Store, c *clock) (*escrow.Service, *invoker) {
	inv := &invoker{}
	s, err := escrow.New(escrow.Options{Store: st, Providers: providers{}, Invoker: inv, Operator: operator, Now: c.Now})
	if err != nil {
		t.Fatal(err)
	}
	return s, inv
}

// everyEngine runs f on memory, bolt and DynamoDB Local.
func everyEngine(t *testing.T, f func(t *testing.T, st store.Store)) {
	for _, e := range stores.All(local) {
		t.Run(e.Name, func(t *testing.T) { f(t, e.Open(t)) })
	}
}

// must returns v, and panics (failing the test) on err.
func must[T any](v T, err error) T {
	if err != nil {
		panic(err)
	}
	return v
}

func balance(t testing.TB, s *escrow.Service, account string) credits.Account {
	t.Helper()
	a, err := s.Ledger().Get(context.Background(), account, 1, "")
	if err != nil {
		t.Fatal(err)
	}
	return a
}

// retryBusy calls f again while it answers Unavailable, as a client
// honouring Retry-After does.
func retryBusy(f func() (escrow.Escrow, error)) (escrow.Escrow, error) {
	for {
		e, err := f()
		if apierror.KindOf(err) != apierror.Unavailable {
			return e, err
		}
		time.Sleep(time.Duration(rand.IntN(20)) * time.Millisecond)
	}
}

// TestReleaseRacingRefundMovesMoneyOnce: 25 releases and 25 refunds by the
// operator race on one disputed escrow (both legal there), and 50 buyer
// releases race on a delivered one; on every engine, exactly one
// settlement commits, its money moves once, and every other call answers
// the escrow as settled (200) or 409 invalid_transition.
func TestReleaseRacingRefundMovesMoneyOnce(t *testing.T) {
	everyEngine(t, func(t *testing.T, st store.Store) {
		ctx := t.Context()
		c := newClock()
		s, _ := newService(t, st, c)
		buyer := awn(10)
		if err := s.Ledger().Grant(ctx, buyer, 200, "test"); err != nil {
			t.Fatal(err)
		}
		mk := func() escrow.Escrow {
			e := must(s.Create(ctx, escrow.CreateInput{Buyer: buyer, Provider: "p", Capability: "work", Amount: 100}))
			must(s.Fund(ctx, e.ID, buyer))
			e = must(s.Verify(ctx, e.ID, buyer))
			if e.State != escrow.Delivered {
				t.Fatalf("verify: %+v", e)
			}
			return e
		}
		disputed := mk()
		must(s.Dispute(ctx, disputed.ID, buyer))
		delivered := mk()

		var wg sync.WaitGroup
		var ok, conflict atomic.Int64
		// 100 racers (it was 200): all start at once, so the first
		// settlements already race each other and every later call races
		// the settled state; what matters is that two settlements of the
		// same escrow contend, not how many more calls answer "settled".
		const racers = 100
		for i := range racers {
			wg.Add(1)
			go func() {
				defer wg.Done()
				var f func() (escrow.Escrow, error)
				switch {
				case i >= racers/2:
					f = func() (escrow.Escrow, error) { return s.Release(ctx, delivered.ID, buyer) }
				case i%2 == 0:
					f = func() (escrow.Escrow, error) { return s.Release(ctx, disputed.ID, operator) }
				default:
					f = func() (escrow.Escrow, error) { return s.Refund(ctx, disputed.ID, operator) }
				}
				e, err := retryBusy(f)
				switch {
				case err == nil && (e.State == escrow.Released || e.State == escrow.Refunded):
					ok.Add(1)
				case apierror.From(err).Code == escrow.CodeInvalidTransition:
					conflict.Add(1)
				default:
					t.Errorf("call %d: %+v %v", i, e, err)
				}
			}()
		}
		wg.Wait()
		if ok.Load()+conflict.Load() != racers || ok.Load() < racers/2+1 {
			t.Fatalf("%d answered the settled escrow, %d conflicts", ok.Load(), conflict.Load())
		}
		d := must(s.Get(ctx, disputed.ID))
		settlements := 0
		for _, tr := range d.Transitions {
			if tr.From == escrow.Disputed {
				settlements++
			}
		}
		if settlements != 1 {
			t.Fatalf("disputed escrow settled %d times: %+v", settlements, d.Transitions)
		}
		dl := must(s.Get(ctx, delivered.ID))
		if dl.State != escrow.Released || len(dl.Transitions) != 4 {
			t.Fatalf("delivered escrow: %s, %+v", dl.State, dl.Transitions)
		}
		b, p := balance(t, s, buyer), balance(t, s, provider)
		want := int64(100) // the delivered escrow's release
		if d.State == escrow.Released {
			want += 100
		}
		if p.Balance != want || b.Balance != 200-want || b.Held != 0 {
			t.Fatalf("buyer %+v provider %+v, disputed escrow %s", b, p, d.State)
		}
		for _, id := range []string{d.ID, dl.ID} {
			if h := balance(t, s, escrow.Hold(id)); h.Balance != 0 {
				t.Fatalf("hold of %s: %d", id, h.Balance)
			}
		}
		checkBooks(t, s, []string{credits.Mint, buyer, provider, escrow.Hold(d.ID), escrow.Hold(dl.ID)})
	})
}

// TestFundRaceStopsAtTheBalance: 100 concurrent funds of 100 escrows of
// 10 credits by a buyer holding 100: exactly 10 commit, 90 answer 402.
func TestFundRaceStopsAtTheBalance(t *testing.T) {
	everyEngine(t, func(t *testing.T, st store.Store) {
		ctx := t.Context()
		s, _ := newService(t, st, newClock())
		buyer := awn(11)
		if err := s.Ledger().Grant(ctx, buyer, 100, ""); err != nil {
			t.Fatal(err)
		}
		ids := make([]string, 100)
		for i := range ids {
			ids[i] = must(s.Create(ctx, escrow.CreateInput{Buyer: buyer, Provider: "p", Capability: "work", Amount: 10})).ID
		}
		var wg sync.WaitGroup
		var funded, poor atomic.Int64
		for _, id := range ids {
			wg.Add(1)
			go func() {
				defer wg.Done()
				e, err := retryBusy(func() (escrow.Escrow, error) { return s.Fund(ctx, id, buyer) })
				switch {
				case err == nil && e.State == escrow.Funded:
					funded.Add(1)
				case apierror.From(err).Code == credits.ErrInsufficientFunds && apierror.KindOf(err) == apierror.PaymentRequired:
					poor.Add(1)
				default:
					t.Errorf("fund %s: %v", id, err)
				}
			}()
		}
		wg.Wait()
		if funded.Load() != 10 || poor.Load() != 90 {
			t.Fatalf("%d funded, %d refused", funded.Load(), poor.Load())
		}
		b := balance(t, s, buyer)
		if b.Balance != 0 || b.Held != 100 {
			t.Fatalf("buyer %+v", b)
		}
		accounts := []string{credits.Mint, buyer}
		for _, id := range ids {
			accounts = append(accounts, escrow.Hold(id))
		}
		checkBooks(t, s, accounts)
	})
}

// checkBooks: every balance is the sum of its entries, the balances sum
// to zero, and only the mint's is negative.
func checkBooks(t *testing.T, s *escrow.Service, accounts []string) {
	t.Helper()
	ctx := context.Background()
	var total int64
	for _, a := range accounts {
		acct := balance(t, s, a)
		entries := must(s.Ledger().Entries(ctx, a))
		var sum int64
		for _, e := range entries {
			sum += e.Amount
		}
		if sum != acct.Balance {
			t.Errorf("account %s: balance %d, entries sum to %d", a, acct.Balance, sum)
		}
		if a != credits.Mint && acct.Balance < 0 {
			t.Errorf("account %s is negative: %d", a, acct.Balance)
		}
		total += acct.Balance
	}
	if total != 0 {
		t.Errorf("the balances sum to %d", total)
	}
}

// checkHistory: every step of the escrow's history is an edge of the
// state machine, each from the state the previous one reached.
func checkHistory(t *testing.T, e escrow.Escrow) {
	t.Helper()
	var at escrow.State
	for _, tr := range e.Transitions {
		if tr.From != at || !escrow.Legal(tr.From, tr.To) {
			t.Errorf("escrow %s: illegal step %s → %s after %s: %+v", e.ID, tr.From, tr.To, at, e.Transitions)
			return
		}
		at = tr.To
	}
	if at != e.State {
		t.Errorf("escrow %s is %s, its history ends at %s", e.ID, e.State, at)
	}
}

// TestRandomWorkloadKeepsTheBooks runs a randomized concurrent workload of
// grants, creates, funds, verifies, releases, refunds, disputes and
// schedule runs on memory (4,000 operations) and DynamoDB Local (fewer,
// see workloadDynamoOps); afterwards every balance is the sum of its
// entries, the balances sum to zero, no balance but the mint's is
// negative, every escrow's history is a legal path, and every kind of
// operation ran.
func TestRandomWorkloadKeepsTheBooks(t *testing.T) {
	t.Run("memory", func(t *testing.T) { randomWorkload(t, stores.Memory().Open(t), *workloadOps) })
	t.Run("dynamo", func(t *testing.T) { randomWorkload(t, stores.Dynamo(local).Open(t), *workloadDynamoOps) })
}

func randomWorkload(t *testing.T, st store.Store, ops int) {
	ctx := t.Context()
	c := newClock()
	s, _ := newService(t, st, c)
	const buyers, workers = 20, 24
	var (
		mu  sync.Mutex
		ids []string
	)
	buyerOf := map[string]string{}
	var left atomic.Int64
	left.Store(int64(ops))
	var counts [8]atomic.Int64
	var wg sync.WaitGroup
	start := time.Now()
	for w := range workers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			r := rand.New(rand.NewPCG(uint64(w), 7))
			for left.Add(-1) >= 0 {
				op := r.IntN(100)
				mu.Lock()
				var id, buyer string
				if len(ids) > 0 {
					id = ids[r.IntN(len(ids))]
					buyer = buyerOf[id]
				}
				mu.Unlock()
				var err error
				switch {
				case op < 8:
					counts[0].Add(1)
					err = s.Ledger().Grant(ctx, awn(100+r.IntN(buyers)), int64(1+r.IntN(50)), "")
				case op < 25 || id == "":
					counts[1].Add(1)
					b := awn(100 + r.IntN(buyers))
					in := `{}`
					if r.IntN(4) == 0 {
						in = `{"Fail":true}`
					}
					var e escrow.Escrow
					e, err = s.Create(ctx, escrow.CreateInput{Buyer: b, Provider: "p", Capability: "work", Amount: int64(1 + r.IntN(30)), Input: json.RawMessage(in)})
					if err == nil {
						mu.Lock()
						ids = append(ids, e.ID)
						buyerOf[e.ID] = b
						mu.Unlock()
					}
				case op < 45:
					counts[2].Add(1)
					_, err = s.Fund(ctx, id, buyer)
				case op < 62:
					counts[3].Add(1)
					_, err = s.Verify(ctx, id, buyer)
				case op < 77:
					counts[4].Add(1)
					_, err = s.Release(ctx, id, buyer)
				case op < 87:
					counts[5].Add(1)
					_, err = s.Refund(ctx, id, buyer)
				case op < 93:
					counts[6].Add(1)
					_, err = s.Dispute(ctx, id, buyer)
				case op < 97:
					counts[7].Add(1)
					if r.IntN(2) == 0 {
						_, err = s.Release(ctx, id, operator)
					} else {
						_, err = s.Refund(ctx, id, operator)
					}
				default:
					c.Advance(time.Hour)
					_, err = s.Run(ctx)
				}
				switch apierror.From(err).Code {
				case "", escrow.CodeInvalidTransition, credits.ErrInsufficientFunds:
				default:
					if apierror.KindOf(err) != apierror.Unavailable {
						t.Errorf("op %d: %v", op, err)
					}
				}
			}
		}()
	}
	wg.Wait()
	t.Logf("%d operations by %d workers in %v (grants %d, creates %d, funds %d, verifies %d, releases %d, refunds %d, disputes %d, operator %d)",
		ops, workers, time.Since(start).Round(time.Millisecond), counts[0].Load(), counts[1].Load(), counts[2].Load(),
		counts[3].Load(), counts[4].Load(), counts[5].Load(), counts[6].Load(), counts[7].Load())
	for i := range counts {
		if counts[i].Load() == 0 {
			t.Errorf("operation kind %d never ran", i)
		}
	}
	accounts := []string{credits.Mint, provider}
	for b := range buyers {
		accounts = append(accounts, awn(100+b))
	}
	var held = map[string]int64{}
	states := map[escrow.State]int{}
	for _, id := range ids {
		accounts = append(accounts, escrow.Hold(id))
		e := must(s.Get(ctx, id))
		checkHistory(t, e)
		states[e.State]++
		if e.State == escrow.Funded || e.State == escrow.Failed || e.State == escrow.Delivered || e.State == escrow.Disputed {
			held[e.Buyer] += e.Amount
		}
	}
	t.Logf("%d escrows end in %v", len(ids), states)
	// A run as large as memory's settles dozens both ways; a small one
	// may by chance settle none.
	if ops >= 4000 && (states[escrow.Released] == 0 || states[escrow.Refunded] == 0) {
		t.Errorf("no escrow was both released and refunded among %v: the workload did not exercise settlement", states)
	}
	checkBooks(t, s, accounts)
	for b := range buyers {
		a := awn(100 + b)
		if got := balance(t, s, a).Held; got != held[a] {
			t.Errorf("buyer %s holds %d, its unsettled escrows %d", a, got, held[a])
		}
	}
}

// TestScheduleRefundsAndReleases: with an injected clock, a funded escrow
// past its deadline is refunded and a delivered one past the dispute
// window released, by "schedule"; earlier runs move nothing.
func TestScheduleRefundsAndReleases(t *testing.T) {
	everyEngine(t, func(t *testing.T, st store.Store) {
		ctx := t.Context()
		c := newClock()
		s, _ := newService(t, st, c)
		buyer := awn(12)
		must(0, s.Ledger().Grant(ctx, buyer, 100, ""))
		late := must(s.Create(ctx, escrow.CreateInput{Buyer: buyer, Provider: "p", Capability: "work", Amount: 30, Deadline: c.Now().Add(2 * time.Hour)}))
		must(s.Fund(ctx, late.ID, buyer))
		done := must(s.Create(ctx, escrow.CreateInput{Buyer: buyer, Provider: "p", Capability: "work", Amount: 20, Deadline: c.Now().Add(48 * time.Hour)}))
		must(s.Fund(ctx, done.ID, buyer))
		must(s.Verify(ctx, done.ID, buyer))
		if rep := must(s.Run(ctx)); rep.Refunded+rep.Released != 0 {
			t.Fatalf("early run: %+v", rep)
		}
		c.Advance(3 * time.Hour)
		if rep := must(s.Run(ctx)); rep.Refunded != 1 || rep.Released != 0 {
			t.Fatalf("after the deadline: %+v", rep)
		}
		c.Advance(escrow.DefaultDisputeWindow)
		if rep := must(s.Run(ctx)); rep.Released != 1 || rep.Refunded != 0 {
			t.Fatalf("after the window: %+v", rep)
		}
		l, d := must(s.Get(ctx, late.ID)), must(s.Get(ctx, done.ID))
		if l.State != escrow.Refunded || l.Transitions[len(l.Transitions)-1].By != escrow.BySchedule ||
			d.State != escrow.Released || d.Transitions[len(d.Transitions)-1].By != escrow.BySchedule {
			t.Fatalf("late %s, done %s", l.State, d.State)
		}
		if _, err := s.Dispute(ctx, done.ID, buyer); apierror.From(err).Code != escrow.CodeInvalidTransition {
			t.Fatalf("dispute after release: %v", err)
		}
		if b, p := balance(t, s, buyer), balance(t, s, provider); b.Balance != 80 || b.Held != 0 || p.Balance != 20 {
			t.Fatalf("buyer %+v provider %+v", b, p)
		}
	})
}

// TestTransitionsAnswerAsTheContractSays: repeats are 200 unchanged,
// illegal steps 409, strangers 403, a failed verify keeps its reason and a
// retry re-invokes with the same task id.
func TestTransitionsAnswerAsTheContractSays(t *testing.T) {
	st := stores.Memory().Open(t)
	ctx := t.Context()
	c := newClock()
	s, inv := newService(t, st, c)
	buyer, stranger := awn(13), awn(14)
	must(0, s.Ledger().Grant(ctx, buyer, 50, ""))
	e := must(s.Create(ctx, escrow.CreateInput{Buyer: buyer, Provider: "p", Capability: "work", Amount: 50, Input: json.RawMessage(`{"Fail":true}`)}))
	if _, err := s.Release(ctx, e.ID, buyer); apierror.From(err).Code != escrow.CodeInvalidTransition {
		t.Fatalf("release of created: %v", err)
	}
	if _, err := s.Fund(ctx, e.ID, stranger); apierror.KindOf(err) != apierror.Forbidden {
		t.Fatalf("stranger's fund: %v", err)
	}
	f1 := must(s.Fund(ctx, e.ID, buyer))
	f2 := must(s.Fund(ctx, e.ID, buyer))
	if f1.Version != f2.Version || len(f2.Transitions) != 2 {
		t.Fatalf("repeated fund moved the escrow: %+v", f2)
	}
	v := must(s.Verify(ctx, e.ID, buyer))
	if v.State != escrow.Failed || v.Status != 502 || v.Reason == "" {
		t.Fatalf("verify: %+v", v)
	}
	v = must(s.Verify(ctx, e.ID, buyer))
	if v.State != escrow.Failed || inv.calls[e.ID] != 2 {
		t.Fatalf("retried verify: %s, %d calls", v.State, inv.calls[e.ID])
	}
	r := must(s.Refund(ctx, e.ID, buyer))
	r2 := must(s.Refund(ctx, e.ID, buyer))
	if r.State != escrow.Refunded || r2.Version != r.Version {
		t.Fatalf("refund: %+v %+v", r, r2)
	}
	if b := balance(t, s, buyer); b.Balance != 50 || b.Held != 0 {
		t.Fatalf("buyer %+v", b)
	}
	if _, err := s.Show(ctx, e.ID, stranger); apierror.KindOf(err) != apierror.Forbidden {
		t.Fatalf("stranger's show: %v", err)
	}
	for _, who := range []string{buyer, provider, operator} {
		must(s.Show(ctx, e.ID, who))
	}
	if _, err := s.Get(ctx, "nope"); apierror.KindOf(err) != apierror.NotFound {
		t.Fatalf("unknown id: %v", err)
	}
	page := must(s.List(ctx, buyer, "buyer", escrow.Refunded, 10, ""))
	if len(page.Escrows) != 1 || page.Escrows[0].ID != e.ID {
		t.Fatalf("list: %+v", page)
	}
	if p := must(s.List(ctx, provider, "provider", escrow.Funded, 10, "")); len(p.Escrows) != 0 {
		t.Fatalf("provider's funded: %+v", p)
	}
	checkHistory(t, r)
	if _, err := s.Create(ctx, escrow.CreateInput{Buyer: buyer, Provider: "p", Capability: "nope", Amount: 1}); apierror.KindOf(err) != apierror.Invalid {
		t.Fatalf("unknown capability: %v", err)
	}
	if _, err := s.Create(ctx, escrow.CreateInput{Buyer: buyer, Provider: "q", Capability: "work", Amount: 1}); apierror.KindOf(err) != apierror.NotFound {
		t.Fatalf("unknown provider: %v", err)
	}
	if err := s.Ledger().Grant(ctx, "bob", 1, ""); apierror.KindOf(err) != apierror.Invalid {
		t.Fatalf("grant to a non-awnId: %v", err)
	}
}
