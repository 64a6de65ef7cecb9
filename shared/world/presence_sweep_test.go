package world_test

import (
	"context"
	"encoding/json"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/a2awire/a2awire/shared/store"
	"github.com/a2awire/a2awire/shared/store/roundtrips"
	"github.com/a2awire/a2awire/shared/world"
)

// presenceOf lists the presence.changed of awnID in world as
// "presence@since", read by reader.
func presenceOf(t *testing.T, s *world.Service, id, reader, awnID string) []string {
	t.Helper()
	var out []string
	for _, e := range eventsOf(t, s, id, reader) {
		if e.Type != world.PresenceChanged {
			continue
		}
		var d struct{ AWNID, Presence, Since string }
		if err := json.Unmarshal(e.Data, &d); err != nil {
			t.Fatal(err)
		}
		if d.AWNID == awnID {
			out = append(out, d.Presence+"@"+d.Since)
		}
	}
	return out
}

func sweep(t *testing.T, s *world.Service) world.SweepReport {
	t.Helper()
	rep, err := s.SweepPresence(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	return rep
}

// TestPresenceSweep: on the injected clock, the sweep announces offline
// (once, data.since the moment the poll lapsed) for a member that stopped
// polling, moves on a member that kept polling, drops the schedule of a
// member that left, leaves a member whose webhook answers online, and
// reads nothing but the schedule when nothing is due: PresenceShards
// Queries however many members are online.
func TestPresenceSweep(t *testing.T) {
	everyEngine(t, func(t *testing.T, st store.Store) {
		ctx := context.Background()
		c := &clock{now: t0}
		rt := roundtrips.Wrap(st)
		s := newWorld(t, rt, c, "lobby")
		obs := join(t, s, "lobby", 9) // reads the events
		a, b, d, h := join(t, s, "lobby", 1), join(t, s, "lobby", 2), join(t, s, "lobby", 3), join(t, s, "lobby", 4)
		for _, m := range []world.Member{a, b, d, h} {
			if err := s.MarkPolled(ctx, "lobby", m.AWNID); err != nil {
				t.Fatal(err)
			}
		}
		// h's webhook answered its last delivery.
		if _, err := st.Write(ctx, store.Put(world.WebhookKey("lobby", h.AWNID), store.Item{
			world.AttrType: store.S("webhook"), "url": store.S("https://example.com/h"), "enabled": store.Bool(true),
			"lastSuccessAt": store.N(t0.UnixNano()),
		})); err != nil {
			t.Fatal(err)
		}
		c.Advance(10 * time.Second)
		rt.Take()
		if rep := sweep(t, s); rep != (world.SweepReport{}) {
			t.Fatalf("nothing due yet, the sweep did %+v", rep)
		}
		if n := rt.Take(); n != world.PresenceShards {
			t.Fatalf("a sweep with nothing due made %d store calls, want %d Queries", n, world.PresenceShards)
		}
		c.Advance(10 * time.Second) // t0+20s
		if err := s.MarkPolled(ctx, "lobby", a.AWNID); err != nil {
			t.Fatal(err)
		}
		c.Advance(11 * time.Second) // t0+31s: b's and h's polls lapsed
		if err := s.Leave(ctx, "lobby", d.AWNID); err != nil {
			t.Fatal(err)
		}
		if rep, want := sweep(t, s), (world.SweepReport{Due: 4, Offline: 1, Moved: 2, Dropped: 1}); rep != want {
			t.Fatalf("sweep at t0+31s: %+v, want %+v", rep, want)
		}
		lapsed := t0.Add(30 * time.Second).Format(time.RFC3339Nano)
		if got, want := fmt.Sprint(presenceOf(t, s, "lobby", obs.AWNID, b.AWNID)), fmt.Sprint([]string{"online@", "offline@" + lapsed}); got != want {
			t.Fatalf("b: %s, want %s", got, want)
		}
		for _, m := range []world.Member{a, h} {
			if got := presenceOf(t, s, "lobby", obs.AWNID, m.AWNID); len(got) != 1 {
				t.Fatalf("%s (still online): %v", m.AWNID, got)
			}
		}
		if rep := sweep(t, s); rep.Due != 0 {
			t.Fatalf("a second sweep at once found %+v", rep)
		}
		// b polls again: online; a stops and lapses at t0+50s.
		if err := s.MarkPolled(ctx, "lobby", b.AWNID); err != nil {
			t.Fatal(err)
		}
		c.Advance(20 * time.Second) // t0+51s
		if rep, want := sweep(t, s), (world.SweepReport{Due: 1, Offline: 1}); rep != want {
			t.Fatalf("sweep at t0+51s: %+v, want %+v", rep, want)
		}
		c.Advance(time.Second)
		if err := s.MarkPolled(ctx, "lobby", a.AWNID); err != nil {
			t.Fatal(err)
		}
		lapsedA := t0.Add(50 * time.Second).Format(time.RFC3339Nano)
		if got, want := fmt.Sprint(presenceOf(t, s, "lobby", obs.AWNID, a.AWNID)), fmt.Sprint([]string{"online@", "offline@" + lapsedA, "online@"}); got != want {
			t.Fatalf("a: %s, want %s (the poll after the sweep announces only online)", got, want)
		}
		// h is looked at again HookRecheck after t0+31s, still online.
		c.Advance(world.HookRecheck)
		rep := sweep(t, s)
		if rep.Offline != 2 || rep.Moved != 1 { // a and b lapsed again; h moved on
			t.Fatalf("sweep after HookRecheck: %+v", rep)
		}
		if got := presenceOf(t, s, "lobby", obs.AWNID, h.AWNID); len(got) != 1 {
			t.Fatalf("h, online by its webhook: %v", got)
		}
		if _, err := st.Get(ctx, world.PresenceDueKey("lobby", d.AWNID)); err == nil {
			t.Fatal("the schedule of a member that left is still there")
		}
	})
}

// TestPresenceSweepRacesPolls: 10 members' polls lapse and each polls
// again while two sweeps run at the same moment: whatever the order,
// each member has exactly one offline announced for the lapse, ends
// announced online, and keeps its schedule (so its next lapse is seen).
// Each member is its own race (its poll against the two sweeps' turns at
// it); 10 of them, all released at once with the sweeps, race as 20 did.
func TestPresenceSweepRacesPolls(t *testing.T) {
	everyEngine(t, func(t *testing.T, st store.Store) {
		ctx := context.Background()
		c := &clock{now: t0}
		s := newWorld(t, st, c, "lobby")
		obs := join(t, s, "lobby", 99)
		const n = 10
		var ms []world.Member
		for i := range n {
			m := join(t, s, "lobby", 100+i)
			if err := s.MarkPolled(ctx, "lobby", m.AWNID); err != nil {
				t.Fatal(err)
			}
			ms = append(ms, m)
		}
		c.Advance(world.ReachableWithin + time.Second)
		var wg sync.WaitGroup
		errs := make(chan error, n+2)
		for range 2 {
			wg.Go(func() {
				if _, err := s.SweepPresence(ctx); err != nil {
					errs <- err
				}
			})
		}
		for _, m := range ms {
			wg.Go(func() {
				if err := s.MarkPolled(ctx, "lobby", m.AWNID); err != nil {
					errs <- err
				}
			})
		}
		wg.Wait()
		close(errs)
		for err := range errs {
			t.Fatal(err)
		}
		for _, m := range ms {
			got := presenceOf(t, s, "lobby", obs.AWNID, m.AWNID)
			offline := 0
			for _, p := range got {
				if p[:len(world.PresenceOffline)] == world.PresenceOffline {
					offline++
				}
			}
			if offline != 1 || got[len(got)-1] != "online@" {
				t.Errorf("%s: %v, want one offline, ending online", m.AWNID, got)
			}
			now, err := s.Member(ctx, "lobby", m.AWNID)
			if err != nil || now.Announced != world.PresenceOnline {
				t.Errorf("%s: announced %q (%v), want online", m.AWNID, now.Announced, err)
			}
			if _, err := st.Get(ctx, world.PresenceDueKey("lobby", m.AWNID)); err != nil {
				t.Errorf("%s is online without a schedule: %v", m.AWNID, err)
			}
		}
	})
}
