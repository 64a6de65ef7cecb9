package cloud

import (
	"context"
	"sync"
	"testing"
	"time"
)

func idleHandlers(e *Entry) int {
	e.mu.Lock()
	defer e.mu.Unlock()
	return len(e.idle)
}

// TestEntryWorkersFollowPeakConcurrency: an entry keeps about as many
// workers as it had concurrent invocations, reuses them, and stops those
// not needed for handlerIdle once invocations resume.
func TestEntryWorkersFollowPeakConcurrency(t *testing.T) {
	var mu sync.Mutex
	now := time.Unix(1e9, 0)
	// The waiting invocations all return once all 8 are running, so 8
	// run at once however slowly the goroutines get started.
	var inside sync.WaitGroup
	inside.Add(8)
	e := NewEntry("echo", func(ctx context.Context, in struct{ Wait bool }) (string, error) {
		if in.Wait {
			inside.Done()
			inside.Wait()
		}
		return "ok", nil
	}, time.Minute)
	e.now = func() time.Time { mu.Lock(); defer mu.Unlock(); return now }
	var wg sync.WaitGroup
	for range 8 {
		wg.Go(func() {
			if _, err := e.Invoke(context.Background(), []byte(`{"Wait":true}`)); err != nil {
				t.Error(err)
			}
		})
	}
	wg.Wait()
	if n := idleHandlers(e); n != 8 {
		t.Fatalf("%d idle handlers after 8 concurrent invocations, want 8", n)
	}
	for range 100 {
		if _, err := e.Invoke(context.Background(), []byte(`{}`)); err != nil {
			t.Fatal(err)
		}
	}
	if n := idleHandlers(e); n != 8 {
		t.Fatalf("%d idle handlers after 100 sequential invocations, want the same 8 reused", n)
	}
	mu.Lock()
	now = now.Add(handlerIdle + time.Second)
	mu.Unlock()
	if _, err := e.Invoke(context.Background(), []byte(`{}`)); err != nil {
		t.Fatal(err)
	}
	if n := idleHandlers(e); n != 1 {
		t.Errorf("%d idle handlers after the others idled past %v, want 1", n, handlerIdle)
	}
}
