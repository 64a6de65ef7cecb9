package phrasebook_test

import (
	"slices"
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
//
// The pair is drawn from the book's languages by index, so every input the
// fuzzer makes reaches a supported pair instead of stopping at an unknown
// language code.
func FuzzTranslate(f *testing.F) {
	b := phrasebook.Default()
	langs := b.Languages()
	index := func(code string) uint8 { return uint8(slices.Index(langs, code)) }
	for _, s := range []string{"Hello, world!", "THANK YOU VERY MUCH", "l'eau", "  tabs\tand\nlines ", "123 — ¿qué?", "\xff\xfe", ""} {
		f.Add(s, index("en"), index("es"))
		f.Add(s, index("fr"), index("de"))
	}
	f.Fuzz(func(t *testing.T, text string, fromIdx, toIdx uint8) {
		from, to := langs[int(fromIdx)%len(langs)], langs[int(toIdx)%len(langs)]
		if from == to {
			to = langs[(int(toIdx)+1)%len(langs)]
		}
		if !b.Supports(from, to) {
			t.Fatalf("the book's own languages %s→%s are not a supported pair", from, to)
		}
		out, _ := b.Translate(text, from, to)
		if utf8.ValidString(text) && !utf8.ValidString(out) {
			t.Fatalf("Translate(%q) = %q, not UTF-8", text, out)
		}
		if !utf8.ValidString(text) {
			return
		}
		if keep := nonLetters(text); !isSubsequence(keep, nonLetters(out)) {
			t.Fatalf("Translate(%q, %s→%s) = %q lost punctuation or spacing: %q vs %q", text, from, to, out, keep, nonLetters(out))
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
