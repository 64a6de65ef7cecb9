package cloud

import (
	"context"
	"errors"
	"sync"
	"testing"
	"time"
)

func idleHandlers(e *Entry) int {
	e.mu.Lock()
	defer e.mu.Unlock()
	return len(e.idle)
}

// TestEntryHandlersFollowPeakConcurrency: an entry keeps about as many
// handlers as it had concurrent invocations, reuses them, and drops those
// not needed for handlerIdle once invocations resume.
func TestEntryHandlersFollowPeakConcurrency(t *testing.T) {
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

// TestEntryDropsHandlerAfterOverrunOrPanic: as Lambda replaces an
// execution environment whose function timed out or panicked, the handler
// of such an invocation is not kept for the next one; a normal invocation's
// handler is.
func TestEntryDropsHandlerAfterOverrunOrPanic(t *testing.T) {
	release := make(chan struct{})
	returned := make(chan struct{})
	e := NewEntry("echo", func(ctx context.Context, in struct{ Hold, Panic bool }) (string, error) {
		switch {
		case in.Hold:
			defer close(returned)
			<-release
		case in.Panic:
			panic("boom")
		}
		return "ok", nil
	}, 50*time.Millisecond)
	if _, err := e.Invoke(context.Background(), []byte(`{"Hold":true}`)); !errors.Is(err, ErrTimeout) {
		t.Fatalf("held invocation: err %v, want ErrTimeout", err)
	}
	close(release)
	<-returned
	// run keeps or drops the handler on the invocation's own goroutine
	// right after the function returns: a keep would show within
	// microseconds, so 100 ms without one means it was dropped.
	for range 100 {
		if n := idleHandlers(e); n != 0 {
			t.Fatalf("%d idle handlers after an overrun, want its handler dropped", n)
		}
		time.Sleep(time.Millisecond)
	}
	var p *PanicError
	if _, err := e.Invoke(context.Background(), []byte(`{"Panic":true}`)); !errors.As(err, &p) {
		t.Fatalf("panicking invocation: err %v", err)
	}
	if n := idleHandlers(e); n != 0 {
		t.Fatalf("%d idle handlers after a panic, want its handler dropped", n)
	}
	if _, err := e.Invoke(context.Background(), []byte(`{}`)); err != nil {
		t.Fatal(err)
	}
	if n := idleHandlers(e); n != 1 {
		t.Errorf("%d idle handlers after a normal invocation, want 1", n)
	}
}
