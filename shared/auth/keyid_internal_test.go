package auth

import (
	"testing"

	"github.com/a2awire/a2awire/shared/ident/identtest"
)

// FuzzValidKeyID holds the keyid check to the expression it replaced.
func FuzzValidKeyID(f *testing.F) {
	identtest.Fuzz(f, []string{"0123456789abcdefghijABCDEFGHIJ_-0123456789a", "0123456789abcdefghijABCDEFGHIJ_-0123456789", "0123456789abcdefghijABCDEFGHIJ_+0123456789a"},
		identtest.Case{Name: "ValidKeyID", Match: ValidKeyID, Pattern: `^[A-Za-z0-9_-]{43}$`},
	)
}
