package ident

import (
	"fmt"
	"unicode"
)

// UnsafeRune returns the first character of s that a single line of text
// shown to people must not hold, and whether there is one: a control
// character (Unicode category Cc: NUL, line feed, escape…), a format
// character (Cf: zero-width space U+200B, the bidirectional overrides and
// isolates U+202A–U+202E and U+2066–U+2069, the soft hyphen…), or a line
// or paragraph separator (Zl, Zp). Such characters let a name or a
// description read differently from what it is: U+202E shows
// "https://example.com/\u202egpj.exe" as ending in "exe.jpg", U+200B
// makes two names that print alike differ. The two joiners, U+200C and
// U+200D, are format characters too but are kept: Persian and the Indic
// scripts need them to spell words, emoji sequences (👩‍💻) to draw one
// picture, and they neither reorder text nor end a line. Invalid UTF-8
// decodes as U+FFFD, which is not refused here (the callers check UTF-8
// first).
func UnsafeRune(s string) (rune, bool) {
	for _, r := range s {
		if r < 0x20 || r == 0x7f || (r >= 0x80 && unsafeWide(r)) {
			return r, true
		}
	}
	return 0, false
}

// unsafeWide is the table lookup for non-ASCII characters: Cc (C1
// controls), Cf, Zl and Zp.
func unsafeWide(r rune) bool {
	if r == '\u200c' || r == '\u200d' {
		return false
	}
	return unicode.In(r, unicode.Cc, unicode.Cf, unicode.Zl, unicode.Zp)
}

// UnsafeRuneError is the message of a refused character: the field's name
// and the character as U+XXXX, never the character itself (it would act on
// the reader's terminal or page as it would have in the field).
func UnsafeRuneError(field string, r rune) string {
	return fmt.Sprintf("%s must not contain control, format or line-separator characters; it contains U+%04X", field, r)
}
