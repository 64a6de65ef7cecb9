// Package roundtrips measures how many store round trips a piece of work
// waits for one after another: its critical path, which is what Lambda
// bills as duration and what a client waits for, where the call count
// (shared/store/dynamo/capacity) says what DynamoDB bills.
//
// A call's depth is one more than the deepest call that had finished when
// it started; calls made side by side (none finished before the other
// began) share a depth. The work's sequential round trips are the deepest
// call's depth. Cost tests and the bench wrap the store under the domain
// with Wrap, run one request, and read Take.
package roundtrips

import (
	"context"
	"sync"
	"time"

	"github.com/a2awire/a2awire/shared/store"
)

// Store is a store.Store that records the depth of each call.
type Store struct {
	inner store.Store
	delay time.Duration

	mu       sync.Mutex
	finished int // deepest call finished since the last Take
	deepest  int // deepest call started since the last Take
}

// Wrap returns st measured.
func Wrap(st store.Store) *Store { return &Store{inner: st} }

// WithDelay returns st measured, each call held d before it is made, as a
// store in another machine would: calls a domain starts side by side then
// all start before any ends, however the goroutines are scheduled, so the
// depth measured is the code's and not the scheduler's.
func WithDelay(st store.Store, d time.Duration) *Store { return &Store{inner: st, delay: d} }

// Take returns the sequential round trips since the last Take and starts
// counting afresh.
func (s *Store) Take() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	n := s.deepest
	s.finished, s.deepest = 0, 0
	return n
}

// call runs f at the depth its start gives it.
func (s *Store) call(f func()) {
	s.mu.Lock()
	d := s.finished + 1
	s.deepest = max(s.deepest, d)
	s.mu.Unlock()
	if s.delay > 0 {
		time.Sleep(s.delay)
	}
	f()
	s.mu.Lock()
	s.finished = max(s.finished, d)
	s.mu.Unlock()
}

// Get is the inner store's Get, measured.
func (s *Store) Get(ctx context.Context, k store.Key) (it store.Item, err error) {
	s.call(func() { it, err = s.inner.Get(ctx, k) })
	return it, err
}

// Query is the inner store's Query, measured.
func (s *Store) Query(ctx context.Context, q store.Query) (p store.Page, err error) {
	s.call(func() { p, err = s.inner.Query(ctx, q) })
	return p, err
}

// Write is the inner store's Write, measured.
func (s *Store) Write(ctx context.Context, actions ...store.Action) (its []store.Item, err error) {
	s.call(func() { its, err = s.inner.Write(ctx, actions...) })
	return its, err
}
