package memory_test

import (
	"testing"

	"github.com/a2awire/a2awire/shared/store"
	"github.com/a2awire/a2awire/shared/store/internal/embeddedtest"
	"github.com/a2awire/a2awire/shared/store/memory"
)

// TestEmbedded runs the tests of what only the embedded engines do (TTL
// sweeper, feed consumers and retention, keys that must stay apart).
func TestEmbedded(t *testing.T) {
	embeddedtest.Run(t, func(t *testing.T, o embeddedtest.Options) embeddedtest.Engine {
		s := memory.New(memory.WithClock(o.Now), memory.WithSweepInterval(o.SweepEvery), memory.WithFeedConsumers(o.Consumers...))
		t.Cleanup(func() { _ = s.Close() })
		return s
	})
}

func BenchmarkMemory(b *testing.B) {
	embeddedtest.Bench(b, func(b *testing.B) store.Store {
		s := memory.New()
		b.Cleanup(func() { _ = s.Close() })
		return s
	})
}
