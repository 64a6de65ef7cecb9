package bolt_test

import (
	"context"
	"errors"
	"fmt"
	"path/filepath"
	"testing"
	"time"

	"github.com/a2awire/a2awire/shared/store"
	"github.com/a2awire/a2awire/shared/store/bolt"
	"github.com/a2awire/a2awire/shared/store/storetest"
)

// MustOpen opens a bolt store in a fresh temporary directory and closes it
// when the test ends.
func MustOpen(t testing.TB) (*bolt.Store, string) {
	t.Helper()
	path := filepath.Join(t.TempDir(), bolt.DefaultFile)
	s, err := bolt.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = s.Close() })
	return s, path
}

func TestConformance(t *testing.T) {
	storetest.Run(t, func(t *testing.T) storetest.Store {
		s, _ := MustOpen(t)
		return s
	})
}

// TestReopen checks that data outlives Close and that a second Open of a file
// in use fails instead of hanging on bbolt's lock.
func TestReopen(t *testing.T) {
	ctx := context.Background()
	path := filepath.Join(t.TempDir(), "nested", "dir", bolt.DefaultFile)
	s, err := bolt.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	now := time.Now()
	rec := store.IdemRecord{Scope: "a", Key: "k", RequestHash: "h", ExpiresAt: now.Add(time.Hour), InProgressUntil: now.Add(time.Minute)}
	if _, err := s.ClaimIdem(ctx, rec, now); err != nil {
		t.Fatal(err)
	}
	if err := s.CompleteIdem(ctx, "a", "k", "h", 200, []byte("body")); err != nil {
		t.Fatal(err)
	}
	storetest.MustAppend(t, s, store.LedgerEntry{Account: "acct", EntryID: "e1", AmountCents: 5})

	start := time.Now()
	if _, err := bolt.Open(path); err == nil {
		t.Fatal("second Open of a file in use succeeded")
	} else if time.Since(start) > 10*time.Second {
		t.Fatalf("second Open took %s", time.Since(start))
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}

	s, err = bolt.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	if got := storetest.MustGet(t, s, "a", "k", now); got.State != store.IdemCompleted || string(got.Body) != "body" {
		t.Fatalf("record after reopen: %+v", got)
	}
	if b, err := s.LedgerBalance(ctx, "acct"); err != nil || b.BalanceCents != 5 || b.Entries != 1 {
		t.Fatalf("balance after reopen: %+v, %v", b, err)
	}
	e := storetest.MustAppend(t, s, store.LedgerEntry{Account: "acct", EntryID: "e2", AmountCents: 1})
	if e.Sequence != 2 || e.BalanceCents != 6 {
		t.Fatalf("append after reopen: %+v", e)
	}
}

// TestSweep checks that expired idempotency records are eventually removed
// from the file, as DynamoDB's TTL would remove them.
func TestSweep(t *testing.T) {
	ctx := context.Background()
	s, _ := MustOpen(t)
	now := time.Unix(1_900_000_000, 0)
	old := store.IdemRecord{Scope: "a", Key: "old", RequestHash: "h", ExpiresAt: now.Add(time.Second), InProgressUntil: now.Add(time.Second)}
	storetest.MustClaim(t, s, old, now)
	later := now.Add(time.Hour)
	for i := range bolt.SweepEvery {
		rec := store.IdemRecord{Scope: "a", Key: fmt.Sprint(i), RequestHash: "h", ExpiresAt: later.Add(time.Hour), InProgressUntil: later.Add(time.Minute)}
		storetest.MustClaim(t, s, rec, later)
	}
	if n := bolt.CountIdem(t, s); n != bolt.SweepEvery {
		t.Fatalf("%d records after a sweep, want %d (the expired one removed)", n, bolt.SweepEvery)
	}
	if _, err := s.GetIdem(ctx, "a", "old", now); !errors.Is(err, store.ErrNotFound) {
		t.Fatalf("swept record still readable: %v", err)
	}
}
