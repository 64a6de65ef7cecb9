package delivery

import (
	"testing"

	"github.com/a2awire/a2awire/shared/ident/identtest"
)

// FuzzActionName holds the forwarded action's name check to the
// expression it replaced.
func FuzzActionName(f *testing.F) {
	identtest.Fuzz(f, []string{"move", "chat.say", "a_b-c.d", "0move", "2x", "Move", "m"},
		identtest.Case{Name: "actionName", Match: actionName.Match, Pattern: `^[a-z0-9][a-z0-9._-]{0,63}$`},
	)
}
