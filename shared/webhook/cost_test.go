package webhook_test

import (
	"maps"
	"net/http"
	"testing"
	"time"

	"github.com/a2awire/a2awire/shared/store"
	"github.com/a2awire/a2awire/shared/store/dynamo"
	"github.com/a2awire/a2awire/shared/store/dynamo/capacity"
	"github.com/a2awire/a2awire/shared/store/dynamo/dynamolocal"
	"github.com/a2awire/a2awire/shared/world"
)

// TestCost pins the DynamoDB calls of every webhook operation on DynamoDB
// Local (capacity meter), so a regression that adds a read to delivery
// fails here rather than on the bill.
func TestCost(t *testing.T) {
	m := capacity.New()
	client, table := dynamolocal.NewTable(t, local, m.Option())
	var st store.Store = dynamo.New(client, table)
	ctx := t.Context()
	c := &clock{now: t0}
	d := newDispatcher(t, st, c, nil)
	ok, failing := newReceiver(t), newReceiver(t)
	failing.setAnswer(status(http.StatusInternalServerError))
	m.Take()
	step := func(name string, want map[string]int, f func()) {
		t.Helper()
		f()
		if got := m.Take().Calls(); !maps.Equal(got, want) {
			t.Errorf("%s: calls %v, want %v", name, got, want)
		}
	}
	addMember(t, st, "w", "aw:ok")
	m.Take()
	// The webhook's Put and its agent's membership check, in one transaction.
	step("set", map[string]int{"TransactWriteItems": 1}, func() {
		if _, err := d.Store().Set(ctx, "w", "aw:ok", ok.URL); err != nil {
			t.Fatal(err)
		}
	})
	if _, err := asMember(t, st, d.Store()).Set(ctx, "w", "aw:fail", failing.URL); err != nil {
		t.Fatal(err)
	}
	for i := range 3 {
		if _, err := asMember(t, st, d.Store()).Set(ctx, "w", "aw:more"+string(rune('a'+i)), ok.URL); err != nil {
			t.Fatal(err)
		}
	}
	m.Take()
	// The webhook and its counters.
	step("show", map[string]int{"GetItem": 2}, func() {
		if _, err := d.Store().Show(ctx, "w", "aw:ok"); err != nil {
			t.Fatal(err)
		}
	})
	// The webhook (GetItem), its agent's membership (GetItem), its
	// counters (UpdateItem), and, as this first answer changes whether it
	// answered, the webhook item's outcome (UpdateItem).
	step("private event, delivered", map[string]int{"GetItem": 2, "UpdateItem": 2}, func() {
		if err := d.Dispatch(ctx, event(t, "w", world.MessageReceived, world.Private, "aw:ok", map[string]any{}, t0)); err != nil {
			t.Fatal(err)
		}
	})
	// Five webhooks, one failing: one Query, a membership GetItem and a
	// counters UpdateItem each, the failing one's retry PutItem, and the
	// outcome on the webhook item of the three answering for the first
	// time (aw:ok answered before; aw:fail never has).
	step("public event to 5 webhooks, 1 failing", map[string]int{"Query": 1, "GetItem": 5, "UpdateItem": 5 + 3, "PutItem": 1}, func() {
		if err := d.Dispatch(ctx, event(t, "w", world.PresenceChanged, world.Public, "", map[string]any{}, t0)); err != nil {
			t.Fatal(err)
		}
	})
	c.Advance(time.Minute)
	// One Query per shard; the due retry: claim (UpdateItem), webhook and
	// membership (GetItem each), stats (UpdateItem), settle as the next
	// retry (PutItem).
	step("retry run, 1 due and failing again", map[string]int{"Query": 4, "UpdateItem": 2, "GetItem": 2, "PutItem": 1}, func() {
		if rep, err := d.RunRetries(ctx); err != nil || rep.Sent != 1 {
			t.Fatalf("%+v %v", rep, err)
		}
	})
	step("retry run, none due", map[string]int{"Query": 4}, func() {
		if rep, err := d.RunRetries(ctx); err != nil || rep.Due != 0 {
			t.Fatalf("%+v %v", rep, err)
		}
	})
	step("probe", map[string]int{"GetItem": 1}, func() {
		if ok, _, err := d.Probe(ctx, "w", "aw:ok"); !ok || err != nil {
			t.Fatalf("%v %v", ok, err)
		}
	})
	gone := newReceiver(t)
	gone.setAnswer(status(http.StatusGone))
	if _, err := asMember(t, st, d.Store()).Set(ctx, "w2", "aw:gone", gone.URL); err != nil {
		t.Fatal(err)
	}
	m.Take()
	// Counters, the webhook disabled, the dead letter.
	step("private event answered 410: disable + dead letter", map[string]int{"GetItem": 2, "UpdateItem": 2, "PutItem": 1}, func() {
		if err := d.Dispatch(ctx, event(t, "w2", world.MessageReceived, world.Private, "aw:gone", map[string]any{}, t0)); err != nil {
			t.Fatal(err)
		}
	})
	if _, err := asMember(t, st, d.Store()).Set(ctx, "w2", "aw:gone", ok.URL); err != nil {
		t.Fatal(err)
	}
	m.Take()
	step("replay of 1 dead letter", map[string]int{"GetItem": 1, "Query": 1, "TransactWriteItems": 1}, func() {
		if n, err := d.Store().Replay(ctx, "w2", "aw:gone", t0.Add(-time.Hour)); err != nil || n != 1 {
			t.Fatalf("%d %v", n, err)
		}
	})
	c.Advance(time.Second)
	// Delivered: claim, webhook, membership, counters, the first answer
	// of the webhook set again on the webhook item, settle by deleting the
	// retry.
	step("retry run, 1 due and delivered", map[string]int{"Query": 4, "UpdateItem": 3, "GetItem": 2, "DeleteItem": 1}, func() {
		if rep, err := d.RunRetries(ctx); err != nil || rep.Sent != 1 {
			t.Fatalf("%+v %v", rep, err)
		}
	})
	// The webhook and its counters, in one transaction.
	step("remove", map[string]int{"TransactWriteItems": 1}, func() {
		if err := d.Store().Remove(ctx, "w", "aw:more"+"a"); err != nil {
			t.Fatal(err)
		}
	})
}
