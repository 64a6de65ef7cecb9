package inbox_test

import (
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/a2awire/a2awire/shared/apierror"
	"github.com/a2awire/a2awire/shared/inbox"
	"github.com/a2awire/a2awire/shared/store"
	"github.com/a2awire/a2awire/shared/world"
	"github.com/a2awire/a2awire/shared/world/worldtest"
)

// fanIn creates world w of shards event shards (owned by key 0) and joins
// keys 1 to members to it, before the tests' clocks start; it returns
// their awnIds and the world's service.
func fanIn(t *testing.T, st store.Store, w string, shards, members int) ([]string, *world.Service) {
	t.Helper()
	ctx := context.Background()
	s := world.New(st, world.WithClock(func() time.Time { return t0.Add(-time.Hour) }))
	spec := world.Manifest{ID: w, Name: w, Description: "a sharded test world", Category: "test", EventShards: shards}
	if _, _, err := s.PutWorld(ctx, spec, key(0)); err != nil {
		t.Fatal(err)
	}
	var out []string
	for n := 1; n <= members; n++ {
		m, _, err := s.Join(ctx, w, key(n), nil)
		if err != nil {
			t.Fatal(err)
		}
		out = append(out, m.AWNID)
	}
	return out, s
}

// raise raises world w's event shards to shards.
func raise(t *testing.T, s *world.Service, w string, shards int) {
	t.Helper()
	spec := world.Manifest{ID: w, Name: w, Description: "a sharded test world", Category: "test", EventShards: shards}
	if _, err := s.UpdateWorld(context.Background(), spec, key(0)); err != nil {
		t.Fatal(err)
	}
}

// sendFrom sends n messages to to in w from froms in turn, advancing c by
// a millisecond after each (nil: the real clock), and returns their ids.
func sendFrom(t *testing.T, b *inbox.Inbox, c *clock, w, to string, froms []string, n int) []string {
	t.Helper()
	var out []string
	for i := range n {
		m, err := b.Send(context.Background(), w, froms[i%len(froms)], to, json.RawMessage(fmt.Sprintf(`{"n":%d}`, i)), "")
		if err != nil {
			t.Fatal(err)
		}
		out = append(out, m.ID)
		if c != nil {
			c.Advance(time.Millisecond)
		}
	}
	return out
}

// spread returns how many items each of the first MaxEventShards shards
// of pk holds, and fails unless exactly the first shards of them hold
// any, each at least one.
func spread(t *testing.T, st store.Store, pk string, shards int) []int {
	t.Helper()
	counts := worldtest.Count(t, st, pk)
	for n, c := range counts {
		if n < shards && c == 0 || n >= shards && c > 0 {
			t.Fatalf("%s: %v items by shard, want items in each of the first %d and none past them", pk, counts, shards)
		}
	}
	return counts
}

func total(counts []int) int {
	n := 0
	for _, c := range counts {
		n += c
	}
	return n
}

// readFrom is read in world w.
func readFrom(t *testing.T, b *inbox.Inbox, w, awnID string, o inbox.ReadOptions) []inbox.Message {
	t.Helper()
	ms, err := b.Read(context.Background(), w, awnID, o)
	if err != nil {
		t.Fatalf("read %s %+v: %v", awnID, o, err)
	}
	return ms
}

// TestShardedInboxSpreadsAndReads: in a world of 4 event shards, 60
// messages from 5 senders to one recipient are spread over the 4 shards
// of its inbox and the 4 of its private events (each message beside its
// event); peeking shows them all, oldest first; consuming reads of 25
// return each once, in order, and leave every shard empty. The recipient's
// poll sees every message.received once, in order. Reading shard 0 only,
// or deleting by a key recomputed from the id (shard 0), fails it.
func TestShardedInboxSpreadsAndReads(t *testing.T) {
	everyEngine(t, func(t *testing.T, st store.Store) {
		ms, _ := fanIn(t, st, "fanin", 4, 6)
		to, froms := ms[0], ms[1:]
		c := &clock{now: t0}
		b := inbox.New(st, inbox.WithClock(c.Now))
		sent := sendFrom(t, b, c, "fanin", to, froms, 60)
		if n := total(spread(t, st, world.InboxPK("fanin", to), 4)); n != 60 {
			t.Fatalf("%d messages in the inbox's shards, want 60", n)
		}
		if n := total(spread(t, st, world.PrivateEventsPK("fanin", to), 4)); n != 60 {
			t.Fatalf("%d events in the private shards, want 60", n)
		}
		drainInOrder(t, st, b, c, "fanin", to, sent, 25)
	})
}

// wantReceived fails unless following awnID's events in w with pages of 7
// shows a message.received for each of sent, once, in order.
func wantReceived(t *testing.T, s *world.Service, w, awnID string, sent []string) {
	t.Helper()
	var got []string
	after := ""
	for range 1000 {
		p, err := s.Poll(context.Background(), w, awnID, after, 7, 0)
		if err != nil {
			t.Fatal(err)
		}
		if len(p.Events) == 0 {
			break
		}
		for _, e := range p.Events {
			if e.Type != world.MessageReceived {
				continue
			}
			var d struct {
				MessageID string `json:"messageId"`
			}
			if err := json.Unmarshal(e.Data, &d); err != nil {
				t.Fatal(err)
			}
			got = append(got, d.MessageID)
		}
		after = p.Cursor
	}
	if !slices.Equal(got, sent) {
		t.Fatalf("the recipient's poll saw %d message.received, want one per message sent (%d), once each, in order", len(got), len(sent))
	}
}

// TestShardedInboxDrops: 250 messages to one inbox of a world of 4 event
// shards: a peek shows exactly the newest 100 (the newest across the
// shards, not of one), and the first consuming read deletes the 150
// dropped ones in every shard before it consumes its 10, so 90 items are
// left in all.
func TestShardedInboxDrops(t *testing.T) {
	everyEngine(t, func(t *testing.T, st store.Store) {
		ms, _ := fanIn(t, st, "flood", 4, 4)
		to, froms := ms[0], ms[1:]
		c := &clock{now: t0}
		b := inbox.New(st, inbox.WithClock(c.Now))
		sent := sendFrom(t, b, c, "flood", to, froms, 250)
		spread(t, st, world.InboxPK("flood", to), 4)
		kept := sent[len(sent)-inbox.MaxMessages:]
		if got := readFrom(t, b, "flood", to, inbox.ReadOptions{Peek: true, Limit: 100}); !slices.Equal(ids(got), kept) {
			t.Fatalf("peek shows %d messages, want the newest 100 (first shown %v, want %s)", len(got), ids(got[:min(1, len(got))]), kept[0])
		}
		if got := readFrom(t, b, "flood", to, inbox.ReadOptions{Limit: 10}); !slices.Equal(ids(got), kept[:10]) {
			t.Fatalf("the first consuming read returned %v, want the oldest 10 of the newest 100", ids(got))
		}
		counts := worldtest.Count(t, st, world.InboxPK("flood", to))
		if total(counts) != 90 {
			t.Fatalf("after the read the inbox's shards hold %v items, want 90 in all: the dropped ones deleted in every shard", counts)
		}
		if got := readFrom(t, b, "flood", to, inbox.ReadOptions{Limit: 100}); !slices.Equal(ids(got), kept[10:]) {
			t.Fatalf("the next read returned %d messages, want the other 90 kept", len(got))
		}
	})
}

// TestShardedInboxConcurrentReaders: 4 consuming readers drain an inbox of
// a world of 4 event shards while 5 senders send 90 messages into it: no
// message is returned twice, none is lost, and every shard is empty after.
func TestShardedInboxConcurrentReaders(t *testing.T) {
	everyEngine(t, func(t *testing.T, st store.Store) {
		ctx := context.Background()
		ms, _ := fanIn(t, st, "race", 4, 6)
		to, froms := ms[0], ms[1:]
		b := inbox.New(st)
		const perSender = 18 // 90 in all: none dropped
		var sent []string
		var mu sync.Mutex
		var sending, reading sync.WaitGroup
		var sendErr error
		for _, from := range froms {
			sending.Go(func() {
				for i := range perSender {
					m, err := b.Send(ctx, "race", from, to, json.RawMessage(fmt.Sprint(i)), "")
					mu.Lock()
					if err != nil {
						sendErr = err
					} else {
						sent = append(sent, m.ID)
					}
					mu.Unlock()
				}
			})
		}
		var done atomic.Bool
		got := make([][]string, 4)
		errs := make([]error, 4)
		var busy atomic.Int64
		for r := range got {
			reading.Go(func() {
				for {
					last := done.Load() // read once more after the senders end
					page, err := b.Read(ctx, "race", to, inbox.ReadOptions{Limit: 7})
					if apierror.KindOf(err) == apierror.Unavailable && busy.Add(1) < 100 {
						continue // racing readers: read again, as a client would
					}
					if err != nil {
						errs[r] = err
						return
					}
					got[r] = append(got[r], ids(page)...)
					if len(page) == 0 && last {
						return
					}
				}
			})
		}
		sending.Wait()
		done.Store(true)
		reading.Wait()
		if sendErr != nil {
			t.Fatal(sendErr)
		}
		seen := map[string]int{}
		for r := range got {
			if errs[r] != nil {
				t.Fatalf("reader %d: %v", r, errs[r])
			}
			for _, id := range got[r] {
				if prev, dup := seen[id]; dup {
					t.Fatalf("message %s returned to reader %d and to reader %d", id, prev, r)
				}
				seen[id] = r
			}
		}
		slices.Sort(sent)
		var union []string
		for id := range seen {
			union = append(union, id)
		}
		slices.Sort(union)
		if !slices.Equal(union, sent) {
			t.Fatalf("the readers got %d distinct messages, want the %d sent", len(union), len(sent))
		}
		if n := total(worldtest.Count(t, st, world.InboxPK("race", to))); n != 0 {
			t.Fatalf("%d messages left in the inbox's shards", n)
		}
		t.Logf("%d messages, %d reads refused as busy", len(sent), busy.Load())
	})
}

// TestRaisedShardsKeepMessages: 30 messages sent while the world had 1
// event shard (all in shard 0), then its owner raises the count to 4 and
// 30 more are spread over 4: every one is readable, in order, and
// consumed once — each deleted where it is, not where 4 shards would put
// it — and the recipient's poll sees each message.received once, in
// order, the old ones in shard 0 of its private partition.
func TestRaisedShardsKeepMessages(t *testing.T) {
	everyEngine(t, func(t *testing.T, st store.Store) {
		ms, s := fanIn(t, st, "grown", 1, 4)
		to, froms := ms[0], ms[1:]
		c := &clock{now: t0}
		b := inbox.New(st, inbox.WithClock(c.Now))
		sent := sendFrom(t, b, c, "grown", to, froms, 30)
		spread(t, st, world.InboxPK("grown", to), 1)
		raise(t, s, "grown", 4)
		sent = append(sent, sendFrom(t, b, c, "grown", to, froms, 30)...)
		spread(t, st, world.InboxPK("grown", to), 4)
		spread(t, st, world.PrivateEventsPK("grown", to), 4)
		drainInOrder(t, st, b, c, "grown", to, sent, 11)
	})
}

// TestShardedInboxLeave: the recipient of messages in every shard of its
// inbox leaves: no message is left in any shard (package world clears
// them), and a send to it is refused.
func TestShardedInboxLeave(t *testing.T) {
	everyEngine(t, func(t *testing.T, st store.Store) {
		ctx := context.Background()
		ms, s := fanIn(t, st, "gone", 4, 4)
		to, froms := ms[0], ms[1:]
		b := inbox.New(st)
		sendFrom(t, b, nil, "gone", to, froms, 40)
		spread(t, st, world.InboxPK("gone", to), 4)
		if err := s.Leave(ctx, "gone", to); err != nil {
			t.Fatal(err)
		}
		if n := total(worldtest.Count(t, st, world.InboxPK("gone", to))); n != 0 {
			t.Fatalf("after the leave %d messages are left in the inbox's shards", n)
		}
		_, err := b.Send(ctx, "gone", froms[0], to, json.RawMessage(`1`), "")
		if err == nil {
			t.Fatalf("a send to %s after its leave was accepted", to)
		}
	})
}

// drainInOrder checks that a peek of to's inbox in w shows the messages
// sent (ids, oldest first) and that consuming reads of limit return each
// once, in order, leaving no message in any shard and every
// message.received seen once by to's poll.
func drainInOrder(t *testing.T, st store.Store, b *inbox.Inbox, c *clock, w, to string, sent []string, limit int) {
	t.Helper()
	if got := readFrom(t, b, w, to, inbox.ReadOptions{Peek: true, Limit: 100}); !slices.Equal(ids(got), sent) {
		t.Fatalf("peek shows %d messages, want the %d sent, oldest first", len(got), len(sent))
	}
	var got []string
	for {
		page := readFrom(t, b, w, to, inbox.ReadOptions{Limit: limit})
		if len(page) == 0 {
			break
		}
		got = append(got, ids(page)...)
	}
	if !slices.Equal(got, sent) {
		t.Fatalf("consuming reads returned %d messages, want the %d sent, once each, in order", len(got), len(sent))
	}
	if n := total(worldtest.Count(t, st, world.InboxPK(w, to))); n != 0 {
		t.Fatalf("after the reads %d messages are left in the inbox's shards", n)
	}
	wantReceived(t, world.New(st, world.WithClock(c.Now)), w, to, sent)
}
