package store

import (
	"fmt"
	"math/big"
	"strconv"
	"strings"
	"sync"
	"unicode/utf8"

	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
)

// DynamoDB's limits, held by every engine so that nothing the embedded
// engines accept can fail later on AWS.
const (
	// MaxItemBytes is the largest item, attribute names included.
	MaxItemBytes = 400 * 1024
	// MaxPKBytes and MaxSKBytes bound partition and sort key values (and
	// gsi1pk / gsi1sk).
	MaxPKBytes = 2048
	MaxSKBytes = 1024
	// MaxActions is the most actions of one Write (TransactWriteItems).
	MaxActions = 100
	// MaxWriteBytes is the most bytes of all items of one Write.
	MaxWriteBytes = 4 << 20
	// MaxPageBytes is the most item bytes one Query page reads.
	MaxPageBytes = 1 << 20
	// MaxDepth is DynamoDB's nesting limit: 32 levels, the item being the
	// first, so at most 31 lists and maps inside one another (as DynamoDB
	// Local counts them; a scalar or set innermost adds no level).
	MaxDepth = 32
)

// ItemSize is DynamoDB's size of an item: for each attribute, the UTF-8
// length of its name plus the size of its value.
func ItemSize(it Item) int {
	n := 0
	for name, v := range it {
		n += len(name) + valueSize(v)
	}
	return n
}

func valueSize(v types.AttributeValue) int {
	switch v := v.(type) {
	case *types.AttributeValueMemberS:
		return len(v.Value)
	case *types.AttributeValueMemberN:
		return numberSize(v.Value)
	case *types.AttributeValueMemberB:
		return len(v.Value)
	case *types.AttributeValueMemberBOOL, *types.AttributeValueMemberNULL:
		return 1
	case *types.AttributeValueMemberL:
		n := 3
		for _, x := range v.Value {
			n += 1 + valueSize(x)
		}
		return n
	case *types.AttributeValueMemberM:
		n := 3
		for k, x := range v.Value {
			n += 1 + len(k) + valueSize(x)
		}
		return n
	case *types.AttributeValueMemberSS:
		n := 0
		for _, s := range v.Value {
			n += len(s)
		}
		return n
	case *types.AttributeValueMemberNS:
		n := 0
		for _, s := range v.Value {
			n += numberSize(s)
		}
		return n
	case *types.AttributeValueMemberBS:
		n := 0
		for _, b := range v.Value {
			n += len(b)
		}
		return n
	}
	return 0
}

// numberSize is the size DynamoDB Local gives a number (measured against its
// 400 KB limit): the significant digits in pairs aligned on the decimal
// point (base-100 digits: 1.5 is 01|50, 12.5 is 12|50), one byte per pair,
// plus one byte of exponent, plus one for a negative number. DynamoDB's
// documentation rounds this to "one byte per two significant digits, plus
// one"; the alignment and the sign byte are Local's, and Local decides.
func numberSize(s string) int {
	neg := strings.HasPrefix(s, "-")
	s = strings.TrimLeft(s, "+-")
	exp := 0
	if i := strings.IndexAny(s, "eE"); i >= 0 {
		exp, _ = strconv.Atoi(s[i+1:]) // validNumber has checked the syntax
		s = s[:i]
	}
	intPart, frac, _ := strings.Cut(s, ".")
	digits := intPart + frac
	point := len(intPart) + exp // digits[:point] is the integer part
	trimmed := strings.TrimLeft(digits, "0")
	point -= len(digits) - len(trimmed)
	digits = strings.TrimRight(trimmed, "0")
	if digits == "" {
		return 1 // zero
	}
	if point%2 != 0 { // align pairs on the decimal point
		digits = "0" + digits
	}
	n := (len(digits)+1)/2 + 1
	if neg {
		n++
	}
	return n
}

// ValidateWrite checks a Write's actions against DynamoDB's rules: 1 to
// MaxActions actions, one per item, well-formed keys and values, Put items
// under MaxItemBytes, ReturnNew only on a single Update. Engines check the
// size of an Update's result themselves, after applying it.
func ValidateWrite(actions []Action) error {
	if len(actions) == 0 || len(actions) > MaxActions {
		return fmt.Errorf("a write takes 1 to %d actions, not %d: %w", MaxActions, len(actions), ErrInvalid)
	}
	seen := make(map[Key]int, len(actions))
	total := 0
	for i, a := range actions {
		if err := validateAction(a, len(actions)); err != nil {
			return fmt.Errorf("action %d (%s %s): %w", i, a.Kind, a.Key, err)
		}
		if j, dup := seen[a.Key]; dup {
			return fmt.Errorf("actions %d and %d both touch %s: %w", j, i, a.Key, ErrInvalid)
		}
		seen[a.Key] = i
		total += ItemSize(a.Item) + ItemSize(a.Set)
	}
	if total > MaxWriteBytes {
		return fmt.Errorf("a write of %d bytes is over %d: %w", total, MaxWriteBytes, ErrInvalid)
	}
	return nil
}

func validateAction(a Action, n int) error {
	if err := ValidateKey(a.Key); err != nil {
		return err
	}
	if a.If != nil {
		if err := validateCond(a.If); err != nil {
			return err
		}
	}
	if a.ReturnNew && (a.Kind != UpdateAction || n != 1) {
		return fmt.Errorf("only a write of one Update may return the new item: %w", ErrInvalid)
	}
	switch a.Kind {
	case PutAction:
		if a.Set != nil || a.Add != nil || a.Remove != nil {
			return fmt.Errorf("a Put takes only Item: %w", ErrInvalid)
		}
		for _, name := range []string{AttrPK, AttrSK} {
			if v, ok := a.Item[name]; ok {
				if s, ok := v.(*types.AttributeValueMemberS); !ok || s.Value != map[string]string{AttrPK: a.Key.PK, AttrSK: a.Key.SK}[name] {
					return fmt.Errorf("item attribute %s differs from the key: %w", name, ErrInvalid)
				}
			}
		}
		return ValidateItem(WithKey(a.Item, a.Key))
	case UpdateAction:
		if a.Item != nil {
			return fmt.Errorf("an Update takes Set, Add and Remove, not Item: %w", ErrInvalid)
		}
		if len(a.Set)+len(a.Add)+len(a.Remove) == 0 {
			return fmt.Errorf("an Update changes nothing: %w", ErrInvalid)
		}
		names := map[string]bool{}
		use := func(name string) error {
			switch {
			case name == AttrPK || name == AttrSK:
				return fmt.Errorf("an Update cannot change key attribute %s: %w", name, ErrInvalid)
			case name == "" || !utf8.ValidString(name) || len(name) > 65535:
				return fmt.Errorf("attribute name %q: %w", name, ErrInvalid)
			case names[name]:
				return fmt.Errorf("attribute %s appears twice in one Update: %w", name, ErrInvalid)
			}
			names[name] = true
			return nil
		}
		for name, v := range a.Set {
			if err := use(name); err != nil {
				return err
			}
			if err := validateAttr(name, v); err != nil {
				return err
			}
		}
		for name := range a.Add {
			if err := use(name); err != nil {
				return err
			}
			if err := validateAttr(name, N(0)); err != nil {
				return err
			}
		}
		for _, name := range a.Remove {
			if err := use(name); err != nil {
				return err
			}
		}
	case DeleteAction:
		if a.Item != nil || a.Set != nil || a.Add != nil || a.Remove != nil {
			return fmt.Errorf("a Delete takes only a key: %w", ErrInvalid)
		}
	case CheckAction:
		if a.If == nil {
			return fmt.Errorf("a ConditionCheck needs a condition: %w", ErrInvalid)
		}
		if a.Item != nil || a.Set != nil || a.Add != nil || a.Remove != nil {
			return fmt.Errorf("a ConditionCheck takes only a key and a condition: %w", ErrInvalid)
		}
	default:
		return fmt.Errorf("unknown action kind %d: %w", a.Kind, ErrInvalid)
	}
	return nil
}

// WithKey returns a copy of item carrying k's pk and sk.
func WithKey(item Item, k Key) Item {
	out := make(Item, len(item)+2)
	for n, v := range item {
		out[n] = v
	}
	out[AttrPK], out[AttrSK] = S(k.PK), S(k.SK)
	return out
}

// ValidateKey checks a table key: non-empty UTF-8 strings within DynamoDB's
// key sizes.
func ValidateKey(k Key) error {
	if err := keyString(AttrPK, k.PK, MaxPKBytes); err != nil {
		return err
	}
	return keyString(AttrSK, k.SK, MaxSKBytes)
}

func keyString(name, v string, max int) error {
	switch {
	case v == "":
		return fmt.Errorf("%s is empty: %w", name, ErrInvalid)
	case len(v) > max:
		return fmt.Errorf("%s is %d bytes, over %d: %w", name, len(v), max, ErrInvalid)
	case !utf8.ValidString(v):
		return fmt.Errorf("%s is not valid UTF-8: %w", name, ErrInvalid)
	}
	return nil
}

// ValidateItem checks a whole item as it would be stored: its keys, its
// index keys (strings, non-empty, when present), expiresAt (a number), every
// value, and its size.
func ValidateItem(it Item) error {
	if err := ValidateKey(it.Key()); err != nil {
		return err
	}
	for name, v := range it {
		if err := validateAttr(name, v); err != nil {
			return err
		}
	}
	if size := ItemSize(it); size > MaxItemBytes {
		return fmt.Errorf("item is %d bytes, over %d: %w", size, MaxItemBytes, ErrInvalid)
	}
	return nil
}

func validateAttr(name string, v types.AttributeValue) error {
	if name == "" || !utf8.ValidString(name) || len(name) > 65535 {
		return fmt.Errorf("attribute name %q: %w", name, ErrInvalid)
	}
	switch name {
	case AttrPK, AttrGSI1PK:
		s, ok := v.(*types.AttributeValueMemberS)
		if !ok {
			return fmt.Errorf("%s must be a string: %w", name, ErrInvalid)
		}
		return keyString(name, s.Value, MaxPKBytes)
	case AttrSK, AttrGSI1SK:
		s, ok := v.(*types.AttributeValueMemberS)
		if !ok {
			return fmt.Errorf("%s must be a string: %w", name, ErrInvalid)
		}
		return keyString(name, s.Value, MaxSKBytes)
	case AttrExpiresAt:
		if _, ok := v.(*types.AttributeValueMemberN); !ok {
			return fmt.Errorf("%s must be a number: %w", name, ErrInvalid)
		}
	}
	if err := validateValue(v, 0); err != nil {
		return fmt.Errorf("attribute %s: %w", name, err)
	}
	return nil
}

// validateValue checks v, which sits inside depth lists and maps.
func validateValue(v types.AttributeValue, depth int) error {
	switch v.(type) {
	case *types.AttributeValueMemberL, *types.AttributeValueMemberM:
		if depth+1 >= MaxDepth {
			return fmt.Errorf("lists and maps nested deeper than %d levels: %w", MaxDepth, ErrInvalid)
		}
	}
	switch v := v.(type) {
	case *types.AttributeValueMemberS:
		if !utf8.ValidString(v.Value) {
			return fmt.Errorf("string is not valid UTF-8: %w", ErrInvalid)
		}
	case *types.AttributeValueMemberN:
		return validNumber(v.Value)
	case *types.AttributeValueMemberB:
		if v.Value == nil {
			// The SDK sends a nil slice as no value at all, which DynamoDB
			// refuses; []byte{} (what B(nil) makes) is the empty binary.
			return fmt.Errorf("binary value is nil (use []byte{} for empty): %w", ErrInvalid)
		}
	case *types.AttributeValueMemberBOOL:
	case *types.AttributeValueMemberNULL:
		if !v.Value {
			return fmt.Errorf("NULL must be true: %w", ErrInvalid)
		}
	case *types.AttributeValueMemberL:
		for _, x := range v.Value {
			if err := validateValue(x, depth+1); err != nil {
				return err
			}
		}
	case *types.AttributeValueMemberM:
		for k, x := range v.Value {
			if !utf8.ValidString(k) {
				return fmt.Errorf("map key is not valid UTF-8: %w", ErrInvalid)
			}
			if err := validateValue(x, depth+1); err != nil {
				return err
			}
		}
	case *types.AttributeValueMemberSS:
		if len(v.Value) == 0 {
			return fmt.Errorf("empty string set: %w", ErrInvalid)
		}
		seen := map[string]bool{}
		for _, s := range v.Value {
			if seen[s] || !utf8.ValidString(s) {
				return fmt.Errorf("string set with a duplicate or invalid member: %w", ErrInvalid)
			}
			seen[s] = true
		}
	case *types.AttributeValueMemberNS:
		if len(v.Value) == 0 {
			return fmt.Errorf("empty number set: %w", ErrInvalid)
		}
		seen := make([]*big.Rat, 0, len(v.Value))
		for _, s := range v.Value {
			if err := validNumber(s); err != nil {
				return err
			}
			r, _ := ParseNumber(s)
			for _, x := range seen {
				if x.Cmp(r) == 0 { // 1 and 1.0 are duplicates
					return fmt.Errorf("number set with a duplicate member: %w", ErrInvalid)
				}
			}
			seen = append(seen, r)
		}
	case *types.AttributeValueMemberBS:
		if len(v.Value) == 0 {
			return fmt.Errorf("empty binary set: %w", ErrInvalid)
		}
		seen := map[string]bool{}
		for _, b := range v.Value {
			if seen[string(b)] {
				return fmt.Errorf("binary set with a duplicate member: %w", ErrInvalid)
			}
			seen[string(b)] = true
		}
	case nil:
		return fmt.Errorf("nil value: %w", ErrInvalid)
	default:
		return fmt.Errorf("unsupported value %T: %w", v, ErrInvalid)
	}
	return nil
}

// numberBounds are DynamoDB's smallest and largest magnitudes, computed once:
// every number of every write is checked against them.
var numberBounds = sync.OnceValues(func() (lo, hi *big.Rat) {
	hi = new(big.Rat).SetInt(new(big.Int).Exp(big.NewInt(10), big.NewInt(126), nil))
	lo = new(big.Rat).SetFrac(big.NewInt(1), new(big.Int).Exp(big.NewInt(10), big.NewInt(130), nil))
	return lo, hi
})

// validNumber accepts what DynamoDB stores: a decimal of at most 38
// significant digits, magnitude between 1e-130 and 1e126 (or zero).
func validNumber(s string) error {
	r, err := ParseNumber(s)
	if err != nil {
		return err
	}
	digits := strings.TrimLeft(strings.TrimPrefix(strings.TrimPrefix(s, "-"), "+"), "0")
	if i := strings.IndexAny(digits, "eE"); i >= 0 {
		digits = digits[:i]
	}
	digits = strings.Trim(strings.Replace(digits, ".", "", 1), "0")
	if len(digits) > 38 {
		return fmt.Errorf("number %q has more than 38 significant digits: %w", s, ErrInvalid)
	}
	if r.Sign() != 0 {
		abs := new(big.Rat).Abs(r)
		lo, hi := numberBounds()
		if abs.Cmp(hi) >= 0 || abs.Cmp(lo) < 0 {
			return fmt.Errorf("number %q is out of DynamoDB's range: %w", s, ErrInvalid)
		}
	}
	return nil
}

func validateCond(c Cond) error {
	switch c := c.(type) {
	case AttrExists:
		if c.Attr == "" {
			return fmt.Errorf("condition on an empty attribute name: %w", ErrInvalid)
		}
	case Compare:
		if c.Attr == "" {
			return fmt.Errorf("condition on an empty attribute name: %w", ErrInvalid)
		}
		switch c.Op {
		case OpEq, OpNe, OpLt, OpLe, OpGt, OpGe:
		default:
			return fmt.Errorf("operator %q: %w", c.Op, ErrInvalid)
		}
		if err := validateValue(c.Value, 0); err != nil {
			return err
		}
		if c.Op != OpEq && c.Op != OpNe {
			// DynamoDB refuses the expression itself ("Incorrect operand
			// type for operator") when the value cannot be ordered.
			switch c.Value.(type) {
			case *types.AttributeValueMemberN, *types.AttributeValueMemberS, *types.AttributeValueMemberB:
			default:
				return fmt.Errorf("operator %s needs a number, string or binary value, not %T: %w", c.Op, c.Value, ErrInvalid)
			}
		}
	case AndCond:
		if len(c) == 0 {
			return fmt.Errorf("empty AND: %w", ErrInvalid)
		}
		for _, x := range c {
			if err := validateCond(x); err != nil {
				return err
			}
		}
	case OrCond:
		if len(c) == 0 {
			return fmt.Errorf("empty OR: %w", ErrInvalid)
		}
		for _, x := range c {
			if err := validateCond(x); err != nil {
				return err
			}
		}
	default:
		return fmt.Errorf("condition %T: %w", c, ErrInvalid)
	}
	return nil
}

// ValidateQuery checks a Query's shape (the cursor is checked by
// DecodeCursor).
func ValidateQuery(q Query) error {
	switch q.Index {
	case "":
		if err := keyString(AttrPK, q.PK, MaxPKBytes); err != nil {
			return err
		}
	case IndexGSI1:
		if err := keyString(AttrGSI1PK, q.PK, MaxPKBytes); err != nil {
			return err
		}
	default:
		return fmt.Errorf("unknown index %q: %w", q.Index, ErrInvalid)
	}
	if q.Limit < 0 {
		return fmt.Errorf("negative limit: %w", ErrInvalid)
	}
	if q.SK.Op < SortAll || q.SK.Op > SortPrefix {
		return fmt.Errorf("sort condition %d: %w", q.SK.Op, ErrInvalid)
	}
	if q.SK.Op != SortAll {
		if err := keyString("sort key value", q.SK.Value, MaxSKBytes); err != nil {
			return err
		}
	}
	if q.SK.Op == SortBetween {
		if err := keyString("sort key value", q.SK.Value2, MaxSKBytes); err != nil {
			return err
		}
		if q.SK.Value > q.SK.Value2 {
			return fmt.Errorf("between with a lower bound above its upper bound: %w", ErrInvalid)
		}
	}
	return nil
}
