package main

import (
	"fmt"
	"runtime/debug"
	"strings"
	"sync"
	"testing"
	"time"
)

// countingWriter records each Write it gets.
type countingWriter struct {
	mu     sync.Mutex
	writes []string
}

func (c *countingWriter) Write(p []byte) (int, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.writes = append(c.writes, string(p))
	return len(p), nil
}

func (c *countingWriter) get() []string {
	c.mu.Lock()
	defer c.mu.Unlock()
	return append([]string(nil), c.writes...)
}

// manualTimer stands in for time.AfterFunc: the test fires it.
type manualTimer struct {
	mu    sync.Mutex
	armed []func()
}

func (m *manualTimer) after(_ time.Duration, f func()) func() bool {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.armed = append(m.armed, f)
	return func() bool { return true }
}

func (m *manualTimer) fire() {
	m.mu.Lock()
	fs := m.armed
	m.armed = nil
	m.mu.Unlock()
	for _, f := range fs {
		f()
	}
}

func newTestBatchWriter(out *countingWriter) (*batchWriter, *manualTimer) {
	timer := &manualTimer{}
	b := newBatchWriter(out, time.Hour)
	b.after = timer.after
	return b, timer
}

// TestBatchWriterWritesABatchOnceItsDelayPasses: lines wait for their
// batch's timer and then go out in one write, in the order written.
func TestBatchWriterWritesABatchOnceItsDelayPasses(t *testing.T) {
	out := &countingWriter{}
	b, timer := newTestBatchWriter(out)
	for i := range 100 {
		fmt.Fprintf(b, "line %d\n", i)
	}
	if got := out.get(); len(got) != 0 {
		t.Fatalf("%d writes before the delay passed, want none", len(got))
	}
	timer.fire()
	got := out.get()
	if len(got) != 1 {
		t.Fatalf("%d writes for one batch, want 1", len(got))
	}
	var want strings.Builder
	for i := range 100 {
		fmt.Fprintf(&want, "line %d\n", i)
	}
	if got[0] != want.String() {
		t.Errorf("batch = %q, want the lines in order", got[0])
	}
	// The next line starts a new batch with its own timer.
	fmt.Fprintf(b, "again\n")
	timer.fire()
	if got := out.get(); len(got) != 2 || got[1] != "again\n" {
		t.Errorf("writes %q, want a second batch with the later line", got)
	}
}

// TestBatchWriterCloseWritesWhatIsPending: nothing written before Close is
// lost, and writes after it go straight out.
func TestBatchWriterCloseWritesWhatIsPending(t *testing.T) {
	out := &countingWriter{}
	b, _ := newTestBatchWriter(out)
	fmt.Fprintf(b, "pending\n")
	if err := b.Close(); err != nil {
		t.Fatal(err)
	}
	fmt.Fprintf(b, "after close\n")
	if got := out.get(); len(got) != 2 || got[0] != "pending\n" || got[1] != "after close\n" {
		t.Errorf("writes %q, want the pending line at Close, then the later one at once", got)
	}
}

// TestBatchWriterFullBatchGoesOutAtOnce: a batch that reaches maxBatch is
// written by the writer that filled it, without waiting for the timer.
func TestBatchWriterFullBatchGoesOutAtOnce(t *testing.T) {
	out := &countingWriter{}
	b, _ := newTestBatchWriter(out)
	line := strings.Repeat("x", 1023) + "\n"
	for range maxBatch / len(line) {
		_, _ = b.Write([]byte(line))
	}
	got := out.get()
	if len(got) != 1 || len(got[0]) != maxBatch {
		t.Fatalf("%d writes, want the full batch of %d bytes written once", len(got), maxBatch)
	}
}

// TestBatchWriterConcurrentWritersLoseNothing: lines written from many
// goroutines while batches are flushed come out whole, each once, each
// writer's in its order.
func TestBatchWriterConcurrentWritersLoseNothing(t *testing.T) {
	out := &countingWriter{}
	b := newBatchWriter(out, 50*time.Microsecond)
	const writers, lines = 8, 500
	var wg sync.WaitGroup
	for w := range writers {
		wg.Go(func() {
			for i := range lines {
				fmt.Fprintf(b, "w%d %d\n", w, i)
			}
		})
	}
	wg.Wait()
	if err := b.Close(); err != nil {
		t.Fatal(err)
	}
	next := make([]int, writers)
	all := strings.Join(out.get(), "")
	for _, l := range strings.Split(strings.TrimSuffix(all, "\n"), "\n") {
		var w, i int
		if _, err := fmt.Sscanf(l, "w%d %d", &w, &i); err != nil || w < 0 || w >= writers {
			t.Fatalf("torn or foreign line %q", l)
		}
		if i != next[w] {
			t.Fatalf("writer %d: line %d after %d, want %d", w, i, next[w]-1, next[w])
		}
		next[w]++
	}
	for w, n := range next {
		if n != lines {
			t.Errorf("writer %d: %d lines out, want %d", w, n, lines)
		}
	}
}

// TestTuneGC: the harness sets its GOGC unless the environment sets one.
func TestTuneGC(t *testing.T) {
	prev := debug.SetGCPercent(100)
	defer debug.SetGCPercent(prev)
	tuneGC(func(string) string { return "" })
	if got := debug.SetGCPercent(100); got != harnessGOGC {
		t.Errorf("GOGC unset: collector at %d, want %d", got, harnessGOGC)
	}
	debug.SetGCPercent(150) // as the runtime does for GOGC=150
	tuneGC(func(k string) string {
		if k == "GOGC" {
			return "150"
		}
		return ""
	})
	if got := debug.SetGCPercent(100); got != 150 {
		t.Errorf("GOGC=150 in the environment: collector at %d, want it left at 150", got)
	}
}
