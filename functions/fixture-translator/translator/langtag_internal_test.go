package translator

import (
	"testing"

	"github.com/a2awire/a2awire/shared/ident/identtest"
)

// FuzzLangTag holds the language-tag check to the expression it replaced.
func FuzzLangTag(f *testing.F) {
	identtest.Fuzz(f, []string{"en", "pt-BR", "zh-Hant", "e", "engl", "en-", "-en", "en--US", "en-123456789", "en-12345678", "x-a-b-c"},
		identtest.Case{Name: "langTagShape", Match: langTagShape, Pattern: `^[A-Za-z]{2,3}(-[A-Za-z0-9]{1,8})*$`},
	)
}
