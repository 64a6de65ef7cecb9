package check_test

import (
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/a2awire/a2awire/shared/store"
	"github.com/a2awire/a2awire/shared/store/internal/check"
)

func TestID(t *testing.T) {
	for _, tc := range []struct {
		id string
		ok bool
	}{
		{"a", true},
		{"ünï#code", true},
		{strings.Repeat("x", store.MaxKeyBytes), true},
		{"", false},
		{strings.Repeat("x", store.MaxKeyBytes+1), false},
		{"\xff", false},
	} {
		err := check.ID("id", tc.id)
		if (err == nil) != tc.ok || (err != nil && !errors.Is(err, store.ErrInvalid)) {
			t.Errorf("ID(%.20q) = %v, want ok=%t", tc.id, err, tc.ok)
		}
	}
}

func TestClaimNormalizes(t *testing.T) {
	loc := time.FixedZone("X", 3600)
	now := time.Now().In(loc) // carries a monotonic reading and a zone
	rec, err := check.Claim(store.IdemRecord{
		Scope: "a", Key: "k", Status: 200, Body: []byte("x"),
		ExpiresAt: now.Add(time.Hour), InProgressUntil: now.Add(time.Minute),
	}, now)
	if err != nil {
		t.Fatal(err)
	}
	if rec.State != store.IdemInProgress || rec.Status != 0 || rec.Body != nil {
		t.Errorf("claim not normalized: %+v", rec)
	}
	if rec.ExpiresAt.Location() != time.UTC || rec.ExpiresAt != check.FromNanos(now.Add(time.Hour).UnixNano()) {
		t.Errorf("ExpiresAt %#v not normalized", rec.ExpiresAt)
	}
}

func TestTimeRoundTrip(t *testing.T) {
	if !check.FromNanos(check.Nanos(time.Time{})).IsZero() {
		t.Error("zero time does not round-trip")
	}
	at := time.Date(2030, 1, 2, 3, 4, 5, 6, time.UTC)
	if got := check.FromNanos(check.Nanos(at)); got != at {
		t.Errorf("round trip %s -> %s", at, got)
	}
	if got := check.Time(at.In(time.FixedZone("Y", -7200))); got != at {
		t.Errorf("Time = %s, want %s", got, at)
	}
}

func TestEntryClearsAssignedFields(t *testing.T) {
	e, err := check.Entry(store.LedgerEntry{Account: "a", EntryID: "e", Sequence: 9, BalanceCents: 9})
	if err != nil || e.Sequence != 0 || e.BalanceCents != 0 {
		t.Fatalf("Entry = %+v, %v", e, err)
	}
}
