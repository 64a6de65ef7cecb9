package storetest

import (
	"context"
	"sync"

	"github.com/a2awire/a2awire/shared/store"
)

// BeforeWrite wraps a store and runs Hook once, just before the first
// Write that passes it: a test puts a racing request exactly between a
// domain's reads and its write.
type BeforeWrite struct {
	store.Store
	Hook func()
	once sync.Once
}

// Write runs Hook the first time, then writes.
func (b *BeforeWrite) Write(ctx context.Context, acts ...store.Action) ([]store.Item, error) {
	b.once.Do(b.Hook)
	return b.Store.Write(ctx, acts...)
}
