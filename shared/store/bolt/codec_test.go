package bolt

import (
	"errors"
	"testing"

	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"

	"github.com/a2awire/a2awire/shared/store"
	"github.com/a2awire/a2awire/shared/store/internal/embedded"
)

// everyType holds every attribute type, nested, with the values a lossy
// codec would get wrong: NUL and non-ASCII in strings and names, numbers
// with trailing zeros and exponents, empty binaries, set member order.
func everyType() store.Item {
	return store.Item{
		"pk":        store.S("p\x00k"),
		"sk":        store.S("s"),
		"s":         store.S("é\x00\U0001F600"),
		"n":         &types.AttributeValueMemberN{Value: "-1.50e3"},
		"big":       &types.AttributeValueMemberN{Value: "12345678901234567890123456789012345678"},
		"b":         store.B([]byte{0, 0xFF, 1}),
		"empty":     store.B(nil),
		"t":         store.Bool(true),
		"f":         store.Bool(false),
		"null":      store.Null(),
		"ss":        store.SS("b", "a", ""),
		"ns":        &types.AttributeValueMemberNS{Value: []string{"2", "1.0", "-3"}},
		"bs":        &types.AttributeValueMemberBS{Value: [][]byte{{1}, {}, {0, 0}}},
		"l":         &types.AttributeValueMemberL{Value: []types.AttributeValue{store.S("x"), store.N(1), &types.AttributeValueMemberL{}, &types.AttributeValueMemberM{Value: map[string]types.AttributeValue{}}}},
		"m":         &types.AttributeValueMemberM{Value: map[string]types.AttributeValue{"nested": &types.AttributeValueMemberM{Value: map[string]types.AttributeValue{"deep": store.SS("z")}}, "": store.Null()}},
		"naïve\x00": store.S(""),
	}
}

func TestCodecRoundTrip(t *testing.T) {
	in := everyType()
	b := encodeItem(nil, in)
	out, err := decodeItem(b)
	if err != nil {
		t.Fatal(err)
	}
	if !store.EqualItems(in, out) {
		t.Fatalf("round trip changed the item:\n in  %v\n out %v", in, out)
	}
	// Lossless beyond DynamoDB's equality: the exact number text and the
	// set member order survive, and an empty binary stays non-nil.
	if out["n"].(*types.AttributeValueMemberN).Value != "-1.50e3" {
		t.Fatalf("number text %q", out["n"].(*types.AttributeValueMemberN).Value)
	}
	if ns := out["ns"].(*types.AttributeValueMemberNS).Value; ns[0] != "2" || ns[1] != "1.0" || ns[2] != "-3" {
		t.Fatalf("number set %v", ns)
	}
	if e := out["empty"].(*types.AttributeValueMemberB).Value; e == nil {
		t.Fatal("empty binary decoded as nil, which ValidateItem refuses")
	}
	if err := store.ValidateItem(out); err != nil {
		t.Fatalf("decoded item is invalid: %v", err)
	}
	// Equal items encode equally whatever the map order.
	if string(encodeItem(nil, out)) != string(b) {
		t.Fatal("encoding is not deterministic")
	}
	// The decoded item shares no memory with the encoded bytes.
	b[len(b)-1] ^= 0xFF
	if !store.EqualItems(in, out) {
		t.Fatal("decoded item aliases the encoded bytes")
	}
}

func TestCodecRefusesCorruptInput(t *testing.T) {
	b := encodeItem(nil, everyType())
	for i := 0; i < len(b); i++ {
		if _, err := decodeItem(b[:i]); !errors.Is(err, errCorrupt) {
			t.Fatalf("a value truncated to %d of %d bytes decoded (%v)", i, len(b), err)
		}
	}
	if _, err := decodeItem(append(b, 0)); !errors.Is(err, errCorrupt) {
		t.Fatalf("trailing bytes accepted: %v", err)
	}
}

func TestRecordRoundTrip(t *testing.T) {
	c := embedded.Change{Key: store.Key{PK: "p\x00k", SK: "s"}, Old: everyType()}
	r, err := decodeRecord(encodeRecord(-5, true, c))
	if err != nil || r.created != -5 || !r.byTTL || r.change.Key != c.Key || !store.EqualItems(r.change.Old, c.Old) || r.change.New != nil {
		t.Fatalf("record round trip: %+v, %v", r, err)
	}
}
