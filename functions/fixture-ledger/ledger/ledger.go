// Package ledger is the a2awire-ledger fixture: the stateful provider
// of the five. record-entry appends to an account's ledger and balance reads
// it back. The ledger itself (Book: accounts, entries, entry-id guards; key
// patterns in book.go) is written once over the item API (store.Store), so
// it runs unchanged on memory, bolt and DynamoDB.
//
// A repeated X-A2AWire-Task-Id never appends twice, at two levels. The kit's
// idempotency (shared/idempotency) lets exactly one request per task id run
// and replays its response to the others. Under it, the entry id is derived
// from (agent, task id), and the book appends an entry id at most once per
// account, so even a request that runs again after its idempotency record was
// lost (expired, or released by a crash between append and commit) returns
// the entry already written instead of appending another.
//
// Overload never becomes a 500 (issue 9): a store that stays busy, appends
// that keep losing races to other processes, or a deadline too close to
// start a write are 503 unavailable with Retry-After, and nothing was
// written. A write whose outcome is lost (a timeout in flight) is settled by
// fencing its entry id (see Book.Append); only if even that fails is the
// answer a 503 whose message points to the task-id replay path.
//
// Calls per invocation (item API; on DynamoDB, in brackets):
//
//	record-entry, first run with a task id  guard Get + claim Put, account Get + 3-action Write, commit Update
//	                                        [2 GetItem, 1 PutItem, 1 TransactWriteItems, 1 UpdateItem]
//	record-entry, replay of a task id       1 Get [1 GetItem]
//	record-entry without a task id          account Get + 3-action Write [1 GetItem, 1 TransactWriteItems]
//	  each race lost to another process     +1 Write (no read: the failed condition returns the account)
//	  write outcome lost                    +1 Put of a fence (resent until it settles)
//	balance                                 1 Get [1 GetItem]
package ledger

import (
	"context"
	"crypto/rand"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"log/slog"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/a2awire/a2awire/shared/idempotency"
	"github.com/a2awire/a2awire/shared/protocol"
	"github.com/a2awire/a2awire/shared/store"
)

// Name is the fixture's registered agent name.
const Name = "a2awire-ledger"

// Input limits of record-entry and balance.
const (
	// MaxAccountChars bounds account, in Unicode code points.
	MaxAccountChars = 128
	// MaxAmountCents bounds |amount_cents|.
	MaxAmountCents = 1_000_000_000
	// MaxMemoChars bounds memo, in Unicode code points.
	MaxMemoChars = 1024
)

// Option configures the fixture.
type Option func(*config)

type config struct {
	now  func() time.Time
	idem []idempotency.Option
}

// WithClock replaces time.Now for entry timestamps and idempotency expiry.
func WithClock(now func() time.Time) Option {
	return func(c *config) {
		c.now = now
		c.idem = append(c.idem, idempotency.WithClock(now))
	}
}

// WithIdempotencyOptions passes options (TTL, default hold) to the guard.
func WithIdempotencyOptions(opts ...idempotency.Option) Option {
	return func(c *config) { c.idem = append(c.idem, opts...) }
}

// New returns the fixture's HTTP handler over st: its ledger (Book) and the
// kit's idempotency records (shared/idempotency) live in the same store.
func New(log *slog.Logger, st store.Store, opts ...Option) *protocol.Provider {
	if st == nil {
		panic("ledger: nil store")
	}
	c := config{now: time.Now}
	for _, o := range opts {
		o(&c)
	}
	l := &ledger{book: NewBook(st), now: c.now}
	p := protocol.NewProvider(Name, protocol.WithLogger(log),
		protocol.WithIdempotency(idempotency.New(st, c.idem...)))
	protocol.Handle(p, "record-entry", l.recordEntry)
	protocol.Handle(p, "balance", l.balance)
	return p
}

type ledger struct {
	book *Book
	now  func() time.Time
}

// RecordInput is record-entry's input.
type RecordInput struct {
	Account     string `json:"account"`
	AmountCents int64  `json:"amount_cents"`
	Memo        string `json:"memo"`
}

// RecordOutput is record-entry's output.
type RecordOutput struct {
	EntryID      string `json:"entry_id"`
	Account      string `json:"account"`
	Sequence     int64  `json:"sequence"`
	BalanceCents int64  `json:"balance_cents"`
}

func (l *ledger) recordEntry(ctx context.Context, in RecordInput) (RecordOutput, error) {
	if err := checkAccount(in.Account); err != nil {
		return RecordOutput{}, err
	}
	if in.AmountCents == 0 || in.AmountCents > MaxAmountCents || in.AmountCents < -MaxAmountCents {
		return RecordOutput{}, protocol.Errorf(protocol.InvalidInput,
			"input.amount_cents is required: a non-zero integer between -%d and %d", MaxAmountCents, MaxAmountCents)
	}
	if utf8.RuneCountInString(in.Memo) > MaxMemoChars {
		return RecordOutput{}, protocol.Errorf(protocol.InvalidInput, "input.memo is longer than %d characters", MaxMemoChars)
	}
	taskID := protocol.TaskID(ctx)
	e, err := l.book.Append(ctx, Entry{
		Account:     in.Account,
		EntryID:     entryID(taskID),
		AmountCents: in.AmountCents,
		Memo:        in.Memo,
		CreatedAt:   l.now(),
	})
	if errors.Is(err, ErrEntryExists) {
		// This task id already appended. Its idempotency record is gone
		// (or the same entry would have been replayed), so answer from the
		// entry itself, unless the id is now reused for another entry.
		if e.AmountCents != in.AmountCents || e.Memo != in.Memo {
			return RecordOutput{}, protocol.Errorf(protocol.IdempotencyKeyReused,
				"%s already recorded a different entry in this account; use a new task id", protocol.TaskIDHeader)
		}
		err = nil
	}
	if err != nil {
		return RecordOutput{}, storeError(err, taskID != "")
	}
	return RecordOutput{EntryID: e.EntryID, Account: e.Account, Sequence: e.Sequence, BalanceCents: e.BalanceCents}, nil
}

// BalanceInput is balance's input.
type BalanceInput struct {
	Account string `json:"account"`
}

// BalanceOutput is balance's output; an account without entries has a
// balance of 0 and 0 entries.
type BalanceOutput struct {
	Account      string `json:"account"`
	BalanceCents int64  `json:"balance_cents"`
	Entries      int64  `json:"entries"`
}

func (l *ledger) balance(ctx context.Context, in BalanceInput) (BalanceOutput, error) {
	if err := checkAccount(in.Account); err != nil {
		return BalanceOutput{}, err
	}
	b, err := l.book.Balance(ctx, in.Account)
	switch {
	case errors.Is(err, store.ErrNotFound):
		return BalanceOutput{Account: in.Account}, nil
	case err != nil:
		return BalanceOutput{}, storeError(err, false)
	}
	return BalanceOutput{Account: in.Account, BalanceCents: b.BalanceCents, Entries: b.Entries}, nil
}

// storeError turns a failure of the book into what the client sees
// (issue 9): an overloaded or contended store is 503 unavailable
// with Retry-After, and nothing was written; an unknown outcome is 503 too,
// and its message points to the task-id replay path, which settles it
// without appending twice; anything else is a 500 whose text stays in the
// logs.
func storeError(err error, withTaskID bool) error {
	switch {
	case errors.Is(err, ErrOutcomeUnknown):
		msg := "the entry may or may not have been recorded; retry with the same " + protocol.TaskIDHeader +
			" to get its outcome without recording it twice"
		if !withTaskID {
			msg = "the entry may or may not have been recorded; check the balance before retrying, and send an " +
				protocol.TaskIDHeader + " to make retries safe"
		}
		return &protocol.Error{Code: protocol.Unavailable, Message: msg, RetryAfter: retryAfter, Err: err}
	case errors.Is(err, store.ErrUnavailable):
		return &protocol.Error{Code: protocol.Unavailable, RetryAfter: retryAfter, Err: err,
			Message: "the ledger is busy and recorded nothing; retry later"}
	}
	return err // 500; the kit logs it and releases the task id
}

// retryAfter is what a busy ledger tells its callers to wait.
const retryAfter = time.Second

func checkAccount(account string) error {
	if strings.TrimSpace(account) == "" {
		return protocol.Errorf(protocol.InvalidInput, "input.account is required: a non-empty string")
	}
	if utf8.RuneCountInString(account) > MaxAccountChars {
		return protocol.Errorf(protocol.InvalidInput, "input.account is longer than %d characters", MaxAccountChars)
	}
	return nil
}

// entryID names an entry. With a task id it is a digest of (agent, task id),
// so every run of one task id writes the same entry id and the store's
// entry-id guard makes the append exactly-once; without one it is random.
func entryID(taskID string) string {
	if taskID == "" {
		var b [16]byte
		_, _ = rand.Read(b[:])
		return "e-" + hex.EncodeToString(b[:])
	}
	sum := sha256.Sum256([]byte(Name + "\x00" + taskID))
	return "t-" + hex.EncodeToString(sum[:16])
}
