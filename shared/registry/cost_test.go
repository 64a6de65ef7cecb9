package registry_test

import (
	"context"
	"fmt"
	"maps"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/a2awire/a2awire/shared/auth"
	"github.com/a2awire/a2awire/shared/registry"
	"github.com/a2awire/a2awire/shared/store"
	"github.com/a2awire/a2awire/shared/store/dynamo"
	"github.com/a2awire/a2awire/shared/store/dynamo/capacity"
	"github.com/a2awire/a2awire/shared/store/dynamo/dynamolocal"
	"github.com/a2awire/a2awire/shared/store/memory"
	"github.com/a2awire/a2awire/shared/store/storetest"
)

// seed bulk-loads n agents named bulk-NNNNN with capability "common" (and
// "rare" for the names in rare), in Writes of up to store.MaxActions
// actions, four at a time.
func seed(t testing.TB, st store.Store, n int, rare map[int]bool) {
	var batches [][]store.Action
	var cur []store.Action
	for i := range n {
		caps := []string{"common"}
		if rare[i] {
			caps = append(caps, "rare-skill")
		}
		acts := registry.SeedActions(agent(fmt.Sprintf("bulk-%05d", i), 10000+i, caps...), t0)
		if len(cur)+len(acts) > store.MaxActions {
			batches = append(batches, cur)
			cur = nil
		}
		cur = append(cur, acts...)
	}
	batches = append(batches, cur)
	work := make(chan []store.Action)
	var wg sync.WaitGroup
	var failed atomic.Value
	for range 4 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for b := range work {
				if _, err := st.Write(context.Background(), b...); err != nil {
					failed.Store(err)
				}
			}
		}()
	}
	for _, b := range batches {
		work <- b
	}
	close(work)
	wg.Wait()
	if err, _ := failed.Load().(error); err != nil {
		t.Fatalf("seed: %v", err)
	}
}

// TestDiscoverReadsOnlyMatches: with 1,000
// registered agents on DynamoDB Local, discovering a capability held by 3
// of them returns exactly those 3 with one Query on gsi1 that reads at
// most limit+1 items, measured by the capacity meter and an item counter.
// It also pins the DynamoDB calls of every registry operation (docs/storage.md
// cost table).
//
// Why 1,000 agents (it was 5,000): the property is that a page's cost does
// not grow with the registry, so the registry only has to be much larger
// than any page: a discovery that read more than the matches (a listing
// filtered in the process, a query on the wrong partition) would read
// hundreds of items and tens of read units here, against the 3 items and
// 0.5 units asserted, and the common capability still has ten times the
// 101 items a page of 100 reads. Seeding 5,000 took 200 transactions of
// 100 items, most of this package's DynamoDB Local CPU, and proved no more.
func TestDiscoverReadsOnlyMatches(t *testing.T) {
	start := time.Now()
	m := capacity.New()
	client, table := dynamolocal.NewTable(t, local, m.Option())
	st := &storetest.Counting{Store: dynamo.New(client, table)}
	const n = 1000
	rare := map[int]bool{17: true, n / 2: true, n - 1: true}
	seed(t, st, n, rare)
	t.Logf("seeded %d agents in %v: %v", n, time.Since(start).Round(time.Millisecond), m.Take().Calls())
	ctx := context.Background()
	r := registry.New(st)

	// 1. The rare capability: exactly the 3, one Query, ≤ limit+1 items.
	st.TakeItems()
	p, err := r.Discover(ctx, registry.Filter{Capability: "rare-skill"})
	if err != nil {
		t.Fatal(err)
	}
	use := m.Take()
	t.Logf("discover rare-skill (limit 50): %d agents, %d items read\n%v", len(p.Agents), st.Items(), use)
	if want := []string{"bulk-00017", fmt.Sprintf("bulk-%05d", n/2), fmt.Sprintf("bulk-%05d", n-1)}; !slices.Equal(names(p.Agents), want) || p.Next != "" {
		t.Fatalf("discover rare-skill = %v next %q, want %v", names(p.Agents), p.Next, want)
	}
	if calls := use.Calls(); !maps.Equal(calls, map[string]int{"Query": 1}) {
		t.Fatalf("discover rare-skill made calls %v, want one Query (no Scan)", calls)
	}
	// Three profiles of ~400 bytes fit in one 4 KB unit: an eventually
	// consistent read of them is 0.5 RCU. A scan of 1,000 agents would
	// read about 400 KB: about fifty units.
	if u := use["Query"].ReadUnits; u > 0.5 {
		t.Fatalf("discover rare-skill consumed %g read units, want ≤ 0.5", u)
	}
	if got := st.Items(); got > 3 {
		t.Fatalf("discover rare-skill read %d items, want 3", got)
	}

	// 2. limit 2 of 3: a full page and a cursor, limit+1 = 3 items read.
	st.TakeItems()
	p, err = r.Discover(ctx, registry.Filter{Capability: "rare-skill", Limit: 2})
	if err != nil || len(p.Agents) != 2 || p.Next == "" {
		t.Fatalf("limit 2: %v next %q err %v", names(p.Agents), p.Next, err)
	}
	use = m.Take()
	if calls := use.Calls(); !maps.Equal(calls, map[string]int{"Query": 1}) || st.Items() > 3 {
		t.Fatalf("limit 2: calls %v, items %d; want one Query of ≤ 3 items", calls, st.Items())
	}
	p, err = r.Discover(ctx, registry.Filter{Capability: "rare-skill", Limit: 2, Cursor: p.Next})
	if err != nil || !slices.Equal(names(p.Agents), []string{fmt.Sprintf("bulk-%05d", n-1)}) || p.Next != "" {
		t.Fatalf("page 2: %v next %q err %v", names(p.Agents), p.Next, err)
	}
	m.Take()

	// 3. A capability all 1,000 hold, limit 100: 101 items, one Query.
	st.TakeItems()
	p, err = r.Discover(ctx, registry.Filter{Capability: "common", Limit: 100})
	if err != nil || len(p.Agents) != 100 || p.Next == "" {
		t.Fatalf("common: %d agents next %q err %v", len(p.Agents), p.Next, err)
	}
	use = m.Take()
	t.Logf("discover common (limit 100): %d items read\n%v", st.Items(), use)
	if calls := use.Calls(); !maps.Equal(calls, map[string]int{"Query": 1}) || st.Items() != 101 {
		t.Fatalf("common: calls %v, items %d; want one Query of 101 items", calls, st.Items())
	}

	// 4. status=any: the online partition runs out after 3, so the
	// offline one is queried too; still ≤ limit+1 items in all.
	st.TakeItems()
	if _, err := r.Discover(ctx, registry.Filter{Capability: "rare-skill", Status: "any"}); err != nil {
		t.Fatal(err)
	}
	use = m.Take()
	if calls := use.Calls(); !maps.Equal(calls, map[string]int{"Query": 2}) || st.Items() > 3 {
		t.Fatalf("any: calls %v, items %d; want 2 Queries, ≤ 3 items", calls, st.Items())
	}
	t.Logf("discover rare-skill status=any: %v", use)

	// The other operations, for docs/storage.md's cost table.
	steps := []struct {
		name  string
		run   func() error
		calls map[string]int
	}{
		{"register (new, 2 capabilities)", func() error {
			_, _, err := r.Register(ctx, agent("cost-agent", 1, "common", "rare-skill"))
			return err
		}, map[string]int{"GetItem": 1, "TransactWriteItems": 1}},
		{"register (owner update, 1 dropped)", func() error {
			_, _, err := r.Register(ctx, agent("cost-agent", 1, "common"))
			return err
		}, map[string]int{"GetItem": 1, "TransactWriteItems": 1}},
		{"register (name taken)", func() error {
			_, _, err := r.Register(ctx, agent("cost-agent", 2, "common"))
			if err == nil {
				return fmt.Errorf("no name_taken")
			}
			return nil
		}, map[string]int{"GetItem": 1}},
		{"get", func() error { _, err := r.Get(ctx, "cost-agent"); return err }, map[string]int{"GetItem": 1}},
		{"presence offline", func() error {
			_, err := r.SetPresence(ctx, "cost-agent", key(1), registry.Offline)
			return err
		}, map[string]int{"GetItem": 1, "TransactWriteItems": 1}},
		{"presence unchanged", func() error {
			_, err := r.SetPresence(ctx, "cost-agent", key(1), registry.Offline)
			return err
		}, map[string]int{"GetItem": 1}},
		{"lookup key", func() error { _, err := r.LookupKey(ctx, auth.KeyID(key(1))); return err }, map[string]int{"GetItem": 1}},
		{"name for key", func() error { _, err := r.NameForKey(ctx, key(1)); return err }, map[string]int{"GetItem": 1}},
	}
	for _, s := range steps {
		if err := s.run(); err != nil {
			t.Fatalf("%s: %v", s.name, err)
		}
		got := m.Take()
		t.Logf("%-36s\n%v", s.name, got)
		if !maps.Equal(got.Calls(), s.calls) {
			t.Errorf("%s: calls %v, want %v", s.name, got.Calls(), s.calls)
		}
	}
	// Its duration is the machine's, not the registry's (make test keeps
	// wall-clock assertions out): reported, not asserted.
	t.Logf("took %v", time.Since(start))
}

// BenchmarkDiscover measures a discovery page of 50 among 5,000 agents on
// the memory engine (the domain's own cost, without DynamoDB's latency).
func BenchmarkDiscover(b *testing.B) {
	st := memory.New()
	b.Cleanup(func() { _ = st.Close() })
	seed(b, st, 5000, map[int]bool{1: true, 2: true, 3: true})
	r := registry.New(st)
	ctx := context.Background()
	for _, f := range []registry.Filter{{Capability: "rare-skill"}, {Capability: "common"}, {Capability: "common", Status: "any", Limit: 100}} {
		b.Run(fmt.Sprintf("%s/%s/%d", f.Capability, f.Status, f.Limit), func(b *testing.B) {
			for b.Loop() {
				if _, err := r.Discover(ctx, f); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}
