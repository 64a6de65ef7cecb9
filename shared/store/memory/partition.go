package memory

import (
	"sort"

	"github.com/a2awire/a2awire/shared/store"
	"github.com/a2awire/a2awire/shared/store/internal/embedded"
)

// partition is one partition of the table or of gsi1: items sorted by their
// order key (see embedded.TableOrder and IndexOrder). A sorted slice keeps
// lookups at a binary search and the common append at the end cheap.
type partition struct {
	keys  []string
	items []store.Item
}

func (p *partition) len() int { return len(p.keys) }

func (p *partition) find(key string) (int, bool) {
	i := sort.SearchStrings(p.keys, key)
	return i, i < len(p.keys) && p.keys[i] == key
}

func (p *partition) get(key string) store.Item {
	if i, ok := p.find(key); ok {
		return p.items[i]
	}
	return nil
}

func (p *partition) put(key string, it store.Item) {
	i, ok := p.find(key)
	if ok {
		p.items[i] = it
		return
	}
	p.keys = append(p.keys, "")
	p.items = append(p.items, nil)
	copy(p.keys[i+1:], p.keys[i:])
	copy(p.items[i+1:], p.items[i:])
	p.keys[i], p.items[i] = key, it
}

func (p *partition) delete(key string) {
	i, ok := p.find(key)
	if !ok {
		return
	}
	p.keys = append(p.keys[:i], p.keys[i+1:]...)
	p.items = append(p.items[:i], p.items[i+1:]...)
	p.keys[len(p.keys):cap(p.keys)][0] = "" // drop references past the end
	p.items[len(p.items):cap(p.items)][0] = nil
}

// scan calls fn with the items within b, in order or reversed, until fn
// returns false.
func (p *partition) scan(b embedded.Bounds, backward bool, fn func(store.Item) bool) {
	lo := sort.SearchStrings(p.keys, b.Lo)
	hi := len(p.keys)
	if b.Hi != "" {
		hi = sort.SearchStrings(p.keys, b.Hi)
	}
	if backward {
		for i := hi - 1; i >= lo; i-- {
			if !fn(p.items[i]) {
				return
			}
		}
		return
	}
	for i := lo; i < hi; i++ {
		if !fn(p.items[i]) {
			return
		}
	}
}
