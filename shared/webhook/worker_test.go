package webhook_test

import (
	"context"
	"testing"
	"time"

	"github.com/a2awire/a2awire/shared/queue"
	"github.com/a2awire/a2awire/shared/store"
	"github.com/a2awire/a2awire/shared/webhook"
	"github.com/a2awire/a2awire/shared/world"
)

// queued is a dispatcher over st with an in-process delivery queue whose
// dead-letter queue redrives after 2 receives, on the real clock.
func queued(t *testing.T, st store.Store) (*webhook.Dispatcher, *queue.Memory, *queue.Memory) {
	t.Helper()
	dead := queue.NewMemory(queue.Config{VisibilityTimeout: time.Minute})
	q := queue.NewMemory(queue.Config{VisibilityTimeout: time.Minute, MaxReceiveCount: 2}, queue.WithDeadLetter(dead))
	d, err := webhook.NewDispatcher(webhook.Config{Store: st, Client: localClient(), NetworkKey: networkKey(), Jitter: fixedJitter, Queue: q})
	if err != nil {
		t.Fatal(err)
	}
	return d, q, dead
}

// receive takes what q holds now as the worker gets it.
func receive(t *testing.T, q queue.Queue) []webhook.Received {
	t.Helper()
	rs, err := q.Receive(context.Background(), queue.MaxBatch, 100*time.Millisecond)
	if err != nil {
		t.Fatal(err)
	}
	var out []webhook.Received
	for _, r := range rs {
		out = append(out, webhook.Received{ID: r.ID, Body: r.Body, Receipt: r.Receipt, ReceiveCount: r.ReceiveCount})
	}
	return out
}

// TestQueuedDeliveryDroppedByRemove: a delivery enqueued for a webhook
// that is then removed and set again (a new URL, a new secret) is dropped
// by the worker: nothing reaches either URL, and the message is done.
func TestQueuedDeliveryDroppedByRemove(t *testing.T) {
	everyEngine(t, func(t *testing.T, st store.Store) {
		ctx := t.Context()
		old, repl := newReceiver(t), newReceiver(t)
		d, q, _ := queued(t, st)
		if _, err := asMember(t, st, d.Store()).Set(ctx, "w", "aw:a", old.URL); err != nil {
			t.Fatal(err)
		}
		e := event(t, "w", world.AgentJoined, world.Public, "", map[string]any{}, time.Now())
		if errs := d.Enqueue(ctx, []world.Event{e}); errs[0] != nil {
			t.Fatal(errs[0])
		}
		if err := d.Store().Remove(ctx, "w", "aw:a"); err != nil {
			t.Fatal(err)
		}
		if _, err := d.Store().Set(ctx, "w", "aw:a", repl.URL); err != nil {
			t.Fatal(err)
		}
		msgs := receive(t, q)
		if len(msgs) != 1 {
			t.Fatalf("%d messages, want the one delivery", len(msgs))
		}
		if kept := d.Work(ctx, msgs); len(kept) != 0 {
			t.Fatalf("kept %v, want the dropped delivery done", kept)
		}
		old.none(t)
		repl.none(t)
	})
}

// TestQueuedDeliveryKeptFailingBecomesDeadLetter: a delivery the workers
// cannot settle (the store refuses its reads) comes back, moves to the
// dead-letter queue after maxReceiveCount receives, and the dead-letter
// function keeps it as the webhook's dead letter, counted and replayable.
func TestQueuedDeliveryKeptFailingBecomesDeadLetter(t *testing.T) {
	everyEngine(t, func(t *testing.T, st store.Store) {
		ctx := t.Context()
		rc := newReceiver(t)
		d, q, dead := queued(t, st)
		if _, err := asMember(t, st, d.Store()).Set(ctx, "w", "aw:a", rc.URL); err != nil {
			t.Fatal(err)
		}
		e := event(t, "w", world.AgentJoined, world.Public, "", map[string]any{}, time.Now())
		if errs := d.Enqueue(ctx, []world.Event{e}); errs[0] != nil {
			t.Fatal(errs[0])
		}
		// A worker whose table is down: every receive fails.
		broken, err := webhook.NewDispatcher(webhook.Config{Store: failingStore{st}, Client: localClient(), Queue: q})
		if err != nil {
			t.Fatal(err)
		}
		for i := range 2 {
			msgs := receive(t, q)
			if len(msgs) != 1 || msgs[0].ReceiveCount != i+1 {
				t.Fatalf("receive %d: %+v", i+1, msgs)
			}
			if kept := broken.Work(ctx, msgs); len(kept) != 1 {
				t.Fatalf("receive %d: kept %v, want the unsettled message", i+1, kept)
			}
			// Lambda leaves it; its visibility timeout ends.
			if err := q.ChangeVisibility(ctx, msgs[0].Receipt, 0); err != nil {
				t.Fatal(err)
			}
		}
		if msgs := receive(t, q); len(msgs) != 0 {
			t.Fatalf("received %d after maxReceiveCount", len(msgs))
		}
		dl := receive(t, dead)
		if len(dl) != 1 {
			t.Fatalf("dead-letter queue holds %d", len(dl))
		}
		if failed := d.DeadLetterJobs(ctx, dl); len(failed) != 0 {
			t.Fatalf("dead letters not kept: %v", failed)
		}
		got, err := d.Store().DeadLetters(ctx, "w", "aw:a", time.Time{})
		if err != nil || len(got) != 1 || got[0].Event.ID != e.ID {
			t.Fatalf("dead letters %+v %v", got, err)
		}
		v, _ := d.Store().Show(ctx, "w", "aw:a")
		if v.Stats.DeadLettered != 1 {
			t.Errorf("stats %+v, want one dead-lettered", v.Stats)
		}
		if n, err := d.Store().Replay(ctx, "w", "aw:a", time.Time{}); err != nil || n != 1 {
			t.Fatalf("replay: %d %v", n, err)
		}
		rc.none(t)
	})
}

// failingStore refuses every read and write (the table is unavailable).
type failingStore struct{ store.Store }

func (failingStore) Get(context.Context, store.Key) (store.Item, error) {
	return nil, store.ErrUnavailable
}

func (failingStore) Query(context.Context, store.Query) (store.Page, error) {
	return store.Page{}, store.ErrUnavailable
}
