package store

import (
	"testing"

	"github.com/a2awire/a2awire/shared/ident/identtest"
)

// FuzzDecimal holds isDecimal to the expression it replaced.
func FuzzDecimal(f *testing.F) {
	identtest.Fuzz(f, []string{"1", "-0.5", ".5", "5.", "1e+3", "+1E-07", ".", "e5", "1e", "1e+", "--1", "1.2.3", "0x10", "1_000", " 1", "Inf", "NaN", "1/2"},
		identtest.Case{Name: "isDecimal", Match: isDecimal, Pattern: `^[+-]?([0-9]+\.?[0-9]*|\.[0-9]+)([eE][+-]?[0-9]+)?$`},
	)
}
