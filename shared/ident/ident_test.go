package ident_test

import (
	"regexp"
	"testing"

	"github.com/a2awire/a2awire/shared/ident"
	"github.com/a2awire/a2awire/shared/ident/identtest"
)

// TestOf: ranges, literal '-' at either end, and nothing outside the spec.
func TestOf(t *testing.T) {
	c := ident.Of("a-c0-1_-")
	for b := 0; b < 256; b++ {
		want := (b >= 'a' && b <= 'c') || b == '0' || b == '1' || b == '_' || b == '-'
		if got := c.Has(byte(b)); got != want {
			t.Errorf("Has(%q) = %v, want %v", byte(b), got, want)
		}
	}
	lead := ident.Of("-a")
	if !lead.Has('-') || !lead.Has('a') || lead.Has('b') {
		t.Error(`Of("-a") is not {'-', 'a'}`)
	}
}

// TestOfPanicsOnBadSpec: a reversed range or a non-ASCII byte is a
// programming error, not a silently wrong class.
func TestOfPanicsOnBadSpec(t *testing.T) {
	for _, spec := range []string{"z-a", "é"} {
		func() {
			defer func() {
				if recover() == nil {
					t.Errorf("Of(%q) did not panic", spec)
				}
			}()
			ident.Of(spec)
		}()
	}
}

// shapes pairs Shapes with the regular expressions they stand for.
var shapes = []struct {
	shape ident.Shape
	re    *regexp.Regexp
}{
	{ident.Shape{First: ident.Of("a-z0-9"), Rest: ident.Of("a-z0-9-"), Min: 1, Max: 63}, regexp.MustCompile(`^[a-z0-9][a-z0-9-]{0,62}$`)},
	{ident.Shape{First: ident.Of("a-z0-9"), Rest: ident.Of("a-z0-9-"), Min: 2, Max: 63}, regexp.MustCompile(`^[a-z0-9][a-z0-9-]{1,62}$`)},
	{ident.Shape{First: ident.Of("A-Za-z0-9_-"), Rest: ident.Of("A-Za-z0-9_-"), Min: 3, Max: 3}, regexp.MustCompile(`^[A-Za-z0-9_-]{3}$`)},
	// The network's names (names.go), each defined once.
	{ident.WorldID, regexp.MustCompile(`^[a-z0-9][a-z0-9-]{0,62}$`)},
	{ident.ActionName, regexp.MustCompile(`^[a-z0-9][a-z0-9._-]{0,63}$`)},
	{ident.AgentName, regexp.MustCompile(`^[a-z0-9][a-z0-9-]{1,62}$`)},
	{ident.Capability, regexp.MustCompile(`^[a-z0-9][a-z0-9-]{0,63}$`)},
	{ident.KeyID, regexp.MustCompile(`^[A-Za-z0-9_-]{43}$`)},
	{ident.AWNIDHex, regexp.MustCompile(`^[0-9a-f]{64}$`)},
	{ident.MediaTypeName, regexp.MustCompile(`^[A-Za-z0-9][A-Za-z0-9!#$&^_.+-]{0,126}$`)},
}

// TestShapeMatch: the boundaries of each shape, as its expression decides them.
func TestShapeMatch(t *testing.T) {
	for _, s := range []string{"", "a", "ab", "-a", "a-", "A", "abc", "a_c", "é", "a\n", "a\x00", "2x", "x.y", "0", "a+b",
		"a23456789012345678901234567890123456789012345678901234567890123",
		"a234567890123456789012345678901234567890123456789012345678901234"} {
		for i, p := range shapes {
			if got, want := p.shape.Match(s), p.re.MatchString(s); got != want {
				t.Errorf("shape %d (%s).Match(%q) = %v, the expression says %v", i, p.re, s, got, want)
			}
		}
	}
}

// FuzzShape holds every shape to its expression on any input.
func FuzzShape(f *testing.F) {
	cases := make([]identtest.Case, len(shapes))
	for i, p := range shapes {
		cases[i] = identtest.Case{Name: p.re.String(), Match: p.shape.Match, Pattern: p.re.String()}
	}
	identtest.Fuzz(f, []string{"a-b", "A_b", "\xff", "a\n"}, cases...)
}

func BenchmarkShape(b *testing.B) {
	s := "my-world-01"
	b.Run("shape", func(b *testing.B) {
		for b.Loop() {
			shapes[0].shape.Match(s)
		}
	})
	b.Run("regexp", func(b *testing.B) {
		for b.Loop() {
			shapes[0].re.MatchString(s)
		}
	})
}
