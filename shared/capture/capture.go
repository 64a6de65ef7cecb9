// Package capture collects what is written from several goroutines at once
// (a logger, a command's output, a child process's pipes) so that a reader
// can look at it while the writing goes on.
package capture

import (
	"bytes"
	"sync"
)

// Buffer is a bytes.Buffer whose Write and String may be called
// concurrently. The zero value is an empty buffer ready to use.
type Buffer struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

// Write appends p; it never fails.
func (b *Buffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.Write(p)
}

// String returns everything written so far.
func (b *Buffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.String()
}
