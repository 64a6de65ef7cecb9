// Package check validates store arguments once for every adapter, so that
// memory, bolt and DynamoDB reject exactly the same inputs and a value the
// embedded store accepts never fails later on DynamoDB.
package check

import (
	"fmt"
	"time"
	"unicode/utf8"

	"github.com/a2awire/a2awire/shared/store"
)

// ID checks one identifier (scope, key, account, entry id). It must be
// non-empty, valid UTF-8 (DynamoDB strings are UTF-8; invalid bytes would be
// replaced on the wire and two distinct ids could collide) and short enough
// for a DynamoDB sort key.
func ID(what, v string) error {
	switch {
	case v == "":
		return fmt.Errorf("%s is empty: %w", what, store.ErrInvalid)
	case len(v) > store.MaxKeyBytes:
		return fmt.Errorf("%s is %d bytes, over %d: %w", what, len(v), store.MaxKeyBytes, store.ErrInvalid)
	case !utf8.ValidString(v):
		return fmt.Errorf("%s is not valid UTF-8: %w", what, store.ErrInvalid)
	}
	return nil
}

// IdemKey checks an idempotency record's scope and key.
func IdemKey(scope, key string) error {
	if err := ID("scope", scope); err != nil {
		return err
	}
	return ID("key", key)
}

// Claim checks a record about to be claimed and returns it normalized: state
// in_progress, no response yet, times in UTC without a monotonic reading (so
// every adapter returns the same values). A record that would be dead the
// moment it is written is refused: it can only be a caller's clock or
// arithmetic bug.
func Claim(rec store.IdemRecord, now time.Time) (store.IdemRecord, error) {
	if err := IdemKey(rec.Scope, rec.Key); err != nil {
		return store.IdemRecord{}, err
	}
	if rec.State != "" && rec.State != store.IdemInProgress {
		return store.IdemRecord{}, fmt.Errorf("claim state %q, want %q: %w", rec.State, store.IdemInProgress, store.ErrInvalid)
	}
	if len(rec.RequestHash) > store.MaxKeyBytes {
		return store.IdemRecord{}, fmt.Errorf("request hash over %d bytes: %w", store.MaxKeyBytes, store.ErrInvalid)
	}
	rec.State = store.IdemInProgress
	rec.Status = 0
	rec.Body = nil
	rec.ExpiresAt = Time(rec.ExpiresAt)
	rec.InProgressUntil = Time(rec.InProgressUntil)
	if !rec.Live(now) {
		return store.IdemRecord{}, fmt.Errorf("claim already expired at %s (expires %s, in progress until %s): %w",
			now.UTC().Format(time.RFC3339Nano), rec.ExpiresAt.Format(time.RFC3339Nano),
			rec.InProgressUntil.Format(time.RFC3339Nano), store.ErrInvalid)
	}
	return rec, nil
}

// Body checks a response body about to be stored.
func Body(body []byte) error {
	if len(body) > store.MaxIdemBodyBytes {
		return fmt.Errorf("body is %d bytes, over %d: %w", len(body), store.MaxIdemBodyBytes, store.ErrInvalid)
	}
	return nil
}

// Entry checks a ledger entry about to be appended and returns it
// normalized: Sequence and BalanceCents cleared (the store assigns them),
// CreatedAt in UTC.
func Entry(e store.LedgerEntry) (store.LedgerEntry, error) {
	if err := ID("account", e.Account); err != nil {
		return store.LedgerEntry{}, err
	}
	if err := ID("entry id", e.EntryID); err != nil {
		return store.LedgerEntry{}, err
	}
	if len(e.Memo) > store.MaxMemoBytes {
		return store.LedgerEntry{}, fmt.Errorf("memo is %d bytes, over %d: %w", len(e.Memo), store.MaxMemoBytes, store.ErrInvalid)
	}
	if !utf8.ValidString(e.Memo) {
		return store.LedgerEntry{}, fmt.Errorf("memo is not valid UTF-8: %w", store.ErrInvalid)
	}
	e.Sequence = 0
	e.BalanceCents = 0
	e.CreatedAt = Time(e.CreatedAt)
	return e, nil
}

// Time normalizes a time the way every adapter stores it: UTC, nanosecond
// precision, no monotonic clock reading; the zero time stays zero.
func Time(t time.Time) time.Time {
	if t.IsZero() {
		return time.Time{}
	}
	return time.Unix(0, t.UnixNano()).UTC()
}

// Nanos encodes a time for storage as Unix nanoseconds; the zero time is 0.
func Nanos(t time.Time) int64 {
	if t.IsZero() {
		return 0
	}
	return t.UnixNano()
}

// FromNanos decodes Nanos.
func FromNanos(n int64) time.Time {
	if n == 0 {
		return time.Time{}
	}
	return time.Unix(0, n).UTC()
}
