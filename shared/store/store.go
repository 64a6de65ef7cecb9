// Package store holds the domain types and errors shared by every storage
// adapter (memory, bolt, dynamo) and their consumers.
//
// Consumers declare the small interface they need where they use it; adapters
// satisfy all of them, and storetest.Run checks that every adapter behaves the
// same. Times are passed in by callers so that expiry is testable and never
// depends on a store's clock or on DynamoDB's lazy TTL deletion.
package store

import (
	"errors"
	"time"
)

// Sentinel errors. Adapters wrap them with the operation; callers test with errors.Is.
var (
	// ErrNotFound means the item does not exist or has expired.
	ErrNotFound = errors.New("store: not found")
	// ErrExists means a conditional create found a live item in the way.
	ErrExists = errors.New("store: already exists")
)

// IdemState is the state of an idempotency record.
type IdemState string

// Idempotency record states.
const (
	IdemInProgress IdemState = "in_progress"
	IdemCompleted  IdemState = "completed"
)

// IdemRecord remembers one (scope, key) execution of a stateful provider:
// scope is the agent name, key the buyer's X-A2AWire-Task-Id.
type IdemRecord struct {
	Scope       string
	Key         string
	State       IdemState
	RequestHash string
	// Status and Body are the stored response once State is completed.
	Status int
	Body   []byte
	// ExpiresAt ends the record's life (24 h by default); an expired record
	// behaves as absent.
	ExpiresAt time.Time
	// InProgressUntil is when an in-progress holder is presumed dead (its
	// Lambda deadline); after it, a new claim may take the record over.
	InProgressUntil time.Time
}

// Live reports whether the record still counts at now: it has not expired,
// and if in progress its holder's deadline has not passed.
func (r IdemRecord) Live(now time.Time) bool {
	if !now.Before(r.ExpiresAt) {
		return false
	}
	if r.State == IdemInProgress && !now.Before(r.InProgressUntil) {
		return false
	}
	return true
}

// LedgerEntry is one append to an account's ledger.
type LedgerEntry struct {
	Account string
	// EntryID is unique per account; appending an existing EntryID again
	// changes nothing, which makes the append itself idempotent.
	EntryID     string
	Sequence    int64
	AmountCents int64
	Memo        string
	// BalanceCents is the account balance right after this entry.
	BalanceCents int64
	CreatedAt    time.Time
}

// Balance is an account's current state.
type Balance struct {
	Account      string
	BalanceCents int64
	Entries      int64
}

// ErrInvalid means the caller passed a value no adapter can store (an empty
// key, an oversized body, a record that is already dead). It is a programming
// error in the caller, not a client error, so it maps to 500.
var ErrInvalid = errors.New("store: invalid argument")

// Size limits enforced identically by every adapter, so that a value the
// embedded store accepts never fails later on DynamoDB, whose items are
// limited to 400 KB including attribute names and the other fields.
const (
	// MaxIdemBodyBytes bounds IdemRecord.Body.
	MaxIdemBodyBytes = 300 << 10
	// MaxMemoBytes bounds LedgerEntry.Memo. The ledger item and its
	// entry-id guard item each carry the memo.
	MaxMemoBytes = 64 << 10
	// MaxKeyBytes bounds every identifier (idempotency scope and key,
	// ledger account and entry id): DynamoDB sort keys hold at most 1024
	// bytes and ours carry a prefix.
	MaxKeyBytes = 512
)
