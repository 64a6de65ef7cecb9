package world_test

import (
	"context"
	"encoding/json"
	"errors"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/a2awire/a2awire/shared/apierror"
	"github.com/a2awire/a2awire/shared/auth"
	"github.com/a2awire/a2awire/shared/store"
	storeguard "github.com/a2awire/a2awire/shared/store/guard"
	"github.com/a2awire/a2awire/shared/store/memory"
	"github.com/a2awire/a2awire/shared/store/roundtrips"
	"github.com/a2awire/a2awire/shared/store/storetest"
	"github.com/a2awire/a2awire/shared/world"
)

// memberReads counts the Gets of member items that reach the store.
type memberReads struct {
	store.Store
	mu sync.Mutex
	n  int
}

func (m *memberReads) Get(ctx context.Context, k store.Key) (store.Item, error) {
	if strings.HasPrefix(k.SK, world.MemberPrefix) {
		m.mu.Lock()
		m.n++
		m.mu.Unlock()
	}
	return m.Store.Get(ctx, k)
}

// coldLeave runs n's leave as world-leave does on an instance that has
// not seen its key: the member key read (MemberKey) with the manifest
// read ahead beside it, then LeaveAs; hook runs before its first write.
// It returns how many member items the leave read, and its error.
func coldLeave(t *testing.T, st store.Store, c *clock, id string, n int, hook func()) (int, error) {
	t.Helper()
	counted := &memberReads{Store: &storetest.BeforeWrite{Store: st, Hook: hook}}
	s := world.New(storeguard.Wrap(counted), world.WithClock(c.Now), world.WithIDs(testIDs))
	ctx, _ := storeguard.Begin(context.Background())
	stop := storeguard.Ahead(ctx, world.LeaveReads(id)...)
	_, awnID, err := s.MemberKey(ctx, id, auth.KeyID(key(n)))
	stop()
	if err != nil {
		t.Fatal(err)
	}
	err = s.LeaveAs(ctx, id, awnID, auth.KeyID(key(n)))
	if gerr := storeguard.Settle(ctx); gerr != nil && err == nil {
		err = gerr
	}
	return counted.n, err
}

// TestColdLeaveRacingKick: a leave on an instance that has not seen the
// key removes the membership on the joinedAt its member key item carries,
// without reading the member; a kick (or a leave and a rejoin) committing
// between that read and the leave's write makes the leave fail NOT_JOINED
// and leaves the other's outcome whole: one announcement, the count
// exact, the new membership kept.
func TestColdLeaveRacingKick(t *testing.T) {
	everyEngine(t, func(t *testing.T, st store.Store) {
		ctx := context.Background()
		c := &clock{now: t0}
		s := newWorld(t, st, c, "arena")
		target := auth.AWNID(key(1))

		// Uncontended: the member key item is enough.
		join(t, s, "arena", 1)
		reads, err := coldLeave(t, st, c, "arena", 1, func() {})
		if err != nil {
			t.Fatal(err)
		}
		if reads != 0 {
			t.Fatalf("the cold leave read the member %d times, want 0 (the member key item carries joinedAt)", reads)
		}
		if _, err := s.Member(ctx, "arena", target); apierror.KindOf(err) != apierror.NotFound {
			t.Fatalf("after the leave: %v, want NotFound", err)
		}

		// A kick between the leave's read and its write.
		join(t, s, "arena", 1)
		var kerr error
		_, err = coldLeave(t, st, c, "arena", 1, func() { _, kerr = s.Kick(ctx, "arena", target) })
		if kerr != nil {
			t.Fatal(kerr)
		}
		wantKind(t, err, apierror.NotJoined)

		// A leave and a rejoin between them: the stale leave must not end
		// the new membership.
		join(t, s, "arena", 1)
		_, err = coldLeave(t, st, c, "arena", 1, func() {
			c.Advance(time.Millisecond) // a new joinedAt, as a real clock gives
			if err := s.Leave(ctx, "arena", target); err != nil {
				t.Error(err)
			}
			join(t, s, "arena", 1)
		})
		wantKind(t, err, apierror.NotJoined)
		if _, err := s.Member(ctx, "arena", target); err != nil {
			t.Fatalf("the rejoined membership is gone: %v", err)
		}
		m, err := s.GetWorld(ctx, "arena")
		if err != nil || m.Members != 1 {
			t.Fatalf("member count %d, %v; want 1", m.Members, err)
		}
		page, err := s.PublicEvents(ctx, "arena", "", world.MaxEventLimit)
		if err != nil {
			t.Fatal(err)
		}
		if n, k := countEvents(page.Events, world.AgentLeft), countEvents(page.Events, world.AgentKicked); n != 2 || k != 1 {
			t.Fatalf("%d agent.left and %d agent.kicked, want 2 and 1 (the first leave, the kick, the racing leave)", n, k)
		}
	})
}

// TestCommitRefusedByGuardWritesNothing: a commit whose actions cannot
// carry the request's guard (an action on an item a guard part writes)
// has the guard written first; when the guard refuses (a nonce used
// already), the commit writes nothing — neither the event nor its
// actions — and answers the guard's error.
func TestCommitRefusedByGuardWritesNothing(t *testing.T) {
	ctx := context.Background()
	st := memory.New()
	t.Cleanup(func() { _ = st.Close() })
	nonce := store.Key{PK: "NONCE#k", SK: "N#1"}
	if _, err := st.Write(ctx, store.Put(nonce, store.Item{"type": store.S("nonce")})); err != nil {
		t.Fatal(err)
	}
	g := storeguard.Wrap(st)
	log := world.NewLog(g, testIDs, time.Now)
	rctx, _ := storeguard.Begin(ctx)
	used := errors.New("nonce already used")
	storeguard.Add(rctx, g, storeguard.Part{Action: store.Put(nonce, store.Item{"type": store.S("nonce")}).When(store.ItemAbsent()),
		Refused: func(*store.ConditionFailedError) error { return used }})
	ev, err := testIDs.NewEvent("arena", "test.done", world.Public, "", map[string]string{}, time.Now())
	if err != nil {
		t.Fatal(err)
	}
	// The commit's own action names the nonce's item: it cannot carry it.
	_, err = log.Commit(rctx, ev, store.Update(nonce).SetAttr("seen", store.S("yes")))
	if !errors.Is(err, used) {
		t.Fatalf("commit under a refused guard: %v, want the guard's error", err)
	}
	if _, err := st.Get(ctx, store.Key{PK: world.SharedEventsPK("arena"), SK: ev.ID}); !errors.Is(err, store.ErrNotFound) {
		t.Fatalf("the event was written under a refused guard (%v)", err)
	}
	if it, _ := st.Get(ctx, nonce); it.Str("seen") != "" {
		t.Fatal("the commit's own action was written under a refused guard")
	}
}

// coldPoll runs n's poll as world-events does on an instance that has not
// seen its key: the member key read with the event head read ahead, the
// nonce added, then PollAs. It returns the page, how many member items it
// read, its sequential round trips (each call held 50 ms, so that calls
// side by side overlap), and its error.
func coldPoll(t *testing.T, st store.Store, c *clock, id string, n int, nonce string) (world.EventPage, int, int, error) {
	t.Helper()
	counted := &memberReads{Store: st}
	rt := roundtrips.WithDelay(counted, 50*time.Millisecond)
	g := storeguard.Wrap(rt)
	s := world.New(g, world.WithClock(c.Now), world.WithIDs(testIDs))
	ctx, _ := storeguard.Begin(context.Background())
	stop := storeguard.Ahead(ctx, world.EventsReads(id)...)
	_, awnID, err := s.MemberKey(ctx, id, auth.KeyID(key(n)))
	stop()
	if err != nil {
		t.Fatal(err)
	}
	nk := store.Key{PK: "NONCE#" + nonce, SK: "N"}
	storeguard.Add(ctx, g, storeguard.Part{Action: store.Put(nk, store.Item{"type": store.S("nonce")}).When(store.ItemAbsent()),
		Refused: func(*store.ConditionFailedError) error { return errReplayed }})
	p, err := s.PollAs(ctx, id, awnID, auth.KeyID(key(n)), "", 50, 0)
	if gerr := storeguard.Settle(ctx); gerr != nil && err == nil {
		err = gerr
	}
	return p, counted.n, rt.Take(), err
}

var errReplayed = errors.New("nonce already used")

// TestColdPoll: a steady poll on an instance that has not seen the key
// records itself in a write carrying the request's guard, with the
// membership its member key item shows (no member read), in 2 round trips,
// and answers what a warm poll would; a replayed nonce records nothing and answers the
// nonce's error.
func TestColdPoll(t *testing.T) {
	everyEngine(t, func(t *testing.T, st store.Store) {
		ctx := context.Background()
		c := &clock{now: t0}
		s := newWorld(t, st, c, "arena")
		m := join(t, s, "arena", 1)
		if _, err := s.Poll(ctx, "arena", m.AWNID, "", 50, 0); err != nil { // online: later polls are steady
			t.Fatal(err)
		}
		c.Advance(time.Second)
		if err := s.Append(ctx, world.Event{Type: "test.done", World: "arena", Data: json.RawMessage(`{}`), Visibility: world.Agents}); err != nil {
			t.Fatal(err)
		}
		warm, err := s.Events(ctx, "arena", m.AWNID, "", 50)
		if err != nil {
			t.Fatal(err)
		}
		c.Advance(time.Second)
		p, reads, depth, err := coldPoll(t, st, c, "arena", 1, "n1")
		if err != nil {
			t.Fatal(err)
		}
		if reads != 0 || depth != 2 {
			t.Fatalf("the cold steady poll read the member %d times in %d round trips, want 0 in 2 (the key with the head, then the record carrying the guard beside the pages)", reads, depth)
		}
		if len(p.Events) != len(warm) || len(p.Events) == 0 || p.Events[len(p.Events)-1].Type != "test.done" {
			t.Fatalf("cold poll answered %d events, a warm read %d (the last should be test.done)", len(p.Events), len(warm))
		}
		got, err := s.Member(ctx, "arena", m.AWNID)
		if err != nil || !got.LastPollAt.Equal(c.Now()) {
			t.Fatalf("lastPollAt %v, %v; want %v", got.LastPollAt, err, c.Now())
		}

		c.Advance(time.Second)
		if _, _, _, err := coldPoll(t, st, c, "arena", 1, "n1"); !errors.Is(err, errReplayed) {
			t.Fatalf("a replayed poll: %v, want the nonce's error", err)
		}
		if again, _ := s.Member(ctx, "arena", m.AWNID); !again.LastPollAt.Equal(got.LastPollAt) {
			t.Fatalf("a replayed poll recorded itself: lastPollAt %v, want %v", again.LastPollAt, got.LastPollAt)
		}
	})
}

// announcements returns the presences announced for awnID in world, in
// order, as the member itself reads them (presence.changed is an agents
// event it sees from its join on).
func announcements(t *testing.T, s *world.Service, id, awnID string) []string {
	t.Helper()
	evs, err := s.Events(context.Background(), id, awnID, "", world.MaxEventLimit)
	if err != nil {
		t.Fatal(err)
	}
	var out []string
	for _, e := range evs {
		if e.Type != world.PresenceChanged {
			continue
		}
		var d struct {
			AWNID    string `json:"awnId"`
			Presence string `json:"presence"`
		}
		if err := json.Unmarshal(e.Data, &d); err != nil {
			t.Fatal(err)
		}
		if d.AWNID == awnID {
			out = append(out, d.Presence)
		}
	}
	return out
}

// keyPresence is the presence member n's key item carries in world.
func keyPresence(t *testing.T, st store.Store, id string, n int) string {
	t.Helper()
	it, err := st.Get(context.Background(), world.MemberKeyKey(id, auth.KeyID(key(n))))
	if err != nil {
		t.Fatal(err)
	}
	return it.Str("presence")
}

// TestColdFirstPoll: the member key item carries the presence last
// announced (offline from the join), so a member's first poll on an
// instance that has not seen its key commits presence.changed (online)
// carrying the request's guard, without reading the member and without a
// failed update first: 2 round trips. A replayed nonce announces nothing.
// A key item behind the member (another writer's announcement not on it)
// costs round trips, never a second announcement. After the presence
// sweep announces a silence, the key item says offline again and the next
// cold poll is 2 round trips again.
func TestColdFirstPoll(t *testing.T) {
	everyEngine(t, func(t *testing.T, st store.Store) {
		ctx := context.Background()
		c := &clock{now: t0}
		s := newWorld(t, st, c, "arena")
		m := join(t, s, "arena", 1)
		if got := keyPresence(t, st, "arena", 1); got != world.PresenceOffline {
			t.Fatalf("a new member's key item says presence %q, want offline", got)
		}
		c.Advance(time.Second)
		_, reads, depth, err := coldPoll(t, st, c, "arena", 1, "first")
		if err != nil {
			t.Fatal(err)
		}
		if reads != 0 || depth != 2 {
			t.Fatalf("the cold first poll read the member %d times in %d round trips, want 0 in 2", reads, depth)
		}
		if got := announcements(t, s, "arena", m.AWNID); len(got) != 1 || got[0] != world.PresenceOnline {
			t.Fatalf("announced %v, want [online]", got)
		}
		if got, err := s.Member(ctx, "arena", m.AWNID); err != nil || got.Announced != world.PresenceOnline || !got.LastPollAt.Equal(c.Now()) {
			t.Fatalf("member %+v, %v: want announced online, polled now", got, err)
		}
		if got := keyPresence(t, st, "arena", 1); got != world.PresenceOnline {
			t.Fatalf("after the announcement the key item says %q, want online", got)
		}

		// A replayed first poll: refused by the guard its announcement
		// carried, so nothing is announced.
		r := join(t, s, "arena", 2)
		if _, err := st.Write(ctx, store.Put(store.Key{PK: "NONCE#used", SK: "N"}, store.Item{"type": store.S("nonce")})); err != nil {
			t.Fatal(err)
		}
		if _, _, _, err := coldPoll(t, st, c, "arena", 2, "used"); !errors.Is(err, errReplayed) {
			t.Fatalf("a replayed cold first poll: %v, want the nonce's error", err)
		}
		if got := announcements(t, s, "arena", r.AWNID); len(got) != 0 {
			t.Fatalf("a replayed poll announced %v", got)
		}
		if got, _ := s.Member(ctx, "arena", r.AWNID); got.Announced == world.PresenceOnline || !got.LastPollAt.IsZero() {
			t.Fatalf("a replayed poll recorded itself: %+v", got)
		}

		// A key item behind its member: member 3 is online, its key
		// item says offline. The cold poll's announcement fails on the
		// member's presence and the poll records itself as a warm one
		// would, announcing nothing more.
		b := join(t, s, "arena", 3)
		if _, err := s.Poll(ctx, "arena", b.AWNID, "", 50, 0); err != nil {
			t.Fatal(err)
		}
		if _, err := st.Write(ctx, store.Update(world.MemberKeyKey("arena", auth.KeyID(key(3)))).SetAttr("presence", store.S(world.PresenceOffline))); err != nil {
			t.Fatal(err)
		}
		c.Advance(time.Second)
		if _, _, _, err := coldPoll(t, st, c, "arena", 3, "behind"); err != nil {
			t.Fatal(err)
		}
		if got := announcements(t, s, "arena", b.AWNID); len(got) != 1 {
			t.Fatalf("a key item behind its member: announced %v, want [online] once", got)
		}
		if got, _ := s.Member(ctx, "arena", b.AWNID); !got.LastPollAt.Equal(c.Now()) {
			t.Fatalf("the poll was not recorded: lastPollAt %v, want %v", got.LastPollAt, c.Now())
		}

		// A silence the sweep announces: the key item follows, and the
		// next cold poll brings the member online in 2 round trips.
		c.Advance(world.ReachableWithin + time.Minute)
		sweep(t, s)
		if got := keyPresence(t, st, "arena", 1); got != world.PresenceOffline {
			t.Fatalf("after the sweep announced the silence the key item says %q, want offline", got)
		}
		_, reads, depth, err = coldPoll(t, st, c, "arena", 1, "back")
		if err != nil {
			t.Fatal(err)
		}
		if reads != 0 || depth != 2 {
			t.Fatalf("the cold poll after an announced silence read the member %d times in %d round trips, want 0 in 2", reads, depth)
		}
		if got := announcements(t, s, "arena", m.AWNID); len(got) != 3 || got[1] != world.PresenceOffline || got[2] != world.PresenceOnline {
			t.Fatalf("announced %v, want [online offline online]", got)
		}
	})
}
