// Package ident checks identifier-shaped strings (world ids, agent names,
// capabilities, key ids, action names, the parts of a media type) against
// a byte class and a length range.
//
// It exists instead of regular expressions because every Lambda pays for
// its package initialization at each cold start: regexp.MustCompile at
// package level cost a world function about 1.6 ms of INIT (counted
// repetitions such as {0,126} compile to hundreds of states), while a Shape
// is four 64-bit words per class built in a few nanoseconds, and matching is
// a single loop without allocation. Each package that swapped a pattern for
// a Shape keeps the pattern in its tests and fuzzes the two against each
// other.
package ident

// Class is a set of bytes. Only ASCII bytes are ever added (see Of), so a
// byte of a multi-byte UTF-8 sequence is never a member.
type Class [4]uint64

// Of returns the class of the bytes in spec, where a '-' between two bytes
// is a range ("a-z0-9_-": lowercase letters, digits, '_' and '-'; a '-' at
// either end is itself). It panics on a non-ASCII byte or a reversed range:
// classes are written in source, so that is a programming error.
func Of(spec string) Class {
	var c Class
	for i := 0; i < len(spec); i++ {
		lo, hi := spec[i], spec[i]
		if i+2 < len(spec) && spec[i+1] == '-' {
			hi = spec[i+2]
			i += 2
		}
		if hi >= 0x80 || lo > hi {
			panic("ident.Of: bad class " + spec)
		}
		for b := int(lo); b <= int(hi); b++ {
			c[b>>6] |= 1 << (b & 63)
		}
	}
	return c
}

// Has reports whether b is in the class.
func (c *Class) Has(b byte) bool { return c[b>>6]&(1<<(b&63)) != 0 }

// All reports whether every byte of s is in the class.
func (c *Class) All(s string) bool {
	for i := 0; i < len(s); i++ {
		if !c.Has(s[i]) {
			return false
		}
	}
	return true
}

// Shape is a string of Min to Max bytes whose first byte is in First and
// whose other bytes are in Rest: ^[First][Rest]{Min-1,Max-1}$ as a regular
// expression. Min is at least 1.
type Shape struct {
	First, Rest Class
	Min, Max    int
}

// Match reports whether s has the shape.
func (p *Shape) Match(s string) bool {
	if len(s) < p.Min || len(s) > p.Max || len(s) == 0 || !p.First.Has(s[0]) {
		return false
	}
	return p.Rest.All(s[1:])
}
