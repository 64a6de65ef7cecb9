package ledger

import (
	"context"
	"fmt"
	"sync"
	"time"

	"github.com/a2awire/a2awire/shared/store"
)

// keyedMutex is one mutex per key, created on demand and dropped when no
// one holds or waits for it, so it never grows with the number of accounts
// ever seen.
type keyedMutex struct {
	mu sync.Mutex
	m  map[string]*keyLock
}

type keyLock struct {
	sem  chan struct{} // capacity 1: a token in it means held
	refs int           // holders plus waiters
}

// lock takes key's mutex. A free mutex is taken at once; waiting for a held
// one ends when the context is done or when less than reserve is left
// before its deadline, so that a queued caller gives up while it can still
// answer (an error wrapping store.ErrUnavailable: nothing was written).
func (k *keyedMutex) lock(ctx context.Context, key string, reserve time.Duration) error {
	k.mu.Lock()
	l, ok := k.m[key]
	if !ok {
		l = &keyLock{sem: make(chan struct{}, 1)}
		k.m[key] = l
	}
	l.refs++
	k.mu.Unlock()

	select {
	case l.sem <- struct{}{}:
		return nil
	default:
	}
	wait := ctx
	if dl, ok := ctx.Deadline(); ok {
		var cancel context.CancelFunc
		wait, cancel = context.WithDeadline(ctx, dl.Add(-reserve))
		defer cancel()
	}
	select {
	case l.sem <- struct{}{}:
		return nil
	case <-wait.Done():
		k.release(key, l)
		return fmt.Errorf("queue wait (%w): %w", context.Cause(wait), store.ErrUnavailable)
	}
}

func (k *keyedMutex) unlock(key string) {
	k.mu.Lock()
	l := k.m[key]
	k.mu.Unlock()
	<-l.sem
	k.release(key, l)
}

func (k *keyedMutex) release(key string, l *keyLock) {
	k.mu.Lock()
	defer k.mu.Unlock()
	if l.refs--; l.refs == 0 {
		delete(k.m, key)
	}
}
