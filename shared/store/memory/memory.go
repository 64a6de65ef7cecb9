// Package memory is the in-process store adapter: the default of the local
// harness and the fastest adapter for tests.
//
// One mutex guards everything; every operation is a few map lookups, so
// contention is not a concern at the scale of a local run. Values are copied
// in and out (byte slices included), so a caller mutating a slice it passed
// or received never changes what the store holds. It passes the same
// conformance suite (storetest) as the bolt and DynamoDB adapters.
package memory

import (
	"bytes"
	"context"
	"fmt"
	"sync"
	"time"

	"github.com/a2awire/a2awire/shared/store"
	"github.com/a2awire/a2awire/shared/store/internal/check"
)

// Store holds everything in maps guarded by one mutex. The zero value is not
// usable; call New.
type Store struct {
	mu     sync.Mutex
	idem   map[idemKey]store.IdemRecord
	ledger map[string]*account
	claims int // counts claims between sweeps of expired records
}

// sweepEvery is how many claims pass between sweeps of expired idempotency
// records: DynamoDB's TTL does this in the cloud; here a long local run would
// otherwise keep every record forever.
const sweepEvery = 1024

type idemKey struct{ scope, key string }

// account is one ledger: its entries in sequence order (entries[i] has
// Sequence i+1) and an index from entry id to position.
type account struct {
	entries []store.LedgerEntry
	byID    map[string]int
	balance int64
}

// New returns an empty store.
func New() *Store {
	return &Store{
		idem:   make(map[idemKey]store.IdemRecord),
		ledger: make(map[string]*account),
	}
}

// Close releases nothing; it exists so that Store satisfies the same
// interface as the adapters that hold files or connections.
func (s *Store) Close() error { return nil }

// GetIdem returns the live record for (scope, key), or ErrNotFound when there
// is none or it is no longer live at now.
func (s *Store) GetIdem(_ context.Context, scope, key string, now time.Time) (store.IdemRecord, error) {
	if err := check.IdemKey(scope, key); err != nil {
		return store.IdemRecord{}, fmt.Errorf("memory: get idempotency: %w", err)
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	rec, ok := s.idem[idemKey{scope, key}]
	if !ok || !rec.Live(now) {
		return store.IdemRecord{}, fmt.Errorf("memory: get idempotency: %w", store.ErrNotFound)
	}
	return copyIdem(rec), nil
}

// ClaimIdem creates rec in progress unless a live record holds (scope, key),
// in which case it returns that record and ErrExists.
func (s *Store) ClaimIdem(_ context.Context, rec store.IdemRecord, now time.Time) (store.IdemRecord, error) {
	rec, err := check.Claim(rec, now)
	if err != nil {
		return store.IdemRecord{}, fmt.Errorf("memory: claim idempotency: %w", err)
	}
	k := idemKey{rec.Scope, rec.Key}
	s.mu.Lock()
	defer s.mu.Unlock()
	if old, ok := s.idem[k]; ok && old.Live(now) {
		return copyIdem(old), fmt.Errorf("memory: claim idempotency: %w", store.ErrExists)
	}
	s.idem[k] = copyIdem(rec)
	if s.claims++; s.claims%sweepEvery == 0 {
		for k, r := range s.idem {
			if !now.Before(r.ExpiresAt) {
				delete(s.idem, k)
			}
		}
	}
	return copyIdem(rec), nil
}

// CompleteIdem stores the response of an in-progress record still held under
// requestHash; ErrNotFound when it is absent, completed or taken over.
func (s *Store) CompleteIdem(_ context.Context, scope, key, requestHash string, status int, body []byte) error {
	if err := check.IdemKey(scope, key); err != nil {
		return fmt.Errorf("memory: complete idempotency: %w", err)
	}
	if err := check.Body(body); err != nil {
		return fmt.Errorf("memory: complete idempotency: %w", err)
	}
	k := idemKey{scope, key}
	s.mu.Lock()
	defer s.mu.Unlock()
	rec, ok := s.idem[k]
	if !ok || rec.State != store.IdemInProgress || rec.RequestHash != requestHash {
		return fmt.Errorf("memory: complete idempotency: %w", store.ErrNotFound)
	}
	rec.State = store.IdemCompleted
	rec.Status = status
	rec.Body = bytes.Clone(body)
	s.idem[k] = rec
	return nil
}

// DeleteIdem removes the record if it is still held under requestHash; a
// missing or re-claimed record is left alone and is not an error.
func (s *Store) DeleteIdem(_ context.Context, scope, key, requestHash string) error {
	if err := check.IdemKey(scope, key); err != nil {
		return fmt.Errorf("memory: delete idempotency: %w", err)
	}
	k := idemKey{scope, key}
	s.mu.Lock()
	defer s.mu.Unlock()
	if rec, ok := s.idem[k]; ok && rec.RequestHash == requestHash {
		delete(s.idem, k)
	}
	return nil
}

// AppendLedger appends e to its account with the next sequence and the new
// balance. An EntryID already in the account returns the stored entry and
// ErrExists and changes nothing.
func (s *Store) AppendLedger(_ context.Context, e store.LedgerEntry) (store.LedgerEntry, error) {
	e, err := check.Entry(e)
	if err != nil {
		return store.LedgerEntry{}, fmt.Errorf("memory: append ledger: %w", err)
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	a, ok := s.ledger[e.Account]
	if !ok {
		a = &account{byID: make(map[string]int)}
		s.ledger[e.Account] = a
	}
	if i, ok := a.byID[e.EntryID]; ok {
		return a.entries[i], fmt.Errorf("memory: append ledger: entry %q: %w", e.EntryID, store.ErrExists)
	}
	a.balance += e.AmountCents
	e.Sequence = int64(len(a.entries)) + 1
	e.BalanceCents = a.balance
	a.byID[e.EntryID] = len(a.entries)
	a.entries = append(a.entries, e)
	return e, nil
}

// LedgerBalance returns the account's balance and entry count; ErrNotFound
// when it has no entries.
func (s *Store) LedgerBalance(_ context.Context, acct string) (store.Balance, error) {
	if err := check.ID("account", acct); err != nil {
		return store.Balance{}, fmt.Errorf("memory: ledger balance: %w", err)
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	a, ok := s.ledger[acct]
	if !ok {
		return store.Balance{}, fmt.Errorf("memory: ledger balance: %w", store.ErrNotFound)
	}
	return store.Balance{Account: acct, BalanceCents: a.balance, Entries: int64(len(a.entries))}, nil
}

// ListLedger returns the account's entries in sequence order; an empty,
// non-nil slice when there are none.
func (s *Store) ListLedger(_ context.Context, acct string) ([]store.LedgerEntry, error) {
	if err := check.ID("account", acct); err != nil {
		return nil, fmt.Errorf("memory: list ledger: %w", err)
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	a, ok := s.ledger[acct]
	if !ok {
		return []store.LedgerEntry{}, nil
	}
	// LedgerEntry holds no slices, so copying the array copies the values.
	return append([]store.LedgerEntry{}, a.entries...), nil
}

// copyIdem returns rec with its own copy of Body.
func copyIdem(rec store.IdemRecord) store.IdemRecord {
	rec.Body = bytes.Clone(rec.Body)
	return rec
}
