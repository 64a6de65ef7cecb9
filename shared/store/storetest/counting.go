package storetest

import (
	"context"
	"sync/atomic"

	"github.com/a2awire/a2awire/shared/store"
)

// Counting wraps a store and counts the item API calls that reach it, so a
// domain's tests can pin the calls per operation identically on every engine
// (the DynamoDB-level figures come from the dynamo/capacity meter).
type Counting struct {
	store.Store
	gets, queries, writes atomic.Int64
	// items is how many items the Queries returned: for a Query without
	// a filter (the item API has none), the items DynamoDB read.
	items atomic.Int64
}

// Get counts and forwards.
func (c *Counting) Get(ctx context.Context, k store.Key) (store.Item, error) {
	c.gets.Add(1)
	return c.Store.Get(ctx, k)
}

// Query counts and forwards.
func (c *Counting) Query(ctx context.Context, q store.Query) (store.Page, error) {
	c.queries.Add(1)
	p, err := c.Store.Query(ctx, q)
	c.items.Add(int64(len(p.Items)))
	return p, err
}

// Write counts and forwards.
func (c *Counting) Write(ctx context.Context, actions ...store.Action) ([]store.Item, error) {
	c.writes.Add(1)
	return c.Store.Write(ctx, actions...)
}

// Take returns the calls since the last Take as {gets, queries, writes} and
// starts counting again.
func (c *Counting) Take() [3]int64 {
	return [3]int64{c.gets.Swap(0), c.queries.Swap(0), c.writes.Swap(0)}
}

// Items is how many items the Queries returned since the last TakeItems.
func (c *Counting) Items() int64 { return c.items.Load() }

// TakeItems returns Items and starts counting them again.
func (c *Counting) TakeItems() int64 { return c.items.Swap(0) }
