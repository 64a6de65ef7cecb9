package storetest

import (
	"bytes"
	"fmt"
	"testing"

	"github.com/a2awire/a2awire/shared/store"
)

var updateCases = []testCase{
	{"Update/SetAddRemove", testUpdateSetAddRemove},
	{"Update/CreatesMissingItem", testUpdateCreates},
	{"Update/AddIsDecimal", testUpdateAddDecimal},
	{"Update/AddOntoNonNumber", testUpdateAddNonNumber},
	{"Update/Refused", testUpdateRefused},
	{"Update/ResultOverItemLimit", testUpdateOversize},
	{"Update/ReturnsOnlyWhenAsked", testUpdateReturns},
}

func testUpdateSetAddRemove(t *testing.T, s store.Store) {
	k := key("u", "1")
	put(t, s, k, item("a", S("x"), "n", N("5"), "gone", S("bye"), "keep", L(S("k"))))
	out := MustWrite(t, s, store.Update(k).
		SetAttr("a", S("y")).
		SetAttr("new", M(item("deep", Bool(true)))).
		AddNum("n", -7).
		AddNum("c", 3).
		Del("gone", "neverThere").
		Returning())
	want := stored(k, item("a", S("y"), "new", M(item("deep", Bool(true))), "n", N("-2"), "c", N("3"), "keep", L(S("k"))))
	if !sameItem(out[0], want) {
		t.Errorf("Update returned\n %s\nwant\n %s", show(out[0]), show(want))
	}
	wantItem(t, s, k, want)

	// SET replaces a value of another type.
	MustWrite(t, s, store.Update(k).SetAttr("n", S("now a string")))
	want["n"] = S("now a string")
	wantItem(t, s, k, want)
	// Removing every non-key attribute leaves the keys.
	MustWrite(t, s, store.Update(k).Del("a", "new", "n", "c", "keep"))
	wantItem(t, s, k, stored(k, nil))
}

func testUpdateCreates(t *testing.T, s store.Store) {
	k := key("u", "set")
	out := MustWrite(t, s, store.Update(k).SetAttr("a", S("x")).Returning())
	if !sameItem(out[0], stored(k, item("a", S("x")))) {
		t.Errorf("Update of a missing item returned %s", show(out[0]))
	}
	wantItem(t, s, k, stored(k, item("a", S("x"))))

	// ADD counts a missing attribute as 0; negative numbers subtract.
	k = key("u", "add")
	out = MustWrite(t, s, store.Update(k).AddNum("n", -5).Returning())
	if !sameItem(out[0], stored(k, item("n", N("-5")))) {
		t.Errorf("ADD on a missing item returned %s", show(out[0]))
	}
	MustWrite(t, s, store.Update(k).AddNum("n", 12))
	wantItem(t, s, k, stored(k, item("n", N("7"))))

	// Even an Update that only removes creates the item (with its keys),
	// as DynamoDB's UpdateItem does.
	k = key("u", "remove")
	out = MustWrite(t, s, store.Update(k).Del("x").Returning())
	if !sameItem(out[0], stored(k, nil)) {
		t.Errorf("REMOVE on a missing item returned %s", show(out[0]))
	}
	wantItem(t, s, k, stored(k, nil))

	// A Update with ItemExists does not create.
	k = key("u", "guarded")
	_, err := s.Write(t.Context(), store.Update(k).SetAttr("a", S("x")).When(store.ItemExists()))
	wantCondFailed(t, "guarded Update", err, 0, nil)
	wantItem(t, s, k, nil)
}

func testUpdateAddDecimal(t *testing.T, s store.Store) {
	for i, tc := range []struct{ start, want string }{
		{"1.5", "2.5"},
		{"-1", "0"},
		{"1e3", "1001"},
		{"12345678901234567890123456789", "12345678901234567890123456790"}, // beyond int64
		{"99999999999999999999999999999999999999", "1e38"},                 // 38 nines + 1
		{"-0.25", "0.75"},
	} {
		k := key("add", fmt.Sprint(i))
		put(t, s, k, item("n", N(tc.start)))
		out := MustWrite(t, s, store.Update(k).AddNum("n", 1).Returning())
		if !store.Equal(out[0]["n"], N(tc.want)) {
			t.Errorf("%s + 1 = %s, want %s", tc.start, showValue(out[0]["n"]), tc.want)
		}
		wantItem(t, s, k, stored(k, item("n", N(tc.want))))
	}
	// A result DynamoDB cannot hold (39 significant digits) is refused.
	k := key("add", "precision")
	start := "9.9999999999999999999999999999999999999e125"
	put(t, s, k, item("n", N(start)))
	_, err := s.Write(t.Context(), store.Update(k).AddNum("n", 1))
	wantErr(t, "ADD past 38 digits", err, store.ErrInvalid)
	wantItem(t, s, k, stored(k, item("n", N(start))))
}

func testUpdateAddNonNumber(t *testing.T, s store.Store) {
	k := key("u", "1")
	orig := item("s", S("5"), "ns", NS("1"), "b", Bin([]byte{1}), "l", L(N("1")), "n", N("1"))
	put(t, s, k, orig)
	for _, name := range []string{"s", "ns", "b", "l"} {
		_, err := s.Write(t.Context(), store.Update(k).AddNum(name, 1).SetAttr("other", S("x")))
		wantErr(t, "ADD onto "+name, err, store.ErrInvalid)
		wantItem(t, s, k, stored(k, orig))
	}
	// Inside a transaction, the whole write is refused.
	_, err := s.Write(t.Context(),
		store.Put(key("u", "2"), item("a", S("x"))),
		store.Update(k).AddNum("s", 1))
	wantErr(t, "ADD onto a string in a two-action write", err, store.ErrInvalid)
	wantItem(t, s, key("u", "2"), nil)
	wantItem(t, s, k, stored(k, orig))
}

func testUpdateRefused(t *testing.T, s store.Store) {
	k := key("u", "1")
	put(t, s, k, item("a", S("x")))
	other := key("u", "2")
	for name, actions := range map[string][]store.Action{
		"SET pk":                          {store.Update(k).SetAttr("pk", S("q"))},
		"SET sk":                          {store.Update(k).SetAttr("sk", S("t"))},
		"ADD pk":                          {store.Update(k).AddNum("pk", 1)},
		"REMOVE sk":                       {store.Update(k).Del("sk")},
		"SET and REMOVE one attribute":    {store.Update(k).SetAttr("a", S("y")).Del("a")},
		"SET and ADD one attribute":       {store.Update(k).SetAttr("n", N("1")).AddNum("n", 1)},
		"ADD and REMOVE one attribute":    {store.Update(k).AddNum("n", 1).Del("n")},
		"REMOVE one attribute twice":      {store.Update(k).Del("a", "a")},
		"an empty Update":                 {store.Update(k)},
		"an empty attribute name":         {store.Update(k).SetAttr("", S("x"))},
		"ReturnNew on a two-action write": {store.Update(k).SetAttr("a", S("y")).Returning(), store.Put(other, nil)},
		"ReturnNew on the second action":  {store.Put(other, nil), store.Update(k).SetAttr("a", S("y")).Returning()},
		"ReturnNew on a Put":              {store.Put(k, item("a", S("y"))).Returning()},
		"ReturnNew on a Delete":           {store.Delete(k).Returning()},
		"an Update with an Item":          {{Kind: store.UpdateAction, Key: k, Item: item("a", S("y")), Set: item("b", S("y"))}},
		"a Put with Set":                  {{Kind: store.PutAction, Key: k, Set: item("b", S("y"))}},
		"a Delete with Set":               {{Kind: store.DeleteAction, Key: k, Set: item("b", S("y"))}},
		"an unknown action kind":          {{Kind: 99, Key: k}},
	} {
		_, err := s.Write(t.Context(), actions...)
		wantErr(t, name, err, store.ErrInvalid)
		wantItem(t, s, k, stored(k, item("a", S("x"))))
		wantItem(t, s, other, nil)
	}
}

func testUpdateOversize(t *testing.T, s store.Store) {
	k := key("u", "big")
	orig := item("b", Bin(bytes.Repeat([]byte{1}, 300_000)))
	put(t, s, k, orig)
	_, err := s.Write(t.Context(), store.Update(k).SetAttr("c", Bin(bytes.Repeat([]byte{2}, 200_000))))
	wantErr(t, "an Update growing the item past 400 KB", err, store.ErrInvalid)
	wantItem(t, s, k, stored(k, orig))
	// Inside a transaction too.
	_, err = s.Write(t.Context(),
		store.Put(key("u", "other"), nil),
		store.Update(k).SetAttr("c", Bin(bytes.Repeat([]byte{2}, 200_000))))
	wantErr(t, "an oversize Update in a two-action write", err, store.ErrInvalid)
	wantItem(t, s, key("u", "other"), nil)
	wantItem(t, s, k, stored(k, orig))
}

func testUpdateReturns(t *testing.T, s store.Store) {
	a, b := key("u", "a"), key("u", "b")
	out := MustWrite(t, s, store.Update(a).SetAttr("v", N("1")))
	if out[0] != nil {
		t.Errorf("Update without Returning returned %s", show(out[0]))
	}
	out = MustWrite(t, s, store.Update(a).AddNum("v", 1), store.Put(b, nil), store.Delete(key("u", "c")))
	for i, it := range out {
		if it != nil {
			t.Errorf("result %d of a three-action write is %s, want nil", i, show(it))
		}
	}
	out = MustWrite(t, s, store.Put(b, item("x", S("y"))))
	if out[0] != nil {
		t.Errorf("Put returned %s", show(out[0]))
	}
	out = MustWrite(t, s, store.Update(a).AddNum("v", 1).Returning())
	if !sameItem(out[0], stored(a, item("v", N("3")))) {
		t.Errorf("Update.Returning() returned %s", show(out[0]))
	}
}

// --- atomic writes -----------------------------------------------------

var writeCases = []testCase{
	{"Write/AllActionsApply", testWriteAll},
	{"Write/AtomicOnFailedCondition", testWriteAtomic},
	{"Write/FailedItemReturned", testWriteReturnOnFail},
}

func testWriteAll(t *testing.T, s store.Store) {
	put(t, s, key("w", "upd"), item("n", N("1")))
	put(t, s, key("w", "del"), item("x", S("x")))
	put(t, s, key("w", "chk"), item("ok", Bool(true)))
	MustWrite(t, s,
		store.Put(key("w", "new"), item("a", S("a"))).When(store.ItemAbsent()),
		store.Update(key("w", "upd")).AddNum("n", 1).SetAttr("s", S("set")).When(store.Eq("n", N("1"))),
		store.Delete(key("w", "del")).When(store.ItemExists()),
		store.Check(key("w", "chk"), store.Eq("ok", Bool(true))),
		store.Put(key("other", "x"), nil),
	)
	wantItem(t, s, key("w", "new"), stored(key("w", "new"), item("a", S("a"))))
	wantItem(t, s, key("w", "upd"), stored(key("w", "upd"), item("n", N("2"), "s", S("set"))))
	wantItem(t, s, key("w", "del"), nil)
	wantItem(t, s, key("w", "chk"), stored(key("w", "chk"), item("ok", Bool(true))))
	wantItem(t, s, key("other", "x"), stored(key("other", "x"), nil))
}

// testWriteAtomic: in a write of N actions whose one condition fails,
// nothing is written, wherever the failing action is.
func testWriteAtomic(t *testing.T, s store.Store) {
	const n = 6
	seed := func() map[store.Key]store.Item {
		state := map[store.Key]store.Item{}
		for i := range n {
			k := key("w", fmt.Sprint(i))
			if i%2 == 0 {
				put(t, s, k, item("v", N(fmt.Sprint(i))))
				state[k] = stored(k, item("v", N(fmt.Sprint(i))))
			} else {
				MustWrite(t, s, store.Delete(k))
				state[k] = nil
			}
		}
		return state
	}
	actions := func(fail int) []store.Action {
		var as []store.Action
		for i := range n {
			k := key("w", fmt.Sprint(i))
			var a store.Action
			switch i % 3 {
			case 0:
				a = store.Put(k, item("v", S("new")))
			case 1:
				a = store.Update(k).AddNum("v", 100).SetAttr("touched", Bool(true))
			default:
				a = store.Delete(k)
			}
			if i == fail {
				a = a.When(store.Eq("v", S("never")))
			}
			as = append(as, a)
		}
		return as
	}
	for fail := range n {
		state := seed()
		_, err := s.Write(t.Context(), actions(fail)...)
		wantCondFailed(t, fmt.Sprintf("write failing at action %d", fail), err, fail, nil)
		for k, want := range state {
			wantItem(t, s, k, want)
		}
	}
	// A failing Check in the middle stops the whole write, too.
	state := seed()
	as := actions(-1)
	as[3] = store.Check(key("w", "3"), store.ItemExists())
	_, err := s.Write(t.Context(), as...)
	wantCondFailed(t, "write with a failing Check", err, 3, nil)
	for k, want := range state {
		wantItem(t, s, k, want)
	}
	// And the same write without a failing condition applies in full.
	seed()
	MustWrite(t, s, actions(-1)...)
	wantItem(t, s, key("w", "0"), stored(key("w", "0"), item("v", S("new"))))
	wantItem(t, s, key("w", "1"), stored(key("w", "1"), item("v", N("100"), "touched", Bool(true))))
	wantItem(t, s, key("w", "2"), nil)
}

// testWriteReturnOnFail: the failed action's item comes back only when the
// action asked for it and an item was there.
func testWriteReturnOnFail(t *testing.T, s store.Store) {
	a, b, c := key("r", "a"), key("r", "b"), key("r", "c")
	put(t, s, a, item("v", N("1")))
	put(t, s, b, item("v", N("2"), "owner", S("someone")))
	bItem := stored(b, item("v", N("2"), "owner", S("someone")))

	// Single action, asked: the item in the way.
	_, err := s.Write(t.Context(), store.Put(b, nil).When(store.ItemAbsent()).OnFailReturn())
	wantCondFailed(t, "single Put asking", err, 0, bItem)
	// Single action, not asked: none.
	_, err = s.Write(t.Context(), store.Put(b, nil).When(store.ItemAbsent()))
	wantCondFailed(t, "single Put not asking", err, 0, nil)
	// Single Update and Delete, asked.
	_, err = s.Write(t.Context(), store.Update(b).AddNum("v", 1).When(store.Eq("owner", S("me"))).OnFailReturn())
	wantCondFailed(t, "single Update asking", err, 0, bItem)
	_, err = s.Write(t.Context(), store.Delete(b).When(store.Eq("owner", S("me"))).OnFailReturn())
	wantCondFailed(t, "single Delete asking", err, 0, bItem)
	// Asked, but no item there.
	_, err = s.Write(t.Context(), store.Update(c).SetAttr("v", N("1")).When(store.ItemExists()).OnFailReturn())
	wantCondFailed(t, "single Update on a missing item asking", err, 0, nil)

	// In a transaction: the failing action's item, not another's.
	_, err = s.Write(t.Context(),
		store.Update(a).AddNum("v", 1).OnFailReturn(),
		store.Check(b, store.Eq("owner", S("me"))).OnFailReturn(),
		store.Put(c, nil))
	wantCondFailed(t, "transaction, Check asking", err, 1, bItem)
	_, err = s.Write(t.Context(),
		store.Update(a).AddNum("v", 1).OnFailReturn(),
		store.Check(b, store.Eq("owner", S("me"))),
		store.Put(c, nil))
	wantCondFailed(t, "transaction, Check not asking", err, 1, nil)
	_, err = s.Write(t.Context(),
		store.Update(a).AddNum("v", 1),
		store.Put(c, nil).When(store.ItemExists()).OnFailReturn())
	wantCondFailed(t, "transaction, Put on a missing item asking", err, 1, nil)
	wantItem(t, s, a, stored(a, item("v", N("1"))))
	wantItem(t, s, b, bItem)
	wantItem(t, s, c, nil)
}
