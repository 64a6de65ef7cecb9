// Package store is the one storage model every domain speaks: DynamoDB's item
// model, reduced to the few operations the domains need.
//
// Items are keyed by a partition key "pk" and a sort key "sk" (both strings).
// An item may carry "gsi1pk"/"gsi1sk" to appear in the sparse index gsi1, and a
// numeric "expiresAt" (epoch seconds) after which the engine deletes it in the
// background, as DynamoDB's TTL does. Every other attribute is a DynamoDB
// attribute value.
//
// Three engines implement Store: memory (ordered, for tests and `make local`),
// bolt (a file, every commit fsync'd) and dynamo (DynamoDB). They accept and
// refuse exactly the same inputs (Validate holds DynamoDB's limits for all of
// them), and storetest.Run checks that they behave the same. No engine knows any
// domain: idempotency records, ledgers, agents, worlds… are each written once,
// over this API, in their own package.
//
// Every committed write also yields change records shaped as DynamoDB Streams
// delivers them to Lambda (see Feed).
package store

import (
	"context"
	"errors"
	"fmt"

	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
)

// Attribute and index names of the item model.
const (
	AttrPK        = "pk"
	AttrSK        = "sk"
	AttrGSI1PK    = "gsi1pk"
	AttrGSI1SK    = "gsi1sk"
	AttrExpiresAt = "expiresAt"
	// IndexGSI1 is the sparse global secondary index over gsi1pk/gsi1sk.
	IndexGSI1 = "gsi1"
)

// Item is one stored item: attribute name → DynamoDB attribute value. It
// always holds pk and sk when it comes out of a Store.
type Item map[string]types.AttributeValue

// Key names one item.
type Key struct {
	PK, SK string
}

// String renders the key for error messages and logs.
func (k Key) String() string { return fmt.Sprintf("(%q, %q)", k.PK, k.SK) }

// Store is the item API. Engines are safe for concurrent use.
type Store interface {
	// Get returns the item at k, strongly consistent, or an error wrapping
	// ErrNotFound. Items past expiresAt that the sweeper has not deleted
	// yet are returned, as DynamoDB does; domains check expiry themselves.
	Get(ctx context.Context, k Key) (Item, error)
	// Query reads one partition of the table or of gsi1 (q.Index), in
	// sort-key order (or reversed; UTF-8 byte order; items sharing a gsi1sk
	// in a fixed order of the engine's), one page at a time. A page ends
	// (DynamoDB Local's behaviour, which storetest checks on every engine):
	//   - after q.Limit items, with a cursor even if no item follows;
	//   - when the items already on it total MaxPageBytes (ItemSize) or
	//     more and another item matches, with a cursor (so the item that
	//     crosses 1 MB is still on the page);
	//   - when no item is left, with Cursor "".
	// A cursor that this query did not make fails with ErrBadCursor.
	Query(ctx context.Context, q Query) (Page, error)
	// Write applies 1–MaxActions actions atomically: all of them or none.
	// A failed condition returns a *ConditionFailedError (errors.Is
	// ErrConditionFailed); an error wrapping ErrOutcomeUnknown leaves
	// open whether the actions were applied. The result has one entry per action: the item
	// after an Update whose ReturnNew is set, nil otherwise.
	Write(ctx context.Context, actions ...Action) ([]Item, error)
}

// Errors of the item API. Engines wrap them with the operation; callers test
// with errors.Is.
var (
	// ErrNotFound means Get found no item.
	ErrNotFound = errors.New("store: not found")
	// ErrConditionFailed means a Write's condition did not hold; nothing
	// was written. The error is a *ConditionFailedError.
	ErrConditionFailed = errors.New("store: condition failed")
	// ErrInvalid means the caller passed something no engine may store or
	// run: a limit of DynamoDB exceeded, a key attribute of the wrong type,
	// two actions on one item, a malformed query. A programming error of
	// the caller, so it maps to 500 unless the domain checked its input.
	ErrInvalid = errors.New("store: invalid argument")
	// ErrBadCursor means a cursor was not made by this query (tampered,
	// truncated, or from another query). Clients sent it, so it maps to 400.
	ErrBadCursor = errors.New("store: bad cursor")
	// ErrUnavailable means the engine is overloaded (throttled, or a
	// transaction kept conflicting) after its own retries. Nothing was
	// written; the caller may retry later (503 with Retry-After). It
	// answers Unavailable() true, so that apierror.FromStore recognises it
	// without importing the store (the provider kit links apierror, and
	// must not link the store's AWS types).
	ErrUnavailable error = unavailableError{}
	// ErrOutcomeUnknown means a Write may or may not have been applied:
	// the engine lost the answer (a dropped connection, an internal error
	// of DynamoDB, the caller's context ending mid-request) or committed
	// without making the commit durable (bolt's fsync failing after the
	// commit). It is neither success nor failure and never wraps
	// ErrUnavailable: a caller must resolve it — re-read what the write
	// would have changed, or retry it idempotently — before it adjusts
	// anything (a count, a reply) on either outcome.
	ErrOutcomeUnknown = errors.New("store: outcome of the write is unknown")
)

// ConditionFailedError reports which action's condition failed.
type ConditionFailedError struct {
	// Action is the index of the failed action in the Write call.
	Action int
	// Item is the item that was in the way when the action asked for it
	// (ReturnOnFail) and one existed; nil otherwise.
	Item Item
}

func (e *ConditionFailedError) Error() string {
	return fmt.Sprintf("store: condition of action %d failed", e.Action)
}

// Is makes errors.Is(err, ErrConditionFailed) true.
func (e *ConditionFailedError) Is(target error) bool { return target == ErrConditionFailed }

// ActionKind is the kind of one write action.
type ActionKind int

// Action kinds, as in DynamoDB's TransactWriteItems.
const (
	// PutAction replaces the whole item with Item.
	PutAction ActionKind = iota + 1
	// UpdateAction sets, adds to and removes attributes, creating the item
	// when it does not exist (unless the condition says otherwise).
	UpdateAction
	// DeleteAction removes the item; deleting a missing item is not an error.
	DeleteAction
	// CheckAction only evaluates its condition.
	CheckAction
)

func (k ActionKind) String() string {
	switch k {
	case PutAction:
		return "Put"
	case UpdateAction:
		return "Update"
	case DeleteAction:
		return "Delete"
	case CheckAction:
		return "ConditionCheck"
	}
	return fmt.Sprintf("ActionKind(%d)", int(k))
}

// Action is one action of a Write. Build it with Put, Update, Delete or
// Check and the With… methods.
type Action struct {
	Kind ActionKind
	Key  Key
	// Item is a Put's whole new item; pk and sk are taken from Key (an
	// Item that carries different ones is refused).
	Item Item
	// Set, Add and Remove are an Update's changes: SET name = value,
	// ADD name number (a missing attribute counts as 0), REMOVE name. Each
	// attribute appears in at most one of them; pk and sk in none.
	Set    Item
	Add    map[string]int64
	Remove []string
	// If is the action's condition, evaluated against the item as it was
	// before the write; nil means none.
	If Cond
	// ReturnNew asks an Update for the item after the write. Only a Write
	// of exactly one action may ask (DynamoDB's transactions return no
	// values).
	ReturnNew bool
	// ReturnOnFail asks for the item in the way when the condition fails.
	ReturnOnFail bool
}

// Put returns an action that writes item (pk and sk come from k).
func Put(k Key, item Item) Action { return Action{Kind: PutAction, Key: k, Item: item} }

// Update returns an empty update of k; add changes with SetAttr, AddNum, Del.
func Update(k Key) Action { return Action{Kind: UpdateAction, Key: k} }

// Delete returns an action that deletes k.
func Delete(k Key) Action { return Action{Kind: DeleteAction, Key: k} }

// Check returns an action that only checks c against k's item.
func Check(k Key, c Cond) Action { return Action{Kind: CheckAction, Key: k, If: c} }

// SetAttr adds SET name = v to an Update.
func (a Action) SetAttr(name string, v types.AttributeValue) Action {
	set := make(Item, len(a.Set)+1)
	for n, x := range a.Set {
		set[n] = x
	}
	set[name] = v
	a.Set = set
	return a
}

// AddNum adds ADD name n to an Update.
func (a Action) AddNum(name string, n int64) Action {
	add := make(map[string]int64, len(a.Add)+1)
	for k, v := range a.Add {
		add[k] = v
	}
	add[name] = n
	a.Add = add
	return a
}

// Del adds REMOVE name to an Update.
func (a Action) Del(names ...string) Action {
	a.Remove = append(append([]string(nil), a.Remove...), names...)
	return a
}

// When sets the action's condition.
func (a Action) When(c Cond) Action { a.If = c; return a }

// Returning asks an Update for the new item.
func (a Action) Returning() Action { a.ReturnNew = true; return a }

// OnFailReturn asks for the item in the way when the condition fails.
func (a Action) OnFailReturn() Action { a.ReturnOnFail = true; return a }

// Query reads one partition of the table or of gsi1.
type Query struct {
	// Index is "" for the table or IndexGSI1.
	Index string
	// PK is the partition key value (pk, or gsi1pk on the index).
	PK string
	// SK restricts the sort key (sk, or gsi1sk on the index); the zero
	// value matches every item of the partition.
	SK SortCond
	// Backward reads in descending sort-key order.
	Backward bool
	// Limit is the most items per page; 0 means up to the 1 MB page.
	Limit int
	// Cursor continues from the page that returned it.
	Cursor string
}

// Page is one page of a Query.
type Page struct {
	Items []Item
	// Cursor continues the query; "" when the page reached the end (see
	// Store.Query: a page cut by Limit carries one even if nothing follows).
	Cursor string
}

// SortOp is a sort-key condition of a Query, as in DynamoDB's
// KeyConditionExpression.
type SortOp int

// Sort-key conditions.
const (
	SortAll SortOp = iota
	SortEq
	SortLT
	SortLE
	SortGT
	SortGE
	// SortBetween matches Value ≤ sk ≤ Value2.
	SortBetween
	// SortPrefix matches sk beginning with Value.
	SortPrefix
)

// SortCond is a sort-key condition; sort keys compare as UTF-8 bytes.
type SortCond struct {
	Op            SortOp
	Value, Value2 string
}

// Sort-key condition constructors.
func SKEq(v string) SortCond         { return SortCond{Op: SortEq, Value: v} }
func SKLT(v string) SortCond         { return SortCond{Op: SortLT, Value: v} }
func SKLE(v string) SortCond         { return SortCond{Op: SortLE, Value: v} }
func SKGT(v string) SortCond         { return SortCond{Op: SortGT, Value: v} }
func SKGE(v string) SortCond         { return SortCond{Op: SortGE, Value: v} }
func SKBetween(a, b string) SortCond { return SortCond{Op: SortBetween, Value: a, Value2: b} }
func SKPrefix(p string) SortCond     { return SortCond{Op: SortPrefix, Value: p} }

// Matches reports whether sort key sk satisfies the condition.
func (c SortCond) Matches(sk string) bool {
	switch c.Op {
	case SortAll:
		return true
	case SortEq:
		return sk == c.Value
	case SortLT:
		return sk < c.Value
	case SortLE:
		return sk <= c.Value
	case SortGT:
		return sk > c.Value
	case SortGE:
		return sk >= c.Value
	case SortBetween:
		return c.Value <= sk && sk <= c.Value2
	case SortPrefix:
		return len(sk) >= len(c.Value) && sk[:len(c.Value)] == c.Value
	}
	return false
}

// unavailableError is the type of ErrUnavailable.
type unavailableError struct{}

func (unavailableError) Error() string     { return "store: temporarily unavailable" }
func (unavailableError) Unavailable() bool { return true }
