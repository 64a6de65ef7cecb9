package registry

import (
	"testing"

	"github.com/a2awire/a2awire/shared/ident/identtest"
)

// FuzzShapes holds the name checks to the expressions they replaced.
func FuzzShapes(f *testing.F) {
	identtest.Fuzz(f, []string{"a2awire-clean", "x", "ab", "-ab", "ab-", "Ab", "0123456789abcdefghijABCDEFGHIJ_-0123456789a"},
		identtest.Case{Name: "nameShape", Match: nameShape.Match, Pattern: `^[a-z0-9][a-z0-9-]{1,62}$`},
		identtest.Case{Name: "capShape", Match: capShape.Match, Pattern: `^[a-z0-9][a-z0-9-]{0,63}$`},
	)
}
