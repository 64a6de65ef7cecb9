// Package identtest holds a hand-written validator to the regular
// expression it replaced: a package that swapped a pattern compiled at
// start for an ident.Shape (or a loop) declares the pairs and fuzzes them
// with Fuzz, so the two can never drift apart.
package identtest

import (
	"regexp"
	"strings"
	"testing"
)

// Case is one validator and the expression it must agree with on every
// input.
type Case struct {
	Name    string
	Match   func(string) bool
	Pattern string
}

// Fuzz adds seeds to f — the given ones, plus runs of each byte that
// matters to an identifier at lengths around every limit up to 140 — and
// fuzzes every case against its compiled Pattern.
func Fuzz(f *testing.F, seeds []string, cases ...Case) {
	f.Helper()
	res := make([]*regexp.Regexp, len(cases))
	for i, c := range cases {
		res[i] = regexp.MustCompile(c.Pattern)
	}
	for _, s := range seeds {
		f.Add(s)
	}
	for _, b := range []string{"a", "Z", "0", "f", "g", "-", "_", ".", "/", "é"} {
		for _, n := range []int{0, 1, 2, 3, 42, 43, 44, 62, 63, 64, 65, 126, 127, 128, 140} {
			f.Add(strings.Repeat(b, n))
			f.Add("a" + strings.Repeat(b, n))
		}
	}
	f.Fuzz(func(t *testing.T, s string) {
		for i, c := range cases {
			if got, want := c.Match(s), res[i].MatchString(s); got != want {
				t.Fatalf("%s(%q) = %v; %s says %v", c.Name, s, got, c.Pattern, want)
			}
		}
	})
}
