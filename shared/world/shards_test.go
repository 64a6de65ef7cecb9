package world_test

import (
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"testing"

	"github.com/a2awire/a2awire/shared/apierror"
	"github.com/a2awire/a2awire/shared/auth"
	"github.com/a2awire/a2awire/shared/store"
	"github.com/a2awire/a2awire/shared/store/memory"
	"github.com/a2awire/a2awire/shared/store/storetest"
	"github.com/a2awire/a2awire/shared/world"
	"github.com/a2awire/a2awire/shared/world/worldtest"
)

// TestShardedEventsConcurrentWriters is TestEventsConcurrentWriters for a
// world created with 3 event shards whose owner raises them to 8 halfway
// through, while four services that knew nothing of either count go on
// writing: every reader still sees every event it may see exactly once, in
// order (the readers read the shards the head names), and every event is in
// the shard its id hashes to among 3 or 8 — some in shards 3 to 7, which
// only the raised count names, so the writers learnt it.
func TestShardedEventsConcurrentWriters(t *testing.T) {
	everyEngine(t, func(t *testing.T, st store.Store) {
		spec := manifest("sharded")
		spec.EventShards = 3
		concurrentWriters(t, st, spec, func(owner *world.Service) {
			raised := spec
			raised.EventShards = 8
			if _, err := owner.UpdateWorld(context.Background(), raised, key(0)); err != nil {
				t.Errorf("raise the shards: %v", err)
			}
		})
		if t.Failed() {
			return
		}
		pks := worldtest.Placement(t, st, "sharded")
		var high int
		for id, pk := range pks {
			e := world.Event{ID: id, World: "sharded", Visibility: world.Public}
			if pk != world.EventKeyIn(e, 3).PK && pk != world.EventKeyIn(e, 8).PK {
				t.Errorf("event %s is in %s, neither its shard among 3 (%s) nor among 8 (%s)", id, pk, world.EventKeyIn(e, 3).PK, world.EventKeyIn(e, 8).PK)
			}
			if slices.Index(worldtest.SharedPKs("sharded"), pk) >= 3 {
				high++
			}
		}
		if high == 0 {
			t.Fatalf("none of %d events is in shards 3 to 7: the writers never wrote across 8", len(pks))
		}
		t.Logf("%d shared events, %d of them in shards 3 to 7", len(pks), high)
	})
}

// TestShardsComeFromTheHead: a service that wrote a world's events across
// 4 shards, after that world is deleted and created again with 1, writes
// its next events where the new world's readers read them — its commit is
// conditioned on the head's count, not on what it remembers.
func TestShardsComeFromTheHead(t *testing.T) {
	everyEngine(t, func(t *testing.T, st store.Store) {
		ctx := context.Background()
		writer := world.New(st, world.WithIDs(testIDs))
		spec := manifest("phoenix")
		spec.EventShards = 4
		if _, _, err := writer.PutWorld(ctx, spec, key(0)); err != nil {
			t.Fatal(err)
		}
		public := world.Event{Type: world.PresenceChanged, World: "phoenix", Data: json.RawMessage(`{}`), Visibility: world.Public}
		for range 8 {
			if err := writer.Append(ctx, public); err != nil {
				t.Fatal(err)
			}
		}
		if err := writer.DeleteWorld(ctx, "phoenix", auth.KeyID(key(0))); err != nil {
			t.Fatal(err)
		}
		for done := false; !done; {
			var err error
			if done, err = writer.Purge(ctx, "phoenix", world.PurgeOptions{}); err != nil {
				t.Fatal(err)
			}
		}
		if left := worldtest.Placement(t, st, "phoenix"); len(left) != 0 {
			t.Fatalf("the deletion left %d events", len(left))
		}
		reader := world.New(st, world.WithIDs(testIDs))
		again, created, err := reader.PutWorld(ctx, manifest("phoenix"), key(0))
		if err != nil || !created || again.EventShards != 1 {
			t.Fatalf("created again: %+v, %v, %v; want 1 shard", again, created, err)
		}
		for range 8 {
			if err := writer.Append(ctx, public); err != nil {
				t.Fatal(err)
			}
		}
		page, err := reader.PublicEvents(ctx, "phoenix", "", world.MaxEventLimit)
		if err != nil {
			t.Fatal(err)
		}
		if len(page.Events) != 8 {
			t.Fatalf("the world's reader sees %d of the 8 events written after it was created again", len(page.Events))
		}
	})
}

// TestEventShardsOnlyGrow: a manifest's eventShards is 1 when absent, 1 to
// 16 when given, kept when an update leaves it out, raised by an update,
// and never lowered (Conflict, the count named).
func TestEventShardsOnlyGrow(t *testing.T) {
	everyEngine(t, func(t *testing.T, st store.Store) {
		ctx := context.Background()
		s := world.New(st, world.WithIDs(testIDs))
		for _, n := range []int{-1, world.MaxEventShards + 1} {
			spec := manifest("grow")
			spec.EventShards = n
			_, _, err := s.PutWorld(ctx, spec, key(0))
			wantKind(t, err, apierror.Invalid, "eventShards")
		}
		m, _, err := s.PutWorld(ctx, manifest("grow"), key(0))
		if err != nil || m.EventShards != 1 {
			t.Fatalf("created: %d shards, %v; want 1", m.EventShards, err)
		}
		for _, step := range []struct{ send, want int }{{4, 4}, {0, 4}, {4, 4}, {16, 16}} {
			spec := manifest("grow")
			spec.EventShards = step.send
			m, err := s.UpdateWorld(ctx, spec, key(0))
			if err != nil || m.EventShards != step.want {
				t.Fatalf("update with %d: %d shards, %v; want %d", step.send, m.EventShards, err, step.want)
			}
			if got, err := world.New(st).GetWorld(ctx, "grow"); err != nil || got.EventShards != step.want {
				t.Fatalf("after an update with %d the world shows %d shards (%v), want %d", step.send, got.EventShards, err, step.want)
			}
		}
		spec := manifest("grow")
		spec.EventShards = 8
		_, err = s.UpdateWorld(ctx, spec, key(0))
		wantKind(t, err, apierror.Conflict, "16")
		// The head names what the manifest shows: a commit of a service
		// that knew nothing lands in the shard its id hashes to among 16.
		fresh := world.New(st, world.WithIDs(testIDs))
		if err := fresh.Append(ctx, world.Event{Type: world.PresenceChanged, World: "grow", Data: json.RawMessage(`{}`), Visibility: world.Public}); err != nil {
			t.Fatal(err)
		}
		for id, pk := range worldtest.Placement(t, st, "grow") {
			if want := world.EventKeyIn(world.Event{ID: id, World: "grow"}, 16).PK; pk != want {
				t.Errorf("event %s in %s, want %s", id, pk, want)
			}
		}
	})
}

// TestShardedPollQueries: a poll of a world of 4 shards Queries its 4
// shards and the 4 of the member's private partition (8 Queries, side by
// side, as the 2 of a world of 1 shard are); the public feed, which has
// no private partition, the 4 shards.
func TestShardedPollQueries(t *testing.T) {
	ctx := context.Background()
	for _, shards := range []int{1, 4} {
		t.Run(fmt.Sprint(shards), func(t *testing.T) {
			counted := &storetest.Counting{Store: memory.New()}
			s := world.New(counted, world.WithIDs(testIDs))
			spec := manifest("cost")
			spec.EventShards = shards
			if _, _, err := s.PutWorld(ctx, spec, key(0)); err != nil {
				t.Fatal(err)
			}
			a := join(t, s, "cost", 1)
			counted.Take()
			if _, err := s.Events(ctx, "cost", a.AWNID, "", 0); err != nil {
				t.Fatal(err)
			}
			if calls := counted.Take(); calls[1] != int64(2*shards) {
				t.Fatalf("a poll made %d Queries, want %d (the shards of the shared and of the private partition)", calls[1], 2*shards)
			}
			if _, err := s.PublicEvents(ctx, "cost", "", 0); err != nil {
				t.Fatal(err)
			}
			if calls := counted.Take(); calls[1] != int64(shards) {
				t.Fatalf("a poll of the public feed made %d Queries, want %d (the shards)", calls[1], shards)
			}
		})
	}
}

// TestShardedPollReadsItsShare: in a world of 16 event shards holding 400
// shared events and 400 private ones of the poller, polls of 100 read
// about their share of each shard of either kind (at most 14 events of
// each, 448 in all, not 32 pages of 100), and following them still gives
// every event once, in order — with pages of 100 and of 1.
func TestShardedPollReadsItsShare(t *testing.T) {
	ctx := context.Background()
	st := &storetest.Counting{Store: memory.New()}
	s := world.New(st, world.WithIDs(testIDs))
	spec := manifest("busy16")
	spec.EventShards = world.MaxEventShards
	if _, _, err := s.PutWorld(ctx, spec, key(0)); err != nil {
		t.Fatal(err)
	}
	a := join(t, s, "busy16", 1)
	for i := range 400 {
		e := world.Event{Type: world.PresenceChanged, World: "busy16", Data: json.RawMessage(fmt.Sprintf(`{"n":%d}`, i)), Visibility: world.Public}
		if err := s.Append(ctx, e); err != nil {
			t.Fatal(err)
		}
		e.Visibility, e.Recipient = world.Private, a.AWNID
		if err := s.Append(ctx, e); err != nil {
			t.Fatal(err)
		}
	}
	st.TakeItems()
	page, err := s.Events(ctx, "busy16", a.AWNID, "", world.MaxEventLimit)
	if err != nil {
		t.Fatal(err)
	}
	if read := st.Items(); read > 2*16*14 || len(page) == 0 {
		t.Fatalf("a poll of %d read %d items and answered %d, want at most %d read", world.MaxEventLimit, read, len(page), 2*16*14)
	}
	t.Logf("a poll of %d read %d items and answered %d events", world.MaxEventLimit, st.Items(), len(page))
	want := worldtest.VisibleIDs(t, st, "busy16", a.AWNID)
	if len(want) < 800 {
		t.Fatalf("%d events visible to the poller, want the 800 appended and more", len(want))
	}
	for _, limit := range []int{world.MaxEventLimit, 1} {
		if got := follow(t, s, "busy16", a.AWNID, "", limit); !slices.Equal(ids(got), want) {
			t.Fatalf("following with limit %d saw %d events, want the %d there, once each, in order", limit, len(got), len(want))
		}
	}
}
