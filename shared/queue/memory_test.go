package queue_test

import (
	"sync"
	"testing"
	"time"

	"github.com/a2awire/a2awire/shared/queue"
	"github.com/a2awire/a2awire/shared/queue/queuetest"
)

// fakeClock is a clock the suite moves.
type fakeClock struct {
	mu sync.Mutex
	t  time.Time
}

func (c *fakeClock) now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.t
}

func (c *fakeClock) add(d time.Duration) {
	c.mu.Lock()
	c.t = c.t.Add(d)
	c.mu.Unlock()
}

// TestMemoryConformance: the in-process queue passes the suite on an
// injected clock (no sleeps).
func TestMemoryConformance(t *testing.T) {
	queuetest.Run(t, func(t *testing.T, cfg queue.Config) queuetest.Pair {
		clock := &fakeClock{t: time.Date(2026, 12, 1, 0, 0, 0, 0, time.UTC)}
		dlq := queue.NewMemory(queue.Config{VisibilityTimeout: cfg.VisibilityTimeout}, queue.WithClock(clock.now))
		q := queue.NewMemory(cfg, queue.WithClock(clock.now), queue.WithDeadLetter(dlq))
		return queuetest.Pair{Queue: q, DLQ: dlq, Pass: func(d time.Duration) {
			clock.add(d)
			q.Wake()
			dlq.Wake()
		}}
	})
}

// TestMemoryRealClockWaits: on the real clock, a receiver waiting on a
// delayed message gets it when the delay ends, without a Wake.
func TestMemoryRealClockWaits(t *testing.T) {
	q := queue.NewMemory(queue.Config{VisibilityTimeout: time.Second})
	start := time.Now()
	if err := q.Send(t.Context(), queue.Message{Body: "d", Delay: 200 * time.Millisecond}); err != nil {
		t.Fatal(err)
	}
	got, err := q.Receive(t.Context(), 1, 2*time.Second)
	if err != nil || len(got) != 1 {
		t.Fatalf("Receive: %v %v", got, err)
	}
	if el := time.Since(start); el < 200*time.Millisecond || el > 1500*time.Millisecond {
		t.Errorf("received after %v, want just after the 200 ms delay", el)
	}
}

// TestMemoryHeld: a receive is held until it is deleted, given a new
// visibility, or its visibility timeout ends.
func TestMemoryHeld(t *testing.T) {
	ctx := t.Context()
	clock := &fakeClock{t: time.Date(2026, 12, 1, 0, 0, 0, 0, time.UTC)}
	q := queue.NewMemory(queue.Config{VisibilityTimeout: 30 * time.Second}, queue.WithClock(clock.now))
	for _, b := range []string{"a", "b", "c"} {
		if err := q.Send(ctx, queue.Message{Body: b}); err != nil {
			t.Fatal(err)
		}
	}
	if n := q.Held(); n != 0 {
		t.Fatalf("held before any receive: %d", n)
	}
	got, err := q.Receive(ctx, 3, 0)
	if err != nil || len(got) != 3 {
		t.Fatalf("Receive: %v %v", got, err)
	}
	if n := q.Held(); n != 3 {
		t.Fatalf("held after receiving 3: %d", n)
	}
	if err := q.Delete(ctx, got[0].Receipt); err != nil {
		t.Fatal(err)
	}
	if err := q.ChangeVisibility(ctx, got[1].Receipt, time.Minute); err != nil {
		t.Fatal(err)
	}
	if n := q.Held(); n != 1 {
		t.Fatalf("held after a delete and a visibility change: %d, want 1", n)
	}
	clock.add(31 * time.Second)
	if n := q.Held(); n != 0 {
		t.Fatalf("held after the visibility timeout ended: %d", n)
	}
}
