package capture_test

import (
	"fmt"
	"strings"
	"sync"
	"testing"

	"github.com/a2awire/a2awire/shared/capture"
)

// TestBufferConcurrentWrites: writes from many goroutines, read while they
// go on, all arrive whole (and, under -race, without a data race).
func TestBufferConcurrentWrites(t *testing.T) {
	var b capture.Buffer
	var wg sync.WaitGroup
	for i := range 8 {
		wg.Go(func() {
			for j := range 100 {
				fmt.Fprintf(&b, "w%d-%d\n", i, j)
				_ = b.String()
			}
		})
	}
	wg.Wait()
	lines := strings.Split(strings.TrimSuffix(b.String(), "\n"), "\n")
	if len(lines) != 800 {
		t.Fatalf("%d lines, want 800", len(lines))
	}
	seen := map[string]bool{}
	for _, l := range lines {
		seen[l] = true
	}
	if len(seen) != 800 || !seen["w7-99"] {
		t.Errorf("%d distinct lines, want 800 whole ones", len(seen))
	}
}
