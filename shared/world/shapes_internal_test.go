package world

import (
	"testing"

	"github.com/a2awire/a2awire/shared/ident/identtest"
)

// FuzzShapes holds the id checks to the expressions they replaced.
func FuzzShapes(f *testing.F) {
	identtest.Fuzz(f, []string{"lobby", "my-world", "-x", "a.b_c-d", "aw:sha256:" + hex64, "aw:sha256:" + hex64 + "0", "AW:sha256:" + hex64},
		identtest.Case{Name: "ValidID", Match: ValidID, Pattern: `^[a-z0-9][a-z0-9-]{0,62}$`},
		identtest.Case{Name: "actionNameShape", Match: actionNameShape.Match, Pattern: `^[a-z0-9][a-z0-9._-]{0,63}$`},
		identtest.Case{Name: "ValidAWNID", Match: ValidAWNID, Pattern: `^aw:sha256:[0-9a-f]{64}$`},
	)
}

const hex64 = "0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef"
