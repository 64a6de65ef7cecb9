package world_test

import (
	"context"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/a2awire/a2awire/shared/apierror"
	"github.com/a2awire/a2awire/shared/auth"
	"github.com/a2awire/a2awire/shared/store"
	storeguard "github.com/a2awire/a2awire/shared/store/guard"
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
// It returns the leave's error and how many member items it read.
func coldLeave(t *testing.T, st store.Store, c *clock, id string, n int, hook func()) (error, int) {
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
	return err, counted.n
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
		err, reads := coldLeave(t, st, c, "arena", 1, func() {})
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
		err, _ = coldLeave(t, st, c, "arena", 1, func() { _, kerr = s.Kick(ctx, "arena", target) })
		if kerr != nil {
			t.Fatal(kerr)
		}
		wantKind(t, err, apierror.NotJoined)

		// A leave and a rejoin between them: the stale leave must not end
		// the new membership.
		join(t, s, "arena", 1)
		err, _ = coldLeave(t, st, c, "arena", 1, func() {
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
