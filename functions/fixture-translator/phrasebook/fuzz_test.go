package phrasebook_test

import (
	"strings"
	"testing"
	"unicode"
	"unicode/utf8"

	"github.com/a2awire/a2awire/functions/fixture-translator/phrasebook"
)

// FuzzTranslate decodes arbitrary buyer text into tokens and back: it must
// never panic, always return valid UTF-8 for valid input, keep every
// non-letter character of the source (punctuation, digits, spacing) in order,
// and leave text without letters untouched.
func FuzzTranslate(f *testing.F) {
	for _, s := range []string{"Hello, world!", "THANK YOU VERY MUCH", "l'eau", "  tabs\tand\nlines ", "123 — ¿qué?", "\xff\xfe", ""} {
		f.Add(s, "en", "es")
		f.Add(s, "fr", "de")
	}
	b := phrasebook.Default()
	f.Fuzz(func(t *testing.T, text, from, to string) {
		if !b.Supports(from, to) {
			return
		}
		out, _ := b.Translate(text, from, to)
		if utf8.ValidString(text) && !utf8.ValidString(out) {
			t.Fatalf("Translate(%q) = %q, not UTF-8", text, out)
		}
		if !utf8.ValidString(text) {
			return
		}
		if keep := nonLetters(text); !isSubsequence(keep, nonLetters(out)) {
			t.Fatalf("Translate(%q) = %q lost punctuation or spacing: %q vs %q", text, out, keep, nonLetters(out))
		}
		if strings.IndexFunc(text, unicode.IsLetter) < 0 && out != text {
			t.Fatalf("Translate(%q) = %q, want it unchanged", text, out)
		}
	})
}

// nonLetters keeps the characters a translation must carry over: digits,
// punctuation and symbols (spacing inside phrases may change).
func nonLetters(s string) string {
	return strings.Map(func(r rune) rune {
		if unicode.IsLetter(r) || unicode.IsMark(r) || unicode.IsSpace(r) || r == '\'' || r == '’' || r == '-' {
			return -1
		}
		return r
	}, s)
}

func isSubsequence(sub, s string) bool {
	for _, r := range sub {
		i := strings.IndexRune(s, r)
		if i < 0 {
			return false
		}
		s = s[i+utf8.RuneLen(r):]
	}
	return true
}
