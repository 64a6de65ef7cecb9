package bolt_test

import (
	"path/filepath"
	"testing"

	"github.com/a2awire/a2awire/shared/store"
	"github.com/a2awire/a2awire/shared/store/bolt"
	"github.com/a2awire/a2awire/shared/store/storetest"
)

func openBolt(t *testing.T) *bolt.Store {
	s, err := bolt.Open(filepath.Join(t.TempDir(), bolt.DefaultFile))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := s.Close(); err != nil {
			t.Error(err)
		}
	})
	return s
}

// TestConformance runs the engine suite, which DynamoDB Local also passes.
func TestConformance(t *testing.T) {
	storetest.Run(t, func(t *testing.T) store.Store { return openBolt(t) })
}

// TestFeedConformance runs the change-feed suite on the store's own feed,
// kept in the file.
func TestFeedConformance(t *testing.T) {
	storetest.RunFeed(t, func(t *testing.T) (store.Store, store.Feed) {
		s := openBolt(t)
		return s, s
	})
}
