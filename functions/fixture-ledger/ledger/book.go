package ledger

import (
	"context"
	crand "crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"math/rand/v2"
	"time"

	"github.com/a2awire/a2awire/shared/store"
)

// Key patterns and attributes of the ledger's items. An account's items
// share one partition, so listing its entries is one Query with the "SEQ#"
// prefix, in sequence order thanks to the zero padding.
//
//	entity          pk                 sk                        attributes
//	account         LEDGER#<account>   ACCOUNT                   type, account, entries, balanceCents
//	entry           LEDGER#<account>   SEQ#<20-digit sequence>   type, account, entryId, sequence,
//	                                                             amountCents, memo, balanceCents, createdAt
//	entry-id guard  LEDGER#<account>   ENTRYID#<entry id>        the entry's attributes and attempt;
//	                                                             or, fencing a lost write, fence and
//	                                                             expiresAt
//
// createdAt is nanoseconds since the epoch (absent for a zero time). "type"
// tells items apart on the change feed without parsing keys. The account
// sits in the partition key and the entry id in the sort key, so a "#"
// inside either cannot make two of them collide.
const (
	pkPrefix      = "LEDGER#"
	accountSK     = "ACCOUNT"
	seqPrefix     = "SEQ#"
	entryIDPrefix = "ENTRYID#"

	attrType         = "type"
	attrAccount      = "account"
	attrEntries      = "entries"
	attrBalanceCents = "balanceCents"
	attrEntryID      = "entryId"
	attrSequence     = "sequence"
	attrAmountCents  = "amountCents"
	attrMemo         = "memo"
	attrCreatedAt    = "createdAt"
	attrAttempt      = "attempt"
	attrFence        = "fence"

	// Item types, the "type" attribute.
	TypeAccount = "ledger-account"
	TypeEntry   = "ledger-entry"
	TypeEntryID = "ledger-entry-id"
	TypeFence   = "ledger-entry-fence"
)

// Optimistic retries of Append. An append loses only to an append from
// another process that committed between its read and its write, so every
// round of losers has a winner; jittered exponential backoff spreads the
// losers out. Giving up is a 503, never a 500: nothing was written.
const (
	appendMaxAttempts = 100
	appendBackoffBase = 2 * time.Millisecond
	appendBackoffMax  = 200 * time.Millisecond
	// appendReserve is the time an append keeps for its own write: it stops
	// queueing or retrying when less than this is left before the context's
	// deadline, so that it answers 503 (nothing written) instead of being
	// cut off mid-write (outcome unknown). Each write itself must end
	// appendReserve/2 before the deadline, which leaves the other half to
	// settle a write that was cut off.
	appendReserve = time.Second
	// fenceTimeout bounds the writes that settle an unknown outcome.
	fenceTimeout = 5 * time.Second
	// fenceTTL is how long a fence item lives; it only has to outlast the
	// write it fences, which DynamoDB settles within seconds.
	fenceTTL = time.Hour
)

// Errors of the book. Store errors (store.ErrNotFound, store.ErrInvalid,
// store.ErrUnavailable…) come wrapped as they are.
var (
	// ErrEntryExists means the entry id is already in the account; the
	// error comes with the stored entry, and nothing was written.
	ErrEntryExists = errors.New("ledger: entry id already recorded")
	// ErrOutcomeUnknown means a write failed in a way that does not tell
	// whether it committed, and fencing it failed too. Appending the same
	// entry id again (a retry with the same task id) settles it.
	ErrOutcomeUnknown = errors.New("ledger: outcome of the write unknown")
)

// Entry is one append to an account's ledger.
type Entry struct {
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

// Book is the ledger over the item API. It is safe for concurrent use.
//
// Appends to one account through one Book are queued in-process (a keyed
// mutex), so racing goroutines of one process (the local harness, a server)
// do not burn round trips on lost races; separate processes (Lambda
// instances) race optimistically, each append conditioned on the account's
// entry count.
type Book struct {
	store    store.Store
	accounts keyedMutex
	// The optimistic retry budget (appendMaxAttempts…; tests shrink it).
	maxAttempts             int
	backoffBase, backoffMax time.Duration
	// fenceTimeout bounds settling an unknown outcome (the constant; a
	// test of a fence that never lands shrinks it).
	fenceTimeout time.Duration
}

// NewBook returns a book over s.
func NewBook(s store.Store) *Book {
	if s == nil {
		panic("ledger: nil store")
	}
	return &Book{store: s, accounts: keyedMutex{m: map[string]*keyLock{}},
		maxAttempts: appendMaxAttempts, backoffBase: appendBackoffBase, backoffMax: appendBackoffMax,
		fenceTimeout: fenceTimeout}
}

func accountKey(account string) store.Key { return store.Key{PK: pkPrefix + account, SK: accountSK} }
func entryKey(account string, seq int64) store.Key {
	return store.Key{PK: pkPrefix + account, SK: fmt.Sprintf("%s%020d", seqPrefix, seq)}
}
func entryIDKey(account, id string) store.Key {
	return store.Key{PK: pkPrefix + account, SK: entryIDPrefix + id}
}

// Append appends e to its account with the next sequence and the new
// balance, and returns the entry as stored. An EntryID already in the
// account returns the stored entry and an error wrapping ErrEntryExists, and
// changes nothing.
//
// Cost: 1 Get of the account, then 1 Write of 3 actions: the entry-id guard
// (put, conditioned absent), the account (update, conditioned on the entry
// count just read, or on its absence) and the entry at the next sequence
// (put, conditioned absent). When another process's append committed in
// between, the account's condition fails and returns the account as it is
// now, and the next attempt starts from it without reading again.
//
// Errors: store.ErrUnavailable (wrapped) when the store is overloaded, the
// queue or the optimistic retries outlast their budget, or the context
// runs out: nothing was written. ErrOutcomeUnknown when a write failed
// without telling whether it committed and it could not be settled.
func (b *Book) Append(ctx context.Context, e Entry) (Entry, error) {
	if e.Account == "" || e.EntryID == "" {
		return Entry{}, fmt.Errorf("ledger: append: empty account or entry id: %w", store.ErrInvalid)
	}
	if err := b.accounts.lock(ctx, e.Account, appendReserve); err != nil {
		return Entry{}, fmt.Errorf("ledger: append to %q: waiting for earlier appends: %w", e.Account, err)
	}
	defer b.accounts.unlock(e.Account)

	cur, err := b.store.Get(ctx, accountKey(e.Account))
	if errors.Is(err, store.ErrNotFound) {
		cur, err = nil, nil
	}
	if err != nil {
		return Entry{}, fmt.Errorf("ledger: append to %q: read account: %w", e.Account, unavailableIfDone(err))
	}
	for attempt := 0; ; attempt++ {
		r := b.tryAppend(ctx, e, cur)
		switch {
		case r.err == nil:
			return r.entry, nil
		case !r.retry:
			return r.entry, fmt.Errorf("ledger: append to %q: %w", e.Account, r.err)
		}
		if r.account != nil {
			cur = r.account
		}
		if attempt+1 >= b.maxAttempts || !timeLeft(ctx, appendReserve) {
			return Entry{}, fmt.Errorf("ledger: append to %q: gave up after %d attempts (%v): %w",
				e.Account, attempt+1, r.err, store.ErrUnavailable)
		}
		if err := sleep(ctx, b.backoff(attempt)); err != nil {
			return Entry{}, fmt.Errorf("ledger: append to %q: %w", e.Account, unavailableIfDone(err))
		}
	}
}

// appendResult is the outcome of one append attempt.
type appendResult struct {
	entry Entry
	err   error
	// retry: the attempt lost a race (or the store was briefly
	// unavailable) and wrote nothing; try again.
	retry bool
	// account is the account item as it is now, when the attempt lost to
	// another append, or nil.
	account store.Item
}

// tryAppend makes one attempt from cur, the account item (nil: none yet).
func (b *Book) tryAppend(ctx context.Context, e Entry, cur store.Item) appendResult {
	wctx := ctx
	if dl, ok := ctx.Deadline(); ok {
		var cancel context.CancelFunc
		wctx, cancel = context.WithDeadline(ctx, dl.Add(-appendReserve/2))
		defer cancel()
	}
	var entries, balance int64
	accountCond := store.ItemAbsent()
	if cur != nil {
		var err error
		if entries, err = cur.Int(attrEntries); err != nil {
			return appendResult{err: fmt.Errorf("account item: %w", err)}
		}
		if balance, err = cur.Int(attrBalanceCents); err != nil {
			return appendResult{err: fmt.Errorf("account item: %w", err)}
		}
		accountCond = store.Eq(attrEntries, store.N(entries))
	}
	e.Sequence = entries + 1
	e.BalanceCents = balance + e.AmountCents
	attempt, err := randomHex(8)
	if err != nil {
		return appendResult{err: err}
	}
	guard := entryItem(e, TypeEntryID)
	guard[attrAttempt] = store.S(attempt)
	guardKey := entryIDKey(e.Account, e.EntryID)
	actions := []store.Action{
		// The guard goes first: when the entry id exists, that is the
		// answer, whatever else has changed.
		store.Put(guardKey, guard).
			When(notStored(attempt)).
			OnFailReturn(),
		store.Update(accountKey(e.Account)).
			SetAttr(attrType, store.S(TypeAccount)).
			SetAttr(attrAccount, store.S(e.Account)).
			SetAttr(attrEntries, store.N(e.Sequence)).
			SetAttr(attrBalanceCents, store.N(e.BalanceCents)).
			When(accountCond).
			OnFailReturn(),
		store.Put(entryKey(e.Account, e.Sequence), entryItem(e, TypeEntry)).When(store.ItemAbsent()),
	}
	_, err = b.store.Write(wctx, actions...)
	if err == nil {
		return appendResult{entry: e}
	}
	var cf *store.ConditionFailedError
	switch {
	case errors.As(err, &cf):
		switch cf.Action {
		case 0:
			if cf.Item == nil {
				return appendResult{err: fmt.Errorf("entry id %q: guard condition failed without the item: %w", e.EntryID, err)}
			}
			stored, derr := decodeEntry(cf.Item)
			if derr != nil {
				return appendResult{err: derr}
			}
			return appendResult{entry: stored, err: fmt.Errorf("entry id %q: %w", e.EntryID, ErrEntryExists)}
		case 1:
			// Another append committed since cur was read.
			return appendResult{err: err, retry: true, account: cf.Item}
		}
		// The account agreed with cur, yet the next sequence is taken:
		// the items disagree, and retrying cannot fix that.
		return appendResult{err: fmt.Errorf("entry %d exists but the account has %d entries: %w", e.Sequence, entries, err)}
	case errors.Is(err, store.ErrUnavailable):
		// Throttled or conflicting: nothing was written; back off.
		return appendResult{err: err, retry: true}
	case errors.Is(err, store.ErrInvalid):
		return appendResult{err: err}
	}
	return b.settle(ctx, e, guardKey, attempt, err)
}

// notStored is the condition of both the guard's put and the fence's: the
// entry id is not stored, that is its guard is absent or only a fence left
// by another attempt. An attempt never meets its own fence at its write
// (its id is fresh), but its fence's resend does. An older attempt's fence
// may be replaced: that attempt was settled before this one began (appends
// of one entry id are serialized by the kit's idempotency claim and by the
// account queue), and its write cannot land any more.
func notStored(attempt string) store.Cond {
	return store.Or(store.ItemAbsent(), store.And(store.Exists(attrFence), store.Ne(attrFence, store.S(attempt))))
}

// settle decides the outcome of an attempt whose write failed without
// saying whether it committed (a timeout, a lost connection). It writes a
// fence at the entry id's guard, conditioned on notStored: if the fence lands,
// the attempt can never commit afterwards (its guard condition now fails),
// so nothing was written; if the guard is already there, the attempt (or an
// earlier one of the same entry id) committed and the stored entry is the
// answer. The fence is resent until one of those answers comes (a resend is
// safe: if an earlier one landed, the resend meets it). Only when no answer
// comes within fenceTimeout does the outcome stay unknown.
func (b *Book) settle(ctx context.Context, e Entry, guardKey store.Key, attempt string, cause error) appendResult {
	fctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), b.fenceTimeout)
	defer cancel()
	fence := store.Item{
		attrType:            store.S(TypeFence),
		attrFence:           store.S(attempt),
		store.AttrExpiresAt: store.ExpiresAt(time.Now().Add(fenceTTL)),
	}
	var err error
	for try := 0; ; try++ {
		_, err = b.store.Write(fctx, store.Put(guardKey, fence).When(notStored(attempt)).OnFailReturn())
		var cf *store.ConditionFailedError
		switch {
		case err == nil:
			return appendResult{err: fmt.Errorf("write failed and was fenced, nothing written (%v): %w", cause, store.ErrUnavailable)}
		case errors.As(err, &cf) && cf.Item != nil:
			switch {
			case cf.Item.Str(attrType) == TypeFence && cf.Item.Str(attrFence) == attempt:
				// An earlier resend of this fence landed.
				return appendResult{err: fmt.Errorf("write failed and was fenced, nothing written (%v): %w", cause, store.ErrUnavailable)}
			case cf.Item.Str(attrType) == TypeEntryID:
				stored, derr := decodeEntry(cf.Item)
				if derr != nil {
					return appendResult{err: derr}
				}
				if cf.Item.Str(attrAttempt) == attempt {
					return appendResult{entry: stored} // it committed
				}
				return appendResult{entry: stored, err: fmt.Errorf("entry id %q: %w", e.EntryID, ErrEntryExists)}
			}
			return appendResult{err: fmt.Errorf("write failed (%v); fencing it met %s: %w", cause, cf.Item.Str(attrType), ErrOutcomeUnknown)}
		case errors.Is(err, store.ErrInvalid):
			return appendResult{err: fmt.Errorf("write failed (%v) and fencing it failed (%v): %w", cause, err, ErrOutcomeUnknown)}
		}
		if serr := sleep(fctx, b.backoff(try)); serr != nil {
			break
		}
	}
	return appendResult{err: fmt.Errorf("write failed (%v) and fencing it failed (%v): %w", cause, err, ErrOutcomeUnknown)}
}

// Balance returns the account's balance and entry count, or an error
// wrapping store.ErrNotFound for an account without entries. Cost: 1 Get.
func (b *Book) Balance(ctx context.Context, account string) (Balance, error) {
	it, err := b.store.Get(ctx, accountKey(account))
	if err != nil {
		return Balance{}, fmt.Errorf("ledger: balance of %q: %w", account, unavailableIfDone(err))
	}
	bal := Balance{Account: account}
	if bal.Entries, err = it.Int(attrEntries); err != nil {
		return Balance{}, fmt.Errorf("ledger: balance of %q: %w", account, err)
	}
	if bal.BalanceCents, err = it.Int(attrBalanceCents); err != nil {
		return Balance{}, fmt.Errorf("ledger: balance of %q: %w", account, err)
	}
	return bal, nil
}

// List returns the account's entries in sequence order (empty, not nil, for
// an account without entries). Cost: 1 Query per 1 MB page.
func (b *Book) List(ctx context.Context, account string) ([]Entry, error) {
	out := []Entry{}
	q := store.Query{PK: pkPrefix + account, SK: store.SKPrefix(seqPrefix)}
	for {
		page, err := b.store.Query(ctx, q)
		if err != nil {
			return nil, fmt.Errorf("ledger: list %q: %w", account, unavailableIfDone(err))
		}
		for _, it := range page.Items {
			e, err := decodeEntry(it)
			if err != nil {
				return nil, fmt.Errorf("ledger: list %q: %w", account, err)
			}
			out = append(out, e)
		}
		if page.Cursor == "" {
			return out, nil
		}
		q.Cursor = page.Cursor
	}
}

// entryItem is an entry's attributes (without keys).
func entryItem(e Entry, typ string) store.Item {
	it := store.Item{
		attrType:         store.S(typ),
		attrAccount:      store.S(e.Account),
		attrEntryID:      store.S(e.EntryID),
		attrSequence:     store.N(e.Sequence),
		attrAmountCents:  store.N(e.AmountCents),
		attrMemo:         store.S(e.Memo),
		attrBalanceCents: store.N(e.BalanceCents),
	}
	if !e.CreatedAt.IsZero() {
		it[attrCreatedAt] = store.N(e.CreatedAt.UnixNano())
	}
	return it
}

func decodeEntry(it store.Item) (Entry, error) {
	e := Entry{Account: it.Str(attrAccount), EntryID: it.Str(attrEntryID), Memo: it.Str(attrMemo)}
	var err error
	for _, f := range []struct {
		name string
		dst  *int64
	}{{attrSequence, &e.Sequence}, {attrAmountCents, &e.AmountCents}, {attrBalanceCents, &e.BalanceCents}} {
		if *f.dst, err = it.Int(f.name); err != nil {
			return Entry{}, fmt.Errorf("ledger: entry item %s: %w", it.Key(), err)
		}
	}
	if _, ok := it[attrCreatedAt]; ok {
		ns, err := it.Int(attrCreatedAt)
		if err != nil {
			return Entry{}, fmt.Errorf("ledger: entry item %s: %w", it.Key(), err)
		}
		e.CreatedAt = time.Unix(0, ns)
	}
	return e, nil
}

// unavailableIfDone marks a context that ran out as unavailability: the
// request had no time left, nothing was written, a retry may succeed.
func unavailableIfDone(err error) error {
	if errors.Is(err, context.DeadlineExceeded) || errors.Is(err, context.Canceled) {
		return fmt.Errorf("%w (%w)", store.ErrUnavailable, err)
	}
	return err
}

// timeLeft reports whether ctx has more than reserve before its deadline.
func timeLeft(ctx context.Context, reserve time.Duration) bool {
	if ctx.Err() != nil {
		return false
	}
	dl, ok := ctx.Deadline()
	return !ok || time.Until(dl) > reserve
}

// backoff is the jittered exponential wait before retry attempt+1.
func (b *Book) backoff(attempt int) time.Duration {
	d := b.backoffBase << min(attempt, 16)
	if d > b.backoffMax || d <= 0 {
		d = b.backoffMax
	}
	return d/2 + rand.N(d/2+1) // jitter: [d/2, d]
}

func sleep(ctx context.Context, d time.Duration) error {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

func randomHex(n int) (string, error) {
	b := make([]byte, n)
	if _, err := crand.Read(b); err != nil {
		return "", fmt.Errorf("ledger: random: %w", err)
	}
	return hex.EncodeToString(b), nil
}
