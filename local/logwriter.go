package main

import (
	"io"
	"sync"
	"time"
)

// batchWriter gathers the log lines written to it and writes them to out
// together, at most flushDelay after the first of a batch was written: under
// load, one write(2) per batch instead of one per request's access line
// (docs/performance.md). Each Write is whole and in order in the output.
//
// Close (or Flush) writes what is pending; lines written within flushDelay
// before the process is killed outright are lost. A batch that grows past
// maxBatch is written at once by the writer that filled it, so a slow out
// holds up the loggers rather than memory growing.
type batchWriter struct {
	out   io.Writer
	delay time.Duration
	// after runs f after d and returns what stops it (time.AfterFunc's
	// Stop); tests replace it.
	after func(d time.Duration, f func()) (stop func() bool)

	wmu sync.Mutex // held while writing to out: batches go out in order

	mu      sync.Mutex
	pending []byte
	spare   []byte      // the last batch's buffer, for the next one
	stop    func() bool // the pending batch's timer; nil when none is armed
	closed  bool
}

// flushDelay is how long a line may wait for others to share its write:
// too short for a person at the terminal to notice.
const flushDelay = 20 * time.Millisecond

// maxBatch is the batch size at which a write goes out without waiting.
const maxBatch = 64 << 10

func newBatchWriter(out io.Writer, delay time.Duration) *batchWriter {
	return &batchWriter{out: out, delay: delay, after: func(d time.Duration, f func()) func() bool { return time.AfterFunc(d, f).Stop }}
}

func (b *batchWriter) Write(p []byte) (int, error) {
	b.mu.Lock()
	if b.closed {
		b.mu.Unlock()
		b.wmu.Lock()
		defer b.wmu.Unlock()
		return b.out.Write(p)
	}
	b.pending = append(b.pending, p...)
	full := len(b.pending) >= maxBatch
	if !full && b.stop == nil {
		b.stop = b.after(b.delay, b.Flush)
	}
	b.mu.Unlock()
	if full {
		b.Flush()
	}
	return len(p), nil
}

// Flush writes the pending lines now.
func (b *batchWriter) Flush() {
	b.wmu.Lock()
	defer b.wmu.Unlock()
	b.mu.Lock()
	batch := b.pending
	b.pending, b.spare = b.spare[:0], nil
	if b.stop != nil {
		b.stop()
		b.stop = nil
	}
	b.mu.Unlock()
	if len(batch) == 0 {
		return
	}
	// A log line that cannot be written has nowhere else to go.
	_, _ = b.out.Write(batch)
	b.mu.Lock()
	if b.spare == nil && cap(batch) <= 2*maxBatch {
		b.spare = batch[:0]
	}
	b.mu.Unlock()
}

// Close writes what is pending; later writes go straight to out.
func (b *batchWriter) Close() error {
	b.mu.Lock()
	b.closed = true
	b.mu.Unlock()
	b.Flush()
	return nil
}
