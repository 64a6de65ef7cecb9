// Package storetest is the one conformance suite of the item API
// (store.Store and store.Feed). Every engine runs it — memory, bolt and
// dynamo on DynamoDB Local — so that code tested on the embedded engines
// holds on AWS. Where the engines could differ, DynamoDB Local decided what
// the cases expect (see the store package's docs for each rule).
//
// An engine's test calls Run with a constructor returning a fresh, empty
// store for each case and registering its cleanup on that t:
//
//	func TestConformance(t *testing.T) {
//		storetest.Run(t, func(t *testing.T) store.Store {
//			s := memory.New()
//			t.Cleanup(func() { s.Close() })
//			return s
//		})
//	}
//
// RunFeed does the same for the change feed. Cases run in parallel with each
// other, each on its own store.
package storetest

import (
	"context"
	"errors"
	"fmt"
	"sort"
	"strings"
	"testing"

	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"

	"github.com/a2awire/a2awire/shared/store"
)

// Concurrency levels of the race cases (named by the storage issue).
const (
	// ConditionalRacers put one key with ItemAbsent at once; one wins.
	ConditionalRacers = 50
	// CounterRacers add to one counter at once and read it back.
	CounterRacers = 50
)

type testCase struct {
	name string
	fn   func(t *testing.T, s store.Store)
}

// Run runs every store case against stores made by open, each case in
// parallel on its own fresh store.
func Run(t *testing.T, open func(t *testing.T) store.Store) {
	var cases []testCase
	cases = append(cases, itemCases...)
	cases = append(cases, condCases...)
	cases = append(cases, updateCases...)
	cases = append(cases, writeCases...)
	cases = append(cases, queryCases...)
	cases = append(cases, limitCases...)
	cases = append(cases, concurrencyCases...)
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			s := open(t)
			if s == nil {
				t.Fatal("open returned a nil store")
			}
			c.fn(t, s)
		})
	}
}

// S is a string attribute value (store.S).
func S(v string) types.AttributeValue { return store.S(v) }

// Bin is a binary attribute value (store.B: nil is the empty binary).
func Bin(v []byte) types.AttributeValue { return store.B(v) }

// Bool is a boolean attribute value.
func Bool(v bool) types.AttributeValue { return store.Bool(v) }

// Null is the NULL attribute value.
func Null() types.AttributeValue { return store.Null() }

// SS is a string set.
func SS(v ...string) types.AttributeValue { return store.SS(v...) }

// N is a number attribute from its decimal text ("1.5", "-1e3", a 38-digit
// integer), which store.N (int64) cannot express.
func N(v string) types.AttributeValue { return &types.AttributeValueMemberN{Value: v} }

// NS is a number set.
func NS(v ...string) types.AttributeValue { return &types.AttributeValueMemberNS{Value: v} }

// BS is a binary set.
func BS(v ...[]byte) types.AttributeValue { return &types.AttributeValueMemberBS{Value: v} }

// L is a list (never nil, as DynamoDB returns an empty one).
func L(v ...types.AttributeValue) types.AttributeValue {
	if v == nil {
		v = []types.AttributeValue{}
	}
	return &types.AttributeValueMemberL{Value: v}
}

// M is a map (never nil).
func M(v store.Item) types.AttributeValue {
	if v == nil {
		v = store.Item{}
	}
	return &types.AttributeValueMemberM{Value: v}
}

// key is a table key.
func key(pk, sk string) store.Key { return store.Key{PK: pk, SK: sk} }

// item builds an item from name/value pairs (no keys).
func item(kv ...any) store.Item {
	it := store.Item{}
	for i := 0; i+1 < len(kv); i += 2 {
		v, _ := kv[i+1].(types.AttributeValue) // nil stays nil (a refused value)
		it[kv[i].(string)] = v
	}
	return it
}

// stored is how item looks when read back from k: with pk and sk.
func stored(k store.Key, it store.Item) store.Item { return store.WithKey(it, k) }

// MustWrite applies actions in one Write and returns its results, failing
// the test on an error or on results that are not one per action.
func MustWrite(t *testing.T, s store.Store, actions ...store.Action) []store.Item {
	t.Helper()
	out, err := s.Write(t.Context(), actions...)
	if err != nil {
		t.Fatalf("Write(%s): %v", describe(actions), err)
	}
	if len(out) != len(actions) {
		t.Fatalf("Write(%s) returned %d results, want one per action (%d)", describe(actions), len(out), len(actions))
	}
	return out
}

func put(t *testing.T, s store.Store, k store.Key, it store.Item) {
	t.Helper()
	MustWrite(t, s, store.Put(k, it))
}

// get returns the item at k, or nil when there is none.
func get(t *testing.T, s store.Store, k store.Key) store.Item {
	t.Helper()
	it, err := s.Get(t.Context(), k)
	if errors.Is(err, store.ErrNotFound) {
		if it != nil {
			t.Errorf("Get%s: ErrNotFound with a non-nil item %s", k, show(it))
		}
		return nil
	}
	if err != nil {
		t.Fatalf("Get%s: %v", k, err)
	}
	if it == nil {
		t.Fatalf("Get%s returned a nil item and no error", k)
	}
	return it
}

// wantItem fails unless the item at k equals want (nil: no item).
func wantItem(t *testing.T, s store.Store, k store.Key, want store.Item) {
	t.Helper()
	got := get(t, s, k)
	if !sameItem(got, want) {
		t.Errorf("item %s:\n got  %s\n want %s", k, show(got), show(want))
	}
}

// sameItem is store.EqualItems that also tells nil (absent) from empty.
func sameItem(a, b store.Item) bool {
	if (a == nil) != (b == nil) {
		return false
	}
	return store.EqualItems(a, b)
}

func wantErr(t *testing.T, what string, err, target error) {
	t.Helper()
	if !errors.Is(err, target) {
		t.Errorf("%s: error %v, want %v", what, err, target)
	}
}

// wantCondFailed checks err is a *store.ConditionFailedError naming action
// index and carrying item (nil: none).
func wantCondFailed(t *testing.T, what string, err error, index int, item store.Item) {
	t.Helper()
	var cf *store.ConditionFailedError
	if !errors.As(err, &cf) {
		t.Errorf("%s: error %v, want a *store.ConditionFailedError", what, err)
		return
	}
	if !errors.Is(err, store.ErrConditionFailed) {
		t.Errorf("%s: errors.Is(%v, ErrConditionFailed) is false", what, err)
	}
	if cf.Action != index {
		t.Errorf("%s: failed action %d, want %d", what, cf.Action, index)
	}
	if !sameItem(cf.Item, item) {
		t.Errorf("%s: item in the way:\n got  %s\n want %s", what, show(cf.Item), show(item))
	}
}

// show renders an item deterministically for failure messages.
func show(it store.Item) string {
	if it == nil {
		return "<no item>"
	}
	var b strings.Builder
	b.WriteString("{")
	for i, name := range store.SortedNames(it) {
		if i > 0 {
			b.WriteString(", ")
		}
		fmt.Fprintf(&b, "%s: %s", name, showValue(it[name]))
	}
	b.WriteString("}")
	return b.String()
}

func showValue(v types.AttributeValue) string {
	const max = 60
	clip := func(s string) string {
		if len(s) > max {
			return fmt.Sprintf("%s…(%d bytes)", s[:max], len(s))
		}
		return s
	}
	switch v := v.(type) {
	case *types.AttributeValueMemberS:
		return "S:" + clip(fmt.Sprintf("%q", v.Value))
	case *types.AttributeValueMemberN:
		return "N:" + v.Value
	case *types.AttributeValueMemberB:
		if v.Value == nil {
			return "B:nil"
		}
		return "B:" + clip(fmt.Sprintf("%x", v.Value))
	case *types.AttributeValueMemberBOOL:
		return fmt.Sprintf("BOOL:%v", v.Value)
	case *types.AttributeValueMemberNULL:
		return "NULL"
	case *types.AttributeValueMemberL:
		parts := make([]string, len(v.Value))
		for i, x := range v.Value {
			parts[i] = showValue(x)
		}
		return "L[" + strings.Join(parts, ", ") + "]"
	case *types.AttributeValueMemberM:
		return "M" + show(v.Value)
	case *types.AttributeValueMemberSS:
		x := append([]string(nil), v.Value...)
		sort.Strings(x)
		return clip(fmt.Sprintf("SS%q", x))
	case *types.AttributeValueMemberNS:
		return fmt.Sprintf("NS%v", v.Value)
	case *types.AttributeValueMemberBS:
		return fmt.Sprintf("BS%x", v.Value)
	case nil:
		return "nil"
	}
	return fmt.Sprintf("%T", v)
}

func describe(actions []store.Action) string {
	if len(actions) > 3 {
		return fmt.Sprintf("%d actions", len(actions))
	}
	parts := make([]string, len(actions))
	for i, a := range actions {
		parts[i] = a.Kind.String() + a.Key.String()
	}
	return strings.Join(parts, ", ")
}

// --- items ------------------------------------------------------------

var itemCases = []testCase{
	{"Item/GetMissing", testGetMissing},
	{"Item/PutGetDelete", testPutGetDelete},
	{"Item/PutTakesKeyFromKey", testPutKey},
	{"Item/Copies", testCopies},
	{"Item/AttributeTypes", testAttributeTypes},
	{"Item/ExpiresAt", testExpiresAt},
	{"Item/CancelledContext", testCancelled},
}

// testCancelled: a cancelled context fails Get, Query and Write with an
// error wrapping context.Canceled, and the write does not happen.
func testCancelled(t *testing.T, s store.Store) {
	ctx, cancel := context.WithCancel(t.Context())
	cancel()
	k := key("p", "s")
	_, err := s.Write(ctx, store.Put(k, nil))
	wantErr(t, "Write with a cancelled context", err, context.Canceled)
	wantItem(t, s, k, nil)
	_, err = s.Get(ctx, k)
	wantErr(t, "Get with a cancelled context", err, context.Canceled)
	_, err = s.Query(ctx, store.Query{PK: "p"})
	wantErr(t, "Query with a cancelled context", err, context.Canceled)
}

func testGetMissing(t *testing.T, s store.Store) {
	it, err := s.Get(t.Context(), key("p", "missing"))
	wantErr(t, "Get of a missing item", err, store.ErrNotFound)
	if it != nil {
		t.Errorf("Get of a missing item returned %s", show(it))
	}
	// Same partition, other sort key: still not found.
	put(t, s, key("p", "there"), item("a", S("x")))
	_, err = s.Get(t.Context(), key("p", "missin"))
	wantErr(t, "Get of a neighbour's key", err, store.ErrNotFound)
	_, err = s.Get(t.Context(), key("pp", "there"))
	wantErr(t, "Get in another partition", err, store.ErrNotFound)
}

func testPutGetDelete(t *testing.T, s store.Store) {
	k := key("p", "s")
	put(t, s, k, item("a", S("1"), "b", N("2")))
	wantItem(t, s, k, stored(k, item("a", S("1"), "b", N("2"))))

	// A Put replaces the whole item: b is gone.
	put(t, s, k, item("a", S("one"), "c", Bool(true)))
	wantItem(t, s, k, stored(k, item("a", S("one"), "c", Bool(true))))

	// An item of only its keys.
	k2 := key("p", "t")
	put(t, s, k2, nil)
	wantItem(t, s, k2, stored(k2, nil))

	MustWrite(t, s, store.Delete(k))
	wantItem(t, s, k, nil)
	wantItem(t, s, k2, stored(k2, nil))
	// Deleting a missing item is not an error.
	MustWrite(t, s, store.Delete(k))
	MustWrite(t, s, store.Delete(key("nowhere", "x")))
}

func testPutKey(t *testing.T, s store.Store) {
	k := key("p", "s")
	// An item carrying its own (matching) keys is fine.
	put(t, s, k, item("pk", S("p"), "sk", S("s"), "a", S("x")))
	wantItem(t, s, k, stored(k, item("a", S("x"))))
	// Keys that disagree with the Key, or are not strings, are refused.
	for name, it := range map[string]store.Item{
		"other pk":    item("pk", S("q")),
		"other sk":    item("sk", S("t")),
		"numeric pk":  item("pk", N("1")),
		"numeric sk":  item("sk", N("1")),
		"binary keys": item("pk", Bin([]byte("p")), "sk", Bin([]byte("s"))),
	} {
		_, err := s.Write(t.Context(), store.Put(key("p", "new"), it))
		wantErr(t, "Put with "+name, err, store.ErrInvalid)
	}
	wantItem(t, s, key("p", "new"), nil)
}

// testCopies checks that an engine never shares memory with its callers:
// mutating what went in or came out changes nothing stored.
func testCopies(t *testing.T, s store.Store) {
	k := key("p", "s")
	in := item("s", S("x"), "b", Bin([]byte{1, 2}), "l", L(S("a"), N("1")),
		"m", M(item("n", M(item("deep", S("x"))))), "ss", SS("a", "b"), "ns", NS("1"), "bs", BS([]byte{9}))
	want := stored(k, in.Clone())
	put(t, s, k, in)
	mutate(in)
	wantItem(t, s, k, want)

	got := get(t, s, k)
	mutate(got)
	wantItem(t, s, k, want)

	out := MustWrite(t, s, store.Update(k).SetAttr("z", S("z")).Returning())
	want["z"] = S("z")
	mutate(out[0])
	wantItem(t, s, k, want)

	page, err := s.Query(t.Context(), store.Query{PK: "p"})
	if err != nil || len(page.Items) != 1 {
		t.Fatalf("Query: %d items, %v", len(page.Items), err)
	}
	mutate(page.Items[0])
	wantItem(t, s, k, want)

	// The Set map of an Update is the caller's too.
	set := store.Update(k).SetAttr("y", L(S("in")))
	MustWrite(t, s, set)
	set.Set["y"].(*types.AttributeValueMemberL).Value[0] = S("changed")
	want["y"] = L(S("in"))
	wantItem(t, s, k, want)

	// And a failed condition's item.
	_, err = s.Write(t.Context(), store.Put(k, nil).When(store.ItemAbsent()).OnFailReturn())
	var cf *store.ConditionFailedError
	if !errors.As(err, &cf) || cf.Item == nil {
		t.Fatalf("conditional Put over an item: %v, want a ConditionFailedError with the item", err)
	}
	mutate(cf.Item)
	wantItem(t, s, k, want)
}

// mutate changes every value of it in place, nested ones included.
func mutate(it store.Item) {
	for _, v := range it {
		switch v := v.(type) {
		case *types.AttributeValueMemberS:
			v.Value += "!"
		case *types.AttributeValueMemberB:
			for i := range v.Value {
				v.Value[i]++
			}
		case *types.AttributeValueMemberL:
			for _, x := range v.Value {
				if s, ok := x.(*types.AttributeValueMemberS); ok {
					s.Value += "!"
				}
				if n, ok := x.(*types.AttributeValueMemberN); ok {
					n.Value = "99"
				}
			}
			v.Value = append(v.Value, S("extra"))
		case *types.AttributeValueMemberM:
			mutate(v.Value)
			v.Value["added"] = S("x")
		case *types.AttributeValueMemberSS:
			v.Value[0] = "changed"
		case *types.AttributeValueMemberNS:
			v.Value[0] = "12345"
		case *types.AttributeValueMemberBS:
			v.Value[0][0]++
		}
	}
	it["mutated"] = S("yes")
}

// attributeZoo holds every attribute type, with edge values DynamoDB keeps.
func attributeZoo() store.Item {
	return item(
		"s", S("héllo, 世界 😀"),
		"sEmpty", S(""),
		"n0", N("0"),
		"nNeg", N("-17"),
		"nDec", N("3.14159"),
		"nBig", N("12345678901234567890123456789012345678"),
		"nTiny", N("1e-130"),
		"nHuge", N("-9.9999999999999999999999999999999999999e125"),
		"nExp", N("1.5E3"),
		"b", Bin([]byte{0, 1, 254, 255}),
		"bEmpty", Bin([]byte{}),
		"t", Bool(true),
		"f", Bool(false),
		"null", Null(),
		"lEmpty", L(),
		"l", L(S("a"), N("1"), Bool(false), Null(), L(N("2"), L()), M(item("k", S("v"))), Bin([]byte{7})),
		"mEmpty", M(nil),
		"m", M(item("a", M(item("b", M(item("c", L(N("-1.5"), SS("x")))))), "empty key", S(""))),
		"ss", SS("b", "a", "", "ç"),
		"ns", NS("1", "-2.5", "1e10"),
		"bs", BS([]byte{1}, []byte{}, []byte{2, 3}),
		"a name with spaces and ünïcode", S("ok"),
	)
}

func testAttributeTypes(t *testing.T, s store.Store) {
	k := key("types", "1")
	zoo := attributeZoo()
	put(t, s, k, zoo)
	want := stored(k, attributeZoo())
	got := get(t, s, k)
	for name, v := range want {
		if !store.Equal(got[name], v) {
			t.Errorf("attribute %s: got %s, want %s", name, showValue(got[name]), showValue(v))
		}
	}
	for name := range got {
		if _, ok := want[name]; !ok {
			t.Errorf("extra attribute %s: %s", name, showValue(got[name]))
		}
	}
	// The same values through Update's SET and the returned item.
	k2 := key("types", "2")
	up := store.Update(k2)
	for name, v := range attributeZoo() {
		up = up.SetAttr(name, v)
	}
	out := MustWrite(t, s, up.Returning())
	if !sameItem(out[0], stored(k2, attributeZoo())) {
		t.Errorf("Update returned\n %s\nwant\n %s", show(out[0]), show(stored(k2, attributeZoo())))
	}
	wantItem(t, s, k2, stored(k2, attributeZoo()))
	// And through Query.
	page, err := s.Query(t.Context(), store.Query{PK: "types"})
	if err != nil {
		t.Fatal(err)
	}
	if len(page.Items) != 2 || !sameItem(page.Items[0], want) || !sameItem(page.Items[1], stored(k2, attributeZoo())) {
		t.Errorf("Query returned %d items, not the two stored ones", len(page.Items))
	}
}

// testExpiresAt: the TTL attribute is stored as written and must be a
// number (the sweepers read it).
func testExpiresAt(t *testing.T, s store.Store) {
	k := key("ttl", "future")
	put(t, s, k, item("expiresAt", N("4102444800"), "v", S("x"))) // 2100
	wantItem(t, s, k, stored(k, item("expiresAt", N("4102444800"), "v", S("x"))))
	_, err := s.Write(t.Context(), store.Put(key("ttl", "bad"), item("expiresAt", S("tomorrow"))))
	wantErr(t, "expiresAt as a string", err, store.ErrInvalid)
}
