package ident

import "strings"

// Skeleton returns the confusable skeleton of a name made of a-z, 0-9 and
// '-' (the registry's names): two names with the same skeleton read alike
// ("a2awire-c1ean" and "a2awire-clean", "rnail" and "mail").
//
// It is Unicode TR39's skeleton (confusables.txt, the mapping behind
// github.com/mtibben/confusables) restricted to that alphabet, then folded
// to lower case, plus one pair of our own:
//
//	m → rn   TR39
//	1 → l    TR39
//	0 → o    TR39 maps 0 to O; the fold makes it o, since names are lower case
//	w → vv   not in TR39; "vv" reads as "w" in most fonts
//
// Over a-z, 0-9 and '-' those TR39 mappings are the only ones (NFD changes
// no ASCII character), so the table is TR39's skeleton there, without
// linking the library's 6,000-entry map into every function that imports
// the registry (it would be built at each cold start). ident's tests hold
// the table to the library. Characters outside the alphabet are kept as
// they are.
func Skeleton(name string) string {
	if !strings.ContainsAny(name, "m10w") {
		return name
	}
	var b strings.Builder
	b.Grow(len(name) + 8)
	for i := 0; i < len(name); i++ {
		switch c := name[i]; c {
		case 'm':
			b.WriteString("rn")
		case '1':
			b.WriteByte('l')
		case '0':
			b.WriteByte('o')
		case 'w':
			b.WriteString("vv")
		default:
			b.WriteByte(c)
		}
	}
	return b.String()
}
