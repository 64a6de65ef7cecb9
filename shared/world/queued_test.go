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
	"github.com/a2awire/a2awire/shared/world"
	"github.com/a2awire/a2awire/shared/world/worldtest"
)

// submittedIDs returns the actionIds of the action.submitted events
// awnID sees in w, in order.
func submittedIDs(t *testing.T, s *world.Service, w, awnID string) []string {
	t.Helper()
	var ids []string
	var evs []world.Event
	for after := ""; ; {
		page, err := s.Events(context.Background(), w, awnID, after, 100)
		if err != nil {
			t.Fatal(err)
		}
		if len(page) == 0 {
			break
		}
		evs, after = append(evs, page...), page[len(page)-1].ID
	}
	for _, e := range evs {
		if e.Type != world.ActionSubmitted {
			continue
		}
		var d struct {
			ActionID string `json:"actionId"`
		}
		if err := json.Unmarshal(e.Data, &d); err != nil {
			t.Fatal(err)
		}
		ids = append(ids, d.ActionID)
	}
	return ids
}

// TestQueuedActionsCommitManyToATransaction: in a world that batches its
// actions, Act commits nothing and queues each action; CommitQueued then
// commits 80 actions of 10 members in 2 transactions (each member's check
// written once per transaction, so 44 events fit the first: 3 Writes if
// every event carried its own check), each action exactly once and in the
// order the head gives; the same batch handed out again commits nothing
// more, with or without the redelivery's marker reads.
func TestQueuedActionsCommitManyToATransaction(t *testing.T) {
	everyEngine(t, func(t *testing.T, st store.Store) {
		ctx := context.Background()
		c := &clock{now: t0}
		wl := &worldtest.WriteLog{Store: st}
		q := &worldtest.SentQueue{}
		s := world.New(wl, world.WithClock(c.Now), world.WithIDs(testIDs), world.WithActionQueue(q))
		m := manifest("busy")
		m.BatchActions = true
		if _, _, err := s.PutWorld(ctx, m, key(0)); err != nil {
			t.Fatal(err)
		}
		if got, err := s.GetWorld(ctx, "busy"); err != nil || !got.BatchActions {
			t.Fatalf("manifest batchActions = %v, %v; want true", got.BatchActions, err)
		}
		var members []world.Member
		for n := 1; n <= 10; n++ {
			members = append(members, join(t, s, "busy", n))
		}
		wl.Take()
		var want []string
		for round := range 8 {
			for _, mb := range members {
				sub, err := s.Act(ctx, "busy", mb.AWNID, "move", json.RawMessage(fmt.Sprintf(`{"round":%d}`, round)))
				if err != nil || !sub.Queued {
					t.Fatalf("Act: %+v, %v; want queued", sub, err)
				}
				want = append(want, sub.ActionID)
			}
		}
		if w := wl.Take(); len(w) != 0 {
			t.Fatalf("queuing wrote %d times; want nothing written", len(w))
		}
		qs := q.Take(t)
		if got := submittedIDs(t, s, "busy", members[0].AWNID); len(got) != 0 {
			t.Fatalf("events before the commit: %v", got)
		}

		for i, err := range s.CommitQueued(ctx, qs) {
			if err != nil {
				t.Fatalf("action %d: %v", i, err)
			}
		}
		writes := wl.Take()
		if len(writes) != 2 {
			t.Fatalf("%d Writes for 80 actions of 10 members; want 2", len(writes))
		}
		for _, w := range writes {
			if len(w) > store.MaxActions {
				t.Fatalf("a Write of %d actions", len(w))
			}
		}
		got := submittedIDs(t, s, "busy", members[0].AWNID)
		if !slices.Equal(sorted(got), sorted(want)) || len(got) != 80 {
			t.Fatalf("committed %d actions, want the 80 queued once each", len(got))
		}

		// Handed out again: first as if the queue delivered twice
		// unnoticed (markers found in the transaction), then as a
		// redelivery (markers read first).
		for _, redelivered := range []bool{false, true} {
			again := slices.Clone(qs[:5])
			for i := range again {
				again[i].Redelivered = redelivered
			}
			for i, err := range s.CommitQueued(ctx, again) {
				if err != nil {
					t.Fatalf("redelivered %v, action %d: %v", redelivered, i, err)
				}
			}
			if got := submittedIDs(t, s, "busy", members[0].AWNID); len(got) != 80 {
				t.Fatalf("redelivered %v: %d actions after it, want 80", redelivered, len(got))
			}
			if w := wl.Take(); redelivered && len(w) != 0 {
				t.Fatalf("a redelivery whose markers were read wrote %d times", len(w))
			}
		}
	})
}

func sorted(s []string) []string {
	s = slices.Clone(s)
	slices.Sort(s)
	return s
}

// TestQueuedActionOfALeaverIsDropped: a member who left between the queue
// and the commit fails its check: its action is answered NotJoined
// (Dropped) and the others of its transaction commit; a world deleted
// meanwhile answers NotFound (Dropped) and commits nothing.
func TestQueuedActionOfALeaverIsDropped(t *testing.T) {
	everyEngine(t, func(t *testing.T, st store.Store) {
		ctx := context.Background()
		c := &clock{now: t0}
		q := &worldtest.SentQueue{}
		s := world.New(st, world.WithClock(c.Now), world.WithIDs(testIDs), world.WithActionQueue(q))
		m := manifest("fickle")
		m.BatchActions = true
		if _, _, err := s.PutWorld(ctx, m, key(0)); err != nil {
			t.Fatal(err)
		}
		a, b := join(t, s, "fickle", 1), join(t, s, "fickle", 2)
		for _, mb := range []world.Member{a, b, a} {
			if _, err := s.Act(ctx, "fickle", mb.AWNID, "wave", nil); err != nil {
				t.Fatal(err)
			}
		}
		if err := s.Leave(ctx, "fickle", b.AWNID); err != nil {
			t.Fatal(err)
		}
		errs := s.CommitQueued(ctx, q.Take(t))
		if errs[0] != nil || errs[2] != nil {
			t.Fatalf("the member's actions: %v, %v; want committed", errs[0], errs[2])
		}
		wantKind(t, errs[1], apierror.NotJoined)
		if !world.Dropped(errs[1]) {
			t.Fatalf("a leaver's action is not Dropped: %v", errs[1])
		}
		if got := submittedIDs(t, s, "fickle", a.AWNID); len(got) != 2 {
			t.Fatalf("%d actions committed, want 2", len(got))
		}

		q.Take(t)
		if _, err := s.Act(ctx, "fickle", a.AWNID, "wave", nil); err != nil {
			t.Fatal(err)
		}
		if err := s.DeleteWorld(ctx, "fickle", keyID(0)); err != nil {
			t.Fatal(err)
		}
		errs = s.CommitQueued(ctx, q.Take(t))
		wantKind(t, errs[0], apierror.NotFound)
		if !world.Dropped(errs[0]) {
			t.Fatalf("an action of a deleted world is not Dropped: %v", errs[0])
		}
	})
}

// TestActCommitsAtOnceWithoutBatching: a world that does not batch, or a
// service with no action queue, commits the action in Act (201), as
// SubmitAction does.
func TestActCommitsAtOnceWithoutBatching(t *testing.T) {
	ctx := context.Background()
	st := memory.New()
	c := &clock{now: t0}
	q := &worldtest.SentQueue{}
	s := world.New(st, world.WithClock(c.Now), world.WithIDs(testIDs), world.WithActionQueue(q))
	if _, _, err := s.PutWorld(ctx, manifest("calm"), key(0)); err != nil {
		t.Fatal(err)
	}
	m := manifest("busy")
	m.BatchActions = true
	if _, _, err := world.New(st).PutWorld(ctx, m, key(0)); err != nil {
		t.Fatal(err)
	}
	a := join(t, s, "calm", 1)
	b := join(t, s, "busy", 1)
	sub, err := s.Act(ctx, "calm", a.AWNID, "wave", nil)
	if err != nil || sub.Queued {
		t.Fatalf("calm world: %+v, %v; want committed", sub, err)
	}
	noQueue := world.New(st, world.WithClock(c.Now), world.WithIDs(testIDs))
	if sub, err := noQueue.Act(ctx, "busy", b.AWNID, "wave", nil); err != nil || sub.Queued {
		t.Fatalf("no queue: %+v, %v; want committed", sub, err)
	}
	if qs := q.Take(t); len(qs) != 0 {
		t.Fatalf("queued %d", len(qs))
	}
	if got := submittedIDs(t, s, "calm", a.AWNID); len(got) != 1 || got[0] != sub.ActionID {
		t.Fatalf("calm world's actions %v, want [%s]", got, sub.ActionID)
	}
	if got := submittedIDs(t, s, "busy", b.AWNID); len(got) != 1 {
		t.Fatalf("busy world's actions %v, want one", got)
	}

	// Turning it off: every PUT sets it.
	m.BatchActions = false
	if got, _, err := world.New(st).PutWorld(ctx, m, key(0)); err != nil || got.BatchActions {
		t.Fatalf("after a PUT without it: %v, %v", got.BatchActions, err)
	}
}

// TestParseQueuedActionRefusesWhatActDoesNotWrite: the committer's reading
// of a message body.
func TestParseQueuedActionRefusesWhatActDoesNotWrite(t *testing.T) {
	awn := auth.AWNID(key(1))
	ok := `{"world":"w","actionId":"01KBQ4Q8Y8W2Y8Y8Y8Y8Y8Y8Y8","awnId":"` + awn + `","action":"move","params":{}}`
	if _, err := world.ParseQueuedAction(ok); err != nil {
		t.Fatalf("%s: %v", ok, err)
	}
	for _, bad := range []string{
		``, `[]`, `{"world":"w"}`,
		`{"world":"w","actionId":"nope","awnId":"` + awn + `","action":"move"}`,
		`{"world":"w","actionId":"01KBQ4Q8Y8W2Y8Y8Y8Y8Y8Y8Y8","awnId":"` + awn + `","action":"Bad Name"}`,
		`{"world":"w","actionId":"01KBQ4Q8Y8W2Y8Y8Y8Y8Y8Y8Y8","awnId":"` + awn + `","action":"move","params":[1]}`,
	} {
		if _, err := world.ParseQueuedAction(bad); apierror.KindOf(err) != apierror.Invalid {
			t.Errorf("%q: %v, want Invalid", bad, err)
		}
	}
}
