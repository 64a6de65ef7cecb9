// Package storetest is the conformance suite every store adapter runs, so
// that memory, bolt and DynamoDB behave the same and code tested against the
// in-memory store holds on AWS.
//
// An adapter's test calls Run with a constructor that returns a fresh, empty
// store for each subtest (and registers its cleanup on that t):
//
//	func TestConformance(t *testing.T) {
//		storetest.Run(t, func(t *testing.T) storetest.Store {
//			s := memory.New()
//			t.Cleanup(func() { s.Close() })
//			return s
//		})
//	}
//
// Later entities add their methods to Store and their cases to Run.
package storetest

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/a2awire/a2awire/shared/store"
)

// Store is every method an adapter implements. Consumers declare the
// smaller interfaces they need; this one exists so the suite covers all.
type Store interface {
	GetIdem(ctx context.Context, scope, key string, now time.Time) (store.IdemRecord, error)
	ClaimIdem(ctx context.Context, rec store.IdemRecord, now time.Time) (store.IdemRecord, error)
	CompleteIdem(ctx context.Context, scope, key, requestHash string, status int, body []byte) error
	DeleteIdem(ctx context.Context, scope, key, requestHash string) error

	AppendLedger(ctx context.Context, e store.LedgerEntry) (store.LedgerEntry, error)
	LedgerBalance(ctx context.Context, account string) (store.Balance, error)
	ListLedger(ctx context.Context, account string) ([]store.LedgerEntry, error)

	Close() error
}

// Concurrency levels of the race cases (named by the storage issue).
const (
	ClaimRacers     = 50
	AppendRacers    = 200
	DuplicateRacers = 30
)

// Run runs every conformance case against stores made by newStore. Cases
// run in parallel with each other, each on its own store.
func Run(t *testing.T, newStore func(t *testing.T) Store) {
	cases := []struct {
		name string
		fn   func(t *testing.T, s Store)
	}{
		{"Idem/GetAbsent", testIdemGetAbsent},
		{"Idem/ClaimThenGet", testIdemClaimThenGet},
		{"Idem/ClaimWhileInProgress", testIdemClaimWhileInProgress},
		{"Idem/CompleteThenReplay", testIdemCompleteThenReplay},
		{"Idem/CompleteGuards", testIdemCompleteGuards},
		{"Idem/Expiry", testIdemExpiry},
		{"Idem/TakeOver", testIdemTakeOver},
		{"Idem/CompletedIgnoresInProgressDeadline", testIdemCompletedIgnoresDeadline},
		{"Idem/Delete", testIdemDelete},
		{"Idem/ScopesAreSeparate", testIdemScopes},
		{"Idem/Copies", testIdemCopies},
		{"Idem/BodyRoundTrip", testIdemBodyRoundTrip},
		{"Idem/Invalid", testIdemInvalid},
		{"Idem/ConcurrentClaims", testIdemConcurrentClaims},
		{"Ledger/Empty", testLedgerEmpty},
		{"Ledger/Append", testLedgerAppend},
		{"Ledger/DuplicateEntryID", testLedgerDuplicate},
		{"Ledger/AccountsAreSeparate", testLedgerAccounts},
		{"Ledger/Invalid", testLedgerInvalid},
		{"Ledger/ConcurrentAppends", testLedgerConcurrentAppends},
		{"Ledger/ConcurrentDuplicates", testLedgerConcurrentDuplicates},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			c.fn(t, newStore(t))
		})
	}
}

// t0 is the suite's "now". Times are passed in, never read from a clock, so
// expiry is exact and the suite is deterministic.
var t0 = time.Date(2030, 1, 2, 3, 4, 5, 600_000_000, time.UTC)

const (
	idemTTL     = 24 * time.Hour
	holdTimeout = 30 * time.Second
)

// claim returns a fresh in-progress record for (scope, key) claimed at now.
func claim(scope, key, hash string, now time.Time) store.IdemRecord {
	return store.IdemRecord{
		Scope:           scope,
		Key:             key,
		State:           store.IdemInProgress,
		RequestHash:     hash,
		ExpiresAt:       now.Add(idemTTL),
		InProgressUntil: now.Add(holdTimeout),
	}
}

// MustClaim claims rec at now and fails the test unless the claim wins.
func MustClaim(t testing.TB, s Store, rec store.IdemRecord, now time.Time) store.IdemRecord {
	t.Helper()
	got, err := s.ClaimIdem(context.Background(), rec, now)
	if err != nil {
		t.Fatalf("ClaimIdem(%s/%s): %v", rec.Scope, rec.Key, err)
	}
	return got
}

// MustComplete completes (scope, key) held under hash and fails the test on error.
func MustComplete(t testing.TB, s Store, scope, key, hash string, status int, body []byte) {
	t.Helper()
	if err := s.CompleteIdem(context.Background(), scope, key, hash, status, body); err != nil {
		t.Fatalf("CompleteIdem(%s/%s): %v", scope, key, err)
	}
}

// MustGet returns the live record at now and fails the test when there is none.
func MustGet(t testing.TB, s Store, scope, key string, now time.Time) store.IdemRecord {
	t.Helper()
	rec, err := s.GetIdem(context.Background(), scope, key, now)
	if err != nil {
		t.Fatalf("GetIdem(%s/%s) at %s: %v", scope, key, now.Format(time.RFC3339Nano), err)
	}
	return rec
}

// MustAppend appends e and fails the test on error.
func MustAppend(t testing.TB, s Store, e store.LedgerEntry) store.LedgerEntry {
	t.Helper()
	got, err := s.AppendLedger(context.Background(), e)
	if err != nil {
		t.Fatalf("AppendLedger(%s/%s): %v", e.Account, e.EntryID, err)
	}
	return got
}

func wantErr(t testing.TB, what string, err, target error) {
	t.Helper()
	if !errors.Is(err, target) {
		t.Fatalf("%s: error %v, want errors.Is(_, %v)", what, err, target)
	}
	if err != nil && err.Error() == target.Error() {
		t.Errorf("%s: error %q is not wrapped with the operation", what, err)
	}
}

func wantNotFoundAt(t testing.TB, s Store, scope, key string, now time.Time) {
	t.Helper()
	rec, err := s.GetIdem(context.Background(), scope, key, now)
	if !errors.Is(err, store.ErrNotFound) {
		t.Fatalf("GetIdem(%s/%s) at %s = %+v, %v; want ErrNotFound", scope, key, now.Format(time.RFC3339Nano), rec, err)
	}
}

// sameIdem compares records field by field, times with Equal.
func sameIdem(t testing.TB, what string, got, want store.IdemRecord) {
	t.Helper()
	if got.Scope != want.Scope || got.Key != want.Key || got.State != want.State ||
		got.RequestHash != want.RequestHash || got.Status != want.Status || !bytes.Equal(got.Body, want.Body) ||
		!got.ExpiresAt.Equal(want.ExpiresAt) || !got.InProgressUntil.Equal(want.InProgressUntil) {
		t.Fatalf("%s:\n got %s\nwant %s", what, fmtIdem(got), fmtIdem(want))
	}
}

func fmtIdem(r store.IdemRecord) string {
	return fmt.Sprintf("{%s/%s %s hash=%q status=%d body=%q expires=%s until=%s}", r.Scope, r.Key, r.State,
		r.RequestHash, r.Status, r.Body, r.ExpiresAt.Format(time.RFC3339Nano), r.InProgressUntil.Format(time.RFC3339Nano))
}

func completed(rec store.IdemRecord, status int, body []byte) store.IdemRecord {
	rec.State = store.IdemCompleted
	rec.Status = status
	rec.Body = body
	return rec
}

func testIdemGetAbsent(t *testing.T, s Store) {
	_, err := s.GetIdem(context.Background(), "agent", "task-1", t0)
	wantErr(t, "GetIdem absent", err, store.ErrNotFound)
}

func testIdemClaimThenGet(t *testing.T, s Store) {
	rec := claim("agent", "task-1", "h1", t0)
	got := MustClaim(t, s, rec, t0)
	sameIdem(t, "ClaimIdem result", got, rec)
	sameIdem(t, "GetIdem after claim", MustGet(t, s, "agent", "task-1", t0.Add(time.Second)), rec)
}

func testIdemClaimWhileInProgress(t *testing.T, s Store) {
	ctx := context.Background()
	first := MustClaim(t, s, claim("agent", "task-1", "h1", t0), t0)
	for _, hash := range []string{"h1", "h2"} {
		at := t0.Add(holdTimeout - time.Nanosecond)
		got, err := s.ClaimIdem(ctx, claim("agent", "task-1", hash, at), at)
		wantErr(t, "second claim while in progress", err, store.ErrExists)
		sameIdem(t, "record returned with ErrExists", got, first)
	}
	sameIdem(t, "record after refused claims", MustGet(t, s, "agent", "task-1", t0), first)
}

func testIdemCompleteThenReplay(t *testing.T, s Store) {
	ctx := context.Background()
	rec := MustClaim(t, s, claim("agent", "task-1", "h1", t0), t0)
	body := []byte(`{"output":{"sequence":1}}`)
	MustComplete(t, s, "agent", "task-1", "h1", 200, body)
	want := completed(rec, 200, body)
	sameIdem(t, "GetIdem after complete", MustGet(t, s, "agent", "task-1", t0.Add(time.Minute)), want)
	for _, hash := range []string{"h1", "other-body"} {
		got, err := s.ClaimIdem(ctx, claim("agent", "task-1", hash, t0.Add(time.Hour)), t0.Add(time.Hour))
		wantErr(t, "claim of a completed key", err, store.ErrExists)
		sameIdem(t, "completed record returned with ErrExists", got, want)
	}
}

func testIdemCompleteGuards(t *testing.T, s Store) {
	ctx := context.Background()
	err := s.CompleteIdem(ctx, "agent", "absent", "h1", 200, []byte("x"))
	wantErr(t, "complete absent", err, store.ErrNotFound)

	rec := MustClaim(t, s, claim("agent", "task-1", "h1", t0), t0)
	err = s.CompleteIdem(ctx, "agent", "task-1", "h2", 200, []byte("wrong holder"))
	wantErr(t, "complete with another hash", err, store.ErrNotFound)
	sameIdem(t, "record after refused complete", MustGet(t, s, "agent", "task-1", t0), rec)

	MustComplete(t, s, "agent", "task-1", "h1", 201, []byte("first"))
	err = s.CompleteIdem(ctx, "agent", "task-1", "h1", 500, []byte("second"))
	wantErr(t, "complete twice", err, store.ErrNotFound)
	sameIdem(t, "record after second complete", MustGet(t, s, "agent", "task-1", t0), completed(rec, 201, []byte("first")))
}

func testIdemExpiry(t *testing.T, s Store) {
	ctx := context.Background()
	rec := MustClaim(t, s, claim("agent", "task-1", "h1", t0), t0)
	MustComplete(t, s, "agent", "task-1", "h1", 200, []byte("done"))
	end := rec.ExpiresAt
	MustGet(t, s, "agent", "task-1", end.Add(-time.Nanosecond))
	wantNotFoundAt(t, s, "agent", "task-1", end)
	wantNotFoundAt(t, s, "agent", "task-1", end.Add(time.Hour))

	_, err := s.ClaimIdem(ctx, claim("agent", "task-1", "h2", end.Add(-time.Nanosecond)), end.Add(-time.Nanosecond))
	wantErr(t, "claim just before expiry", err, store.ErrExists)
	again := MustClaim(t, s, claim("agent", "task-1", "h2", end), end)
	sameIdem(t, "record after claiming an expired key", MustGet(t, s, "agent", "task-1", end), again)
}

func testIdemTakeOver(t *testing.T, s Store) {
	ctx := context.Background()
	dead := MustClaim(t, s, claim("agent", "task-1", "h1", t0), t0)
	deadline := dead.InProgressUntil
	MustGet(t, s, "agent", "task-1", deadline.Add(-time.Nanosecond))
	wantNotFoundAt(t, s, "agent", "task-1", deadline)

	_, err := s.ClaimIdem(ctx, claim("agent", "task-1", "h2", deadline.Add(-time.Nanosecond)), deadline.Add(-time.Nanosecond))
	wantErr(t, "claim before the holder's deadline", err, store.ErrExists)
	heir := MustClaim(t, s, claim("agent", "task-1", "h2", deadline), deadline)

	// The presumed-dead holder wakes up: it can neither complete nor delete
	// the heir's record.
	err = s.CompleteIdem(ctx, "agent", "task-1", "h1", 200, []byte("late"))
	wantErr(t, "complete by the dead holder", err, store.ErrNotFound)
	if err := s.DeleteIdem(ctx, "agent", "task-1", "h1"); err != nil {
		t.Fatalf("DeleteIdem by the dead holder: %v", err)
	}
	sameIdem(t, "heir's record", MustGet(t, s, "agent", "task-1", deadline), heir)

	MustComplete(t, s, "agent", "task-1", "h2", 200, []byte("heir"))
	sameIdem(t, "heir's completed record", MustGet(t, s, "agent", "task-1", deadline), completed(heir, 200, []byte("heir")))
}

func testIdemCompletedIgnoresDeadline(t *testing.T, s Store) {
	ctx := context.Background()
	rec := MustClaim(t, s, claim("agent", "task-1", "h1", t0), t0)
	MustComplete(t, s, "agent", "task-1", "h1", 200, []byte("done"))
	later := rec.InProgressUntil.Add(time.Hour)
	sameIdem(t, "completed record past the in-progress deadline", MustGet(t, s, "agent", "task-1", later), completed(rec, 200, []byte("done")))
	_, err := s.ClaimIdem(ctx, claim("agent", "task-1", "h2", later), later)
	wantErr(t, "claim of a completed record past the in-progress deadline", err, store.ErrExists)
}

func testIdemDelete(t *testing.T, s Store) {
	ctx := context.Background()
	if err := s.DeleteIdem(ctx, "agent", "absent", "h1"); err != nil {
		t.Fatalf("DeleteIdem absent: %v", err)
	}

	MustClaim(t, s, claim("agent", "task-1", "h1", t0), t0)
	if err := s.DeleteIdem(ctx, "agent", "task-1", "h2"); err != nil {
		t.Fatalf("DeleteIdem with another hash: %v", err)
	}
	MustGet(t, s, "agent", "task-1", t0)
	if err := s.DeleteIdem(ctx, "agent", "task-1", "h1"); err != nil {
		t.Fatalf("DeleteIdem: %v", err)
	}
	wantNotFoundAt(t, s, "agent", "task-1", t0)
	MustClaim(t, s, claim("agent", "task-1", "h3", t0), t0) // a retry runs again

	MustComplete(t, s, "agent", "task-1", "h3", 200, []byte("done"))
	if err := s.DeleteIdem(ctx, "agent", "task-1", "h3"); err != nil {
		t.Fatalf("DeleteIdem completed: %v", err)
	}
	wantNotFoundAt(t, s, "agent", "task-1", t0)
}

func testIdemScopes(t *testing.T, s Store) {
	a := MustClaim(t, s, claim("agent-a", "task-1", "h1", t0), t0)
	b := MustClaim(t, s, claim("agent-b", "task-1", "h1", t0), t0)
	c := MustClaim(t, s, claim("agent-a", "task-2", "h1", t0), t0)
	// Separators must not make distinct pairs collide.
	d := MustClaim(t, s, claim("agent-a#KEY", "task-1", "h1", t0), t0)
	e := MustClaim(t, s, claim("agent-a", "KEY#task-1", "h1", t0), t0)
	MustComplete(t, s, "agent-a", "task-1", "h1", 200, []byte("a"))
	sameIdem(t, "agent-a/task-1", MustGet(t, s, "agent-a", "task-1", t0), completed(a, 200, []byte("a")))
	sameIdem(t, "agent-b/task-1", MustGet(t, s, "agent-b", "task-1", t0), b)
	sameIdem(t, "agent-a/task-2", MustGet(t, s, "agent-a", "task-2", t0), c)
	sameIdem(t, "agent-a#KEY/task-1", MustGet(t, s, "agent-a#KEY", "task-1", t0), d)
	sameIdem(t, "agent-a/KEY#task-1", MustGet(t, s, "agent-a", "KEY#task-1", t0), e)
}

func testIdemCopies(t *testing.T, s Store) {
	ctx := context.Background()
	in := claim("agent", "task-1", "h1", t0)
	in.Body = []byte("ignored: a claim has no response yet")
	in.Status = 299
	got := MustClaim(t, s, in, t0)
	if got.Body != nil || got.Status != 0 {
		t.Fatalf("claim kept a response: status %d body %q", got.Status, got.Body)
	}

	body := []byte("original")
	MustComplete(t, s, "agent", "task-1", "h1", 200, body)
	copy(body, "XXXXXXXX")
	r1 := MustGet(t, s, "agent", "task-1", t0)
	if string(r1.Body) != "original" {
		t.Fatalf("store shares the caller's body slice: got %q", r1.Body)
	}
	copy(r1.Body, "YYYYYYYY")
	if r2 := MustGet(t, s, "agent", "task-1", t0); string(r2.Body) != "original" {
		t.Fatalf("GetIdem returned the store's own body slice: got %q", r2.Body)
	}
	r3, err := s.ClaimIdem(ctx, claim("agent", "task-1", "h2", t0), t0)
	wantErr(t, "claim of a completed key", err, store.ErrExists)
	copy(r3.Body, "ZZZZZZZZ")
	if r4 := MustGet(t, s, "agent", "task-1", t0); string(r4.Body) != "original" {
		t.Fatalf("ClaimIdem returned the store's own body slice: got %q", r4.Body)
	}
}

func testIdemBodyRoundTrip(t *testing.T, s Store) {
	all := make([]byte, 256)
	for i := range all {
		all[i] = byte(i)
	}
	bodies := map[string][]byte{
		"binary": all,
		"empty":  {},
		"max":    bytes.Repeat([]byte("a"), store.MaxIdemBodyBytes),
		"json":   []byte(`{"error":"unavailable","message":"ünïcode ✓"}`),
	}
	for name, body := range bodies {
		rec := MustClaim(t, s, claim("agent", name, "h-"+name, t0), t0)
		MustComplete(t, s, "agent", name, "h-"+name, 503, body)
		sameIdem(t, "body "+name, MustGet(t, s, "agent", name, t0), completed(rec, 503, body))
	}
}

func testIdemInvalid(t *testing.T, s Store) {
	ctx := context.Background()
	long := strings.Repeat("k", store.MaxKeyBytes+1)
	for _, k := range [][2]string{{"", "task"}, {"agent", ""}, {long, "task"}, {"agent", long}, {"agent", "bad\xff"}} {
		_, err := s.ClaimIdem(ctx, claim(k[0], k[1], "h", t0), t0)
		wantErr(t, fmt.Sprintf("claim %q/%q", k[0], k[1]), err, store.ErrInvalid)
		_, err = s.GetIdem(ctx, k[0], k[1], t0)
		wantErr(t, fmt.Sprintf("get %q/%q", k[0], k[1]), err, store.ErrInvalid)
		err = s.CompleteIdem(ctx, k[0], k[1], "h", 200, nil)
		wantErr(t, fmt.Sprintf("complete %q/%q", k[0], k[1]), err, store.ErrInvalid)
		err = s.DeleteIdem(ctx, k[0], k[1], "h")
		wantErr(t, fmt.Sprintf("delete %q/%q", k[0], k[1]), err, store.ErrInvalid)
	}

	dead := claim("agent", "task-1", "h", t0)
	_, err := s.ClaimIdem(ctx, dead, dead.InProgressUntil)
	wantErr(t, "claim of a record already past its deadline", err, store.ErrInvalid)
	_, err = s.ClaimIdem(ctx, store.IdemRecord{Scope: "agent", Key: "task-1"}, t0)
	wantErr(t, "claim without times", err, store.ErrInvalid)
	done := claim("agent", "task-1", "h", t0)
	done.State = store.IdemCompleted
	_, err = s.ClaimIdem(ctx, done, t0)
	wantErr(t, "claim in state completed", err, store.ErrInvalid)

	MustClaim(t, s, claim("agent", "task-1", "h", t0), t0)
	err = s.CompleteIdem(ctx, "agent", "task-1", "h", 200, make([]byte, store.MaxIdemBodyBytes+1))
	wantErr(t, "complete with an oversized body", err, store.ErrInvalid)
	if rec := MustGet(t, s, "agent", "task-1", t0); rec.State != store.IdemInProgress {
		t.Fatalf("refused complete changed the record: %s", fmtIdem(rec))
	}
}

// testIdemConcurrentClaims races ClaimRacers claims of one key; the winner
// completes at once, so losers see either its in-progress or its completed
// record, and always the winner's.
func testIdemConcurrentClaims(t *testing.T, s Store) {
	ctx := context.Background()
	type result struct {
		hash string
		rec  store.IdemRecord
		err  error
	}
	results := make([]result, ClaimRacers)
	start := make(chan struct{})
	var wg sync.WaitGroup
	for i := range results {
		wg.Go(func() {
			hash := fmt.Sprintf("h%02d", i)
			<-start
			rec, err := s.ClaimIdem(ctx, claim("agent", "race", hash, t0), t0)
			if err == nil {
				err = s.CompleteIdem(ctx, "agent", "race", hash, 200, []byte("winner "+hash))
				if err != nil {
					err = fmt.Errorf("winner's complete: %w", err)
				}
			}
			results[i] = result{hash, rec, err}
		})
	}
	close(start)
	wg.Wait()

	var winner string
	for _, r := range results {
		if r.err == nil {
			if winner != "" {
				t.Fatalf("two claims won: %s and %s", winner, r.hash)
			}
			winner = r.hash
		}
	}
	if winner == "" {
		t.Fatalf("no claim won; first error: %v", results[0].err)
	}
	for _, r := range results {
		if r.hash == winner {
			continue
		}
		if !errors.Is(r.err, store.ErrExists) {
			t.Fatalf("loser %s: error %v, want ErrExists", r.hash, r.err)
		}
		if r.rec.RequestHash != winner {
			t.Fatalf("loser %s saw %s, want the winner's record (%s)", r.hash, fmtIdem(r.rec), winner)
		}
		switch r.rec.State {
		case store.IdemInProgress:
		case store.IdemCompleted:
			if string(r.rec.Body) != "winner "+winner || r.rec.Status != 200 {
				t.Fatalf("loser %s saw a completed record with the wrong response: %s", r.hash, fmtIdem(r.rec))
			}
		default:
			t.Fatalf("loser %s saw state %q", r.hash, r.rec.State)
		}
	}
	rec := MustGet(t, s, "agent", "race", t0)
	if rec.State != store.IdemCompleted || rec.RequestHash != winner {
		t.Fatalf("final record %s, want completed by %s", fmtIdem(rec), winner)
	}
}

func entry(account, id string, cents int64, at time.Time) store.LedgerEntry {
	return store.LedgerEntry{Account: account, EntryID: id, AmountCents: cents, Memo: "memo " + id, CreatedAt: at}
}

func sameEntry(t testing.TB, what string, got, want store.LedgerEntry) {
	t.Helper()
	if got.Account != want.Account || got.EntryID != want.EntryID || got.Sequence != want.Sequence ||
		got.AmountCents != want.AmountCents || got.Memo != want.Memo || got.BalanceCents != want.BalanceCents ||
		!got.CreatedAt.Equal(want.CreatedAt) {
		t.Fatalf("%s:\n got %+v\nwant %+v", what, got, want)
	}
}

func mustBalance(t testing.TB, s Store, account string) store.Balance {
	t.Helper()
	b, err := s.LedgerBalance(context.Background(), account)
	if err != nil {
		t.Fatalf("LedgerBalance(%s): %v", account, err)
	}
	return b
}

func mustList(t testing.TB, s Store, account string) []store.LedgerEntry {
	t.Helper()
	es, err := s.ListLedger(context.Background(), account)
	if err != nil {
		t.Fatalf("ListLedger(%s): %v", account, err)
	}
	return es
}

func testLedgerEmpty(t *testing.T, s Store) {
	_, err := s.LedgerBalance(context.Background(), "acct")
	wantErr(t, "LedgerBalance of an empty account", err, store.ErrNotFound)
	es, err := s.ListLedger(context.Background(), "acct")
	if err != nil || es == nil || len(es) != 0 {
		t.Fatalf("ListLedger of an empty account = %v (nil: %t), %v; want an empty slice", es, es == nil, err)
	}
}

func testLedgerAppend(t *testing.T, s Store) {
	amounts := []int64{100, -30, 5, 1_000_000_000, -1_000_000_000}
	var want []store.LedgerEntry
	var balance int64
	for i, cents := range amounts {
		e := entry("acct", fmt.Sprintf("e%d", i+1), cents, t0.Add(time.Duration(i)*time.Millisecond))
		if i == 0 {
			e.Memo = "" // optional
			e.CreatedAt = time.Time{}
		}
		e.Sequence, e.BalanceCents = 99, 99 // the store assigns these
		balance += cents
		w := e
		w.Sequence, w.BalanceCents = int64(i+1), balance
		sameEntry(t, "AppendLedger result", MustAppend(t, s, e), w)
		want = append(want, w)
	}
	got := mustList(t, s, "acct")
	if len(got) != len(want) {
		t.Fatalf("ListLedger: %d entries, want %d", len(got), len(want))
	}
	for i := range want {
		sameEntry(t, fmt.Sprintf("ListLedger[%d]", i), got[i], want[i])
	}
	if !got[0].CreatedAt.IsZero() {
		t.Fatalf("zero CreatedAt came back as %s", got[0].CreatedAt)
	}
	if b := mustBalance(t, s, "acct"); b != (store.Balance{Account: "acct", BalanceCents: balance, Entries: int64(len(amounts))}) {
		t.Fatalf("LedgerBalance = %+v, want balance %d over %d entries", b, balance, len(amounts))
	}
}

func testLedgerDuplicate(t *testing.T, s Store) {
	ctx := context.Background()
	first := MustAppend(t, s, entry("acct", "e1", 100, t0))
	again := entry("acct", "e1", 999, t0.Add(time.Hour))
	again.Memo = "a different memo"
	got, err := s.AppendLedger(ctx, again)
	wantErr(t, "append of an existing entry id", err, store.ErrExists)
	sameEntry(t, "entry returned with ErrExists", got, first)
	if b := mustBalance(t, s, "acct"); b.BalanceCents != 100 || b.Entries != 1 {
		t.Fatalf("duplicate append changed the balance: %+v", b)
	}
	second := MustAppend(t, s, entry("acct", "e2", 1, t0))
	if second.Sequence != 2 || second.BalanceCents != 101 {
		t.Fatalf("append after a duplicate: sequence %d balance %d, want 2 and 101", second.Sequence, second.BalanceCents)
	}
}

func testLedgerAccounts(t *testing.T, s Store) {
	a := MustAppend(t, s, entry("alice", "e1", 10, t0))
	b := MustAppend(t, s, entry("bob", "e1", 20, t0)) // entry ids are per account
	c := MustAppend(t, s, entry("alice#ACCOUNT", "e1", 30, t0))
	for _, e := range []store.LedgerEntry{a, b, c} {
		if e.Sequence != 1 || e.BalanceCents != e.AmountCents {
			t.Fatalf("first entry of %s: %+v", e.Account, e)
		}
	}
	if got := mustBalance(t, s, "alice"); got.BalanceCents != 10 || got.Entries != 1 {
		t.Fatalf("alice: %+v", got)
	}
	if got := mustList(t, s, "bob"); len(got) != 1 || got[0].AmountCents != 20 {
		t.Fatalf("bob's entries: %+v", got)
	}
}

func testLedgerInvalid(t *testing.T, s Store) {
	ctx := context.Background()
	long := strings.Repeat("a", store.MaxKeyBytes+1)
	for _, e := range []store.LedgerEntry{
		entry("", "e1", 1, t0),
		entry("acct", "", 1, t0),
		entry(long, "e1", 1, t0),
		entry("acct", long, 1, t0),
		entry("acct\xff", "e1", 1, t0),
		{Account: "acct", EntryID: "e1", AmountCents: 1, Memo: strings.Repeat("m", store.MaxMemoBytes+1)},
		{Account: "acct", EntryID: "e1", AmountCents: 1, Memo: "bad\xff"},
	} {
		_, err := s.AppendLedger(ctx, e)
		wantErr(t, fmt.Sprintf("append %.20q/%.20q memo %.20q", e.Account, e.EntryID, e.Memo), err, store.ErrInvalid)
	}
	_, err := s.LedgerBalance(ctx, "")
	wantErr(t, "balance of an empty account name", err, store.ErrInvalid)
	_, err = s.ListLedger(ctx, "")
	wantErr(t, "list of an empty account name", err, store.ErrInvalid)
	_, err = s.LedgerBalance(ctx, "acct")
	wantErr(t, "balance after refused appends", err, store.ErrNotFound)

	full := entry("acct", "e1", 1, t0)
	full.Memo = strings.Repeat("m", store.MaxMemoBytes)
	if got := MustAppend(t, s, full); got.Memo != full.Memo {
		t.Fatalf("memo of %d bytes did not round-trip", store.MaxMemoBytes)
	}
}

// testLedgerConcurrentAppends races AppendRacers appends on one account:
// sequences must be exactly 1..AppendRacers and every running balance must
// match the entries before it.
func testLedgerConcurrentAppends(t *testing.T, s Store) {
	ctx := context.Background()
	errs := make([]error, AppendRacers)
	start := make(chan struct{})
	var wg sync.WaitGroup
	var sum int64
	for i := range AppendRacers {
		cents := int64(i*7 - 500)
		sum += cents
		wg.Go(func() {
			<-start
			_, errs[i] = s.AppendLedger(ctx, entry("hot", fmt.Sprintf("e%03d", i), cents, t0))
		})
	}
	close(start)
	wg.Wait()
	for i, err := range errs {
		if err != nil {
			t.Fatalf("append e%03d: %v", i, err)
		}
	}
	checkLedger(t, s, "hot", AppendRacers, sum)
}

// checkLedger verifies the invariants of an account: sequences 1..n without
// gaps or repeats, each entry's balance equals the previous balance plus its
// amount, distinct entry ids, and a Balance that agrees.
func checkLedger(t testing.TB, s Store, account string, n int, sum int64) {
	t.Helper()
	es := mustList(t, s, account)
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
	if b := mustBalance(t, s, account); b.BalanceCents != sum || b.Entries != int64(n) {
		t.Fatalf("%s: LedgerBalance %+v, want %d over %d entries", account, b, sum, n)
	}
}

func testLedgerConcurrentDuplicates(t *testing.T, s Store) {
	ctx := context.Background()
	type result struct {
		e   store.LedgerEntry
		err error
	}
	results := make([]result, DuplicateRacers)
	start := make(chan struct{})
	var wg sync.WaitGroup
	for i := range results {
		wg.Go(func() {
			<-start
			e, err := s.AppendLedger(ctx, entry("acct", "same", int64(i+1), t0))
			results[i] = result{e, err}
		})
	}
	close(start)
	wg.Wait()
	var won *store.LedgerEntry
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
		if !errors.Is(r.err, store.ErrExists) {
			t.Fatalf("duplicate append: %v, want ErrExists", r.err)
		}
		sameEntry(t, "entry returned to a duplicate", r.e, *won)
	}
	checkLedger(t, s, "acct", 1, won.AmountCents)
}
