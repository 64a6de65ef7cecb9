package world_test

import (
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"testing"

	"github.com/a2awire/a2awire/shared/auth"
	"github.com/a2awire/a2awire/shared/inbox"
	"github.com/a2awire/a2awire/shared/store"
	"github.com/a2awire/a2awire/shared/world"
	"github.com/a2awire/a2awire/shared/world/worldtest"
)

// shardedWorld creates world w of shards event shards, owned by key 0.
func shardedWorld(t *testing.T, s *world.Service, w string, shards int) {
	t.Helper()
	spec := manifest(w)
	spec.EventShards = shards
	if _, _, err := s.PutWorld(context.Background(), spec, key(0)); err != nil {
		t.Fatal(err)
	}
}

// raiseShards raises world w's event shards to shards.
func raiseShards(t *testing.T, s *world.Service, w string, shards int) {
	t.Helper()
	spec := manifest(w)
	spec.EventShards = shards
	if _, err := s.UpdateWorld(context.Background(), spec, key(0)); err != nil {
		t.Fatal(err)
	}
}

// appendPrivate appends n private events for to.
func appendPrivate(t *testing.T, s *world.Service, w, to string, n int) {
	t.Helper()
	for i := range n {
		e := world.Event{Type: world.MessageReceived, World: w, Data: json.RawMessage(fmt.Sprintf(`{"n":%d}`, i)), Visibility: world.Private, Recipient: to}
		if err := s.Append(context.Background(), e); err != nil {
			t.Fatal(err)
		}
	}
}

// wantSpread fails unless the shards of pk hold items in exactly the
// first shards of them, each at least one, and want in all.
func wantSpread(t *testing.T, st store.Store, pk string, shards, want int) {
	t.Helper()
	counts := worldtest.Count(t, st, pk)
	total := 0
	for n, c := range counts {
		total += c
		if n < shards && c == 0 || n >= shards && c > 0 {
			t.Errorf("%s: %v items by shard, want items in each of the first %d and none past them", pk, counts, shards)
			return
		}
	}
	if total != want {
		t.Errorf("%s: %d items in its shards (%v), want %d", pk, total, counts, want)
	}
}

// privateOf is the ids of the private events among evs.
func privateOf(evs []world.Event) []string {
	var out []string
	for _, e := range evs {
		if e.Visibility == world.Private {
			out = append(out, e.ID)
		}
	}
	return out
}

// TestShardedPrivateEvents: in a world of 4 event shards, a recipient's
// private events are spread over the 4 shards of its private partition,
// each in the shard its id hashes to (EventKeyIn), and followers of every
// page size see each of them once, in order, beside the shared events —
// the poll reads every private shard (reading shard 0 only misses ~3/4).
// Another member sees none of them.
func TestShardedPrivateEvents(t *testing.T) {
	everyEngine(t, func(t *testing.T, st store.Store) {
		s := world.New(st, world.WithIDs(testIDs))
		shardedWorld(t, s, "privy", 4)
		a, b := join(t, s, "privy", 1), join(t, s, "privy", 2)
		appendPrivate(t, s, "privy", a.AWNID, 60)
		wantSpread(t, st, world.PrivateEventsPK("privy", a.AWNID), 4, 60)
		for n, pk := range worldtest.ShardPKs(world.PrivateEventsPK("privy", a.AWNID))[:4] {
			page, err := st.Query(context.Background(), store.Query{PK: pk})
			if err != nil {
				t.Fatal(err)
			}
			for _, it := range page.Items {
				e, err := world.DecodeEvent(it)
				if err != nil {
					t.Fatal(err)
				}
				if want := world.EventKeyIn(e, 4).PK; pk != want {
					t.Fatalf("event %s in shard %d (%s), want %s", e.ID, n, pk, want)
				}
			}
		}
		want := worldtest.VisibleIDs(t, st, "privy", a.AWNID)
		for _, limit := range []int{1, 7, world.MaxEventLimit} {
			got := follow(t, s, "privy", a.AWNID, "", limit)
			if !slices.Equal(ids(got), want) {
				t.Fatalf("following with limit %d saw %d events, want the %d there, once each, in order", limit, len(got), len(want))
			}
			if n := len(privateOf(got)); n != 60 {
				t.Fatalf("following with limit %d saw %d private events, want 60", limit, n)
			}
		}
		if got := privateOf(follow(t, s, "privy", b.AWNID, "", world.MaxEventLimit)); len(got) != 0 {
			t.Fatalf("another member saw %d private events", len(got))
		}
	})
}

// TestRaisedShardsKeepPrivateEvents: private events committed while a
// world had 1 shard stay in shard 0 and are still read once its owner
// raises the count to 4, beside those committed after, spread over 4.
func TestRaisedShardsKeepPrivateEvents(t *testing.T) {
	everyEngine(t, func(t *testing.T, st store.Store) {
		s := world.New(st, world.WithIDs(testIDs))
		shardedWorld(t, s, "raised", 1)
		a := join(t, s, "raised", 1)
		appendPrivate(t, s, "raised", a.AWNID, 20)
		wantSpread(t, st, world.PrivateEventsPK("raised", a.AWNID), 1, 20)
		raiseShards(t, s, "raised", 4)
		appendPrivate(t, s, "raised", a.AWNID, 40)
		wantSpread(t, st, world.PrivateEventsPK("raised", a.AWNID), 4, 60)
		want := worldtest.VisibleIDs(t, st, "raised", a.AWNID)
		for _, limit := range []int{3, world.MaxEventLimit} {
			got := follow(t, s, "raised", a.AWNID, "", limit)
			if !slices.Equal(ids(got), want) || len(privateOf(got)) != 60 {
				t.Fatalf("following with limit %d saw %d events (%d private), want the %d there (60 private), once each, in order",
					limit, len(got), len(privateOf(got)), len(want))
			}
		}
	})
}

// sendMany sends n messages to to from the members froms in turn.
func sendMany(t *testing.T, box *inbox.Inbox, w, to string, froms []string, n int) {
	t.Helper()
	for i := range n {
		if _, err := box.Send(context.Background(), w, froms[i%len(froms)], to, json.RawMessage(fmt.Sprintf(`{"n":%d}`, i)), ""); err != nil {
			t.Fatal(err)
		}
	}
}

// TestRemovalClearsEveryInboxShard: in a world of 4 event shards, the
// inbox of a member that leaves, is kicked or is banned is spread over 4
// partitions, and the removal leaves no message in any of them (its
// transaction takes shard 0's, the others are cleared after). The leave
// is made by a service that never saw the world (its commit learns the
// count from the head), the kick and the ban by one that did.
func TestRemovalClearsEveryInboxShard(t *testing.T) {
	everyEngine(t, func(t *testing.T, st store.Store) {
		ctx := context.Background()
		s := world.New(st, world.WithIDs(testIDs))
		shardedWorld(t, s, "exits", 4)
		var members []world.Member
		for n := 1; n <= 5; n++ {
			members = append(members, join(t, s, "exits", n))
		}
		senders := []string{members[3].AWNID, members[4].AWNID}
		box := inbox.New(st, inbox.WithIDs(testIDs))
		for _, m := range members[:3] {
			sendMany(t, box, "exits", m.AWNID, senders, 40)
			wantSpread(t, st, world.InboxPK("exits", m.AWNID), 4, 40)
		}
		if err := world.New(st, world.WithIDs(testIDs)).Leave(ctx, "exits", members[0].AWNID); err != nil {
			t.Fatal(err)
		}
		if _, err := s.Kick(ctx, "exits", members[1].AWNID); err != nil {
			t.Fatal(err)
		}
		if _, _, err := s.Ban(ctx, "exits", members[2].AWNID, ""); err != nil {
			t.Fatal(err)
		}
		for i, how := range []string{"leave", "kick", "ban"} {
			if counts := worldtest.Count(t, st, world.InboxPK("exits", members[i].AWNID)); slices.Max(counts) != 0 {
				t.Errorf("after the %s the inbox's shards hold %v messages, want none", how, counts)
			}
		}
	})
}

// TestJoinClearsStraysInEveryShard: messages left in every shard of an
// inbox of a world of 4 event shards by an earlier membership are gone
// once the key joins again — whether the joining service knew the count
// (it reads every shard beside the join's other reads and deletes them in
// its transaction) or not (its commit learns the count, and it clears the
// shards it did not read after).
func TestJoinClearsStraysInEveryShard(t *testing.T) {
	everyEngine(t, func(t *testing.T, st store.Store) {
		ctx := context.Background()
		s := world.New(st, world.WithIDs(testIDs))
		shardedWorld(t, s, "strays", 4)
		join(t, s, "strays", 1) // s has now committed under 4 shards
		for _, c := range []struct {
			who int
			s   *world.Service
		}{{2, s}, {3, world.New(st, world.WithIDs(testIDs))}} {
			awnID := auth.AWNID(key(c.who))
			var puts []store.Action
			for n := range 4 {
				for i := range 3 {
					puts = append(puts, store.Put(store.Key{PK: world.ShardPK(world.InboxPK("strays", awnID), n), SK: fmt.Sprintf("MSG#%d%d", n, i)},
						store.Item{world.AttrType: store.S(inbox.TypeMessage)}))
				}
			}
			if _, err := st.Write(ctx, puts...); err != nil {
				t.Fatal(err)
			}
			join(t, c.s, "strays", c.who)
			if counts := worldtest.Count(t, st, world.InboxPK("strays", awnID)); slices.Max(counts) != 0 {
				t.Errorf("key %d: after the join the inbox's shards hold %v strays, want none", c.who, counts)
			}
		}
	})
}
