package webhook

import (
	"context"
	"testing"
	"time"

	"github.com/a2awire/a2awire/shared/queue"
	"github.com/a2awire/a2awire/shared/store"
	"github.com/a2awire/a2awire/shared/store/memory"
	"github.com/a2awire/a2awire/shared/webhook/delivery"
	"github.com/a2awire/a2awire/shared/world"
)

func TestDeferralDoublesUpToTheHoldersEnd(t *testing.T) {
	for _, c := range []struct {
		retryIn  time.Duration
		deferred int
		want     time.Duration
	}{
		{3800 * time.Millisecond, 0, time.Second},
		{3800 * time.Millisecond, 1, 2 * time.Second},
		{3800 * time.Millisecond, 2, 4 * time.Second},
		{3200 * time.Millisecond, 2, 4 * time.Second}, // rounded up: never before the holder must have ended
		{3000 * time.Millisecond, 2, 3 * time.Second},
		{200 * time.Millisecond, 0, time.Second}, // SQS's whole seconds, at least DeferDelay
		{time.Hour, 9, 16 * time.Second},         // the doubling is bounded
		{-time.Second, 3, time.Second},
	} {
		if got := deferral(noSlot{retryIn: c.retryIn}, c.deferred); got != c.want {
			t.Errorf("deferral(retryIn %v, deferred %d) = %v, want %v", c.retryIn, c.deferred, got, c.want)
		}
	}
}

// sent records what a worker puts back on the queue.
type sent struct {
	queue.Queue
	msgs []queue.Message
}

func (s *sent) Send(_ context.Context, msgs ...queue.Message) error {
	s.msgs = append(s.msgs, msgs...)
	return nil
}

// TestDeliveryBehindABusySlotLooksAgainSoon: an endpoint whose one slot is
// held by an attempt 2 s old (past FastAnswer, so the worker does not wait
// for it) sends the delivery back with 1 s, then 2 s, then the 3 s until
// the holder's attempt must have timed out — not straight to that
// timeout, which made a fast endpoint's delivery wait 5 s behind one of
// its own attempts slowed by a loaded store.
func TestDeliveryBehindABusySlotLooksAgainSoon(t *testing.T) {
	now := time.Date(2026, 12, 4, 12, 0, 0, 0, time.UTC)
	st := memory.New()
	q := &sent{}
	d, err := NewDispatcher(Config{Store: st, Queue: q, Now: func() time.Time { return now }})
	if err != nil {
		t.Fatal(err)
	}
	const url = "https://receiver.example/hook"
	age := 2 * time.Second
	if _, err := st.Write(t.Context(), store.Put(store.Key{PK: EndpointPK(url), SK: slotPrefix + "0"}, store.Item{
		world.AttrType: store.S(TypeEndpointSlot),
		attrUntil:      store.N(now.Add(slotLease).UnixMilli()),
		attrSince:      store.N(now.Add(-age).UnixMilli()),
		attrHolder:     store.S("another worker"),
	})); err != nil {
		t.Fatal(err)
	}
	msg, err := encodeJob(Job{Event: world.Event{World: "w", ID: "e1"}, Recipient: "aw:r", Hook: "g1", URL: url})
	if err != nil {
		t.Fatal(err)
	}
	must := delivery.AttemptTimeout - age
	for i, want := range []time.Duration{time.Second, 2 * time.Second, must} {
		keep, err := d.work(t.Context(), Received{ID: "m", Body: msg.Body, ReceiveCount: 1})
		if err != nil || keep {
			t.Fatalf("deferral %d: keep %v, err %v", i, keep, err)
		}
		if len(q.msgs) != i+1 {
			t.Fatalf("deferral %d: %d messages sent back, want %d", i, len(q.msgs), i+1)
		}
		msg = q.msgs[i]
		if msg.Delay != want {
			t.Errorf("deferral %d: delay %v, want %v", i, msg.Delay, want)
		}
		j, err := decodeJob(msg.Body)
		if err != nil || j.Deferred != i+1 {
			t.Fatalf("deferral %d: job %+v, err %v", i, j, err)
		}
	}
}
