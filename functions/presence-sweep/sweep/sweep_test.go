package sweep_test

import (
	"context"
	"crypto/ed25519"
	"sync/atomic"
	"testing"
	"time"

	"github.com/aws/aws-lambda-go/events"

	"github.com/a2awire/a2awire/functions/presence-sweep/sweep"
	"github.com/a2awire/a2awire/shared/function"
	"github.com/a2awire/a2awire/shared/logging"
	"github.com/a2awire/a2awire/shared/routes"
	"github.com/a2awire/a2awire/shared/store"
	"github.com/a2awire/a2awire/shared/store/memory"
	"github.com/a2awire/a2awire/shared/world"
)

type failingQueries struct{ store.Store }

func (failingQueries) Query(context.Context, store.Query) (store.Page, error) {
	return store.Page{}, store.ErrUnavailable
}

func key(n byte) ed25519.PublicKey {
	seed := make([]byte, ed25519.SeedSize)
	seed[0] = n
	return ed25519.NewKeyFromSeed(seed).Public().(ed25519.PublicKey)
}

// TestScheduledRunAnnouncesLapses: the route table runs the sweep every
// minute; an invocation of the built function with the schedule's event
// announces, on the env's clock, the member whose poll lapsed
// (presence.changed offline), and a run that cannot read the schedule
// fails the invocation.
func TestScheduledRunAnnouncesLapses(t *testing.T) {
	cfg := routes.Config(sweep.Function)
	if len(cfg.Triggers) != 1 || cfg.Triggers[0].Kind != routes.ScheduleTrigger || cfg.Triggers[0].Schedule != "rate(1 minute)" {
		t.Fatalf("triggers %+v", cfg.Triggers)
	}
	st := memory.New()
	defer st.Close()
	var clockNS atomic.Int64
	clockNS.Store(time.Date(2026, 12, 1, 12, 0, 0, 0, time.UTC).UnixNano())
	clock := func() time.Time { return time.Unix(0, clockNS.Load()) }
	s := world.New(st, world.WithClock(clock))
	ctx := t.Context()
	if _, _, err := s.PutWorld(ctx, world.Manifest{ID: "lobby"}, key(1)); err != nil {
		t.Fatal(err)
	}
	m, _, err := s.Join(ctx, "lobby", key(2), nil)
	if err != nil {
		t.Fatal(err)
	}
	if err := s.MarkPolled(ctx, "lobby", m.AWNID); err != nil {
		t.Fatal(err)
	}
	clockNS.Add(int64(10 * time.Second))
	// The builder, as the harness mounts it, on the harness's clock.
	h, err := sweep.Build(function.Env{Name: sweep.Function, Log: logging.Discard(), Store: st, Now: clock})
	if err != nil {
		t.Fatal(err)
	}
	run, ok := h.(sweep.Handler)
	if !ok {
		t.Fatalf("the builder made a %T", h)
	}
	if err := run(ctx, events.EventBridgeEvent{DetailType: "Scheduled Event"}); err != nil {
		t.Fatal(err)
	}
	// 10 s after its poll on the env's clock (days after it on the real
	// one), the member is still online.
	if got, err := s.Member(ctx, "lobby", m.AWNID); err != nil || got.Announced != world.PresenceOnline {
		t.Fatalf("10 s after its poll: announced %q (%v), want online", got.Announced, err)
	}
	clockNS.Add(int64(time.Minute))
	if err := run(ctx, events.EventBridgeEvent{DetailType: "Scheduled Event"}); err != nil {
		t.Fatal(err)
	}
	got, err := s.Member(ctx, "lobby", m.AWNID)
	if err != nil || got.Announced != world.PresenceOffline {
		t.Fatalf("after the run: announced %q (%v), want offline", got.Announced, err)
	}
	if err := sweep.New(world.New(failingQueries{st}), nil)(ctx, events.EventBridgeEvent{}); err == nil {
		t.Fatal("a run that cannot read the schedule succeeded")
	}
}
