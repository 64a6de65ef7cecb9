package stack

import (
	"fmt"
	"maps"
	"math"
	"slices"
	"strconv"
	"strings"
)

// ParseReservedConcurrency reads the reservedConcurrency context value: an
// object {"<function>": n, ...} from cdk.json, or "<function>=n,..." from
// `cdk synth -c reservedConcurrency=...`. nil (unset) is no override.
func ParseReservedConcurrency(v any) (map[string]int, error) {
	out := map[string]int{}
	switch v := v.(type) {
	case nil:
		return out, nil
	case map[string]any:
		for _, name := range slices.Sorted(maps.Keys(v)) {
			n, err := ParseCount(v[name])
			if err != nil {
				return nil, fmt.Errorf("reservedConcurrency %s: %w", name, err)
			}
			out[name] = n
		}
	case string:
		for pair := range strings.SplitSeq(v, ",") {
			if strings.TrimSpace(pair) == "" {
				continue
			}
			name, count, ok := strings.Cut(pair, "=")
			if !ok {
				return nil, fmt.Errorf("reservedConcurrency %q: want <function>=<n>[,...]", pair)
			}
			n, err := ParseCount(count)
			if err != nil {
				return nil, fmt.Errorf("reservedConcurrency %s: %w", name, err)
			}
			out[strings.TrimSpace(name)] = n
		}
	default:
		return nil, fmt.Errorf("reservedConcurrency: want an object or <function>=<n>[,...], got %T", v)
	}
	return out, nil
}

// ParseCount reads a whole-number context value, given as a JSON number
// (cdk.json) or a string (-c key=value).
func ParseCount(v any) (int, error) {
	switch v := v.(type) {
	case float64:
		if v != math.Trunc(v) || v < 0 || v > math.MaxInt32 {
			return 0, fmt.Errorf("%v is not a whole number", v)
		}
		return int(v), nil
	case string:
		n, err := strconv.Atoi(strings.TrimSpace(v))
		if err != nil || n < 0 {
			return 0, fmt.Errorf("%q is not a whole number", v)
		}
		return n, nil
	}
	return 0, fmt.Errorf("%v (%T) is not a whole number", v, v)
}
