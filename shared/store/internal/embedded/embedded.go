// Package embedded holds what the two embedded engines (memory and bolt)
// share, so that they cannot drift from each other: the semantics of Write
// (conditions, Put / Update / Delete / ConditionCheck, the resulting items),
// the order of items inside a partition of the table and of gsi1, the paging
// of Query (limit, 1 MB pages, cursors), change records, and TTL expiry.
//
// Each engine only stores items and walks them in order; everything an engine
// could get subtly wrong about DynamoDB's behaviour lives here once.
package embedded

import (
	"fmt"
	"math/big"
	"strings"
	"time"

	"github.com/aws/aws-lambda-go/events"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"

	"github.com/a2awire/a2awire/shared/store"
)

// DefaultTable is the table name in stream ARNs when an engine is given none.
const DefaultTable = "a2awire"

// StreamARN is the eventSourceARN of an embedded engine's change records.
func StreamARN(table string) string {
	return "arn:aws:dynamodb:local:000000000000:table/" + table + "/stream/local"
}

// Retention is how long change records are kept at most, whether consumed or
// not (DynamoDB Streams keeps records for 24 hours).
const Retention = 24 * time.Hour

// DefaultSweepInterval is how often the TTL sweeper looks for expired items.
const DefaultSweepInterval = time.Minute

// Change is one item changed by a committed write: Old is nil for a new item,
// New is nil for a deleted one.
type Change struct {
	Key      store.Key
	Old, New store.Item
}

// Plan evaluates a Write against the items as they are (get returns the
// current item at a key, nil when there is none, never an item the caller
// may keep) and returns the Write's results and the changes to apply, in
// action order. It writes nothing: the engine applies the changes atomically,
// or none of them when Plan fails. A failed condition is a
// *store.ConditionFailedError; an invalid write, or one whose result would be
// an invalid item (over 400 KB, ADD onto a non-number), wraps
// store.ErrInvalid.
//
// The items in the results and the changes are fresh copies: the engine may
// store them and hand the results to the caller.
func Plan(actions []store.Action, get func(store.Key) (store.Item, error)) ([]store.Item, []Change, error) {
	if err := store.ValidateWrite(actions); err != nil {
		return nil, nil, err
	}
	results := make([]store.Item, len(actions))
	changes := make([]Change, 0, len(actions))
	for i, a := range actions {
		old, err := get(a.Key)
		if err != nil {
			return nil, nil, err
		}
		ok, err := store.Eval(a.If, old)
		if err != nil {
			return nil, nil, fmt.Errorf("action %d: %w", i, err)
		}
		if !ok {
			cf := &store.ConditionFailedError{Action: i}
			if a.ReturnOnFail && old != nil {
				cf.Item = old.Clone()
			}
			return nil, nil, cf
		}
		var next store.Item
		switch a.Kind {
		case store.CheckAction:
			continue
		case store.DeleteAction:
			if old == nil {
				continue
			}
		case store.PutAction:
			next = store.WithKey(a.Item, a.Key).Clone()
		case store.UpdateAction:
			if next, err = update(old, a); err != nil {
				return nil, nil, fmt.Errorf("action %d (Update %s): %w", i, a.Key, err)
			}
			if a.ReturnNew {
				results[i] = next.Clone()
			}
		}
		if next != nil {
			if err := store.ValidateItem(next); err != nil {
				return nil, nil, fmt.Errorf("action %d (%s %s): resulting item: %w", i, a.Kind, a.Key, err)
			}
		}
		changes = append(changes, Change{Key: a.Key, Old: old.Clone(), New: next})
	}
	return results, changes, nil
}

// update applies an Update's SET, ADD and REMOVE to a copy of old (or to a
// new item holding only the key).
func update(old store.Item, a store.Action) (store.Item, error) {
	next := old.Clone()
	if next == nil {
		next = store.Item{store.AttrPK: store.S(a.Key.PK), store.AttrSK: store.S(a.Key.SK)}
	}
	for name, v := range a.Set {
		next[name] = store.CloneValue(v)
	}
	for name, n := range a.Add {
		sum, err := AddNumber(next[name], n)
		if err != nil {
			return nil, fmt.Errorf("ADD %s: %w", name, err)
		}
		next[name] = sum
	}
	for _, name := range a.Remove {
		delete(next, name)
	}
	return next, nil
}

// AddNumber is DynamoDB's ADD on a number: a missing attribute counts as 0;
// any other type is refused (DynamoDB answers a ValidationException).
func AddNumber(have types.AttributeValue, n int64) (types.AttributeValue, error) {
	if have == nil {
		return store.N(n), nil
	}
	num, ok := have.(*types.AttributeValueMemberN)
	if !ok {
		return nil, fmt.Errorf("attribute is not a number: %w", store.ErrInvalid)
	}
	r, err := store.ParseNumber(num.Value)
	if err != nil {
		return nil, err
	}
	r.Add(r, new(big.Rat).SetInt64(n))
	return &types.AttributeValueMemberN{Value: FormatNumber(r)}, nil
}

// FormatNumber writes an exact decimal (the denominator of a sum of decimals
// is a product of 2s and 5s) without an exponent or trailing zeros.
func FormatNumber(r *big.Rat) string {
	if r.IsInt() {
		return r.Num().String()
	}
	scaled := new(big.Rat).Set(r)
	ten := big.NewRat(10, 1)
	digits := 0
	for !scaled.IsInt() && digits < 200 {
		scaled.Mul(scaled, ten)
		digits++
	}
	s := r.FloatString(digits)
	if strings.Contains(s, ".") {
		s = strings.TrimRight(strings.TrimRight(s, "0"), ".")
	}
	return s
}

// TTL is the user identity DynamoDB puts on the REMOVE records of items its
// TTL deleted.
var TTL = events.DynamoDBUserIdentity{Type: "Service", PrincipalID: "dynamodb.amazonaws.com"}

// Record builds the change record of c, or false when c changes nothing.
// byTTL marks a deletion by the TTL sweeper.
func Record(arn string, seq uint64, created int64, c Change, byTTL bool) (events.DynamoDBEventRecord, bool) {
	rec, ok := store.ChangeRecord(arn, seq, created, c.Old, c.New)
	if ok && byTTL {
		id := TTL
		rec.UserIdentity = &id
	}
	return rec, ok
}

// Changed reports whether c changes anything (a Put of an identical item
// does not, and yields no record).
func Changed(c Change) bool {
	switch {
	case c.Old == nil && c.New == nil:
		return false
	case c.Old == nil || c.New == nil:
		return true
	}
	return !store.EqualItems(c.Old, c.New)
}

// Expiry returns an item's expiresAt as whole epoch seconds, rounded down
// and clamped to int64, and whether it has a usable one (a number).
func Expiry(it store.Item) (int64, bool) {
	v, ok := it[store.AttrExpiresAt].(*types.AttributeValueMemberN)
	if !ok {
		return 0, false
	}
	r, err := store.ParseNumber(v.Value)
	if err != nil {
		return 0, false
	}
	q := new(big.Int).Div(r.Num(), r.Denom()) // Euclidean: rounds toward -inf for a positive denominator
	switch {
	case !q.IsInt64() && q.Sign() > 0:
		return 1<<63 - 1, true
	case !q.IsInt64():
		return -1 << 63, true
	}
	return q.Int64(), true
}

// Expired reports whether the TTL sweeper deletes it at now: its expiresAt
// is a number strictly before now.
func Expired(it store.Item, now time.Time) bool {
	v, ok := it[store.AttrExpiresAt].(*types.AttributeValueMemberN)
	if !ok {
		return false
	}
	r, err := store.ParseNumber(v.Value)
	if err != nil {
		return false
	}
	at := new(big.Rat).SetFrac(big.NewInt(now.UnixNano()), big.NewInt(int64(time.Second)))
	return r.Cmp(at) < 0
}
