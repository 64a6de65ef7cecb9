package ledger_test

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/a2awire/a2awire/functions/fixture-ledger/ledger"
	"github.com/a2awire/a2awire/shared/store"
	"github.com/a2awire/a2awire/shared/store/storetest"
	"github.com/a2awire/a2awire/shared/store/storetest/stores"
)

// Concurrency levels of the race cases (named by the storage issues).
const (
	appendRacers    = 200
	duplicateRacers = 30
	// processes is how many Books share one store in the race cases: each
	// queues its own appends, and the Books race each other optimistically,
	// as Lambda instances do.
	processes = 4
)

// t0 is the tests' entry time.
var t0 = time.Date(2030, 1, 2, 3, 4, 5, 600_000_000, time.UTC)

// TestBook runs the ledger's storage rules on every engine.
func TestBook(t *testing.T) {
	cases := []struct {
		name string
		fn   func(t *testing.T, st store.Store)
	}{
		{"empty account", testBookEmpty},
		{"append assigns sequence and balance", testBookAppend},
		{"existing entry id returns the stored entry", testBookDuplicate},
		{"accounts are separate", testBookAccounts},
		{"items follow the documented key patterns", testBookItems},
		{"invalid input writes nothing", testBookInvalid},
		{"concurrent appends from several processes", testBookConcurrentAppends},
		{"concurrent appends of one entry id", testBookConcurrentDuplicates},
		{"contention that exhausts the retries is unavailable", testBookContention},
		{"calls per append", testBookCalls},
		{"a write of unknown outcome is settled", testBookSettle},
	}
	for _, s := range stores.All(local) {
		t.Run(s.Name, func(t *testing.T) {
			t.Parallel()
			for _, c := range cases {
				t.Run(c.name, func(t *testing.T) {
					t.Parallel()
					c.fn(t, s.Open(t))
				})
			}
		})
	}
}

func entry(account, id string, cents int64, at time.Time) ledger.Entry {
	return ledger.Entry{Account: account, EntryID: id, AmountCents: cents, Memo: "memo " + id, CreatedAt: at}
}

func sameEntry(t testing.TB, what string, got, want ledger.Entry) {
	t.Helper()
	if got.Account != want.Account || got.EntryID != want.EntryID || got.Sequence != want.Sequence ||
		got.AmountCents != want.AmountCents || got.Memo != want.Memo || got.BalanceCents != want.BalanceCents ||
		!got.CreatedAt.Equal(want.CreatedAt) {
		t.Fatalf("%s:\n got %+v\nwant %+v", what, got, want)
	}
}

func mustAppend(t testing.TB, b *ledger.Book, e ledger.Entry) ledger.Entry {
	t.Helper()
	got, err := b.Append(context.Background(), e)
	if err != nil {
		t.Fatalf("append %+v: %v", e, err)
	}
	return got
}

func mustBalance(t testing.TB, b *ledger.Book, account string) ledger.Balance {
	t.Helper()
	bal, err := b.Balance(context.Background(), account)
	if err != nil {
		t.Fatalf("balance of %q: %v", account, err)
	}
	return bal
}

func testBookEmpty(t *testing.T, st store.Store) {
	b := ledger.NewBook(st)
	if _, err := b.Balance(context.Background(), "acct"); !errors.Is(err, store.ErrNotFound) {
		t.Fatalf("balance of an empty account: %v, want ErrNotFound", err)
	}
	es, err := b.List(context.Background(), "acct")
	if err != nil || es == nil || len(es) != 0 {
		t.Fatalf("list of an empty account = %v (nil: %t), %v; want an empty slice", es, es == nil, err)
	}
}

func testBookAppend(t *testing.T, st store.Store) {
	b := ledger.NewBook(st)
	amounts := []int64{100, -30, 5, 1_000_000_000, -1_000_000_000}
	var want []ledger.Entry
	var balance int64
	for i, cents := range amounts {
		e := entry("acct", fmt.Sprintf("e%d", i+1), cents, t0.Add(time.Duration(i)*time.Nanosecond))
		if i == 0 {
			e.Memo = "" // optional
			e.CreatedAt = time.Time{}
		}
		e.Sequence, e.BalanceCents = 99, 99 // the book assigns these
		balance += cents
		w := e
		w.Sequence, w.BalanceCents = int64(i+1), balance
		sameEntry(t, "append result", mustAppend(t, b, e), w)
		want = append(want, w)
	}
	got, err := b.List(context.Background(), "acct")
	if err != nil || len(got) != len(want) {
		t.Fatalf("list: %d entries (%v), want %d", len(got), err, len(want))
	}
	for i := range want {
		sameEntry(t, fmt.Sprintf("list[%d]", i), got[i], want[i])
	}
	if bal := mustBalance(t, b, "acct"); bal != (ledger.Balance{Account: "acct", BalanceCents: balance, Entries: int64(len(amounts))}) {
		t.Fatalf("balance = %+v, want %d over %d entries", bal, balance, len(amounts))
	}
}

func testBookDuplicate(t *testing.T, st store.Store) {
	b := ledger.NewBook(st)
	first := mustAppend(t, b, entry("acct", "e1", 100, t0))
	again := entry("acct", "e1", 999, t0.Add(time.Hour))
	again.Memo = "a different memo"
	got, err := b.Append(context.Background(), again)
	if !errors.Is(err, ledger.ErrEntryExists) {
		t.Fatalf("append of an existing entry id: %v, want ErrEntryExists", err)
	}
	sameEntry(t, "entry returned with ErrEntryExists", got, first)
	if bal := mustBalance(t, b, "acct"); bal.BalanceCents != 100 || bal.Entries != 1 {
		t.Fatalf("duplicate append changed the balance: %+v", bal)
	}
	second := mustAppend(t, b, entry("acct", "e2", 1, t0))
	if second.Sequence != 2 || second.BalanceCents != 101 {
		t.Fatalf("append after a duplicate: sequence %d balance %d, want 2 and 101", second.Sequence, second.BalanceCents)
	}
}

func testBookAccounts(t *testing.T, st store.Store) {
	b := ledger.NewBook(st)
	a := mustAppend(t, b, entry("alice", "e1", 10, t0))
	o := mustAppend(t, b, entry("bob", "e1", 20, t0)) // entry ids are per account
	c := mustAppend(t, b, entry("alice#ACCOUNT", "e1", 30, t0))
	d := mustAppend(t, b, entry("alice", "SEQ#00000000000000000001", 40, t0))
	for _, e := range []ledger.Entry{a, o, c} {
		if e.Sequence != 1 || e.BalanceCents != e.AmountCents {
			t.Fatalf("first entry of %s: %+v", e.Account, e)
		}
	}
	if d.Sequence != 2 {
		t.Fatalf("an entry id shaped like a sequence key: %+v", d)
	}
	if got := mustBalance(t, b, "alice"); got.BalanceCents != 50 || got.Entries != 2 {
		t.Fatalf("alice: %+v", got)
	}
	if got, err := b.List(context.Background(), "bob"); err != nil || len(got) != 1 || got[0].AmountCents != 20 {
		t.Fatalf("bob's entries: %+v %v", got, err)
	}
}

// testBookItems reads the items through the item API: docs/storage.md's
// key-pattern table is what is stored.
func testBookItems(t *testing.T, st store.Store) {
	ctx := context.Background()
	b := ledger.NewBook(st)
	mustAppend(t, b, entry("acct", "e1", 7, t0))
	mustAppend(t, b, entry("acct", "e2", 5, t0))
	acct, err := st.Get(ctx, store.Key{PK: "LEDGER#acct", SK: "ACCOUNT"})
	if err != nil {
		t.Fatal(err)
	}
	if n, _ := acct.Int("entries"); n != 2 || acct.Str("type") != ledger.TypeAccount {
		t.Fatalf("account item %v", acct)
	}
	e2, err := st.Get(ctx, store.Key{PK: "LEDGER#acct", SK: "SEQ#00000000000000000002"})
	if err != nil {
		t.Fatal(err)
	}
	if e2.Str("entryId") != "e2" || e2.Str("type") != ledger.TypeEntry {
		t.Fatalf("entry item %v", e2)
	}
	guard, err := st.Get(ctx, store.Key{PK: "LEDGER#acct", SK: "ENTRYID#e2"})
	if err != nil {
		t.Fatal(err)
	}
	if n, _ := guard.Int("sequence"); n != 2 || guard.Str("type") != ledger.TypeEntryID {
		t.Fatalf("guard item %v", guard)
	}
	page, err := st.Query(ctx, store.Query{PK: "LEDGER#acct"})
	if err != nil || len(page.Items) != 5 {
		t.Fatalf("partition holds %d items (%v), want 5 (account, 2 entries, 2 guards)", len(page.Items), err)
	}
}

func testBookInvalid(t *testing.T, st store.Store) {
	ctx := context.Background()
	b := ledger.NewBook(st)
	for _, e := range []ledger.Entry{
		entry("", "e1", 1, t0),
		entry("acct", "", 1, t0),
		entry(strings.Repeat("a", store.MaxPKBytes), "e1", 1, t0),
		entry("acct", strings.Repeat("e", store.MaxSKBytes), 1, t0),
		entry("acct\xff", "e1", 1, t0),
		{Account: "acct", EntryID: "e1", AmountCents: 1, Memo: strings.Repeat("m", store.MaxItemBytes)},
	} {
		_, err := b.Append(ctx, e)
		if !errors.Is(err, store.ErrInvalid) {
			t.Fatalf("append %.20q/%.20q memo %.20q: %v, want ErrInvalid", e.Account, e.EntryID, e.Memo, err)
		}
	}
	if _, err := b.Balance(ctx, "acct"); !errors.Is(err, store.ErrNotFound) {
		t.Fatalf("balance after refused appends: %v, want ErrNotFound", err)
	}
}

// testBookConcurrentAppends races appendRacers appends on one account from
// several Books (processes): sequences are exactly 1..n and every running
// balance matches the entries before it.
func testBookConcurrentAppends(t *testing.T, st store.Store) {
	ctx := context.Background()
	books := make([]*ledger.Book, processes)
	for i := range books {
		books[i] = ledger.NewBook(st)
	}
	errs := make([]error, appendRacers)
	start := make(chan struct{})
	var wg sync.WaitGroup
	var sum int64
	for i := range appendRacers {
		cents := int64(i*7 - 500)
		sum += cents
		wg.Go(func() {
			<-start
			_, errs[i] = books[i%processes].Append(ctx, entry("hot", fmt.Sprintf("e%03d", i), cents, t0))
		})
	}
	close(start)
	wg.Wait()
	for i, err := range errs {
		if err != nil {
			t.Fatalf("append e%03d: %v", i, err)
		}
	}
	checkLedger(t, books[0], "hot", appendRacers, sum)
}

// checkLedger verifies an account's invariants: sequences 1..n without gaps
// or repeats, each balance the previous plus its amount, distinct entry
// ids, and a Balance that agrees.
func checkLedger(t testing.TB, b *ledger.Book, account string, n int, sum int64) {
	t.Helper()
	es, err := b.List(context.Background(), account)
	if err != nil {
		t.Fatal(err)
	}
	if len(es) != n {
		t.Fatalf("%s: %d entries, want %d", account, len(es), n)
	}
	var running int64
	ids := make(map[string]bool, n)
	for i, e := range es {
		running += e.AmountCents
		if e.Sequence != int64(i+1) || e.BalanceCents != running || ids[e.EntryID] {
			t.Fatalf("%s: entry %d is %+v (running balance %d, id seen before: %t)", account, i, e, running, ids[e.EntryID])
		}
		ids[e.EntryID] = true
	}
	if running != sum {
		t.Fatalf("%s: balance %d, want %d", account, running, sum)
	}
	if bal := mustBalance(t, b, account); bal.BalanceCents != sum || bal.Entries != int64(n) {
		t.Fatalf("%s: balance %+v, want %d over %d entries", account, bal, sum, n)
	}
}

func testBookConcurrentDuplicates(t *testing.T, st store.Store) {
	ctx := context.Background()
	books := make([]*ledger.Book, processes)
	for i := range books {
		books[i] = ledger.NewBook(st)
	}
	type result struct {
		e   ledger.Entry
		err error
	}
	results := make([]result, duplicateRacers)
	start := make(chan struct{})
	var wg sync.WaitGroup
	for i := range results {
		wg.Go(func() {
			<-start
			e, err := books[i%processes].Append(ctx, entry("acct", "same", int64(i+1), t0))
			results[i] = result{e, err}
		})
	}
	close(start)
	wg.Wait()
	var won *ledger.Entry
	for i, r := range results {
		if r.err == nil {
			if won != nil {
				t.Fatalf("two appends of one entry id succeeded: %+v and %+v", *won, r.e)
			}
			won = &results[i].e
		}
	}
	if won == nil {
		t.Fatalf("no append succeeded; first error: %v", results[0].err)
	}
	for _, r := range results {
		if r.err == nil {
			continue
		}
		if !errors.Is(r.err, ledger.ErrEntryExists) {
			t.Fatalf("loser: %v, want ErrEntryExists", r.err)
		}
		sameEntry(t, "loser's stored entry", r.e, *won)
	}
	checkLedger(t, books[0], "acct", 1, won.AmountCents)
}

// rival makes every 3-action write lose: just before it, another process
// appends to the same account.
type rival struct {
	store.Store
	other *ledger.Book
	n     atomic.Int64
}

func (r *rival) Write(ctx context.Context, actions ...store.Action) ([]store.Item, error) {
	if len(actions) == 3 {
		i := r.n.Add(1)
		if _, err := r.other.Append(ctx, entry("acct", fmt.Sprintf("rival-%d", i), 1, t0)); err != nil {
			return nil, err
		}
	}
	return r.Store.Write(ctx, actions...)
}

// testBookContention: an append that loses every race until its retries
// run out fails with store.ErrUnavailable (503) and writes nothing; so does
// one whose context leaves no time for another attempt.
func testBookContention(t *testing.T, st store.Store) {
	r := &rival{Store: st, other: ledger.NewBook(st)}
	b := ledger.NewBook(r)
	ledger.SetRetries(b, 3, time.Millisecond)
	_, err := b.Append(context.Background(), entry("acct", "mine", 100, t0))
	if !errors.Is(err, store.ErrUnavailable) {
		t.Fatalf("append that always loses: %v, want ErrUnavailable", err)
	}
	if n := r.n.Load(); n != 3 {
		t.Fatalf("%d attempts, want 3", n)
	}
	checkLedger(t, r.other, "acct", 3, 3) // only the rival's entries

	// With the default budget, the deadline ends the retries instead.
	b = ledger.NewBook(r)
	ctx, cancel := context.WithTimeout(context.Background(), 800*time.Millisecond)
	defer cancel()
	_, err = b.Append(ctx, entry("acct", "mine-2", 100, t0))
	if !errors.Is(err, store.ErrUnavailable) || ctx.Err() != nil {
		t.Fatalf("append out of time: %v (context: %v), want ErrUnavailable before the deadline", err, ctx.Err())
	}
	for _, e := range mustList(t, r.other, "acct") {
		if strings.HasPrefix(e.EntryID, "mine") {
			t.Fatalf("a failed append was written: %+v", e)
		}
	}
}

func mustList(t testing.TB, b *ledger.Book, account string) []ledger.Entry {
	t.Helper()
	es, err := b.List(context.Background(), account)
	if err != nil {
		t.Fatal(err)
	}
	return es
}

// testBookCalls pins the item API calls (gets, queries, writes) of each
// operation, the same on every engine.
func testBookCalls(t *testing.T, st store.Store) {
	c := &storetest.Counting{Store: st}
	b := ledger.NewBook(c)
	ctx := context.Background()
	steps := []struct {
		name string
		do   func() error
		want [3]int64
	}{
		{"first append", func() error { _, err := b.Append(ctx, entry("acct", "e1", 1, t0)); return err }, [3]int64{1, 0, 1}},
		{"next append", func() error { _, err := b.Append(ctx, entry("acct", "e2", 1, t0)); return err }, [3]int64{1, 0, 1}},
		{"existing entry id", func() error {
			_, err := b.Append(ctx, entry("acct", "e1", 1, t0))
			if errors.Is(err, ledger.ErrEntryExists) {
				return nil
			}
			return fmt.Errorf("got %v, want ErrEntryExists", err)
		}, [3]int64{1, 0, 1}},
		{"balance", func() error { _, err := b.Balance(ctx, "acct"); return err }, [3]int64{1, 0, 0}},
		{"list", func() error { _, err := b.List(ctx, "acct"); return err }, [3]int64{0, 1, 0}},
	}
	for _, s := range steps {
		if err := s.do(); err != nil {
			t.Fatalf("%s: %v", s.name, err)
		}
		if got := c.Take(); got != s.want {
			t.Errorf("%s: [gets queries writes] = %v, want %v", s.name, got, s.want)
		}
	}
	// A race lost to another process costs one more write, no read: the
	// failed condition returns the account as it is now.
	r := &rival{Store: st, other: ledger.NewBook(st)}
	c2 := &storetest.Counting{Store: &onceRival{rival: r}}
	b2 := ledger.NewBook(c2)
	if _, err := b2.Append(ctx, entry("acct", "e3", 1, t0)); err != nil {
		t.Fatal(err)
	}
	if got := c2.Take(); got != [3]int64{1, 0, 2} {
		t.Errorf("append after one lost race: [gets queries writes] = %v, want [1 0 2]", got)
	}
}

// onceRival lets the rival win only the first race.
type onceRival struct {
	rival *rival
	done  atomic.Bool
}

func (o *onceRival) Get(ctx context.Context, k store.Key) (store.Item, error) {
	return o.rival.Store.Get(ctx, k)
}
func (o *onceRival) Query(ctx context.Context, q store.Query) (store.Page, error) {
	return o.rival.Store.Query(ctx, q)
}
func (o *onceRival) Write(ctx context.Context, actions ...store.Action) ([]store.Item, error) {
	if o.done.CompareAndSwap(false, true) {
		return o.rival.Write(ctx, actions...)
	}
	return o.rival.Store.Write(ctx, actions...)
}

// lossy fails the next 3-action writes in the configured way.
type lossy struct {
	store.Store
	// commitThenFail commits the write, then reports a connection error
	// (the response was lost).
	commitThenFail atomic.Bool
	// failUnwritten reports a connection error without writing.
	failUnwritten atomic.Bool
	// fenceFailures fails that many 1-action writes (the fence) without
	// writing; fenceAppliedThenFail writes the next one, then fails.
	fenceFailures        atomic.Int64
	fenceAppliedThenFail atomic.Bool
}

var errReset = errors.New("read tcp 127.0.0.1:1234: connection reset by peer")

func (l *lossy) Write(ctx context.Context, actions ...store.Action) ([]store.Item, error) {
	switch {
	case len(actions) == 3 && l.commitThenFail.CompareAndSwap(true, false):
		if _, err := l.Store.Write(ctx, actions...); err != nil {
			return nil, err
		}
		return nil, errReset
	case len(actions) == 3 && l.failUnwritten.CompareAndSwap(true, false):
		return nil, errReset
	case len(actions) == 1 && l.fenceAppliedThenFail.CompareAndSwap(true, false):
		if _, err := l.Store.Write(ctx, actions...); err != nil {
			return nil, err
		}
		return nil, errReset
	case len(actions) == 1 && l.fenceFailures.Add(-1) >= 0:
		return nil, errReset
	}
	return l.Store.Write(ctx, actions...)
}

// testBookSettle: a write whose outcome is lost is settled by fencing its
// entry id: committed → the append succeeded; not committed → nothing was
// written (unavailable), and a retry of the same entry id appends once;
// fence failed too → ErrOutcomeUnknown, and a retry settles it.
func testBookSettle(t *testing.T, st store.Store) {
	ctx := context.Background()
	l := &lossy{Store: st}
	b := ledger.NewBook(l)

	l.commitThenFail.Store(true)
	got, err := b.Append(ctx, entry("acct", "e1", 10, t0))
	if err != nil || got.Sequence != 1 {
		t.Fatalf("committed write with a lost response: %+v %v, want success", got, err)
	}

	l.failUnwritten.Store(true)
	_, err = b.Append(ctx, entry("acct", "e2", 20, t0))
	if !errors.Is(err, store.ErrUnavailable) {
		t.Fatalf("unwritten write with a lost response: %v, want ErrUnavailable", err)
	}
	checkLedger(t, b, "acct", 1, 10)
	got, err = b.Append(ctx, entry("acct", "e2", 20, t0)) // a retry passes the fence
	if err != nil || got.Sequence != 2 {
		t.Fatalf("retry over the fence: %+v %v", got, err)
	}

	// The fence itself is lost twice, then lands: still settled.
	l.failUnwritten.Store(true)
	l.fenceFailures.Store(2)
	if _, err = b.Append(ctx, entry("acct", "e3", 30, t0)); !errors.Is(err, store.ErrUnavailable) {
		t.Fatalf("lost write, fence lost twice: %v, want ErrUnavailable", err)
	}
	// The fence lands but its answer is lost: the resend meets it.
	l.failUnwritten.Store(true)
	l.fenceAppliedThenFail.Store(true)
	if _, err = b.Append(ctx, entry("acct", "e3", 30, t0)); !errors.Is(err, store.ErrUnavailable) {
		t.Fatalf("lost write, fence landed unseen: %v, want ErrUnavailable", err)
	}
	checkLedger(t, b, "acct", 2, 30)

	// No fence gets through: the outcome stays unknown. Every fence fails
	// at once here, so the bound only ends the retries: 250 ms of them
	// show it as well as the real 5 s (15 s over the three engines).
	l.failUnwritten.Store(true)
	l.fenceFailures.Store(1 << 40)
	bound := ledger.SetFenceTimeout(b, 250*time.Millisecond)
	_, err = b.Append(ctx, entry("acct", "e3", 30, t0))
	if !errors.Is(err, ledger.ErrOutcomeUnknown) {
		t.Fatalf("lost write and lost fence: %v, want ErrOutcomeUnknown", err)
	}
	l.fenceFailures.Store(0)
	ledger.SetFenceTimeout(b, bound)
	got, err = b.Append(ctx, entry("acct", "e3", 30, t0))
	if err != nil || got.Sequence != 3 {
		t.Fatalf("retry after an unknown outcome: %+v %v", got, err)
	}
	checkLedger(t, b, "acct", 3, 60)
}
