package embedded

import (
	"fmt"

	"github.com/a2awire/a2awire/shared/store"
)

// Order keys place the items of one partition in the order DynamoDB reads
// them: on the table by sk, on gsi1 by (gsi1sk, pk, sk). They are byte
// strings whose plain byte order is that order, so an engine keeps a
// partition sorted by comparing them (memory) or uses them as B+tree keys
// (bolt). Each component is escaped (0x00 → 0x00 0xFF; valid UTF-8 never
// holds 0xFF) and terminated by 0x00 0x01, which sorts below every escaped
// byte: a string sorts before every longer string it prefixes, exactly as
// the plain strings compare.

const (
	term    = "\x00\x01" // ends a component
	termEnd = "\x00\x02" // sorts after every key whose component ends here
)

// AppendComponent appends the order-preserving encoding of s to dst.
func AppendComponent(dst []byte, s string) []byte {
	dst = appendEscaped(dst, s)
	return append(dst, term...)
}

func appendEscaped(dst []byte, s string) []byte {
	for i := 0; i < len(s); i++ {
		if s[i] == 0 {
			dst = append(dst, 0, 0xFF)
		} else {
			dst = append(dst, s[i])
		}
	}
	return dst
}

// SplitComponent decodes the first component of an order key and returns it
// with the rest of the key.
func SplitComponent(b []byte) (string, []byte, error) {
	out := make([]byte, 0, len(b))
	for i := 0; i < len(b); i++ {
		if b[i] != 0 {
			out = append(out, b[i])
			continue
		}
		if i+1 >= len(b) {
			return "", nil, fmt.Errorf("truncated key component")
		}
		switch b[i+1] {
		case 0xFF:
			out = append(out, 0)
			i++
		case 0x01:
			return string(out), b[i+2:], nil
		default:
			return "", nil, fmt.Errorf("bad escape 0x00 0x%02x in key", b[i+1])
		}
	}
	return "", nil, fmt.Errorf("unterminated key component")
}

// TableOrder is the order key of an item within its table partition.
func TableOrder(sk string) string { return string(AppendComponent(nil, sk)) }

// IndexOrder is the order key of an item within its gsi1 partition.
func IndexOrder(gsi1sk, pk, sk string) string {
	b := AppendComponent(nil, gsi1sk)
	b = AppendComponent(b, pk)
	return string(AppendComponent(b, sk))
}

// IndexKeys returns an item's gsi1 partition and sort keys, and whether it
// appears in gsi1 at all: the index is sparse, holding only items with both
// (DynamoDB leaves out an item lacking either, or holding a non-string).
func IndexKeys(it store.Item) (pk, sk string, ok bool) {
	pk, sk = it.Str(store.AttrGSI1PK), it.Str(store.AttrGSI1SK)
	return pk, sk, pk != "" && sk != ""
}

// Bounds is the slice of a partition a query reads, in order-key space: Lo
// inclusive, Hi exclusive, Hi "" meaning the end of the partition.
type Bounds struct {
	Lo, Hi string
}

// In reports whether an order key lies within b.
func (b Bounds) In(key string) bool {
	return key >= b.Lo && (b.Hi == "" || key < b.Hi)
}

// Scan walks the items of one partition within b in order (reversed when
// backward), calling fn with a copy of each until fn returns false. index is
// "" for the table or store.IndexGSI1.
type Scan func(index, pk string, b Bounds, backward bool, fn func(store.Item) bool) error

// Query runs q over scan: it validates q, turns its sort condition and cursor
// into bounds, and ends the page as store.Store.Query says (DynamoDB Local's
// behaviour): after q.Limit items, with a cursor even if nothing follows;
// when the items on it total store.MaxPageBytes or more and another item
// matches, with a cursor (the item that crosses 1 MB stays on the page);
// at the end of the partition, without one.
func Query(q store.Query, cursors store.Cursors, scan Scan) (store.Page, error) {
	if err := store.ValidateQuery(q); err != nil {
		return store.Page{}, err
	}
	b := sortBounds(q.SK)
	if q.Cursor != "" {
		p, err := cursors.Decode(q)
		if err != nil {
			return store.Page{}, err
		}
		at := TableOrder(p.SK)
		if q.Index == store.IndexGSI1 {
			at = IndexOrder(p.GSI1SK, p.PK, p.SK)
		}
		if q.Backward {
			if b.Hi == "" || at < b.Hi {
				b.Hi = at
			}
		} else if after := at + "\x00"; after > b.Lo {
			b.Lo = after
		}
	}
	page := store.Page{Items: []store.Item{}}
	if b.Hi != "" && b.Lo >= b.Hi {
		return page, nil
	}
	size, cut := 0, false
	err := scan(q.Index, q.PK, b, q.Backward, func(it store.Item) bool {
		if size >= store.MaxPageBytes {
			cut = true // another item matches: the page is full
			return false
		}
		page.Items = append(page.Items, it)
		size += store.ItemSize(it)
		if q.Limit > 0 && len(page.Items) == q.Limit {
			cut = true
			return false
		}
		return true
	})
	if err != nil {
		return store.Page{}, err
	}
	if cut {
		page.Cursor = cursors.Encode(q, store.PositionOf(q, page.Items[len(page.Items)-1]))
	}
	return page, nil
}

// sortBounds turns a sort-key condition into bounds on the first component
// of the order key.
func sortBounds(c store.SortCond) Bounds {
	first := func(v string) string { return string(appendEscaped(nil, v)) }
	switch c.Op {
	case store.SortEq:
		return Bounds{Lo: first(c.Value) + term, Hi: first(c.Value) + termEnd}
	case store.SortLT:
		return Bounds{Hi: first(c.Value) + term}
	case store.SortLE:
		return Bounds{Hi: first(c.Value) + termEnd}
	case store.SortGT:
		return Bounds{Lo: first(c.Value) + termEnd}
	case store.SortGE:
		return Bounds{Lo: first(c.Value) + term}
	case store.SortBetween:
		return Bounds{Lo: first(c.Value) + term, Hi: first(c.Value2) + termEnd}
	case store.SortPrefix:
		p := first(c.Value)
		return Bounds{Lo: p, Hi: prefixEnd(p)}
	}
	return Bounds{}
}

// prefixEnd is the smallest string above every string starting with p, or
// "" when there is none.
func prefixEnd(p string) string {
	b := []byte(p)
	for i := len(b) - 1; i >= 0; i-- {
		if b[i] < 0xFF {
			b[i]++
			return string(b[:i+1])
		}
	}
	return ""
}
