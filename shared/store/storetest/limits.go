package storetest

import (
	"bytes"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"testing"

	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"

	"github.com/a2awire/a2awire/shared/store"
)

// DynamoDB's limits, refused the same way by every engine (checked against
// DynamoDB Local), so nothing an embedded engine accepts fails on AWS.
var limitCases = []testCase{
	{"Limits/ItemSize", testLimitItemSize},
	{"Limits/KeySizes", testLimitKeySizes},
	{"Limits/EmptyKeys", testLimitEmptyKeys},
	{"Limits/ActionCount", testLimitActionCount},
	{"Limits/OneActionPerItem", testLimitOneActionPerItem},
	{"Limits/InvalidUTF8", testLimitUTF8},
	{"Limits/Sets", testLimitSets},
	{"Limits/IndexKeys", testLimitIndexKeys},
	{"Limits/Numbers", testLimitNumbers},
	{"Limits/NilBinary", testLimitNilBinary},
	{"Limits/Nesting", testLimitNesting},
	{"Limits/WriteSize", testLimitWriteSize},
}

// refused checks that a Write of actions fails with ErrInvalid and writes
// none of their keys.
func refused(t *testing.T, s store.Store, what string, actions ...store.Action) {
	t.Helper()
	before := map[store.Key]store.Item{}
	for _, a := range actions {
		if store.ValidateKey(a.Key) == nil {
			before[a.Key] = get(t, s, a.Key)
		}
	}
	_, err := s.Write(t.Context(), actions...)
	wantErr(t, what, err, store.ErrInvalid)
	for k, it := range before {
		if !sameItem(get(t, s, k), it) {
			t.Errorf("%s: item %s changed although the write was refused", what, k)
		}
	}
}

// sized returns an item at k whose store.ItemSize is exactly size.
func sized(t *testing.T, k store.Key, size int) store.Item {
	t.Helper()
	it := item("b", Bin(nil))
	pad := size - store.ItemSize(stored(k, it))
	it["b"] = Bin(bytes.Repeat([]byte{7}, pad))
	if got := store.ItemSize(stored(k, it)); got != size {
		t.Fatalf("test setup: item of %d bytes, want %d", got, size)
	}
	return it
}

func testLimitItemSize(t *testing.T, s store.Store) {
	k := key("lim", "size")
	put(t, s, k, sized(t, k, store.MaxItemBytes))
	wantItem(t, s, k, stored(k, sized(t, k, store.MaxItemBytes)))
	refused(t, s, "Put of 400 KB + 1", store.Put(key("lim", "over"), sized(t, key("lim", "over"), store.MaxItemBytes+1)))
	// Numbers count as DynamoDB Local sizes them (store.ItemSize): base-100
	// digits aligned on the point, plus a byte for the sign.
	for i, num := range []string{"-1.5", "0.011", "-0.011", "12345678901234567890123456789012345678", "-1e100"} {
		kn := key("lim", fmt.Sprintf("num%d", i))
		it := item("n", N(num), "b", Bin(nil))
		pad := store.MaxItemBytes - store.ItemSize(stored(kn, it))
		it["b"] = Bin(bytes.Repeat([]byte{3}, pad))
		put(t, s, kn, it)
		it["b"] = Bin(bytes.Repeat([]byte{3}, pad+1))
		refused(t, s, fmt.Sprintf("item with %s one byte over", num), store.Put(kn, it))
	}
	// A string counts its UTF-8 bytes.
	k2 := key("lim", "str")
	base := store.ItemSize(stored(k2, item("s", S(""))))
	put(t, s, k2, item("s", S(strings.Repeat("é", (store.MaxItemBytes-base)/2))))
	refused(t, s, "string item over 400 KB", store.Put(k2, item("s", S(strings.Repeat("é", (store.MaxItemBytes-base)/2)+"xx"))))
	// An Update reaching exactly the limit is accepted, one byte more is not.
	k3 := key("lim", "upd")
	half := sized(t, k3, store.MaxItemBytes/2)
	put(t, s, k3, half)
	rest := store.MaxItemBytes - store.ItemSize(stored(k3, half)) - len("c")
	MustWrite(t, s, store.Update(k3).SetAttr("c", Bin(bytes.Repeat([]byte{1}, rest))))
	refused(t, s, "Update one byte over", store.Update(k3).SetAttr("c", Bin(bytes.Repeat([]byte{1}, rest+1))))
}

func testLimitKeySizes(t *testing.T, s store.Store) {
	pk := strings.Repeat("p", store.MaxPKBytes)
	sk := strings.Repeat("s", store.MaxSKBytes)
	put(t, s, key(pk, sk), item("v", S("max")))
	wantItem(t, s, key(pk, sk), stored(key(pk, sk), item("v", S("max"))))
	page := query(t, s, store.Query{PK: pk, SK: store.SKEq(sk)})
	if len(page.Items) != 1 {
		t.Errorf("query by the longest keys: %d items", len(page.Items))
	}
	// Multi-byte characters count as bytes.
	put(t, s, key(strings.Repeat("é", store.MaxPKBytes/2), strings.Repeat("é", store.MaxSKBytes/2)), nil)

	long := []struct {
		what string
		k    store.Key
	}{
		{"pk over 2048 bytes", key(pk+"p", "s")},
		{"sk over 1024 bytes", key("p", sk+"s")},
		{"pk over 2048 bytes in é", key(strings.Repeat("é", store.MaxPKBytes/2)+"p", "s")},
	}
	for _, tc := range long {
		refused(t, s, "Put with "+tc.what, store.Put(tc.k, nil))
		refused(t, s, "Update with "+tc.what, store.Update(tc.k).SetAttr("a", S("x")))
		refused(t, s, "Delete with "+tc.what, store.Delete(tc.k))
		refused(t, s, "Check with "+tc.what, store.Check(tc.k, store.ItemExists()))
		_, err := s.Get(t.Context(), tc.k)
		wantErr(t, "Get with "+tc.what, err, store.ErrInvalid)
	}
	// Index keys have the same limits.
	put(t, s, key("p", "g"), indexItem(pk, sk))
	refused(t, s, "gsi1pk over 2048 bytes", store.Put(key("p", "g2"), indexItem(pk+"p", "s")))
	refused(t, s, "gsi1sk over 1024 bytes", store.Put(key("p", "g2"), indexItem("p", sk+"s")))
	refused(t, s, "gsi1sk over 1024 bytes by Update", store.Update(key("p", "g")).SetAttr(store.AttrGSI1SK, S(sk+"s")))
}

func testLimitEmptyKeys(t *testing.T, s store.Store) {
	for _, k := range []store.Key{key("", "s"), key("p", ""), key("", "")} {
		refused(t, s, fmt.Sprintf("Put at %s", k), store.Put(k, item("a", S("x"))))
		refused(t, s, fmt.Sprintf("Update at %s", k), store.Update(k).SetAttr("a", S("x")))
		refused(t, s, fmt.Sprintf("Delete at %s", k), store.Delete(k))
		refused(t, s, fmt.Sprintf("Check at %s", k), store.Check(k, store.ItemAbsent()))
		_, err := s.Get(t.Context(), k)
		wantErr(t, fmt.Sprintf("Get at %s", k), err, store.ErrInvalid)
	}
	// An empty key inside a larger write refuses the whole write.
	refused(t, s, "two-action write with an empty sk", store.Put(key("p", "ok"), nil), store.Put(key("p", ""), nil))
	// Empty strings are fine in other attributes.
	put(t, s, key("p", "s"), item("a", S(""), "b", Bin([]byte{})))
	wantItem(t, s, key("p", "s"), stored(key("p", "s"), item("a", S(""), "b", Bin([]byte{}))))
}

func testLimitActionCount(t *testing.T, s store.Store) {
	_, err := s.Write(t.Context())
	wantErr(t, "a write of no actions", err, store.ErrInvalid)

	actions := func(n int, pk string) []store.Action {
		var as []store.Action
		for i := range n {
			as = append(as, store.Put(key(pk, fmt.Sprintf("%03d", i)), item("i", N(fmt.Sprint(i)))))
		}
		return as
	}
	refused(t, s, "a write of 101 actions", actions(store.MaxActions+1, "over")...)
	if got := queryAll(t, s, store.Query{PK: "over"}); len(got) != 0 {
		t.Errorf("a refused write of 101 actions wrote %d items", len(got))
	}
	MustWrite(t, s, actions(store.MaxActions, "max")...)
	if got := queryAll(t, s, store.Query{PK: "max"}); len(got) != store.MaxActions {
		t.Errorf("a write of 100 actions wrote %d items", len(got))
	}
	// 100 mixed actions with one failing condition: none applied.
	as := actions(store.MaxActions, "max")
	for i := range as {
		as[i] = store.Update(as[i].Key).AddNum("i", 1000)
	}
	as[99] = as[99].When(store.Eq("i", N("-1"))).OnFailReturn()
	_, err = s.Write(t.Context(), as...)
	wantCondFailed(t, "100 actions, the last failing", err, 99, stored(as[99].Key, item("i", N("99"))))
	for _, it := range queryAll(t, s, store.Query{PK: "max"}) {
		if n, _ := it.Int("i"); n >= 1000 {
			t.Errorf("item %s was updated by a failed write", it.Key())
			break
		}
	}
}

func testLimitOneActionPerItem(t *testing.T, s store.Store) {
	k := key("p", "one")
	put(t, s, k, item("v", N("1")))
	refused(t, s, "Put and Check of one item", store.Put(k, nil), store.Check(k, store.ItemExists()))
	refused(t, s, "two Updates of one item", store.Update(k).AddNum("v", 1), store.Update(k).AddNum("w", 1))
	refused(t, s, "Delete and Put of one item", store.Delete(k), store.Put(key("p", "other"), nil), store.Put(k, nil))
	// Same pk, other sk; same sk, other pk: distinct items, fine.
	MustWrite(t, s, store.Update(k).AddNum("v", 1), store.Put(key("p", "two"), nil), store.Put(key("q", "one"), nil))
}

func testLimitUTF8(t *testing.T, s store.Store) {
	bad := "a\xffb"
	k := key("p", "s")
	refused(t, s, "invalid UTF-8 pk", store.Put(key(bad, "s"), nil))
	refused(t, s, "invalid UTF-8 sk", store.Put(key("p", bad), nil))
	refused(t, s, "invalid UTF-8 attribute name", store.Put(k, item(bad, S("x"))))
	refused(t, s, "invalid UTF-8 string value", store.Put(k, item("a", S(bad))))
	refused(t, s, "invalid UTF-8 in a string set", store.Put(k, item("a", SS("ok", bad))))
	refused(t, s, "invalid UTF-8 map key", store.Put(k, item("a", M(item(bad, S("x"))))))
	refused(t, s, "invalid UTF-8 in a list", store.Put(k, item("a", L(S("ok"), L(S(bad))))))
	refused(t, s, "invalid UTF-8 by Update", store.Update(k).SetAttr("a", S(bad)))
	refused(t, s, "invalid UTF-8 name by Update", store.Update(k).AddNum(bad, 1))
	refused(t, s, "invalid UTF-8 gsi1pk", store.Put(k, indexItem(bad, "x")))
	_, err := s.Get(t.Context(), key("p", bad))
	wantErr(t, "Get with an invalid UTF-8 key", err, store.ErrInvalid)
	_, err = s.Query(t.Context(), store.Query{PK: bad})
	wantErr(t, "Query with an invalid UTF-8 key", err, store.ErrInvalid)
	// A truncated multi-byte character is invalid too.
	refused(t, s, "truncated é", store.Put(k, item("a", S("\xc3"))))
}

func testLimitSets(t *testing.T, s store.Store) {
	k := key("p", "s")
	for name, v := range map[string]types.AttributeValue{
		"empty string set":               SS(),
		"empty number set":               NS(),
		"empty binary set":               BS(),
		"string set with a duplicate":    SS("a", "b", "a"),
		"number set with a duplicate":    NS("1", "2", "1"),
		"number set with equal numbers":  NS("1", "1.0"),
		"binary set with a duplicate":    BS([]byte{1}, []byte{1}),
		"number set with a non-number":   NS("1", "x"),
		"empty set nested in a map":      M(item("a", SS())),
		"empty set nested in a list":     L(NS()),
		"nil value":                      nil,
		"NULL false":                     &types.AttributeValueMemberNULL{Value: false},
		"nil value in a list":            &types.AttributeValueMemberL{Value: []types.AttributeValue{nil}},
		"nil value in a map":             &types.AttributeValueMemberM{Value: map[string]types.AttributeValue{"x": nil}},
		"duplicate set nested in a list": L(SS("x", "x")),
	} {
		refused(t, s, "Put with "+name, store.Put(k, item("a", v)))
		refused(t, s, "Update with "+name, store.Update(k).SetAttr("a", v))
	}
	// Sets with empty members are fine (DynamoDB Local accepts them).
	put(t, s, k, item("ss", SS("", "x"), "bs", BS([]byte{}, []byte{1})))
	wantItem(t, s, k, stored(k, item("ss", SS("x", ""), "bs", BS([]byte{1}, []byte{}))))
}

func testLimitIndexKeys(t *testing.T, s store.Store) {
	k := key("p", "s")
	put(t, s, k, indexItem("g", "x"))
	for name, it := range map[string]store.Item{
		"numeric gsi1pk": item(store.AttrGSI1PK, N("1"), store.AttrGSI1SK, S("x")),
		"numeric gsi1sk": item(store.AttrGSI1PK, S("g"), store.AttrGSI1SK, N("1")),
		"binary gsi1sk":  item(store.AttrGSI1PK, S("g"), store.AttrGSI1SK, Bin([]byte("x"))),
		"empty gsi1pk":   item(store.AttrGSI1PK, S(""), store.AttrGSI1SK, S("x")),
		"empty gsi1sk":   item(store.AttrGSI1PK, S("g"), store.AttrGSI1SK, S("")),
		"lone gsi1pk N":  item(store.AttrGSI1PK, N("1")),
		"lone empty sk":  item(store.AttrGSI1SK, S("")),
		"NULL gsi1pk":    item(store.AttrGSI1PK, Null(), store.AttrGSI1SK, S("x")),
	} {
		refused(t, s, "Put with "+name, store.Put(k, it))
		up := store.Update(k)
		for n, v := range it {
			up = up.SetAttr(n, v)
		}
		refused(t, s, "Update with "+name, up)
	}
	wantItem(t, s, k, stored(k, indexItem("g", "x")))
}

func testLimitNumbers(t *testing.T, s store.Store) {
	k := key("p", "n")
	for _, v := range []string{"", "x", "0x10", "1_000", "1/2", " 1", "1 ", "1e", "-", "+", ".", "Inf", "-Infinity", "NaN", "0b1",
		"123456789012345678901234567890123456789", // 39 significant digits
		"1e126", "-1e126", "1e-131", "1.0e-131", "1e0400"} {
		refused(t, s, fmt.Sprintf("number %q", v), store.Put(k, item("n", N(v))))
		refused(t, s, fmt.Sprintf("number %q in a set", v), store.Put(k, item("n", NS("1", v))))
	}
	accepted := []string{"+7", ".5", "5.", "1E3", "-0", "00012", "1e+3", "0.0", "1.5e-3", "-.5", "+.5e-3", "0e999",
		"1.0000000000000000000000000000000000000000000", // trailing zeros are not significant
		"9.9999999999999999999999999999999999999e125", "1e-130", "-1e-130"}
	for i, v := range accepted {
		kk := key("p", fmt.Sprintf("ok%d", i))
		put(t, s, kk, item("n", N(v)))
		got := get(t, s, kk)
		if !store.Equal(got["n"], N(v)) {
			t.Errorf("number %q came back as %s", v, showValue(got["n"]))
		}
	}
}

func testLimitNilBinary(t *testing.T, s store.Store) {
	k := key("p", "b")
	refused(t, s, "a nil binary", store.Put(k, item("b", &types.AttributeValueMemberB{})))
	refused(t, s, "a nil binary by Update", store.Update(k).SetAttr("b", &types.AttributeValueMemberB{}))
	// store.B(nil) is the empty binary, which is fine.
	put(t, s, k, item("b", store.B(nil)))
	got := get(t, s, k)
	if b, ok := got["b"].(*types.AttributeValueMemberB); !ok || b.Value == nil || len(b.Value) != 0 {
		t.Errorf("empty binary came back as %s", showValue(got["b"]))
	}
}

// nested wraps inner in n maps.
func nested(n int, inner types.AttributeValue) types.AttributeValue {
	v := inner
	for range n {
		v = M(item("k", v))
	}
	return v
}

// testLimitNesting: 32 levels, the item being the first: 31 lists or maps
// inside one another hold a scalar or a set, not one more list or map.
func testLimitNesting(t *testing.T, s store.Store) {
	k := key("p", "deep")
	deepest := nested(store.MaxDepth-1, S("x"))
	put(t, s, k, item("m", deepest, "s", nested(store.MaxDepth-1, SS("a"))))
	wantItem(t, s, k, stored(k, item("m", deepest, "s", nested(store.MaxDepth-1, SS("a")))))
	refused(t, s, "32 nested maps", store.Put(k, item("m", nested(store.MaxDepth, S("x")))))
	refused(t, s, "31 nested maps around an empty list", store.Put(k, item("m", nested(store.MaxDepth-1, L()))))
	refused(t, s, "32 nested maps by Update", store.Update(k).SetAttr("m", nested(store.MaxDepth, S("x"))))
	list := S("x")
	for range store.MaxDepth {
		list = L(list)
	}
	refused(t, s, "32 nested lists", store.Put(k, item("l", list)))
}

// testLimitWriteSize: the items of one write total at most 4 MB
// (TransactWriteItems' payload), counted with store.ItemSize.
func testLimitWriteSize(t *testing.T, s store.Store) {
	const each = 390_000
	actions := func(n int, pk string) []store.Action {
		var as []store.Action
		for i := range n {
			k := key(pk, fmt.Sprint(i))
			as = append(as, store.Put(k, sized(t, k, each)))
		}
		return as
	}
	refused(t, s, "11 items of 390 KB in one write", actions(11, "over")...)
	MustWrite(t, s, actions(10, "ok")...)
	if got := len(queryAll(t, s, store.Query{PK: "ok"})); got != 10 {
		t.Errorf("10 items of 390 KB: %d written", got)
	}
}

// --- concurrency ---------------------------------------------------------

var concurrencyCases = []testCase{
	{"Concurrent/OneConditionalPutWins", testConcurrentPut},
	{"Concurrent/CounterValuesAreDistinct", testConcurrentCounter},
}

func testConcurrentPut(t *testing.T, s store.Store) {
	k := key("race", "one")
	start := make(chan struct{})
	errs := make([]error, ConditionalRacers)
	var wg sync.WaitGroup
	for i := range ConditionalRacers {
		wg.Go(func() {
			<-start
			_, errs[i] = s.Write(t.Context(), store.Put(k, item("winner", N(fmt.Sprint(i)))).When(store.ItemAbsent()).OnFailReturn())
		})
	}
	close(start)
	wg.Wait()
	winner := -1
	for i, err := range errs {
		var cf *store.ConditionFailedError
		switch {
		case err == nil:
			if winner >= 0 {
				t.Errorf("racers %d and %d both won", winner, i)
			}
			winner = i
		case errors.As(err, &cf):
			if cf.Action != 0 {
				t.Errorf("racer %d: failed action %d", i, cf.Action)
			}
		default:
			t.Errorf("racer %d: %v", i, err)
		}
	}
	if winner < 0 {
		t.Fatal("no racer won")
	}
	wantItem(t, s, k, stored(k, item("winner", N(fmt.Sprint(winner)))))
	// The losers saw the winner's item in the way.
	for i, err := range errs {
		var cf *store.ConditionFailedError
		if errors.As(err, &cf) && cf.Item != nil && !sameItem(cf.Item, stored(k, item("winner", N(fmt.Sprint(winner))))) {
			t.Errorf("racer %d saw %s in the way", i, show(cf.Item))
		}
	}
}

func testConcurrentCounter(t *testing.T, s store.Store) {
	k := key("race", "counter")
	start := make(chan struct{})
	vals := make([]int64, CounterRacers)
	errs := make([]error, CounterRacers)
	var wg sync.WaitGroup
	for i := range CounterRacers {
		wg.Go(func() {
			<-start
			out, err := s.Write(t.Context(), store.Update(k).AddNum("n", 1).Returning())
			if err != nil {
				errs[i] = err
				return
			}
			vals[i], errs[i] = out[0].Int("n")
		})
	}
	close(start)
	wg.Wait()
	for i, err := range errs {
		if err != nil {
			t.Fatalf("racer %d: %v", i, err)
		}
	}
	slices.Sort(vals)
	for i, v := range vals {
		if v != int64(i+1) {
			t.Fatalf("counter values %v, want 1..%d each once", vals, CounterRacers)
		}
	}
	wantItem(t, s, k, stored(k, item("n", N(fmt.Sprint(CounterRacers)))))
}
