package delivery

import (
	"testing"

	"github.com/a2awire/a2awire/shared/ident/identtest"
)

// FuzzActionName holds the forwarded action's name check to the
// expression it replaced.
func FuzzActionName(f *testing.F) {
	identtest.Fuzz(f, []string{"move", "chat.say", "a_b-c.d", "0move", "Move", "m"},
		identtest.Case{Name: "actionName", Match: actionName.Match, Pattern: `^[a-z][a-z0-9_.-]{0,63}$`},
	)
}
