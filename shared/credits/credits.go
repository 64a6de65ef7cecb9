// Package credits is the network's money: integer credits in a
// double-entry ledger over the item API (store.Store), so it runs on
// memory, bolt and DynamoDB alike. It is not the ledger fixture (a
// provider's own bookkeeping); it is what escrow moves.
//
// # Items
//
//	item     pk               sk                       attributes
//	account  ACCT#<account>   ACCT                     balance, held
//	entry    ACCT#<account>   E#<ulid>                 tx, amount (signed), counterparty, memo, at (Unix ns)
//
// An account is named by an agent's awnId, by Mint (the operator's
// account, whose credits come from nowhere), or by an escrow's hold
// ("escrow:<id>", package escrow). An account that was never written reads
// as balance 0, held 0, no entries. Entry ids are ULIDs, so a backward
// Query of the E# prefix lists the newest first. held is what the agent
// has funded into escrows not yet settled: it moves with the hold (the
// escrow package adds to it in the same transaction).
//
// # One transaction per movement
//
// Transfer writes one TransactWriteItems: an Update of each balance (ADD
// -amount to the payer, conditioned on balance ≥ amount unless the payer
// is Mint; ADD +amount to the payee), a Put of each entry (conditioned on
// the entry not existing), and whatever actions the caller adds in the
// same transaction (an escrow's state condition and change). Either all of
// it commits or none of it does, so the sum over all accounts is zero at
// every commit and no balance but Mint's goes below zero: two payments
// racing for the last credits are serialized by DynamoDB's transaction
// conflict detection (or the embedded engines' single writer), and the
// second one's condition sees the first one's balance.
//
// # Costs
//
// Transfer: 1 write request (TransactWriteItems of 4 actions plus the
// caller's), 1 sequential round trip; 2 WCU per action. Account: 1 Get and
// 1 Query (backward, Limit entries), issued in parallel: 1 sequential
// round trip.
package credits

import (
	"context"
	"crypto/rand"
	"errors"
	"fmt"
	"strings"
	"sync"
	"time"

	"github.com/oklog/ulid/v2"

	"github.com/a2awire/a2awire/shared/apierror"
	"github.com/a2awire/a2awire/shared/store"
)

// Mint is the operator's account: grants come from it, so it is the one
// balance that goes negative (minus every credit in circulation).
const Mint = "mint"

// Limits of one movement.
const (
	// MaxAmount bounds one movement (and so every balance far below
	// int64's range).
	MaxAmount = 1_000_000_000_000
	// MaxMemo bounds a memo's bytes.
	MaxMemo = 256
	// DefaultEntries and MaxEntries bound an account page.
	DefaultEntries = 50
	MaxEntries     = 100
)

// Attribute names of the items.
const (
	attrType         = "type"
	attrBalance      = "balance"
	attrHeld         = "held"
	attrTx           = "tx"
	attrAmount       = "amount"
	attrCounterparty = "counterparty"
	attrMemo         = "memo"
	attrAt           = "at"
	attrAccount      = "account"
)

// Item types.
const (
	typeAccount = "account"
	typeEntry   = "entry"
)

// ErrInsufficientFunds is the code of a payment the payer cannot cover
// (402 insufficient_funds).
const ErrInsufficientFunds = "insufficient_funds"

// AccountPK is the partition of account name.
func AccountPK(account string) string { return "ACCT#" + account }

// AccountKey is the key of account's balance item.
func AccountKey(account string) store.Key { return store.Key{PK: AccountPK(account), SK: "ACCT"} }

// Entry is one line of an account.
type Entry struct {
	ID string
	// Tx names the movement; both of its entries carry it.
	Tx string
	// Amount is positive for credits in, negative for credits out.
	Amount       int64
	Counterparty string
	Memo         string
	At           time.Time
}

// Account is an account's state and a page of its entries.
type Account struct {
	Name    string
	Balance int64
	Held    int64
	Entries []Entry
	// Next continues the entries; "" at the end.
	Next string
}

// Transfer is one movement of Amount from From to To.
type Transfer struct {
	From, To string
	Amount   int64
	Memo     string
	// Tx names the movement (a fresh ULID when empty).
	Tx string
	// Held names an account whose held attribute moves by HeldDelta in
	// the same transaction (escrow: funding adds to the buyer's held,
	// settling takes it back); "" for none.
	Held      string
	HeldDelta int64
}

// Ledger is the credits domain over one store.
type Ledger struct {
	st  store.Store
	now func() time.Time
	mu  sync.Mutex // guards entropy
	ent *ulid.MonotonicEntropy
}

// New returns the ledger over st; now is its clock (nil: time.Now).
func New(st store.Store, now func() time.Time) *Ledger {
	if now == nil {
		now = time.Now
	}
	return &Ledger{st: st, now: now, ent: ulid.Monotonic(rand.Reader, 0)}
}

// Store returns the ledger's store.
func (l *Ledger) Store() store.Store { return l.st }

// NewID returns a fresh ULID at the ledger's clock.
func (l *Ledger) NewID() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return ulid.MustNew(ulid.Timestamp(l.now()), l.ent).String()
}

// CheckAccount checks an account name: an awnId (aw:sha256:<64 hex>),
// Mint, or an escrow hold.
func CheckAccount(name string) error {
	if name == Mint || strings.HasPrefix(name, "escrow:") && len(name) <= 64 {
		return nil
	}
	if !IsAWNID(name) {
		return apierror.New(apierror.Invalid, "account must be an awnId (aw:sha256:<64 lowercase hex>)")
	}
	return nil
}

// IsAWNID reports whether s has an awnId's shape.
func IsAWNID(s string) bool {
	hex, ok := strings.CutPrefix(s, "aw:sha256:")
	if !ok || len(hex) != 64 {
		return false
	}
	for i := 0; i < len(hex); i++ {
		c := hex[i]
		if (c < '0' || c > '9') && (c < 'a' || c > 'f') {
			return false
		}
	}
	return true
}

// CheckAmount checks a movement's amount.
func CheckAmount(n int64) error {
	if n < 1 || n > MaxAmount {
		return apierror.New(apierror.Invalid, "amount must be an integer from 1 to %d", int64(MaxAmount))
	}
	return nil
}

// Actions returns the write actions of t: the two balance updates, the
// two entries and the held update of a third account. The payer's update
// is the first.
func (l *Ledger) Actions(t Transfer) ([]store.Action, error) {
	if err := CheckAmount(t.Amount); err != nil {
		return nil, err
	}
	if len(t.Memo) > MaxMemo {
		return nil, apierror.New(apierror.Invalid, "memo must be at most %d bytes", MaxMemo)
	}
	if t.From == t.To {
		return nil, apierror.New(apierror.Invalid, "an account cannot pay itself")
	}
	if t.Tx == "" {
		t.Tx = l.NewID()
	}
	now := l.now()
	from := store.Update(AccountKey(t.From)).AddNum(attrBalance, -t.Amount).SetAttr(attrType, store.S(typeAccount)).SetAttr(attrAccount, store.S(t.From))
	if t.From != Mint {
		from = from.When(store.Ge(attrBalance, store.N(t.Amount)))
	}
	to := store.Update(AccountKey(t.To)).AddNum(attrBalance, t.Amount).SetAttr(attrType, store.S(typeAccount)).SetAttr(attrAccount, store.S(t.To))
	var held []store.Action
	switch t.Held {
	case "":
	case t.From:
		from = from.AddNum(attrHeld, t.HeldDelta)
	case t.To:
		to = to.AddNum(attrHeld, t.HeldDelta)
	default:
		held = append(held, HeldUpdate(t.Held, t.HeldDelta))
	}
	entry := func(account, counterparty string, amount int64) store.Action {
		id := l.NewID()
		return store.Put(store.Key{PK: AccountPK(account), SK: "E#" + id}, store.Item{
			attrType:         store.S(typeEntry),
			attrTx:           store.S(t.Tx),
			attrAmount:       store.N(amount),
			attrCounterparty: store.S(counterparty),
			attrMemo:         store.S(t.Memo),
			attrAt:           store.N(now.UnixNano()),
		}).When(store.ItemAbsent())
	}
	return append([]store.Action{from, to, entry(t.From, t.To, -t.Amount), entry(t.To, t.From, t.Amount)}, held...), nil
}

// HeldUpdate is an extra action that adds delta to account's held without
// moving its balance (settling a hold whose credits go to someone else).
func HeldUpdate(account string, delta int64) store.Action {
	return store.Update(AccountKey(account)).AddNum(attrHeld, delta).SetAttr(attrType, store.S(typeAccount)).SetAttr(attrAccount, store.S(account))
}

// Move applies t and the caller's extra actions in one transaction. The
// extra actions come first, so that when both an extra condition (an
// escrow's state) and the payer's balance fail, the extra one is reported:
// its failed condition is returned as the store's *ConditionFailedError
// with Action its index among extra. A failed payer condition alone is
// 402 insufficient_funds.
func (l *Ledger) Move(ctx context.Context, t Transfer, extra ...store.Action) error {
	acts, err := l.Actions(t)
	if err != nil {
		return err
	}
	n := len(extra)
	_, err = l.st.Write(ctx, append(append([]store.Action(nil), extra...), acts...)...)
	if err == nil {
		return nil
	}
	var cf *store.ConditionFailedError
	if errors.As(err, &cf) && cf.Action == n {
		return &apierror.Error{Kind: apierror.PaymentRequired, Code: ErrInsufficientFunds,
			Message: "the paying account's balance is less than the amount", Err: err}
	}
	return err
}

// Grant moves amount from Mint to account (the operator's grant).
func (l *Ledger) Grant(ctx context.Context, account string, amount int64, memo string) error {
	if err := CheckAccount(account); err != nil {
		return err
	}
	if account == Mint {
		return apierror.New(apierror.Invalid, "the mint cannot be granted credits")
	}
	err := l.Move(ctx, Transfer{From: Mint, To: account, Amount: amount, Memo: memo})
	if err != nil && apierror.KindOf(err) == apierror.Internal {
		return apierror.FromStore("grant credits", err)
	}
	return err
}

// Get reads account with a page of its entries, newest first: a Get and a
// Query in parallel. An account never written is all zero.
func (l *Ledger) Get(ctx context.Context, account string, limit int, cursor string) (Account, error) {
	if err := CheckAccount(account); err != nil {
		return Account{}, err
	}
	if limit <= 0 {
		limit = DefaultEntries
	}
	limit = min(limit, MaxEntries)
	var (
		wg      sync.WaitGroup
		it      store.Item
		getErr  error
		page    store.Page
		pageErr error
	)
	wg.Add(1)
	go func() {
		defer wg.Done()
		it, getErr = l.st.Get(ctx, AccountKey(account))
	}()
	page, pageErr = l.st.Query(ctx, store.Query{PK: AccountPK(account), SK: store.SKPrefix("E#"), Backward: true, Limit: limit, Cursor: cursor})
	wg.Wait()
	if pageErr != nil {
		if errors.Is(pageErr, store.ErrBadCursor) {
			return Account{}, apierror.New(apierror.Invalid, "cursor is not one this listing made")
		}
		return Account{}, apierror.FromStore("read entries", pageErr)
	}
	a := Account{Name: account, Next: page.Cursor, Entries: []Entry{}}
	switch {
	case errors.Is(getErr, store.ErrNotFound):
	case getErr != nil:
		return Account{}, apierror.FromStore("read account", getErr)
	default:
		a.Balance, _ = it.Int(attrBalance)
		a.Held, _ = it.Int(attrHeld)
	}
	for _, e := range page.Items {
		a.Entries = append(a.Entries, entryOf(e))
	}
	return a, nil
}

// Entries reads every entry of account (tests and audits: sum them).
func (l *Ledger) Entries(ctx context.Context, account string) ([]Entry, error) {
	var out []Entry
	cursor := ""
	for {
		page, err := l.st.Query(ctx, store.Query{PK: AccountPK(account), SK: store.SKPrefix("E#"), Cursor: cursor})
		if err != nil {
			return nil, fmt.Errorf("credits: entries of %s: %w", account, err)
		}
		for _, e := range page.Items {
			out = append(out, entryOf(e))
		}
		if page.Cursor == "" {
			return out, nil
		}
		cursor = page.Cursor
	}
}

func entryOf(it store.Item) Entry {
	amount, _ := it.Int(attrAmount)
	at, _ := it.Int(attrAt)
	return Entry{
		ID:           strings.TrimPrefix(it.Str(store.AttrSK), "E#"),
		Tx:           it.Str(attrTx),
		Amount:       amount,
		Counterparty: it.Str(attrCounterparty),
		Memo:         it.Str(attrMemo),
		At:           time.Unix(0, at).UTC(),
	}
}
