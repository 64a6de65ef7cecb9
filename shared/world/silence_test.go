package world_test

import (
	"context"
	"errors"
	"slices"
	"testing"
	"time"

	"github.com/a2awire/a2awire/shared/auth"
	"github.com/a2awire/a2awire/shared/store"
	storeguard "github.com/a2awire/a2awire/shared/store/guard"
	"github.com/a2awire/a2awire/shared/store/roundtrips"
	"github.com/a2awire/a2awire/shared/world"
)

// warmPoller polls as world-events does on an instance that has seen the
// member's key: the key from this instance's cache (its membership and the
// world joining the request's guard), a nonce added, then PollAs. Every
// store call is held 50 ms, so that calls side by side overlap and Take
// counts the poll's sequential round trips.
type warmPoller struct {
	t  *testing.T
	s  *world.Service
	g  store.Store
	rt *roundtrips.Store
	n  int
}

func newWarmPoller(t *testing.T, st store.Store, c *clock, id string) *warmPoller {
	rt := roundtrips.WithDelay(st, 50*time.Millisecond)
	g := storeguard.Wrap(rt)
	return &warmPoller{t: t, s: world.New(g, world.WithClock(c.Now), world.WithIDs(testIDs)), g: g, rt: rt}
}

// poll polls world id as member n and returns its sequential round trips.
func (w *warmPoller) poll(id string, n int) int {
	w.t.Helper()
	ctx, _ := storeguard.Begin(context.Background())
	_, awnID, err := w.s.MemberKey(ctx, id, auth.KeyID(key(n)))
	if err != nil {
		w.t.Fatal(err)
	}
	w.n++
	nk := store.Key{PK: "NONCE#warm" + string(rune('a'+w.n)), SK: "N"}
	storeguard.Add(ctx, w.g, storeguard.Part{Action: store.Put(nk, store.Item{"type": store.S("nonce")}).When(store.ItemAbsent()),
		Refused: func(*store.ConditionFailedError) error { return errReplayed }})
	w.rt.Take()
	_, err = w.s.PollAs(ctx, id, awnID, auth.KeyID(key(n)), "", 50, 0)
	if gerr := storeguard.Settle(ctx); gerr != nil && err == nil {
		err = gerr
	}
	if err != nil {
		w.t.Fatal(err)
	}
	return w.rt.Take()
}

// TestWarmPollAfterSilence: a warm poll after a silence the presence sweep
// has not announced commits the missed offline (since: when the silence
// began) and the online in the transaction that records it — 2 sequential
// round trips, as a steady poll, where the webhook read and the two
// announcements one after another made it 4. The webhook is read beside
// the member, so a member whose webhook did not answer is 2 round trips
// too and announces the same; one whose webhook answered stayed online,
// announces nothing, and is 2 (it was 3). The sweep, running after, finds
// nothing to announce, and a second poll is steady. On an instance that
// has not seen the key the webhook is not read first: the poll's write
// assumes none, fails on the one that did not answer, which it returns,
// and announces the same.
func TestWarmPollAfterSilence(t *testing.T) {
	everyEngine(t, func(t *testing.T, st store.Store) {
		ctx := context.Background()
		c := &clock{now: t0}
		s := newWorld(t, st, c, "arena")
		w := newWarmPoller(t, st, c, "arena")
		a, b, d := join(t, s, "arena", 1), join(t, s, "arena", 2), join(t, s, "arena", 3)
		put := func(m world.Member, answered bool) {
			item := store.Item{world.AttrType: store.S("webhook"), "url": store.S("https://example.com/h"), "enabled": store.Bool(true)}
			if answered {
				item["lastSuccessAt"] = store.N(t0.UnixNano())
			} else {
				item["lastErrorAt"] = store.N(t0.UnixNano())
			}
			if _, err := st.Write(ctx, store.Put(world.WebhookKey("arena", m.AWNID), item)); err != nil {
				t.Fatal(err)
			}
		}
		put(b, false)
		put(d, true)
		for n := 1; n <= 3; n++ {
			w.poll("arena", n) // online
		}
		c.Advance(world.ReachableWithin + 15*time.Second)
		since := t0.Add(world.ReachableWithin).Format(time.RFC3339Nano)

		if got := w.poll("arena", 1); got != 2 {
			t.Errorf("a warm poll after an unannounced silence took %d sequential round trips, want 2", got)
		}
		if got, want := presenceOf(t, s, "arena", a.AWNID, a.AWNID), []string{"online@", "offline@" + since, "online@"}; !slices.Equal(got, want) {
			t.Fatalf("announced %v, want %v", got, want)
		}
		if got := w.poll("arena", 2); got != 2 {
			t.Errorf("the same poll of a member whose webhook failed took %d round trips, want 2", got)
		}
		if got, want := presenceOf(t, s, "arena", b.AWNID, b.AWNID), []string{"online@", "offline@" + since, "online@"}; !slices.Equal(got, want) {
			t.Fatalf("webhook failed: announced %v, want %v", got, want)
		}
		if got := w.poll("arena", 3); got != 2 {
			t.Errorf("the same poll of a member whose webhook answered took %d round trips, want 2", got)
		}
		if got, want := presenceOf(t, s, "arena", d.AWNID, d.AWNID), []string{"online@"}; !slices.Equal(got, want) {
			t.Fatalf("webhook answered: announced %v, want %v (it never went offline)", got, want)
		}
		for _, m := range []world.Member{a, b, d} {
			got, err := s.Member(ctx, "arena", m.AWNID)
			if err != nil || got.Announced != world.PresenceOnline || !got.LastPollAt.Equal(c.Now()) {
				t.Fatalf("member %+v, %v: want announced online, polled now", got, err)
			}
		}
		if rep := sweep(t, s); rep.Offline != 0 {
			t.Fatalf("the sweep announced %d lapses the polls had announced", rep.Offline)
		}
		c.Advance(time.Second)
		if got := w.poll("arena", 1); got != 2 {
			t.Errorf("the next poll took %d round trips, want 2", got)
		}
		if got := presenceOf(t, s, "arena", a.AWNID, a.AWNID); len(got) != 3 {
			t.Fatalf("a steady poll announced: %v", got)
		}

		// Cold, with a webhook that did not answer.
		bm, err := s.Member(ctx, "arena", b.AWNID)
		if err != nil {
			t.Fatal(err)
		}
		coldSince := bm.LastPollAt.Add(world.ReachableWithin).Format(time.RFC3339Nano)
		c.Advance(world.ReachableWithin + 15*time.Second)
		if _, _, _, err := coldPoll(t, st, c, "arena", 2, "cold-silence"); err != nil {
			t.Fatal(err)
		}
		if got, want := presenceOf(t, s, "arena", b.AWNID, b.AWNID), []string{"online@", "offline@" + since, "online@", "offline@" + coldSince, "online@"}; !slices.Equal(got, want) {
			t.Fatalf("cold, webhook failed: announced %v, want %v", got, want)
		}
	})
}

// TestSilenceRacingSweep: the presence sweep announcing the silence
// between a poll's read and its write makes the poll's combined write
// fail on the member's presence; the poll then announces only the online,
// so the log holds offline once.
func TestSilenceRacingSweep(t *testing.T) {
	everyEngine(t, func(t *testing.T, st store.Store) {
		c := &clock{now: t0}
		s := newWorld(t, st, c, "arena")
		a := join(t, s, "arena", 1)
		if err := s.MarkPolled(context.Background(), "arena", a.AWNID); err != nil {
			t.Fatal(err)
		}
		c.Advance(world.ReachableWithin + time.Minute)
		swept := false
		racing := world.New(&beforeTransaction{Store: st, hook: func() {
			swept = true
			if rep := sweep(t, s); rep.Offline != 1 {
				t.Errorf("the racing sweep announced %d lapses, want 1", rep.Offline)
			}
		}}, world.WithClock(c.Now), world.WithIDs(testIDs))
		if _, err := racing.Poll(context.Background(), "arena", a.AWNID, "", 50, 0); err != nil {
			t.Fatal(err)
		}
		if !swept {
			t.Fatal("the poll made no transaction for the sweep to race")
		}
		since := t0.Add(world.ReachableWithin).Format(time.RFC3339Nano)
		if got, want := presenceOf(t, s, "arena", a.AWNID, a.AWNID), []string{"online@", "offline@" + since, "online@"}; !slices.Equal(got, want) {
			t.Fatalf("announced %v, want %v", got, want)
		}
	})
}

// TestCommitAll: events committed together get increasing ids, the head
// moves to the last, and a caller's condition failing writes none of them.
func TestCommitAll(t *testing.T) {
	everyEngine(t, func(t *testing.T, st store.Store) {
		ctx := context.Background()
		log := world.NewLog(st, testIDs, time.Now)
		var evs []world.Event
		for _, typ := range []string{"test.one", "test.two"} {
			ev, err := testIDs.NewEvent("arena", typ, world.Public, "", map[string]string{}, time.Now())
			if err != nil {
				t.Fatal(err)
			}
			evs = append(evs, ev)
		}
		guardKey := store.Key{PK: "TEST#guard", SK: "G"}
		if _, err := log.CommitAll(ctx, evs, store.Check(guardKey, store.ItemExists())); !errors.Is(err, store.ErrConditionFailed) {
			t.Fatalf("a failed condition: %v, want ErrConditionFailed", err)
		}
		if head, err := log.Head(ctx, "arena"); err != nil || head.Last != "" {
			t.Fatalf("after a failed commit the head is %q (%v), want none", head.Last, err)
		}
		if _, err := st.Write(ctx, store.Put(guardKey, store.Item{"type": store.S("test")})); err != nil {
			t.Fatal(err)
		}
		got, err := log.CommitAll(ctx, evs, store.Check(guardKey, store.ItemExists()))
		if err != nil {
			t.Fatal(err)
		}
		if len(got) != 2 || got[0].ID >= got[1].ID || got[0].Type != "test.one" {
			t.Fatalf("committed %+v, want test.one then test.two with increasing ids", got)
		}
		if head, err := log.Head(ctx, "arena"); err != nil || head.Last != got[1].ID {
			t.Fatalf("head %q (%v), want %q", head.Last, err, got[1].ID)
		}
		page, err := st.Query(ctx, store.Query{PK: world.SharedEventsPK("arena")})
		if err != nil || len(page.Items) != 2 {
			t.Fatalf("read back %d events (%v), want 2", len(page.Items), err)
		}
	})
}

// TestStreamOpenRoundTrips: an event stream opened on a warm instance
// (Follow, its first page) is 2 sequential round trips as a poll is — the
// head, the member and its webhook beside the guard, then the record
// beside the pages — whether the member is steady, new, or back from a
// silence not yet announced.
func TestStreamOpenRoundTrips(t *testing.T) {
	everyEngine(t, func(t *testing.T, st store.Store) {
		c := &clock{now: t0}
		s := newWorld(t, st, c, "arena")
		w := newWarmPoller(t, st, c, "arena")
		m := join(t, s, "arena", 1)
		open := func() int {
			t.Helper()
			ctx, _ := storeguard.Begin(context.Background())
			if _, _, err := w.s.MemberKey(ctx, "arena", auth.KeyID(key(1))); err != nil {
				t.Fatal(err)
			}
			w.n++
			nk := store.Key{PK: "NONCE#stream" + string(rune('a'+w.n)), SK: "N"}
			storeguard.Add(ctx, w.g, storeguard.Part{Action: store.Put(nk, store.Item{"type": store.S("nonce")}).When(store.ItemAbsent()),
				Refused: func(*store.ConditionFailedError) error { return errReplayed }})
			w.rt.Take()
			if _, err := w.s.Follow(ctx, "arena", m.AWNID, ""); err != nil {
				t.Fatal(err)
			}
			if err := storeguard.Settle(ctx); err != nil {
				t.Fatal(err)
			}
			return w.rt.Take()
		}
		for _, step := range []struct {
			name    string
			advance time.Duration
		}{{"new member", 0}, {"steady", time.Second}, {"after a silence", world.ReachableWithin + 15*time.Second}} {
			c.Advance(step.advance)
			if got := open(); got != 2 {
				t.Errorf("%s: the stream's open took %d sequential round trips, want 2", step.name, got)
			}
		}
		if got := presenceOf(t, s, "arena", m.AWNID, m.AWNID); len(got) != 3 {
			t.Fatalf("announced %v, want online, offline, online", got)
		}
	})
}
