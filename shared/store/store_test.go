package store_test

import (
	"errors"
	"strings"
	"testing"

	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"

	"github.com/a2awire/a2awire/shared/store"
)

// The engine suite (storetest) checks these rules through every engine,
// DynamoDB Local included; these tests pin the API package's own helpers
// without an engine, so a regression shows here first.

func n(v string) types.AttributeValue { return &types.AttributeValueMemberN{Value: v} }

func TestEvalMatchesDynamoDBLocal(t *testing.T) {
	it := store.Item{"n": n("10"), "s": store.S("m"), "t": store.Bool(true)}
	for _, tc := range []struct {
		c    store.Cond
		item store.Item
		want bool
	}{
		// Observed on DynamoDB Local: <> holds on a missing attribute and
		// on a missing item; every other comparison does not.
		{store.Ne("x", n("1")), it, true},
		{store.Ne("x", n("1")), nil, true},
		{store.Eq("x", n("1")), it, false},
		{store.Lt("x", n("1")), nil, false},
		{store.Eq("n", n("1e1")), it, true},
		{store.Lt("n", n("9")), it, false},
		{store.Lt("n", store.S("99")), it, false},
		{store.Ne("n", store.S("10")), it, true},
		{store.Lt("t", n("1")), it, false},
		{store.Gt("s", store.S("M")), it, true},
		{store.Or(store.ItemAbsent(), store.Eq("s", store.S("x"))), nil, true},
		{store.And(store.ItemExists(), store.Ne("s", store.S("x"))), it, false},
	} {
		got, err := store.Eval(tc.c, tc.item)
		if err != nil || got != tc.want {
			t.Errorf("Eval(%#v) = %v, %v; want %v", tc.c, got, err, tc.want)
		}
	}
}

func TestValidateNumbers(t *testing.T) {
	for _, v := range []string{"0", "+7", ".5", "5.", "-.5", "1E3", "1e+3", "0e999", "9.9999999999999999999999999999999999999e125", "1e-130",
		"1.0000000000000000000000000000000000000000000"} {
		if err := store.ValidateItem(store.Item{"pk": store.S("p"), "sk": store.S("s"), "n": n(v)}); err != nil {
			t.Errorf("number %q refused: %v", v, err)
		}
	}
	for _, v := range []string{"", ".", "+", "-", "1 ", "0x10", "1_000", "1/2", "Inf", "NaN", "1e", "1e126", "1e-131",
		"123456789012345678901234567890123456789"} {
		if err := store.ValidateItem(store.Item{"pk": store.S("p"), "sk": store.S("s"), "n": n(v)}); !errors.Is(err, store.ErrInvalid) {
			t.Errorf("number %q: %v, want ErrInvalid", v, err)
		}
	}
}

func TestItemSizeMatchesDynamoDBLocal(t *testing.T) {
	// DynamoDB Local accepted pk "p", sk "s" and a 409,593-byte binary "b",
	// and refused one byte more.
	it := store.Item{"pk": store.S("p"), "sk": store.S("s"), "b": store.B(make([]byte, 409_593))}
	if got := store.ItemSize(it); got != store.MaxItemBytes {
		t.Fatalf("ItemSize = %d, want %d", got, store.MaxItemBytes)
	}
	if err := store.ValidateItem(it); err != nil {
		t.Error(err)
	}
	it["b"] = store.B(make([]byte, 409_594))
	if err := store.ValidateItem(it); !errors.Is(err, store.ErrInvalid) {
		t.Errorf("one byte over: %v", err)
	}
}

func TestNumberSizeMatchesDynamoDBLocal(t *testing.T) {
	// The largest padding DynamoDB Local accepted next to each number, so
	// the number's size is MaxItemBytes - pad - the rest of the item.
	for _, tc := range []struct {
		n   string
		pad int
	}{
		{"1", 409590}, {"0", 409591}, {"-0", 409591}, {"100", 409590}, {"0.001", 409590},
		{"12345678901234567890123456789012345678", 409572}, {"1e-130", 409590},
		{"12.5", 409589}, {"1.25", 409589}, {"0.5", 409590}, {"10", 409590}, {"101", 409589},
		{"1010", 409589}, {"0.01", 409590}, {"0.011", 409589},
		{"-1", 409589}, {"-1234", 409588}, {"-1.5", 409588}, {"-0.011", 409588},
		{"-12345678901234567890123456789012345678", 409571},
		{"-9.9999999999999999999999999999999999999e125", 409571},
	} {
		it := store.Item{"pk": store.S("p"), "sk": store.S("s"), "n": n(tc.n), "b": store.B(make([]byte, tc.pad))}
		if got := store.ItemSize(it); got != store.MaxItemBytes {
			t.Errorf("number %s: item size %d, want %d (DynamoDB Local's limit reached exactly)", tc.n, got, store.MaxItemBytes)
		}
	}
}

func TestStreamImageRoundTrip(t *testing.T) {
	it := store.Item{
		"s": store.S("x"), "n": n("-1.5"), "b": store.B([]byte{0, 255}), "e": store.B(nil),
		"t": store.Bool(true), "z": store.Null(),
		"l":  &types.AttributeValueMemberL{Value: []types.AttributeValue{store.S("a"), &types.AttributeValueMemberM{Value: map[string]types.AttributeValue{}}}},
		"m":  &types.AttributeValueMemberM{Value: map[string]types.AttributeValue{"k": n("1")}},
		"ss": store.SS("a", "b"), "ns": &types.AttributeValueMemberNS{Value: []string{"1", "2"}},
		"bs": &types.AttributeValueMemberBS{Value: [][]byte{{1}, {2}}},
	}
	back, err := store.FromStreamImage(store.StreamImage(it))
	if err != nil || !store.EqualItems(back, it) {
		t.Errorf("round trip: %v, %#v", err, back)
	}
}

func TestChangeRecord(t *testing.T) {
	k := store.Item{"pk": store.S("p"), "sk": store.S("s")}
	v1 := store.WithKey(store.Item{"v": n("1")}, k.Key())
	v1b := store.WithKey(store.Item{"v": n("1.0")}, k.Key())
	v2 := store.WithKey(store.Item{"v": n("2")}, k.Key())
	for _, tc := range []struct {
		old, new store.Item
		want     string
	}{
		{nil, v1, store.EventInsert},
		{v1, v2, store.EventModify},
		{v1, nil, store.EventRemove},
		{v1, v1b, ""}, // equal by value: DynamoDB Local writes no record
		{nil, nil, ""},
	} {
		rec, ok := store.ChangeRecord("arn", 7, 0, tc.old, tc.new)
		if ok != (tc.want != "") || rec.EventName != tc.want {
			t.Errorf("ChangeRecord(%v, %v) = %q, %v; want %q", tc.old, tc.new, rec.EventName, ok, tc.want)
		}
		if ok && (rec.EventSource != "aws:dynamodb" || rec.EventSourceArn != "arn" || len(rec.Change.Keys) != 2 ||
			rec.Change.StreamViewType != "NEW_AND_OLD_IMAGES" || rec.Change.SequenceNumber != store.SequenceNumber(7)) {
			t.Errorf("record %+v", rec)
		}
	}
}

func TestCursors(t *testing.T) {
	c := store.NewCursors(nil)
	q := store.Query{PK: "p", SK: store.SKPrefix("a"), Limit: 3}
	q.Cursor = c.Encode(q, store.Position{PK: "p", SK: "a1"})
	if p, err := c.Decode(q); err != nil || p.SK != "a1" {
		t.Fatalf("Decode = %+v, %v", p, err)
	}
	q.Limit = 10 // a cursor is bound to the query, not to its limit
	if _, err := c.Decode(q); err != nil {
		t.Errorf("other limit: %v", err)
	}
	for name, bad := range map[string]store.Query{
		"other partition": {PK: "q", SK: q.SK, Cursor: q.Cursor},
		"backward":        {PK: "p", SK: q.SK, Backward: true, Cursor: q.Cursor},
		"other secret":    {PK: "p", SK: q.SK, Cursor: store.NewCursors([]byte("x")).Encode(q, store.Position{PK: "p", SK: "a1"})},
		"truncated":       {PK: "p", SK: q.SK, Cursor: q.Cursor[:len(q.Cursor)-2]},
		"garbage":         {PK: "p", SK: q.SK, Cursor: strings.Repeat("A", 40)},
	} {
		if _, err := c.Decode(bad); !errors.Is(err, store.ErrBadCursor) {
			t.Errorf("%s: %v, want ErrBadCursor", name, err)
		}
	}
}

func TestNestingLimit(t *testing.T) {
	wrap := func(depth int, inner types.AttributeValue) store.Item {
		v := inner
		for range depth {
			v = &types.AttributeValueMemberL{Value: []types.AttributeValue{v}}
		}
		return store.Item{"pk": store.S("p"), "sk": store.S("s"), "l": v}
	}
	// DynamoDB Local: 31 lists around a string pass, 32 do not, and 31
	// around an empty list (32 containers) do not.
	if err := store.ValidateItem(wrap(31, store.S("x"))); err != nil {
		t.Error(err)
	}
	if err := store.ValidateItem(wrap(32, store.S("x"))); !errors.Is(err, store.ErrInvalid) {
		t.Errorf("32 levels: %v", err)
	}
	if err := store.ValidateItem(wrap(31, &types.AttributeValueMemberL{})); !errors.Is(err, store.ErrInvalid) {
		t.Errorf("31 around an empty list: %v", err)
	}
}
