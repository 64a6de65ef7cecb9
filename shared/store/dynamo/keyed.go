package dynamo

import (
	"context"
	"sync"
)

// keyedMutex is one mutex per key, created on demand and dropped when no
// one holds or waits for it, so it never grows with the number of accounts
// ever seen. Waiting honours the context.
type keyedMutex struct {
	mu sync.Mutex
	m  map[string]*keyLock
}

type keyLock struct {
	sem  chan struct{} // capacity 1: a token in it means held
	refs int           // holders plus waiters
}

func (k *keyedMutex) lock(ctx context.Context, key string) error {
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
	case <-ctx.Done():
		k.release(key, l)
		return ctx.Err()
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
