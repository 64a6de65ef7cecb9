package cloud

import (
	"encoding/json"
	"fmt"
	"strings"
)

// Filter is a trigger's event filtering: the patterns Lambda's
// FilterCriteria holds, matched against an event record's JSON as Lambda
// does. A record passes when any pattern matches it; with no patterns
// every record passes.
//
// The subset of Lambda's pattern syntax understood is what the route
// table's filters produce plus its plain neighbours: nested objects, arrays
// of literal values (strings, numbers, booleans, null), and the operators
// prefix, suffix, exists and anything-but (a literal or a list of
// literals). NewFilter refuses anything else, so a pattern the harness
// cannot apply exactly is an error at start-up, not a silent difference.
type Filter struct {
	patterns []map[string]any
}

// NewFilter compiles patterns (JSON objects).
func NewFilter(patterns []string) (*Filter, error) {
	f := &Filter{}
	for _, p := range patterns {
		var m map[string]any
		if err := json.Unmarshal([]byte(p), &m); err != nil || m == nil {
			return nil, fmt.Errorf("filter pattern %s: not a JSON object", p)
		}
		if err := checkPattern(m); err != nil {
			return nil, fmt.Errorf("filter pattern %s: %w", p, err)
		}
		f.patterns = append(f.patterns, m)
	}
	return f, nil
}

// Match reports whether the record (its JSON as the function would receive
// it) passes the filter.
func (f *Filter) Match(record []byte) (bool, error) {
	if f == nil || len(f.patterns) == 0 {
		return true, nil
	}
	var rec map[string]any
	if err := json.Unmarshal(record, &rec); err != nil {
		return false, fmt.Errorf("filter: record is not a JSON object: %w", err)
	}
	for _, p := range f.patterns {
		if matchObject(p, rec) {
			return true, nil
		}
	}
	return false, nil
}

// MatchValue is Match on a record that is not yet JSON.
func (f *Filter) MatchValue(record any) (bool, error) {
	if f == nil || len(f.patterns) == 0 {
		return true, nil
	}
	b, err := json.Marshal(record)
	if err != nil {
		return false, fmt.Errorf("filter: encode record: %w", err)
	}
	return f.Match(b)
}

// checkPattern refuses what matchObject does not implement.
func checkPattern(p map[string]any) error {
	if len(p) == 0 {
		return fmt.Errorf("empty object")
	}
	for k, v := range p {
		switch v := v.(type) {
		case map[string]any:
			if err := checkPattern(v); err != nil {
				return fmt.Errorf("%s: %w", k, err)
			}
		case []any:
			if len(v) == 0 {
				return fmt.Errorf("%s: empty list matches nothing", k)
			}
			for _, c := range v {
				if err := checkCondition(c); err != nil {
					return fmt.Errorf("%s: %w", k, err)
				}
			}
		default:
			return fmt.Errorf("%s: a field's value must be an object or a list", k)
		}
	}
	return nil
}

func checkCondition(c any) error {
	op, ok := c.(map[string]any)
	if !ok {
		return nil // a literal
	}
	if len(op) != 1 {
		return fmt.Errorf("an operator object has one key: %v", op)
	}
	for name, arg := range op {
		switch name {
		case "prefix", "suffix":
			if _, ok := arg.(string); !ok {
				return fmt.Errorf("%s takes a string", name)
			}
		case "exists":
			if _, ok := arg.(bool); !ok {
				return fmt.Errorf("exists takes a boolean")
			}
		case "anything-but":
			switch a := arg.(type) {
			case []any:
				for _, x := range a {
					if _, isOp := x.(map[string]any); isOp {
						return fmt.Errorf("anything-but takes literals")
					}
				}
			case map[string]any:
				return fmt.Errorf("anything-but takes literals")
			}
		default:
			return fmt.Errorf("operator %q is not supported by the local harness", name)
		}
	}
	return nil
}

// matchObject: every field of the pattern matches the record's field of
// that name.
func matchObject(p, rec map[string]any) bool {
	for k, pv := range p {
		rv, present := rec[k]
		switch pv := pv.(type) {
		case map[string]any:
			sub, ok := rv.(map[string]any)
			if !present || !ok || !matchObject(pv, sub) {
				return false
			}
		case []any:
			if !matchField(pv, rv, present) {
				return false
			}
		}
	}
	return true
}

// matchField: any condition matches the value (or, for a list value, any
// of its elements).
func matchField(conds []any, v any, present bool) bool {
	for _, c := range conds {
		if op, ok := c.(map[string]any); ok {
			if ex, ok := op["exists"]; ok {
				if ex.(bool) == present {
					return true
				}
				continue
			}
		}
		if !present {
			continue
		}
		vals := []any{v}
		if l, ok := v.([]any); ok {
			vals = l
		}
		for _, x := range vals {
			if matchCondition(c, x) {
				return true
			}
		}
	}
	return false
}

func matchCondition(c, v any) bool {
	op, ok := c.(map[string]any)
	if !ok {
		return literalEqual(c, v)
	}
	for name, arg := range op {
		switch name {
		case "prefix":
			s, ok := v.(string)
			return ok && strings.HasPrefix(s, arg.(string))
		case "suffix":
			s, ok := v.(string)
			return ok && strings.HasSuffix(s, arg.(string))
		case "anything-but":
			but, ok := arg.([]any)
			if !ok {
				but = []any{arg}
			}
			for _, b := range but {
				if literalEqual(b, v) {
					return false
				}
			}
			return true
		}
	}
	return false
}

// literalEqual compares JSON scalars; objects and lists never equal a
// literal.
func literalEqual(a, b any) bool {
	switch a := a.(type) {
	case string, bool, float64, nil:
		switch b.(type) {
		case string, bool, float64, nil:
			return a == b
		}
	}
	return false
}
