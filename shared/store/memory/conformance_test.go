package memory_test

import (
	"testing"

	"github.com/a2awire/a2awire/shared/store"
	"github.com/a2awire/a2awire/shared/store/memory"
	"github.com/a2awire/a2awire/shared/store/storetest"
)

func openMemory(t *testing.T) *memory.Store {
	s := memory.New()
	t.Cleanup(func() { _ = s.Close() })
	return s
}

// TestConformance runs the engine suite, which DynamoDB Local also passes.
func TestConformance(t *testing.T) {
	storetest.Run(t, func(t *testing.T) store.Store { return openMemory(t) })
}

// TestFeedConformance runs the change-feed suite on the store's own feed.
func TestFeedConformance(t *testing.T) {
	storetest.RunFeed(t, func(t *testing.T) (store.Store, store.Feed) {
		s := openMemory(t)
		return s, s
	})
}
