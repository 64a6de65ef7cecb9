package ident_test

import (
	"strings"
	"testing"
	"unicode"

	"github.com/mtibben/confusables"

	"github.com/a2awire/a2awire/shared/ident"
)

// TestSkeletonIsTR39OverNames holds Skeleton's table to the TR39 library
// over every character a registry name may hold: the library's skeleton,
// folded to lower case, except for our own w → vv.
func TestSkeletonIsTR39OverNames(t *testing.T) {
	for _, c := range "abcdefghijklmnopqrstuvwxyz0123456789-" {
		s := string(c)
		want := strings.ToLower(confusables.Skeleton(s))
		if c == 'w' {
			want = "vv"
		}
		if got := ident.Skeleton(s); got != want {
			t.Errorf("Skeleton(%q) = %q, TR39 (folded) %q", s, got, want)
		}
	}
	for _, pair := range [][2]string{
		{"a2awire-c1ean", "a2awire-clean"},
		{"rnail", "mail"},
		{"g00gle", "google"},
		{"vvorld", "world"},
		{"a2avvire-x", "a2awire-x"},
	} {
		if ident.Skeleton(pair[0]) != ident.Skeleton(pair[1]) {
			t.Errorf("%q and %q have skeletons %q and %q", pair[0], pair[1], ident.Skeleton(pair[0]), ident.Skeleton(pair[1]))
		}
	}
	if ident.Skeleton("clean") == ident.Skeleton("cleam") {
		t.Error("distinct names share a skeleton")
	}
}

func TestUnsafeRune(t *testing.T) {
	for _, s := range []string{"a\x00b", "tab\there", "line\nbreak", "\x1b[31m", "del\x7f", "\u0085next",
		"zero\u200bwidth", "https://example.com/\u202e", "iso\u2066late", "soft\u00adhyphen", "bom\ufeff",
		"line\u2028sep", "para\u2029sep", "\U000e0001tag"} {
		r, ok := ident.UnsafeRune(s)
		if !ok {
			t.Errorf("%q accepted", s)
			continue
		}
		if !unicode.In(r, unicode.Cc, unicode.Cf, unicode.Zl, unicode.Zp) {
			t.Errorf("%q: reported U+%04X, which is no control, format or separator", s, r)
		}
		if msg := ident.UnsafeRuneError("description", r); strings.ContainsRune(msg, r) || !strings.Contains(msg, "U+") {
			t.Errorf("message %q shows the character itself or no code point", msg)
		}
	}
	// The joiners U+200C and U+200D are kept (Persian, emoji sequences).
	for _, s := range []string{"", "Plain text.", "Ünïcödé — «quotes» 日本語 🎉", "a b", "emoji 👩\u200d💻 with ZWJ", "می\u200cخواهم"} {
		if r, ok := ident.UnsafeRune(s); ok {
			t.Errorf("%q refused at U+%04X", s, r)
		}
	}
}
