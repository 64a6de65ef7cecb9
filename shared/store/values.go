package store

import (
	"fmt"
	"strconv"
	"time"

	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
)

// Attribute value constructors, so domains write store.S("x") rather than
// the SDK's member structs.
func S(v string) types.AttributeValue { return &types.AttributeValueMemberS{Value: v} }
func N(v int64) types.AttributeValue {
	return &types.AttributeValueMemberN{Value: strconv.FormatInt(v, 10)}
}
func B(v []byte) types.AttributeValue {
	if v == nil {
		v = []byte{} // DynamoDB's empty binary; a nil slice is refused
	}
	return &types.AttributeValueMemberB{Value: v}
}
func Bool(v bool) types.AttributeValue { return &types.AttributeValueMemberBOOL{Value: v} }
func Null() types.AttributeValue       { return &types.AttributeValueMemberNULL{Value: true} }

// SS is a string set; DynamoDB refuses an empty one.
func SS(v ...string) types.AttributeValue { return &types.AttributeValueMemberSS{Value: v} }

// ExpiresAt is the TTL attribute's value for t: epoch seconds, rounded up so
// the sweeper never deletes an item before t.
func ExpiresAt(t time.Time) types.AttributeValue {
	s := t.Unix()
	if t.Nanosecond() > 0 {
		s++
	}
	return N(s)
}

// Key returns the item's pk and sk.
func (it Item) Key() Key { return Key{PK: it.Str(AttrPK), SK: it.Str(AttrSK)} }

// Str returns string attribute name, or "" when it is missing or not a string.
func (it Item) Str(name string) string {
	if v, ok := it[name].(*types.AttributeValueMemberS); ok {
		return v.Value
	}
	return ""
}

// Int returns number attribute name as an int64. A missing attribute is an
// error wrapping ErrNotFound; a non-integer one an error.
func (it Item) Int(name string) (int64, error) {
	v, ok := it[name]
	if !ok {
		return 0, fmt.Errorf("attribute %s: %w", name, ErrNotFound)
	}
	n, ok := v.(*types.AttributeValueMemberN)
	if !ok {
		return 0, fmt.Errorf("attribute %s is %T, not a number", name, v)
	}
	i, err := strconv.ParseInt(n.Value, 10, 64)
	if err != nil {
		return 0, fmt.Errorf("attribute %s: %w", name, err)
	}
	return i, nil
}

// Bytes returns binary attribute name, or nil.
func (it Item) Bytes(name string) []byte {
	if v, ok := it[name].(*types.AttributeValueMemberB); ok {
		return v.Value
	}
	return nil
}

// BoolAttr returns boolean attribute name, or false.
func (it Item) BoolAttr(name string) bool {
	if v, ok := it[name].(*types.AttributeValueMemberBOOL); ok {
		return v.Value
	}
	return false
}

// Clone returns a deep copy, so an engine never shares values with callers.
func (it Item) Clone() Item {
	if it == nil {
		return nil
	}
	out := make(Item, len(it))
	for k, v := range it {
		out[k] = CloneValue(v)
	}
	return out
}

// CloneValue returns a deep copy of v.
func CloneValue(v types.AttributeValue) types.AttributeValue {
	switch v := v.(type) {
	case *types.AttributeValueMemberS:
		return &types.AttributeValueMemberS{Value: v.Value}
	case *types.AttributeValueMemberN:
		return &types.AttributeValueMemberN{Value: v.Value}
	case *types.AttributeValueMemberB:
		return &types.AttributeValueMemberB{Value: cloneBytes(v.Value)}
	case *types.AttributeValueMemberBOOL:
		return &types.AttributeValueMemberBOOL{Value: v.Value}
	case *types.AttributeValueMemberNULL:
		return &types.AttributeValueMemberNULL{Value: v.Value}
	case *types.AttributeValueMemberL:
		l := make([]types.AttributeValue, len(v.Value))
		for i, x := range v.Value {
			l[i] = CloneValue(x)
		}
		return &types.AttributeValueMemberL{Value: l}
	case *types.AttributeValueMemberM:
		return &types.AttributeValueMemberM{Value: Item(v.Value).Clone()}
	case *types.AttributeValueMemberSS:
		return &types.AttributeValueMemberSS{Value: append([]string(nil), v.Value...)}
	case *types.AttributeValueMemberNS:
		return &types.AttributeValueMemberNS{Value: append([]string(nil), v.Value...)}
	case *types.AttributeValueMemberBS:
		bs := make([][]byte, len(v.Value))
		for i, b := range v.Value {
			bs[i] = cloneBytes(b)
		}
		return &types.AttributeValueMemberBS{Value: bs}
	}
	return v
}

// cloneBytes copies b, keeping nil and empty apart (an empty binary is a
// value; nil is refused by ValidateItem).
func cloneBytes(b []byte) []byte {
	if b == nil {
		return nil
	}
	return append([]byte{}, b...)
}
