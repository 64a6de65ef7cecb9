package dynamo_test

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/a2awire/a2awire/shared/store"
	"github.com/a2awire/a2awire/shared/store/dynamo"
	"github.com/a2awire/a2awire/shared/store/dynamo/capacity"
	"github.com/a2awire/a2awire/shared/store/dynamo/dynamolocal"
	"github.com/a2awire/a2awire/shared/store/storetest"
)

// meteredStore returns a store on a fresh table whose client is metered,
// with the table set-up calls already taken off the meter.
func meteredStore(t *testing.T) (*dynamo.Store, *capacity.Meter) {
	t.Helper()
	m := capacity.New()
	client, table := dynamolocal.NewTable(t, local, m.Option())
	m.Reset()
	return dynamo.New(client, table), m
}

// wantCost checks the calls one step made, per operation, and that every
// successful call reported consumed capacity (the adapter asks for TOTAL).
func wantCost(t *testing.T, m *capacity.Meter, step string, want map[string]int, wantErrors int) {
	t.Helper()
	r := m.Take()
	t.Logf("%-40s %v", step, strings.ReplaceAll(strings.TrimSpace(r.String()), "\n", "; "))
	if got := r.Calls(); !maps.Equal(got, want) {
		t.Errorf("%s: calls %v, want %v", step, got, want)
	}
	total := r.Total()
	if total.Errors != wantErrors {
		t.Errorf("%s: %d failed calls, want %d", step, total.Errors, wantErrors)
	}
	if total.Calls > total.Errors && total.Units <= 0 {
		t.Errorf("%s: no consumed capacity reported", step)
	}
}

// TestCosts pins the DynamoDB calls of every store operation (the table in
// the package comment). A change that adds a round trip fails here.
func TestCosts(t *testing.T) {
	s, m := meteredStore(t)
	ctx := context.Background()
	now := time.Now()
	rec := store.IdemRecord{Scope: "agent", Key: "task", RequestHash: "h", ExpiresAt: now.Add(24 * time.Hour), InProgressUntil: now.Add(time.Minute)}

	// Idempotency: a first execution is 2 writes, a replay 1 read.
	_, err := s.GetIdem(ctx, "agent", "task", now)
	mustIs(t, err, store.ErrNotFound)
	wantCost(t, m, "GetIdem miss", map[string]int{"GetItem": 1}, 0)
	storetest.MustClaim(t, s, rec, now)
	wantCost(t, m, "ClaimIdem won", map[string]int{"PutItem": 1}, 0)
	storetest.MustComplete(t, s, "agent", "task", "h", 200, []byte(`{"output":{}}`))
	wantCost(t, m, "CompleteIdem", map[string]int{"UpdateItem": 1}, 0)
	storetest.MustGet(t, s, "agent", "task", now)
	wantCost(t, m, "GetIdem replay", map[string]int{"GetItem": 1}, 0)
	_, err = s.ClaimIdem(ctx, rec, now)
	mustIs(t, err, store.ErrExists)
	wantCost(t, m, "ClaimIdem refused (returns the record)", map[string]int{"PutItem": 1}, 1)
	mustIs(t, s.CompleteIdem(ctx, "agent", "task", "h", 200, nil), store.ErrNotFound)
	wantCost(t, m, "CompleteIdem refused", map[string]int{"UpdateItem": 1}, 1)
	if err := s.DeleteIdem(ctx, "agent", "task", "other"); err != nil {
		t.Fatal(err)
	}
	wantCost(t, m, "DeleteIdem refused (other hash)", map[string]int{"DeleteItem": 1}, 1)
	if err := s.DeleteIdem(ctx, "agent", "task", "h"); err != nil {
		t.Fatal(err)
	}
	wantCost(t, m, "DeleteIdem", map[string]int{"DeleteItem": 1}, 0)
	_, err = s.ClaimIdem(ctx, store.IdemRecord{}, now)
	mustIs(t, err, store.ErrInvalid)
	wantCost(t, m, "invalid argument", map[string]int{}, 0)

	// Ledger.
	_, err = s.LedgerBalance(ctx, "acct")
	mustIs(t, err, store.ErrNotFound)
	wantCost(t, m, "LedgerBalance miss", map[string]int{"GetItem": 1}, 0)
	storetest.MustAppend(t, s, store.LedgerEntry{Account: "acct", EntryID: "e1", AmountCents: 5})
	wantCost(t, m, "AppendLedger first entry", map[string]int{"GetItem": 1, "TransactWriteItems": 1}, 0)
	storetest.MustAppend(t, s, store.LedgerEntry{Account: "acct", EntryID: "e2", AmountCents: 5})
	wantCost(t, m, "AppendLedger", map[string]int{"GetItem": 1, "TransactWriteItems": 1}, 0)
	e, err := s.AppendLedger(ctx, store.LedgerEntry{Account: "acct", EntryID: "e1", AmountCents: 7})
	mustIs(t, err, store.ErrExists)
	if e.Sequence != 1 || e.AmountCents != 5 {
		t.Fatalf("duplicate returned %+v", e)
	}
	wantCost(t, m, "AppendLedger duplicate (returns stored)", map[string]int{"GetItem": 1, "TransactWriteItems": 1}, 1)
	if _, err := s.LedgerBalance(ctx, "acct"); err != nil {
		t.Fatal(err)
	}
	wantCost(t, m, "LedgerBalance", map[string]int{"GetItem": 1}, 0)
	if _, err := s.ListLedger(ctx, "acct"); err != nil {
		t.Fatal(err)
	}
	wantCost(t, m, "ListLedger (one page)", map[string]int{"Query": 1}, 0)
}

// TestListLedgerPages fills an account past DynamoDB's 1 MB page so that
// ListLedger must follow LastEvaluatedKey.
func TestListLedgerPages(t *testing.T) {
	s, m := meteredStore(t)
	const n = 20 // 20 entries with 64 KB memos: about 1.3 MB
	for i := range n {
		storetest.MustAppend(t, s, store.LedgerEntry{
			Account: "big", EntryID: fmt.Sprint(i), AmountCents: 1, Memo: strings.Repeat("m", store.MaxMemoBytes),
		})
	}
	m.Reset()
	es, err := s.ListLedger(context.Background(), "big")
	if err != nil {
		t.Fatal(err)
	}
	wantCost(t, m, "ListLedger (two pages)", map[string]int{"Query": 2}, 0)
	for i, e := range es {
		if e.Sequence != int64(i+1) {
			t.Fatalf("entry %d has sequence %d", i, e.Sequence)
		}
	}
	if len(es) != n {
		t.Fatalf("%d entries, want %d", len(es), n)
	}
}

// TestAppendAcrossInstances races appends from several Store values on one
// table, as separate Lambda instances would: they share no in-process queue,
// so they exercise the optimistic retry (a lost race costs one cancelled
// transaction; the account's new state comes back with it, so no re-read).
func TestAppendAcrossInstances(t *testing.T) {
	const instances, perInstance = 4, 50
	m := capacity.New()
	client, table := dynamolocal.NewTable(t, local, m.Option())
	m.Reset()
	ctx := context.Background()
	var wg sync.WaitGroup
	var sum int64
	errs := make(chan error, instances*perInstance)
	for i := range instances {
		s := dynamo.New(client, table)
		for j := range perInstance {
			cents := int64(i*100 + j)
			sum += cents
			wg.Go(func() {
				if _, err := s.AppendLedger(ctx, store.LedgerEntry{Account: "hot", EntryID: fmt.Sprintf("%d-%d", i, j), AmountCents: cents}); err != nil {
					errs <- err
				}
			})
		}
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatal(err)
	}
	r := m.Take()
	t.Logf("%d appends from %d instances:\n%s", instances*perInstance, instances, r)
	tw := r["TransactWriteItems"]
	if tw.Calls-tw.Errors != instances*perInstance {
		t.Errorf("%d committed transactions, want %d", tw.Calls-tw.Errors, instances*perInstance)
	}
	if tw.Errors == 0 {
		t.Errorf("no lost race: the test did not exercise the optimistic retry")
	}

	s := dynamo.New(client, table)
	es, err := s.ListLedger(ctx, "hot")
	if err != nil {
		t.Fatal(err)
	}
	var running int64
	for i, e := range es {
		running += e.AmountCents
		if e.Sequence != int64(i+1) || e.BalanceCents != running {
			t.Fatalf("entry %d: %+v (running %d)", i, e, running)
		}
	}
	if len(es) != instances*perInstance || running != sum {
		t.Fatalf("%d entries summing to %d, want %d summing to %d", len(es), running, instances*perInstance, sum)
	}
}

func mustIs(t *testing.T, err, target error) {
	t.Helper()
	if !errors.Is(err, target) {
		t.Fatalf("error %v, want %v", err, target)
	}
}
