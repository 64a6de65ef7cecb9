package dynamo

import (
	"fmt"
	"strconv"

	"github.com/aws/aws-sdk-go-v2/feature/dynamodb/expression"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"

	"github.com/a2awire/a2awire/shared/store"
)

// names hands the expression builder a stand-in for every attribute name
// and maps the builder's placeholders back to the real names afterwards.
//
// The builder parses names as document paths: "a.b" (with Name) or "a[0]"
// (even with NameNoDotSplit) would address a nested value, not the
// top-level attribute the item model means. Stand-ins ("n0", "n1", …) are
// plain identifiers the builder cannot misread; every name still reaches
// DynamoDB only as an ExpressionAttributeNames placeholder value, so
// reserved words and odd characters never meet the expression parser.
type names struct {
	stand map[string]string // real name → stand-in
	real  map[string]string // stand-in → real name
}

func newNames() *names {
	return &names{stand: map[string]string{}, real: map[string]string{}}
}

// of returns the name builder for attribute name.
func (n *names) of(name string) expression.NameBuilder {
	s, ok := n.stand[name]
	if !ok {
		s = "n" + strconv.Itoa(len(n.stand))
		n.stand[name], n.real[s] = s, name
	}
	return expression.Name(s)
}

// key returns the key builder for key attribute name (pk, sk, gsi1pk,
// gsi1sk: plain identifiers, but mapped the same way for uniformity).
func (n *names) key(name string) expression.KeyBuilder {
	s, ok := n.stand[name]
	if !ok {
		s = "n" + strconv.Itoa(len(n.stand))
		n.stand[name], n.real[s] = s, name
	}
	return expression.Key(s)
}

// built is one action's or query's expressions, ready for a request.
type built struct {
	cond, update, keyCond *string
	names                 map[string]string
	values                map[string]types.AttributeValue
}

// build runs the builder and swaps the real names back in. Empty maps become
// nil: DynamoDB refuses an empty ExpressionAttributeValues.
func (n *names) build(b expression.Builder, hasCond, hasUpdate, hasKey bool) (built, error) {
	if !hasCond && !hasUpdate && !hasKey {
		return built{}, nil
	}
	e, err := b.Build()
	if err != nil {
		return built{}, fmt.Errorf("build expression: %v: %w", err, store.ErrInvalid)
	}
	out := built{values: e.Values()}
	if hasCond {
		out.cond = e.Condition()
	}
	if hasUpdate {
		out.update = e.Update()
	}
	if hasKey {
		out.keyCond = e.KeyCondition()
	}
	if ph := e.Names(); len(ph) > 0 {
		out.names = make(map[string]string, len(ph))
		for p, s := range ph {
			real, ok := n.real[s]
			if !ok {
				return built{}, fmt.Errorf("expression name %q has no attribute", s)
			}
			out.names[p] = real
		}
	}
	if len(out.values) == 0 {
		out.values = nil
	}
	return out, nil
}

// condition converts a store.Cond tree (validated by store.ValidateWrite)
// into the builder's form.
func (n *names) condition(c store.Cond) (expression.ConditionBuilder, error) {
	switch c := c.(type) {
	case store.AttrExists:
		if c.Not {
			return expression.AttributeNotExists(n.of(c.Attr)), nil
		}
		return expression.AttributeExists(n.of(c.Attr)), nil
	case store.Compare:
		name, v := n.of(c.Attr), expression.Value(c.Value)
		switch c.Op {
		case store.OpEq:
			return name.Equal(v), nil
		case store.OpNe:
			return name.NotEqual(v), nil
		case store.OpLt:
			return name.LessThan(v), nil
		case store.OpLe:
			return name.LessThanEqual(v), nil
		case store.OpGt:
			return name.GreaterThan(v), nil
		case store.OpGe:
			return name.GreaterThanEqual(v), nil
		}
		return expression.ConditionBuilder{}, fmt.Errorf("operator %q: %w", c.Op, store.ErrInvalid)
	case store.AndCond:
		return n.compound(c, expression.And)
	case store.OrCond:
		return n.compound(c, expression.Or)
	}
	return expression.ConditionBuilder{}, fmt.Errorf("condition %T: %w", c, store.ErrInvalid)
}

func (n *names) compound(cs []store.Cond, join func(l, r expression.ConditionBuilder, o ...expression.ConditionBuilder) expression.ConditionBuilder) (expression.ConditionBuilder, error) {
	if len(cs) == 0 {
		return expression.ConditionBuilder{}, fmt.Errorf("empty AND/OR: %w", store.ErrInvalid)
	}
	bs := make([]expression.ConditionBuilder, len(cs))
	for i, c := range cs {
		b, err := n.condition(c)
		if err != nil {
			return expression.ConditionBuilder{}, err
		}
		bs[i] = b
	}
	if len(bs) == 1 {
		return bs[0], nil
	}
	return join(bs[0], bs[1], bs[2:]...), nil
}

// actionExpr builds an action's condition and, for an Update, its update
// expression.
func actionExpr(a store.Action) (built, error) {
	n := newNames()
	b := expression.NewBuilder()
	hasCond := a.If != nil
	if hasCond {
		c, err := n.condition(a.If)
		if err != nil {
			return built{}, err
		}
		b = b.WithCondition(c)
	}
	hasUpdate := a.Kind == store.UpdateAction
	if hasUpdate {
		var u expression.UpdateBuilder
		// Sorted names: the same action always yields the same request,
		// which keeps a transaction's retries byte-identical (its client
		// request token requires that) and logs comparable.
		for _, name := range store.SortedNames(a.Set) {
			u = u.Set(n.of(name), expression.Value(a.Set[name]))
		}
		adds := make(store.Item, len(a.Add))
		for name, d := range a.Add {
			adds[name] = store.N(d)
		}
		for _, name := range store.SortedNames(adds) {
			u = u.Add(n.of(name), expression.Value(adds[name]))
		}
		for _, name := range a.Remove {
			u = u.Remove(n.of(name))
		}
		b = b.WithUpdate(u)
	}
	return n.build(b, hasCond, hasUpdate, false)
}

// keyExpr builds a query's key condition.
func keyExpr(q store.Query) (built, error) {
	pkName, skName := store.AttrPK, store.AttrSK
	if q.Index == store.IndexGSI1 {
		pkName, skName = store.AttrGSI1PK, store.AttrGSI1SK
	}
	n := newNames()
	pk := expression.KeyEqual(n.key(pkName), expression.Value(store.S(q.PK)))
	sk := n.key(skName)
	v := expression.Value(store.S(q.SK.Value))
	switch q.SK.Op {
	case store.SortAll:
	case store.SortEq:
		pk = pk.And(expression.KeyEqual(sk, v))
	case store.SortLT:
		pk = pk.And(expression.KeyLessThan(sk, v))
	case store.SortLE:
		pk = pk.And(expression.KeyLessThanEqual(sk, v))
	case store.SortGT:
		pk = pk.And(expression.KeyGreaterThan(sk, v))
	case store.SortGE:
		pk = pk.And(expression.KeyGreaterThanEqual(sk, v))
	case store.SortBetween:
		pk = pk.And(expression.KeyBetween(sk, v, expression.Value(store.S(q.SK.Value2))))
	case store.SortPrefix:
		pk = pk.And(expression.KeyBeginsWith(sk, q.SK.Value))
	default:
		return built{}, fmt.Errorf("sort condition %d: %w", q.SK.Op, store.ErrInvalid)
	}
	return n.build(expression.NewBuilder().WithKeyCondition(pk), false, false, true)
}
