package world_test

import (
	"context"
	"fmt"
	"sync"
	"testing"

	"github.com/a2awire/a2awire/shared/apierror"
	"github.com/a2awire/a2awire/shared/store"
	"github.com/a2awire/a2awire/shared/world"
)

// beforeTransaction runs hook once, just before the first Write of more
// than one action (a join's transaction, after its slot was taken).
type beforeTransaction struct {
	store.Store
	hook func()
	once sync.Once
}

func (b *beforeTransaction) Write(ctx context.Context, acts ...store.Action) ([]store.Item, error) {
	if len(acts) > 1 {
		b.once.Do(b.hook)
	}
	return b.Store.Write(ctx, acts...)
}

// TestCloseRefusesJoins: a closed world refuses joins (Conflict
// world_closed) while its members may still leave; reopening lets joins
// in; each change emits one public event and a repeated close emits
// none; only the owner may close.
func TestCloseRefusesJoins(t *testing.T) {
	everyEngine(t, func(t *testing.T, st store.Store) {
		ctx := context.Background()
		c := &clock{now: t0}
		s := newWorld(t, st, c, "hall")
		a := join(t, s, "hall", 1)
		join(t, s, "hall", 2)
		if _, err := s.Close(ctx, "hall", keyID(1)); apierror.KindOf(err) != apierror.Forbidden {
			t.Fatalf("close by a member: %v, want Forbidden", err)
		}
		for range 2 {
			m, err := s.Close(ctx, "hall", keyID(0))
			if err != nil || m.Status != world.StatusClosed {
				t.Fatalf("close: %+v %v", m, err)
			}
		}
		_, _, err := s.Join(ctx, "hall", key(3), nil)
		wantCode(t, err, apierror.Conflict, world.CodeWorldClosed)
		if err := s.Leave(ctx, "hall", awnID(2)); err != nil {
			t.Fatalf("a member leaves a closed world: %v", err)
		}
		if m, err := s.Reopen(ctx, "hall", keyID(0)); err != nil || m.Status != world.StatusOpen {
			t.Fatalf("reopen: %+v %v", m, err)
		}
		join(t, s, "hall", 3)
		var types []string
		for _, e := range eventsOf(t, s, "hall", a.AWNID) {
			if e.Type == world.WorldClosed || e.Type == world.WorldReopened {
				if e.Visibility != world.Public {
					t.Errorf("%s is %s", e.Type, e.Visibility)
				}
				types = append(types, e.Type)
			}
		}
		if fmt.Sprint(types) != "[world.closed world.reopened]" {
			t.Fatalf("lifecycle events %v, want one close and one reopen", types)
		}
		m, err := s.GetWorld(ctx, "hall")
		if err != nil || m.Members != 2 {
			t.Fatalf("members %d %v, want 2", m.Members, err)
		}
	})
}

// TestCloseRacingJoin: the owner closes the world after a join took its
// slot (and saw the world open) but before the join's transaction: the
// join is refused WORLD_CLOSED, because the status is a condition of that
// transaction, and nothing of it was written.
func TestCloseRacingJoin(t *testing.T) {
	everyEngine(t, func(t *testing.T, st store.Store) {
		ctx := context.Background()
		c := &clock{now: t0}
		s := newWorld(t, st, c, "race")
		racing := &beforeTransaction{Store: st, hook: func() {
			if _, err := s.Close(ctx, "race", keyID(0)); err != nil {
				t.Errorf("close: %v", err)
			}
		}}
		_, _, err := world.New(racing, world.WithClock(c.Now), world.WithIDs(testIDs)).Join(ctx, "race", key(1), nil)
		wantCode(t, err, apierror.Conflict, world.CodeWorldClosed)
		if _, err := s.Member(ctx, "race", awnID(1)); apierror.KindOf(err) != apierror.NotFound {
			t.Fatalf("member after a refused join: %v", err)
		}
		if m, _ := s.GetWorld(ctx, "race"); m.Members != 0 {
			t.Fatalf("count %d after a refused join", m.Members)
		}
	})
}

// TestMaxMembers: 12 concurrent joins of a world capped at 5 make exactly
// 5 members and 7 WORLD_FULL, with the count 5; a join racing the one
// that fills the world (it read 4 members) is refused too; after a leave
// one more may join.
func TestMaxMembers(t *testing.T) {
	everyEngine(t, func(t *testing.T, st store.Store) {
		ctx := context.Background()
		c := &clock{now: t0}
		s := world.New(st, world.WithClock(c.Now), world.WithIDs(testIDs))
		if _, _, err := s.PutWorld(ctx, world.Manifest{ID: "small", MaxMembers: 5}, key(0)); err != nil {
			t.Fatal(err)
		}
		var wg sync.WaitGroup
		errs := make([]error, 12)
		for i := range errs {
			wg.Go(func() { _, _, errs[i] = s.Join(ctx, "small", key(10+i), nil) })
		}
		wg.Wait()
		joined := 0
		for _, err := range errs {
			if err == nil {
				joined++
				continue
			}
			wantCode(t, err, apierror.Conflict, world.CodeWorldFull)
		}
		ms, err := s.Members(ctx, "small")
		if err != nil {
			t.Fatal(err)
		}
		m, _ := s.GetWorld(ctx, "small")
		if joined != 5 || len(ms) != 5 || m.Members != 5 {
			t.Fatalf("%d joins succeeded, %d members, count %d; want 5 each", joined, len(ms), m.Members)
		}
		if err := s.Leave(ctx, "small", ms[0].AWNID); err != nil {
			t.Fatal(err)
		}
		// A join that read 4 members loses to one that fills the world.
		racing := &beforeTransaction{Store: st, hook: func() { join(t, s, "small", 40) }}
		_, _, err = world.New(racing, world.WithClock(c.Now), world.WithIDs(testIDs)).Join(ctx, "small", key(41), nil)
		wantCode(t, err, apierror.Conflict, world.CodeWorldFull)
		if m, _ := s.GetWorld(ctx, "small"); m.Members != 5 {
			t.Fatalf("count %d, want 5", m.Members)
		}
	})
}
