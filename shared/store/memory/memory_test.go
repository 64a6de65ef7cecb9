package memory_test

import (
	"testing"

	"github.com/a2awire/a2awire/shared/store/memory"
	"github.com/a2awire/a2awire/shared/store/storetest"
)

func TestConformance(t *testing.T) {
	storetest.Run(t, func(t *testing.T) storetest.Store {
		s := memory.New()
		t.Cleanup(func() { _ = s.Close() })
		return s
	})
}
