package memory_test

import (
	"fmt"
	"testing"
	"time"

	"github.com/a2awire/a2awire/shared/store"
	"github.com/a2awire/a2awire/shared/store/memory"
	"github.com/a2awire/a2awire/shared/store/storetest"
)

func TestConformance(t *testing.T) {
	storetest.Run(t, func(t *testing.T) storetest.Store {
		s := memory.New()
		t.Cleanup(func() { _ = s.Close() })
		return s
	})
}

// TestSweep checks that expired idempotency records are eventually dropped,
// as DynamoDB's TTL would drop them, so a long local run does not grow
// without bound.
func TestSweep(t *testing.T) {
	s := memory.New()
	now := time.Unix(1_900_000_000, 0)
	storetest.MustClaim(t, s, store.IdemRecord{Scope: "a", Key: "old", ExpiresAt: now.Add(time.Second), InProgressUntil: now.Add(time.Second)}, now)
	later := now.Add(time.Hour)
	for i := range memory.SweepEvery - 1 {
		storetest.MustClaim(t, s, store.IdemRecord{Scope: "a", Key: fmt.Sprint(i), ExpiresAt: later.Add(time.Hour), InProgressUntil: later.Add(time.Minute)}, later)
	}
	if n := memory.CountIdem(s); n != memory.SweepEvery-1 {
		t.Fatalf("%d records after a sweep, want %d (the expired one removed)", n, memory.SweepEvery-1)
	}
}
