package embedded

import (
	"errors"
	"math/rand/v2"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"

	"github.com/a2awire/a2awire/shared/store"
)

// randKey draws short strings over an alphabet rich in the bytes the
// encoding treats specially (NUL, 0x01, 0x02) and in prefixes of each other.
func randKey(r *rand.Rand) string {
	const alphabet = "\x00\x01\x02ab\x7f"
	n := 1 + r.IntN(4)
	var b strings.Builder
	for range n {
		b.WriteByte(alphabet[r.IntN(len(alphabet))])
	}
	if r.IntN(8) == 0 {
		b.WriteString("é")
	}
	return b.String()
}

func sign(x int) int { return min(max(x, -1), 1) }

// TestOrderKeysSortLikeTheirStrings: the byte order of order keys is the
// order DynamoDB gives the strings (and tuples) they encode.
func TestOrderKeysSortLikeTheirStrings(t *testing.T) {
	r := rand.New(rand.NewPCG(1, 2))
	for range 20000 {
		a, b := randKey(r), randKey(r)
		if got, want := sign(strings.Compare(TableOrder(a), TableOrder(b))), sign(strings.Compare(a, b)); got != want {
			t.Fatalf("order of %q and %q: %d, want %d", a, b, got, want)
		}
		x := [3]string{randKey(r), randKey(r), randKey(r)}
		y := [3]string{randKey(r), randKey(r), randKey(r)}
		if r.IntN(2) == 0 {
			y[0] = x[0]
		}
		want := sign(slices.Compare(x[:], y[:]))
		if got := sign(strings.Compare(IndexOrder(x[0], x[1], x[2]), IndexOrder(y[0], y[1], y[2]))); got != want {
			t.Fatalf("order of %q and %q: %d, want %d", x, y, got, want)
		}
		s, rest, err := SplitComponent([]byte(IndexOrder(x[0], x[1], x[2])))
		if err != nil || s != x[0] || string(rest) != TableOrder(x[1])+TableOrder(x[2]) {
			t.Fatalf("split %q: %q %q %v", x, s, rest, err)
		}
	}
}

// TestSortBoundsMatchSortConditions: an order key is within a condition's
// bounds exactly when its sort key matches the condition, on the table and
// on gsi1 (where the pk and sk that follow must not matter).
func TestSortBoundsMatchSortConditions(t *testing.T) {
	r := rand.New(rand.NewPCG(3, 4))
	for range 20000 {
		v, w := randKey(r), randKey(r)
		if v > w {
			v, w = w, v
		}
		c := []store.SortCond{store.SKEq(v), store.SKLT(v), store.SKLE(v), store.SKGT(v), store.SKGE(v),
			store.SKBetween(v, w), store.SKPrefix(v), {}}[r.IntN(8)]
		sk := randKey(r)
		if r.IntN(3) == 0 {
			sk = v + sk // prefixed by the condition's value
		}
		b := sortBounds(c)
		if got, want := b.In(TableOrder(sk)), c.Matches(sk); got != want {
			t.Fatalf("%+v on table sk %q: in bounds %v, matches %v", c, sk, got, want)
		}
		if got, want := b.In(IndexOrder(sk, randKey(r), randKey(r))), c.Matches(sk); got != want {
			t.Fatalf("%+v on gsi1sk %q: in bounds %v, matches %v", c, sk, got, want)
		}
	}
}

func TestAddNumber(t *testing.T) {
	for _, c := range []struct {
		have string // "" for a missing attribute
		add  int64
		want string
	}{
		{"", 5, "5"},
		{"1.5", 2, "3.5"},
		{"-0.25", 0, "-0.25"},
		{"1e3", 1, "1001"},
		{"1e-5", 1, "1.00001"},
		{"9223372036854775807", 1, "9223372036854775808"},
		{"10", -10, "0"},
	} {
		var have types.AttributeValue
		if c.have != "" {
			have = &types.AttributeValueMemberN{Value: c.have}
		}
		got, err := AddNumber(have, c.add)
		if err != nil || got.(*types.AttributeValueMemberN).Value != c.want {
			t.Errorf("%q + %d = %v (%v), want %s", c.have, c.add, got, err, c.want)
		}
	}
	if _, err := AddNumber(store.S("1"), 1); !errors.Is(err, store.ErrInvalid) {
		t.Fatalf("ADD onto a string: %v", err)
	}
}

func TestExpiry(t *testing.T) {
	for _, c := range []struct {
		v    string
		want int64
	}{{"10", 10}, {"10.9", 10}, {"-1.5", -2}, {"1e30", 1<<63 - 1}, {"-1e30", -1 << 63}} {
		if got, ok := Expiry(store.Item{store.AttrExpiresAt: &types.AttributeValueMemberN{Value: c.v}}); !ok || got != c.want {
			t.Errorf("Expiry(%s) = %d, %v; want %d", c.v, got, ok, c.want)
		}
	}
	if _, ok := Expiry(store.Item{}); ok {
		t.Error("an item without expiresAt has an expiry")
	}
	now := time.Unix(100, 500_000_000)
	for v, want := range map[string]bool{"100": true, "100.4": true, "100.5": false, "101": false} {
		if got := Expired(store.Item{store.AttrExpiresAt: &types.AttributeValueMemberN{Value: v}}, now); got != want {
			t.Errorf("Expired(%s) at 100.5 = %v", v, got)
		}
	}
}

// TestPlanWritesNothingOnFailure: a failed condition or an invalid result
// anywhere in a write yields no change at all, and the failure names its
// action.
func TestPlanWritesNothingOnFailure(t *testing.T) {
	k1, k2 := store.Key{PK: "p", SK: "1"}, store.Key{PK: "p", SK: "2"}
	held := store.Item{"pk": store.S("p"), "sk": store.S("2"), "s": store.S("x")}
	get := func(k store.Key) (store.Item, error) {
		if k == k2 {
			return held, nil
		}
		return nil, nil
	}
	_, changes, err := Plan([]store.Action{store.Put(k1, nil), store.Update(k2).AddNum("s", 1)}, get)
	if !errors.Is(err, store.ErrInvalid) || changes != nil {
		t.Fatalf("ADD onto a string: %v, %v", changes, err)
	}
	_, changes, err = Plan([]store.Action{store.Put(k1, nil), store.Delete(k2).When(store.ItemAbsent()).OnFailReturn()}, get)
	var cf *store.ConditionFailedError
	if !errors.As(err, &cf) || cf.Action != 1 || !store.EqualItems(cf.Item, held) || changes != nil {
		t.Fatalf("failed condition: %v, %v", changes, err)
	}
	cf.Item["s"] = store.S("changed")
	if held.Str("s") != "x" {
		t.Fatal("the item returned on failure aliases the stored one")
	}
	big := store.S(strings.Repeat("x", store.MaxItemBytes/2))
	_, changes, err = Plan([]store.Action{store.Update(k2).SetAttr("a", big).SetAttr("b", big)}, get)
	if !errors.Is(err, store.ErrInvalid) || changes != nil {
		t.Fatalf("update growing past 400 KB: %v, %v", changes, err)
	}
}
