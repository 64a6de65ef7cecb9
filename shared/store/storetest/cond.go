package storetest

import (
	"errors"
	"fmt"
	"testing"

	"github.com/a2awire/a2awire/shared/store"
)

var condCases = []testCase{
	{"Cond/Exists", testCondExists},
	{"Cond/Compare", testCondCompare},
	{"Cond/AndOr", testCondAndOr},
	{"Cond/EveryActionHonoursIt", testCondActions},
	{"Cond/Invalid", testCondInvalid},
	{"Cond/AttributeNamesAreLiteral", testCondNames},
}

// oddNames are attribute names that an expression would read as paths,
// placeholders or reserved words; the item API takes every name literally.
var oddNames = []string{"a.b", "l[0]", "#x", ":v", "with space", "size", "status", "name", "AND", "ünï", "a-b", "1st"}

// testCondNames: conditions and updates address attributes by their exact
// name (a.b is one attribute, not b inside a).
func testCondNames(t *testing.T, s store.Store) {
	k := key("c", "names")
	it := item("a", M(item("b", N("99"))), "l", L(N("98")))
	for i, name := range oddNames {
		it[name] = N(fmt.Sprint(i))
	}
	put(t, s, k, it)
	want := stored(k, it.Clone())
	wantItem(t, s, k, want)
	for i, name := range oddNames {
		v := N(fmt.Sprint(i))
		if !holds(t, s, k, store.Eq(name, v)) {
			t.Errorf("%q = %d does not hold", name, i)
		}
		if !holds(t, s, k, store.And(store.Exists(name), store.Ge(name, v), store.Ne(name, N("99")))) {
			t.Errorf("exists(%q) and %q >= %d does not hold", name, name, i)
		}
	}
	up := store.Update(k)
	for i, name := range oddNames {
		switch i % 3 {
		case 0:
			up = up.SetAttr(name, S("set"))
			want[name] = S("set")
		case 1:
			up = up.AddNum(name, 10)
			want[name] = N(fmt.Sprint(i + 10))
		default:
			up = up.Del(name)
			delete(want, name)
		}
	}
	out := MustWrite(t, s, up.When(store.Eq("a.b", N("0"))).Returning())
	if !sameItem(out[0], want) {
		t.Errorf("Update by odd names returned\n %s\nwant\n %s", show(out[0]), show(want))
	}
	wantItem(t, s, k, want)
}

// holds reports whether c holds for the item at k, through the engine (a
// ConditionCheck), and checks that store.Eval agrees on the same item: on
// DynamoDB Local that pins Eval, which the embedded engines use, to
// DynamoDB's semantics.
func holds(t *testing.T, s store.Store, k store.Key, c store.Cond) bool {
	t.Helper()
	_, err := s.Write(t.Context(), store.Check(k, c))
	var ok bool
	switch {
	case err == nil:
		ok = true
	case errors.Is(err, store.ErrConditionFailed):
		wantCondFailed(t, fmt.Sprintf("Check %s", showCond(c)), err, 0, nil)
	default:
		t.Fatalf("Check %s on %s: %v", showCond(c), k, err)
	}
	if eval, err := store.Eval(c, get(t, s, k)); err != nil || eval != ok {
		t.Errorf("store.Eval(%s) = %v, %v; the engine says %v", showCond(c), eval, err, ok)
	}
	return ok
}

func showCond(c store.Cond) string {
	switch c := c.(type) {
	case store.AttrExists:
		if c.Not {
			return "attribute_not_exists(" + c.Attr + ")"
		}
		return "attribute_exists(" + c.Attr + ")"
	case store.Compare:
		return fmt.Sprintf("%s %s %s", c.Attr, c.Op, showValue(c.Value))
	case store.AndCond:
		return showList("AND", c)
	case store.OrCond:
		return showList("OR", c)
	}
	return fmt.Sprintf("%T", c)
}

func showList(op string, cs []store.Cond) string {
	s := "("
	for i, c := range cs {
		if i > 0 {
			s += " " + op + " "
		}
		s += showCond(c)
	}
	return s + ")"
}

func testCondExists(t *testing.T, s store.Store) {
	k := key("c", "item")
	put(t, s, k, item("a", S("x"), "nul", Null(), "empty", S("")))
	missing := key("c", "missing")
	for _, tc := range []struct {
		k    store.Key
		c    store.Cond
		want bool
	}{
		{k, store.Exists("a"), true},
		{k, store.NotExists("a"), false},
		{k, store.Exists("b"), false},
		{k, store.NotExists("b"), true},
		// NULL and empty strings are attributes that exist.
		{k, store.Exists("nul"), true},
		{k, store.Exists("empty"), true},
		{k, store.ItemExists(), true},
		{k, store.ItemAbsent(), false},
		{k, store.Exists("sk"), true},
		{missing, store.ItemExists(), false},
		{missing, store.ItemAbsent(), true},
		{missing, store.Exists("a"), false},
		{missing, store.NotExists("a"), true},
	} {
		if got := holds(t, s, tc.k, tc.c); got != tc.want {
			t.Errorf("%s on %s: %v, want %v", showCond(tc.c), tc.k, got, tc.want)
		}
	}
}

func testCondCompare(t *testing.T, s store.Store) {
	k := key("c", "item")
	put(t, s, k, item(
		"n", N("10"), "neg", N("-2.5"), "big", N("12345678901234567890123456789012345678"),
		"s", S("m"), "u", S("😀"), "b", Bin([]byte{0x10}),
		"t", Bool(true), "nul", Null(),
		"l", L(N("1"), S("x")), "m", M(item("x", N("1"), "y", S("z"))),
		"ss", SS("a", "b"), "ns", NS("1", "2"), "bs", BS([]byte{1}, []byte{2}),
	))
	missing := key("c", "missing")
	type tc struct {
		k    store.Key
		c    store.Cond
		want bool
	}
	cases := []tc{
		// Numbers compare by value, not text.
		{k, store.Eq("n", N("10")), true},
		{k, store.Eq("n", N("10.0")), true},
		{k, store.Eq("n", N("1e1")), true},
		{k, store.Eq("n", N("11")), false},
		{k, store.Ne("n", N("10.00")), false},
		{k, store.Ne("n", N("11")), true},
		{k, store.Lt("n", N("11")), true},
		{k, store.Lt("n", N("9")), false}, // "10" < "9" as text
		{k, store.Lt("n", N("10")), false},
		{k, store.Le("n", N("10")), true},
		{k, store.Le("n", N("9.99")), false},
		{k, store.Gt("n", N("9.5")), true},
		{k, store.Gt("n", N("10")), false},
		{k, store.Ge("n", N("10")), true},
		{k, store.Ge("n", N("10.000001")), false},
		{k, store.Lt("neg", N("-2")), true},
		{k, store.Gt("neg", N("-3")), true},
		{k, store.Lt("neg", N("-10")), false},
		{k, store.Gt("big", N("12345678901234567890123456789012345677")), true},
		{k, store.Lt("big", N("12345678901234567890123456789012345679")), true},
		{k, store.Eq("big", N("12345678901234567890123456789012345678")), true},
		// Strings compare as UTF-8 bytes.
		{k, store.Eq("s", S("m")), true},
		{k, store.Ne("s", S("M")), true},
		{k, store.Lt("s", S("n")), true},
		{k, store.Lt("s", S("M")), false}, // upper case sorts first
		{k, store.Le("s", S("ma")), true},
		{k, store.Gt("s", S("l")), true},
		{k, store.Gt("s", S("")), true},
		{k, store.Ge("s", S("m")), true},
		{k, store.Gt("u", S("\uFFFD")), true}, // UTF-16 order would say false
		{k, store.Gt("u", S("é")), true},
		// Binaries compare as bytes.
		{k, store.Eq("b", Bin([]byte{0x10})), true},
		{k, store.Lt("b", Bin([]byte{0x11})), true},
		{k, store.Lt("b", Bin([]byte{0x10, 0})), true}, // a prefix sorts first
		{k, store.Gt("b", Bin([]byte{0x0f, 0xff})), true},
		{k, store.Le("b", Bin([]byte{0x10})), true},
		{k, store.Ge("b", Bin([]byte{0x80})), false}, // unsigned bytes
		// Mixed types: never equal, never ordered.
		{k, store.Eq("n", S("10")), false},
		{k, store.Ne("n", S("10")), true},
		{k, store.Lt("n", S("99")), false},
		{k, store.Ge("n", S("1")), false},
		{k, store.Gt("s", N("1")), false},
		{k, store.Le("s", Bin([]byte("m"))), false},
		{k, store.Eq("b", S("\x10")), false},
		{k, store.Eq("t", N("1")), false},
		{k, store.Lt("t", N("1")), false}, // BOOL attribute, number value
		{k, store.Gt("ss", S("a")), false},
		{k, store.Ge("l", N("0")), false},
		// = and <> on every other type.
		{k, store.Eq("t", Bool(true)), true},
		{k, store.Ne("t", Bool(false)), true},
		{k, store.Eq("nul", Null()), true},
		{k, store.Ne("nul", Null()), false},
		{k, store.Eq("l", L(N("1.0"), S("x"))), true},
		{k, store.Eq("l", L(S("x"), N("1"))), false}, // lists are ordered
		{k, store.Eq("m", M(item("y", S("z"), "x", N("1")))), true},
		{k, store.Eq("m", M(item("x", N("1")))), false},
		{k, store.Eq("ss", SS("b", "a")), true}, // sets are not ordered
		{k, store.Eq("ss", SS("a")), false},
		{k, store.Eq("ns", NS("2", "1.0")), true},
		{k, store.Eq("bs", BS([]byte{2}, []byte{1})), true},
		{k, store.Ne("ss", SS("a", "b", "c")), true},
		// A missing attribute: every comparison is false, except <>.
		{k, store.Eq("x", N("1")), false},
		{k, store.Ne("x", N("1")), true},
		{k, store.Lt("x", N("1")), false},
		{k, store.Le("x", N("1")), false},
		{k, store.Gt("x", S("")), false},
		{k, store.Ge("x", S("")), false},
		{k, store.Eq("x", Null()), false},
		{missing, store.Eq("n", N("10")), false},
		{missing, store.Ne("n", N("10")), true},
		{missing, store.Ge("n", N("0")), false},
		{missing, store.Ne("pk", S("c")), true},
	}
	for _, tc := range cases {
		if got := holds(t, s, tc.k, tc.c); got != tc.want {
			t.Errorf("%s on %s: %v, want %v", showCond(tc.c), tc.k, got, tc.want)
		}
	}
}

func testCondAndOr(t *testing.T, s store.Store) {
	k := key("c", "item")
	put(t, s, k, item("a", N("1"), "b", S("x")))
	missing := key("c", "missing")
	T := store.Eq("a", N("1")) // true on k
	F := store.Eq("a", N("2")) // false on k
	T2 := store.Exists("b")    // true on k
	F2 := store.NotExists("b") // false on k
	cases := []struct {
		k    store.Key
		c    store.Cond
		want bool
	}{
		{k, store.And(T), true},
		{k, store.And(T, T2), true},
		{k, store.And(T, F), false},
		{k, store.And(F, T), false},
		{k, store.And(F, F2), false},
		{k, store.Or(F), false},
		{k, store.Or(F, T), true},
		{k, store.Or(T, F), true},
		{k, store.Or(F, F2), false},
		{k, store.Or(T, T2), true},
		{k, store.And(T, T2, store.Ne("a", N("3")), store.Lt("b", S("y"))), true},
		{k, store.And(T, T2, store.Ne("a", N("3")), store.Lt("b", S("w"))), false},
		{k, store.Or(F, F2, store.Eq("b", S("nope")), store.Gt("a", N("0"))), true},
		// Nested both ways.
		{k, store.And(store.Or(F, T2), store.Or(F2, T)), true},
		{k, store.And(store.Or(F, T2), store.Or(F2, F)), false},
		{k, store.Or(store.And(T, F), store.And(T2, T)), true},
		{k, store.Or(store.And(T, F), store.And(F2, T)), false},
		{k, store.And(T, store.Or(F, store.And(T2, store.Or(F2, T)))), true},
		{k, store.And(T, store.Or(F, store.And(T2, store.Or(F2, F)))), false},
		// The guard of an insert-or-match: absent, or the same owner.
		{k, store.Or(store.ItemAbsent(), store.Eq("b", S("x"))), true},
		{k, store.Or(store.ItemAbsent(), store.Eq("b", S("y"))), false},
		{missing, store.Or(store.ItemAbsent(), store.Eq("b", S("y"))), true},
		{missing, store.And(store.ItemAbsent(), store.Ne("b", S("y"))), true},
		{missing, store.And(store.ItemAbsent(), store.Eq("b", S("y"))), false},
		{missing, store.Or(store.ItemExists(), store.Gt("a", N("0"))), false},
	}
	for _, tc := range cases {
		if got := holds(t, s, tc.k, tc.c); got != tc.want {
			t.Errorf("%s on %s: %v, want %v", showCond(tc.c), tc.k, got, tc.want)
		}
	}
}

// testCondActions: Put, Update, Delete and Check each write only when their
// condition holds, and a failed one changes nothing.
func testCondActions(t *testing.T, s store.Store) {
	k := key("c", "item")
	orig := item("v", N("1"))
	put(t, s, k, orig)
	want := stored(k, orig)
	no := store.Eq("v", N("2"))
	yes := store.Eq("v", N("1"))
	for _, a := range []store.Action{
		store.Put(k, item("v", N("9"))).When(no),
		store.Update(k).SetAttr("v", N("9")).When(no),
		store.Update(k).AddNum("v", 1).When(no).Returning(),
		store.Delete(k).When(no),
		store.Check(k, no),
		store.Put(k, nil).When(store.ItemAbsent()),
	} {
		_, err := s.Write(t.Context(), a)
		wantCondFailed(t, a.Kind.String(), err, 0, nil)
		wantItem(t, s, k, want)
	}
	// Actions on a missing item whose condition needs one.
	missing := key("c", "missing")
	for _, a := range []store.Action{
		store.Update(missing).SetAttr("v", N("1")).When(store.ItemExists()),
		store.Delete(missing).When(store.ItemExists()),
		store.Put(missing, nil).When(store.Exists("v")),
	} {
		_, err := s.Write(t.Context(), a)
		wantCondFailed(t, a.Kind.String()+" on a missing item", err, 0, nil)
		wantItem(t, s, missing, nil)
	}

	MustWrite(t, s, store.Update(k).AddNum("v", 1).When(yes))
	want["v"] = N("2")
	wantItem(t, s, k, want)
	MustWrite(t, s, store.Put(k, item("v", N("3"))).When(store.Eq("v", N("2"))))
	wantItem(t, s, k, stored(k, item("v", N("3"))))
	MustWrite(t, s, store.Check(k, store.Eq("v", N("3"))))
	MustWrite(t, s, store.Delete(k).When(store.Eq("v", N("3"))))
	wantItem(t, s, k, nil)
	MustWrite(t, s, store.Put(k, nil).When(store.ItemAbsent()))
	wantItem(t, s, k, stored(k, nil))
}

func testCondInvalid(t *testing.T, s store.Store) {
	k := key("c", "item")
	put(t, s, k, item("a", N("1")))
	for name, c := range map[string]store.Cond{
		"empty AND":          store.AndCond{},
		"empty OR":           store.OrCond{},
		"empty name":         store.Eq("", N("1")),
		"empty exists name":  store.Exists(""),
		"unknown operator":   store.Compare{Attr: "a", Op: "~", Value: N("1")},
		"< on a BOOL":        store.Lt("a", Bool(true)),
		">= on a NULL":       store.Ge("a", Null()),
		"> on a set":         store.Gt("a", SS("x")),
		"<= on a list":       store.Le("a", L(N("1"))),
		"nil value":          store.Eq("a", nil),
		"invalid number":     store.Eq("a", N("one")),
		"empty set value":    store.Eq("a", SS()),
		"nested empty OR":    store.And(store.Exists("a"), store.OrCond{}),
		"invalid UTF-8 text": store.Eq("a", S("\xff")),
	} {
		_, err := s.Write(t.Context(), store.Check(k, c))
		wantErr(t, "Check with "+name, err, store.ErrInvalid)
		_, err = s.Write(t.Context(), store.Put(k, item("a", N("2"))).When(c))
		wantErr(t, "Put with "+name, err, store.ErrInvalid)
	}
	_, err := s.Write(t.Context(), store.Check(k, nil))
	wantErr(t, "Check without a condition", err, store.ErrInvalid)
	wantItem(t, s, k, stored(k, item("a", N("1"))))
}
