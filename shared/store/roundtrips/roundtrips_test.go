package roundtrips_test

import (
	"context"
	"runtime"
	"sync"
	"testing"

	"github.com/a2awire/a2awire/shared/store"
	"github.com/a2awire/a2awire/shared/store/memory"
	"github.com/a2awire/a2awire/shared/store/roundtrips"
)

// TestDepth: calls one after another add up; calls side by side count
// once; Take starts afresh.
func TestDepth(t *testing.T) {
	ctx := context.Background()
	mem := memory.New()
	t.Cleanup(func() { _ = mem.Close() })
	st := roundtrips.Wrap(mem)
	k := store.Key{PK: "P", SK: "S"}
	_, _ = st.Get(ctx, k)
	_, _ = st.Get(ctx, k)
	_, _ = st.Write(ctx, store.Put(k, store.Item{"type": store.S("x")}))
	if got := st.Take(); got != 3 {
		t.Fatalf("three calls in a row: %d round trips, want 3", got)
	}
	// Side by side: every call starts before any finishes.
	var start, wg sync.WaitGroup
	start.Add(1)
	block := make(chan struct{})
	gate := &gated{Store: mem, gate: block}
	par := roundtrips.Wrap(gate)
	for range 3 {
		wg.Go(func() { start.Wait(); _, _ = par.Get(ctx, k) })
	}
	start.Done()
	for gate.waiting() < 3 { // the three Gets have each started, held at the gate
		runtime.Gosched()
	}
	close(block)
	wg.Wait()
	_, _ = par.Query(ctx, store.Query{PK: "P"})
	if got := par.Take(); got != 2 {
		t.Fatalf("three side by side then one: %d round trips, want 2", got)
	}
	if got := par.Take(); got != 0 {
		t.Fatalf("after Take: %d, want 0", got)
	}
}

// gated holds each Get until gate closes, counting those held.
type gated struct {
	store.Store
	gate chan struct{}
	mu   sync.Mutex
	n    int
}

func (g *gated) Get(ctx context.Context, k store.Key) (store.Item, error) {
	g.mu.Lock()
	g.n++
	g.mu.Unlock()
	<-g.gate
	return g.Store.Get(ctx, k)
}

func (g *gated) waiting() int {
	g.mu.Lock()
	defer g.mu.Unlock()
	return g.n
}
