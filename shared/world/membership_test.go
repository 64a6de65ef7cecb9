package world_test

import (
	"context"
	"encoding/json"
	"testing"

	"github.com/a2awire/a2awire/shared/apierror"
	"github.com/a2awire/a2awire/shared/store"
	"github.com/a2awire/a2awire/shared/store/storetest"
	"github.com/a2awire/a2awire/shared/world"
)

// TestSubmitActionRacingLeave (issue 26's third repro, for actions): an
// agent's leave lands after SubmitAction has read the manifest but before
// it writes. The action is refused NotJoined and no action.submitted is
// written, because the membership is a condition of the event's own Write.
// A plain non-member is refused the same way, and ForwardAction marks its
// event as forwarded (Forwarded) while SubmitAction's is not.
func TestSubmitActionRacingLeave(t *testing.T) {
	everyEngine(t, func(t *testing.T, st store.Store) {
		ctx := context.Background()
		c := &clock{now: t0}
		s := newWorld(t, st, c, "arena", "move")
		a, b := join(t, s, "arena", 1), join(t, s, "arena", 2)
		racing := &storetest.BeforeWrite{Store: st, Hook: func() {
			if err := s.Leave(ctx, "arena", a.AWNID); err != nil {
				t.Errorf("leave: %v", err)
			}
		}}
		_, err := world.New(racing, world.WithClock(c.Now), world.WithIDs(testIDs)).SubmitAction(ctx, "arena", a.AWNID, "move", nil)
		wantKind(t, err, apierror.NotJoined)
		_, err = s.SubmitAction(ctx, "arena", a.AWNID, "move", nil)
		wantKind(t, err, apierror.NotJoined)
		for _, e := range eventsOf(t, s, "arena", b.AWNID) {
			if e.Type == world.ActionSubmitted {
				t.Fatalf("an action.submitted by a non-member was written: %s", e.Data)
			}
		}
		if _, err := s.SubmitAction(ctx, "arena", b.AWNID, "move", json.RawMessage(`{"to":"e4"}`)); err != nil {
			t.Fatal(err)
		}
		if _, err := s.ForwardAction(ctx, "arena", b.AWNID, "move", nil); err != nil {
			t.Fatal(err)
		}
		_, err = s.ForwardAction(ctx, "arena", a.AWNID, "move", nil)
		wantKind(t, err, apierror.NotJoined)
		var forwarded []bool
		for _, e := range eventsOf(t, s, "arena", b.AWNID) {
			if e.Type == world.ActionSubmitted {
				forwarded = append(forwarded, world.Forwarded(e))
			}
		}
		if len(forwarded) != 2 || forwarded[0] || !forwarded[1] {
			t.Fatalf("Forwarded of the two actions: %v, want [false true]", forwarded)
		}
	})
}
