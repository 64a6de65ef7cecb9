package inbox

import (
	"testing"

	"github.com/a2awire/a2awire/shared/ident/identtest"
)

// FuzzMediaType holds isMediaType to the expression it replaced.
func FuzzMediaType(f *testing.F) {
	identtest.Fuzz(f, []string{"text/plain", "application/vnd.a2a+json", "a/b/c", "/x", "x/", "text/plain; charset=utf-8", "Text/HTML", "a!#$&^_.+-/b"},
		identtest.Case{Name: "isMediaType", Match: isMediaType, Pattern: `^[A-Za-z0-9][A-Za-z0-9!#$&^_.+-]{0,126}/[A-Za-z0-9][A-Za-z0-9!#$&^_.+-]{0,126}$`},
	)
}
