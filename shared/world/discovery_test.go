package world_test

import (
	"context"
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/a2awire/a2awire/shared/apierror"
	"github.com/a2awire/a2awire/shared/auth"
	"github.com/a2awire/a2awire/shared/store"
	"github.com/a2awire/a2awire/shared/store/memory"
	"github.com/a2awire/a2awire/shared/store/storetest"
	"github.com/a2awire/a2awire/shared/store/storetest/stores"
	"github.com/a2awire/a2awire/shared/world"
)

// discoveryWorlds creates n worlds on s, one a millisecond of c, in three
// categories, every seventh closed, and returns their ids.
func discoveryWorlds(t testing.TB, s *world.Service, c *clock, n int) []string {
	t.Helper()
	ctx := context.Background()
	var ids []string
	for i := range n {
		c.Advance(time.Millisecond)
		id := fmt.Sprintf("w%05d", i)
		m := world.Manifest{ID: id, Name: fmt.Sprintf("World %d", i), Category: []string{"games", "Chat", "markets"}[i%3]}
		if i%10 == 0 {
			m.Description = "has a needle inside"
		}
		if _, _, err := s.PutWorld(ctx, m, key(0)); err != nil {
			t.Fatal(err)
		}
		if i%7 == 0 {
			if _, err := s.Close(ctx, id, keyID(0)); err != nil {
				t.Fatal(err)
			}
		}
		ids = append(ids, id)
	}
	return ids
}

// page through every page of f, checking each costs at most maxQueries
// Queries, and return the world ids in order.
func pageAll(t testing.TB, s *world.Service, counted *storetest.Counting, f world.Filter, maxQueries int64) []string {
	got, _, _ := pageCount(t, s, counted, f, maxQueries)
	return got
}

// pageCount is pageAll that also returns the pages and Queries it took.
func pageCount(t testing.TB, s *world.Service, counted *storetest.Counting, f world.Filter, maxQueries int64) (got []string, pages, queries int64) {
	t.Helper()
	for ; ; pages++ {
		if pages > 10_000 {
			t.Fatal("listing never ends")
		}
		counted.Take()
		l, err := s.Discover(context.Background(), f)
		if err != nil {
			t.Fatalf("page %d: %v", pages, err)
		}
		calls := counted.Take()
		if calls[1] > maxQueries || calls[0] != 0 || calls[2] != 0 {
			t.Fatalf("page %d cost {gets, queries, writes} = %v, want at most %d Queries", pages, calls, maxQueries)
		}
		queries += calls[1]
		for _, w := range l.Worlds {
			got = append(got, w.ID)
		}
		if l.Cursor == "" {
			return got, pages + 1, queries
		}
		f.Cursor = l.Cursor
	}
}

// TestDiscoverPagesEveryWorldOnce: paging a listing (newest, by members,
// by category, with q, closed and any) returns every world the filter
// keeps exactly once and in order, merged from the listing's
// world.ListingShards gsi1 partitions: each page 1 Query a shard unless
// closed worlds or q skip items (then at most 4 a shard). 45 worlds on every engine keep
// it at a few seconds on DynamoDB Local; BenchmarkDiscover5000 is the same
// check over 5,000 worlds.
func TestDiscoverPagesEveryWorldOnce(t *testing.T) {
	for _, e := range stores.All(local) {
		t.Run(e.Name, func(t *testing.T) {
			counted := &storetest.Counting{Store: e.Open(t)}
			c := &clock{now: t0}
			s := world.New(counted, world.WithClock(c.Now), world.WithIDs(testIDs))
			const n = 45
			ids := discoveryWorlds(t, s, c, n)
			ctx := context.Background()
			// Members: w00001 gets 3, w00002 gets 2, w00004 gets 1 then
			// another that leaves: counts 3, 2, 1 then everyone at 0.
			for i, w := range map[int]string{1: "w00001", 2: "w00001", 3: "w00001", 4: "w00002", 5: "w00002", 6: "w00004", 7: "w00004"} {
				if _, _, err := s.Join(ctx, w, key(i), nil); err != nil {
					t.Fatal(err)
				}
			}
			if err := s.Leave(ctx, "w00004", awnID(7)); err != nil {
				t.Fatal(err)
			}
			open := func(keep func(i int) bool) []string {
				var out []string
				for i := n - 1; i >= 0; i-- {
					if keep(i) {
						out = append(out, ids[i])
					}
				}
				return out
			}
			newestOpen := open(func(i int) bool { return i%7 != 0 })
			byMembers := append([]string{"w00001", "w00002", "w00004"}, slices.DeleteFunc(slices.Clone(newestOpen), func(id string) bool {
				return id == "w00001" || id == "w00002" || id == "w00004"
			})...)
			for _, tc := range []struct {
				name       string
				f          world.Filter
				want       []string
				maxQueries int64
			}{
				{"newest", world.Filter{Sort: world.SortNewest, Limit: 7}, newestOpen, 2 * shards},
				{"members", world.Filter{Limit: 7}, byMembers, 2 * shards},
				{"category ignoring case", world.Filter{Sort: world.SortNewest, Category: "CHAT", Limit: 5},
					open(func(i int) bool { return i%7 != 0 && i%3 == 1 }), 2 * shards},
				{"q", world.Filter{Sort: world.SortNewest, Query: "NEEDLE", Limit: 3},
					open(func(i int) bool { return i%7 != 0 && i%10 == 0 }), 4 * shards},
				{"closed", world.Filter{Sort: world.SortNewest, Status: world.StatusClosed, Limit: 4},
					open(func(i int) bool { return i%7 == 0 }), 4 * shards},
				{"any, one page", world.Filter{Sort: world.SortNewest, Status: world.StatusAny, Limit: 100}, open(func(int) bool { return true }), shards},
			} {
				got := pageAll(t, s, counted, tc.f, tc.maxQueries)
				if !slices.Equal(got, tc.want) {
					t.Errorf("%s: listed %d worlds %v…, want %d %v…", tc.name, len(got), head(got), len(tc.want), head(tc.want))
				}
			}
			l, err := s.Discover(ctx, world.Filter{Limit: 1})
			if err != nil || len(l.Worlds) != 1 || l.Worlds[0].Members != 3 || l.Worlds[0].OwnerAWNID != awnID(0) || l.Worlds[0].Status != world.StatusOpen {
				t.Fatalf("first world by members: %+v, %v", l.Worlds, err)
			}
		})
	}
}

// shards is the Queries a page makes at least: one a listing shard.
const shards = world.ListingShards

func head(ids []string) []string { return ids[:min(len(ids), 5)] }

func awnID(n int) string { return auth.AWNID(key(n)) }
func keyID(n int) string { return auth.KeyID(key(n)) }

// TestDiscoverRefusesBadFilters: every bad filter and cursor is Invalid
// naming what was wrong, and a cursor of another filter is refused.
func TestDiscoverRefusesBadFilters(t *testing.T) {
	s := world.New(memory.New())
	c := &clock{now: t0}
	s2 := world.New(memory.New(), world.WithClock(c.Now))
	discoveryWorlds(t, s2, c, 5)
	ctx := context.Background()
	for _, f := range []world.Filter{
		{Sort: "oldest"}, {Status: "deleted"}, {Limit: -1}, {Limit: 101}, {Cursor: "!!"}, {Cursor: "eyJrIjoiMSJ9"},
		{Query: string(make([]byte, 101))}, {Category: "\xff"},
	} {
		if _, err := s.Discover(ctx, f); apierror.KindOf(err) != apierror.Invalid {
			t.Errorf("filter %+v: %v, want Invalid", f, err)
		}
	}
	l, err := s2.Discover(ctx, world.Filter{Sort: world.SortNewest, Limit: 1})
	if err != nil || l.Cursor == "" {
		t.Fatalf("%+v %v", l, err)
	}
	if _, err := s2.Discover(ctx, world.Filter{Sort: world.SortMembers, Limit: 1, Cursor: l.Cursor}); apierror.KindOf(err) != apierror.Invalid {
		t.Fatalf("a newest cursor on the members listing: %v, want Invalid", err)
	}
	if _, err := s2.Discover(ctx, world.Filter{Sort: world.SortNewest, Limit: 1, Cursor: l.Cursor}); err != nil {
		t.Fatalf("own cursor: %v", err)
	}
}

// TestDiscoverFollowsManifest: an owner's update (name, category) and a
// delete show in the listing at once.
func TestDiscoverFollowsManifest(t *testing.T) {
	for _, e := range stores.All(local) {
		t.Run(e.Name, func(t *testing.T) {
			c := &clock{now: t0}
			s := world.New(e.Open(t), world.WithClock(c.Now), world.WithIDs(testIDs))
			ctx := context.Background()
			if _, _, err := s.PutWorld(ctx, world.Manifest{ID: "moving", Category: "games"}, key(0)); err != nil {
				t.Fatal(err)
			}
			list := func(cat string) []world.Summary {
				t.Helper()
				l, err := s.Discover(ctx, world.Filter{Category: cat, Status: world.StatusAny})
				if err != nil {
					t.Fatal(err)
				}
				return l.Worlds
			}
			if _, _, err := s.PutWorld(ctx, world.Manifest{ID: "moving", Name: "Moved", Category: "chat", MaxMembers: 5}, key(0)); err != nil {
				t.Fatal(err)
			}
			if got := list("games"); len(got) != 0 {
				t.Fatalf("old category still lists %+v", got)
			}
			if got := list("chat"); len(got) != 1 || got[0].Name != "Moved" {
				t.Fatalf("new category lists %+v", got)
			}
			if _, err := s.Close(ctx, "moving", keyID(0)); err != nil {
				t.Fatal(err)
			}
			if got := list(""); len(got) != 1 || got[0].Status != world.StatusClosed {
				t.Fatalf("closed world lists %+v", got)
			}
			if err := s.DeleteWorld(ctx, "moving", keyID(0)); err != nil {
				t.Fatal(err)
			}
			if got := list(""); len(got) != 0 {
				t.Fatalf("deleted world lists %+v", got)
			}
		})
	}
}

// BenchmarkDiscover5000 creates 5,000 worlds on the memory engine and
// pages the newest listing 20 at a time: every world exactly once, and
// the Queries per page (reported as queries/page) stay one a shard.
func BenchmarkDiscover5000(b *testing.B) {
	counted := &storetest.Counting{Store: memory.New()}
	c := &clock{now: t0}
	s := world.New(counted, world.WithClock(c.Now), world.WithIDs(testIDs))
	ctx := context.Background()
	const n = 5000
	for i := range n {
		c.Advance(time.Millisecond)
		if _, _, err := s.PutWorld(ctx, world.Manifest{ID: fmt.Sprintf("b%05d", i)}, key(0)); err != nil {
			b.Fatal(err)
		}
	}
	b.ResetTimer()
	for range b.N {
		got, pages, queries := pageCount(b, s, counted, world.Filter{Sort: world.SortNewest, Limit: 20}, shards)
		seen := map[string]bool{}
		for _, id := range got {
			if seen[id] {
				b.Fatalf("%s listed twice", id)
			}
			seen[id] = true
		}
		if len(seen) != n {
			b.Fatalf("listed %d worlds, want %d", len(seen), n)
		}
		b.ReportMetric(float64(queries)/float64(pages), "queries/page")
		b.ReportMetric(float64(pages), "pages")
	}
}

// TestDiscoverSpentQueriesContinue: a q that matches 3 of 480 worlds spends
// a page's Queries (discoveryQueries a shard, 25 items each) before it has
// its limit; the page answers what matched with a cursor, and paging on
// finds every match once, newest first, no page over 4 Queries a shard.
func TestDiscoverSpentQueriesContinue(t *testing.T) {
	counted := &storetest.Counting{Store: memory.New()}
	c := &clock{now: t0}
	s := world.New(counted, world.WithClock(c.Now), world.WithIDs(testIDs))
	ctx := context.Background()
	var want []string
	for i := range 480 {
		c.Advance(time.Millisecond)
		m := world.Manifest{ID: fmt.Sprintf("q%05d", i)}
		if i%160 == 5 {
			m.Description = "the needle"
			want = append([]string{m.ID}, want...)
		}
		if _, _, err := s.PutWorld(ctx, m, key(0)); err != nil {
			t.Fatal(err)
		}
	}
	got, pages, _ := pageCount(t, s, counted, world.Filter{Sort: world.SortNewest, Query: "needle", Limit: 10}, 4*shards)
	if !slices.Equal(got, want) {
		t.Fatalf("listed %v, want %v", got, want)
	}
	if pages < 2 {
		t.Fatalf("%d page(s): the Queries were never spent", pages)
	}
}

// TestListingFromBeforeTheShardsMoves: a world whose listing items are in
// the unsharded partitions (written before the listings were sharded) is
// missing from the listing until its next join, which moves them to its
// shard.
func TestListingFromBeforeTheShardsMoves(t *testing.T) {
	st := memory.New()
	c := &clock{now: t0}
	s := world.New(st, world.WithClock(c.Now), world.WithIDs(testIDs))
	ctx := context.Background()
	if _, _, err := s.PutWorld(ctx, world.Manifest{ID: "old", Category: "games"}, key(0)); err != nil {
		t.Fatal(err)
	}
	for sk, pk := range map[string]string{"LIST#new#all": "WORLDS#new#*", "LIST#new#cat": "WORLDS#new#c:games",
		"LIST#mem#all": "WORLDS#mem#*", "LIST#mem#cat": "WORLDS#mem#c:games"} {
		if _, err := st.Write(ctx, store.Update(store.Key{PK: world.WorldPK("old"), SK: sk}).SetAttr(store.AttrGSI1PK, store.S(pk))); err != nil {
			t.Fatal(err)
		}
	}
	listed := func() int {
		n := 0
		for _, f := range []world.Filter{{}, {Sort: world.SortNewest}, {Category: "games"}, {Sort: world.SortNewest, Category: "games"}} {
			l, err := s.Discover(ctx, f)
			if err != nil {
				t.Fatal(err)
			}
			n += len(l.Worlds)
		}
		return n
	}
	if n := listed(); n != 0 {
		t.Fatalf("listed %d times from the unsharded partitions", n)
	}
	if _, _, err := s.Join(ctx, "old", key(1), nil); err != nil {
		t.Fatal(err)
	}
	if n := listed(); n != 4 {
		t.Fatalf("listed in %d of the 4 listings after a join, want all", n)
	}
}
