package dynamo

import (
	"context"
	"errors"
	"sync"
	"testing"
	"time"
)

// TestKeyedMutex checks mutual exclusion per key, independence across keys,
// a cancelled wait, and that the map empties when no one holds a key.
func TestKeyedMutex(t *testing.T) {
	k := keyedMutex{m: map[string]*keyLock{}}
	ctx := context.Background()
	if err := k.lock(ctx, "a"); err != nil {
		t.Fatal(err)
	}
	if err := k.lock(ctx, "b"); err != nil { // another key is not blocked
		t.Fatal(err)
	}
	cctx, cancel := context.WithTimeout(ctx, 20*time.Millisecond)
	defer cancel()
	if err := k.lock(cctx, "a"); !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("lock of a held key with an expiring context: %v", err)
	}
	k.unlock("b")

	var mu sync.Mutex
	inside := 0
	var wg sync.WaitGroup
	for range 20 {
		wg.Go(func() {
			if err := k.lock(ctx, "a"); err != nil {
				t.Error(err)
				return
			}
			mu.Lock()
			inside++
			if inside != 1 {
				t.Errorf("%d holders of one key", inside)
			}
			mu.Unlock()
			time.Sleep(time.Millisecond)
			mu.Lock()
			inside--
			mu.Unlock()
			k.unlock("a")
		})
	}
	time.Sleep(5 * time.Millisecond)
	k.unlock("a") // the first holder lets the waiters in
	wg.Wait()
	if len(k.m) != 0 {
		t.Fatalf("%d keys left in the map", len(k.m))
	}
}
