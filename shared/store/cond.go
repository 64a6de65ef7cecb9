package store

import (
	"bytes"
	"fmt"
	"math/big"
	"reflect"

	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
)

// Cond is a write condition: an AND/OR tree of attribute tests, evaluated
// against the item as it is before the write (a missing item has no
// attributes). Build it with Exists, NotExists, Eq, Ne, Lt, Le, Gt, Ge, And
// and Or. The dynamo engine turns it into a ConditionExpression; the embedded
// engines evaluate it with Eval, with DynamoDB's semantics.
type Cond interface{ cond() }

// Op is a comparison operator.
type Op string

// Comparison operators, written as in DynamoDB's expressions.
const (
	OpEq Op = "="
	OpNe Op = "<>"
	OpLt Op = "<"
	OpLe Op = "<="
	OpGt Op = ">"
	OpGe Op = ">="
)

// Compare compares attribute Attr with Value.
type Compare struct {
	Attr  string
	Op    Op
	Value types.AttributeValue
}

// AttrExists tests attribute_exists(Attr) or, when Not, attribute_not_exists.
type AttrExists struct {
	Attr string
	Not  bool
}

// AndCond holds when every one of its conditions holds.
type AndCond []Cond

// OrCond holds when any one of its conditions holds.
type OrCond []Cond

func (Compare) cond()    {}
func (AttrExists) cond() {}
func (AndCond) cond()    {}
func (OrCond) cond()     {}

// Exists holds when the item has attribute name (ItemExists for the item).
func Exists(name string) Cond { return AttrExists{Attr: name} }

// NotExists holds when the item lacks attribute name (ItemAbsent for the item).
func NotExists(name string) Cond { return AttrExists{Attr: name, Not: true} }

// ItemExists holds when the item exists.
func ItemExists() Cond { return Exists(AttrPK) }

// ItemAbsent holds when no item exists at the key.
func ItemAbsent() Cond { return NotExists(AttrPK) }

// Comparison constructors.
func Eq(name string, v types.AttributeValue) Cond { return Compare{name, OpEq, v} }
func Ne(name string, v types.AttributeValue) Cond { return Compare{name, OpNe, v} }
func Lt(name string, v types.AttributeValue) Cond { return Compare{name, OpLt, v} }
func Le(name string, v types.AttributeValue) Cond { return Compare{name, OpLe, v} }
func Gt(name string, v types.AttributeValue) Cond { return Compare{name, OpGt, v} }
func Ge(name string, v types.AttributeValue) Cond { return Compare{name, OpGe, v} }

// And holds when all of cs hold.
func And(cs ...Cond) Cond { return AndCond(cs) }

// Or holds when any of cs holds.
func Or(cs ...Cond) Cond { return OrCond(cs) }

// Eval evaluates c against item (nil for a missing item) with DynamoDB's
// semantics (checked against DynamoDB Local by storetest): a comparison with a
// missing attribute is false, except <>, which is true (a missing attribute
// differs from every value); = and <> compare any two values, and <, <=, >, >=
// hold only between two numbers, two strings (UTF-8 byte order) or two
// binaries, and are false between values of different types.
func Eval(c Cond, item Item) (bool, error) {
	switch c := c.(type) {
	case nil:
		return true, nil
	case AttrExists:
		_, ok := item[c.Attr]
		return ok != c.Not, nil
	case Compare:
		have, ok := item[c.Attr]
		if !ok {
			return c.Op == OpNe, nil
		}
		return compare(have, c.Op, c.Value)
	case AndCond:
		if len(c) == 0 {
			return false, fmt.Errorf("empty AND: %w", ErrInvalid)
		}
		for _, x := range c {
			ok, err := Eval(x, item)
			if err != nil || !ok {
				return false, err
			}
		}
		return true, nil
	case OrCond:
		if len(c) == 0 {
			return false, fmt.Errorf("empty OR: %w", ErrInvalid)
		}
		for _, x := range c {
			ok, err := Eval(x, item)
			if err != nil || ok {
				return ok, err
			}
		}
		return false, nil
	}
	return false, fmt.Errorf("condition %T: %w", c, ErrInvalid)
}

func compare(have types.AttributeValue, op Op, want types.AttributeValue) (bool, error) {
	switch op {
	case OpEq:
		return Equal(have, want), nil
	case OpNe:
		return !Equal(have, want), nil
	case OpLt, OpLe, OpGt, OpGe:
	default:
		return false, fmt.Errorf("operator %q: %w", op, ErrInvalid)
	}
	var cmp int
	switch h := have.(type) {
	case *types.AttributeValueMemberN:
		w, ok := want.(*types.AttributeValueMemberN)
		if !ok {
			return false, nil
		}
		a, err := ParseNumber(h.Value)
		if err != nil {
			return false, err
		}
		b, err := ParseNumber(w.Value)
		if err != nil {
			return false, err
		}
		cmp = a.Cmp(b)
	case *types.AttributeValueMemberS:
		w, ok := want.(*types.AttributeValueMemberS)
		if !ok {
			return false, nil
		}
		cmp = bytes.Compare([]byte(h.Value), []byte(w.Value))
	case *types.AttributeValueMemberB:
		w, ok := want.(*types.AttributeValueMemberB)
		if !ok {
			return false, nil
		}
		cmp = bytes.Compare(h.Value, w.Value)
	default:
		return false, nil
	}
	switch op {
	case OpLt:
		return cmp < 0, nil
	case OpLe:
		return cmp <= 0, nil
	case OpGt:
		return cmp > 0, nil
	default:
		return cmp >= 0, nil
	}
}

// isDecimal reports whether s has the number syntax DynamoDB accepts: an
// optionally signed decimal with an optional exponent ("1", "-0.5", ".5",
// "5.", "1e+3"); no hex, fractions, underscores, spaces, Inf or NaN, which
// big.Rat would take. It is ^[+-]?([0-9]+\.?[0-9]*|\.[0-9]+)([eE][+-]?[0-9]+)?$
// written out, so no regular expression is compiled at a Lambda's cold
// start; the tests hold it to that expression.
func isDecimal(s string) bool {
	i := skipSign(s, 0)
	whole := countDigits(s[i:])
	i += whole
	frac := 0
	if i < len(s) && s[i] == '.' {
		frac = countDigits(s[i+1:])
		i += 1 + frac
	}
	if whole == 0 && frac == 0 {
		return false
	}
	if i < len(s) && (s[i] == 'e' || s[i] == 'E') {
		i = skipSign(s, i+1)
		exp := countDigits(s[i:])
		if exp == 0 {
			return false
		}
		i += exp
	}
	return i == len(s)
}

// skipSign returns the index after an optional '+' or '-' at s[i].
func skipSign(s string, i int) int {
	if i < len(s) && (s[i] == '+' || s[i] == '-') {
		return i + 1
	}
	return i
}

// countDigits returns how many ASCII digits s starts with.
func countDigits(s string) int {
	n := 0
	for n < len(s) && s[n] >= '0' && s[n] <= '9' {
		n++
	}
	return n
}

// ParseNumber parses a DynamoDB number (a decimal string) exactly.
func ParseNumber(s string) (*big.Rat, error) {
	if !isDecimal(s) {
		return nil, fmt.Errorf("number %q: %w", s, ErrInvalid)
	}
	r, ok := new(big.Rat).SetString(s)
	if !ok {
		return nil, fmt.Errorf("number %q: %w", s, ErrInvalid)
	}
	return r, nil
}

// Equal reports whether two attribute values are equal as DynamoDB compares
// them: same type and value; numbers by value (1 = 1.0); sets regardless of
// order.
func Equal(a, b types.AttributeValue) bool {
	switch a := a.(type) {
	case *types.AttributeValueMemberN:
		b, ok := b.(*types.AttributeValueMemberN)
		if !ok {
			return false
		}
		x, err1 := ParseNumber(a.Value)
		y, err2 := ParseNumber(b.Value)
		return err1 == nil && err2 == nil && x.Cmp(y) == 0
	case *types.AttributeValueMemberS:
		b, ok := b.(*types.AttributeValueMemberS)
		return ok && a.Value == b.Value
	case *types.AttributeValueMemberB:
		b, ok := b.(*types.AttributeValueMemberB)
		return ok && bytes.Equal(a.Value, b.Value)
	case *types.AttributeValueMemberBOOL:
		b, ok := b.(*types.AttributeValueMemberBOOL)
		return ok && a.Value == b.Value
	case *types.AttributeValueMemberNULL:
		_, ok := b.(*types.AttributeValueMemberNULL)
		return ok
	case *types.AttributeValueMemberL:
		b, ok := b.(*types.AttributeValueMemberL)
		if !ok || len(a.Value) != len(b.Value) {
			return false
		}
		for i := range a.Value {
			if !Equal(a.Value[i], b.Value[i]) {
				return false
			}
		}
		return true
	case *types.AttributeValueMemberM:
		b, ok := b.(*types.AttributeValueMemberM)
		if !ok || len(a.Value) != len(b.Value) {
			return false
		}
		for k, v := range a.Value {
			w, ok := b.Value[k]
			if !ok || !Equal(v, w) {
				return false
			}
		}
		return true
	case *types.AttributeValueMemberSS:
		b, ok := b.(*types.AttributeValueMemberSS)
		return ok && sameSet(a.Value, b.Value, func(x, y string) bool { return x == y })
	case *types.AttributeValueMemberNS:
		b, ok := b.(*types.AttributeValueMemberNS)
		return ok && sameSet(a.Value, b.Value, func(x, y string) bool {
			return Equal(&types.AttributeValueMemberN{Value: x}, &types.AttributeValueMemberN{Value: y})
		})
	case *types.AttributeValueMemberBS:
		b, ok := b.(*types.AttributeValueMemberBS)
		return ok && sameSet(a.Value, b.Value, func(x, y []byte) bool { return bytes.Equal(x, y) })
	}
	return reflect.DeepEqual(a, b)
}

func sameSet[T any](a, b []T, eq func(x, y T) bool) bool {
	if len(a) != len(b) {
		return false
	}
outer:
	for _, x := range a {
		for _, y := range b {
			if eq(x, y) {
				continue outer
			}
		}
		return false
	}
	return true
}

// EqualItems reports whether two items hold the same attributes.
func EqualItems(a, b Item) bool {
	return Equal(&types.AttributeValueMemberM{Value: a}, &types.AttributeValueMemberM{Value: b})
}
