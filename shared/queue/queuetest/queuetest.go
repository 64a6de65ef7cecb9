// Package queuetest is the conformance suite of package queue: the SQS
// semantics webhook delivery relies on, run against the in-process queue
// and against an SQS-compatible server when one is available.
package queuetest

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/a2awire/a2awire/shared/queue"
)

// Pair is a queue with its dead-letter queue, made for one test.
type Pair struct {
	Queue, DLQ queue.Queue
	// Pass lets d pass for the queues: a fake clock moved (and the queue
	// woken), or a real sleep.
	Pass func(d time.Duration)
}

// Open makes a fresh Pair with cfg (VisibilityTimeout in whole seconds,
// MaxReceiveCount ≥ 1 redriving to DLQ).
type Open func(t *testing.T, cfg queue.Config) Pair

// Visibility is the visibility timeout the suite's queues get.
const Visibility = 2 * time.Second

// Run runs the suite.
func Run(t *testing.T, open Open) {
	t.Run("SendReceiveDelete", func(t *testing.T) { sendReceiveDelete(t, open) })
	t.Run("VisibilityTimeout", func(t *testing.T) { visibilityTimeout(t, open) })
	t.Run("Delay", func(t *testing.T) { delay(t, open) })
	t.Run("ChangeVisibility", func(t *testing.T) { changeVisibility(t, open) })
	t.Run("PartialBatch", func(t *testing.T) { partialBatch(t, open) })
	t.Run("Redrive", func(t *testing.T) { redrive(t, open) })
	t.Run("BadInput", func(t *testing.T) { badInput(t, open) })
}

// receiveAll receives until want messages came or wait passed in total.
func receiveAll(t *testing.T, q queue.Queue, want int, wait time.Duration) []queue.Received {
	t.Helper()
	var out []queue.Received
	deadline := time.Now().Add(wait)
	for len(out) < want {
		left := time.Until(deadline)
		if left <= 0 {
			break
		}
		got, err := q.Receive(context.Background(), queue.MaxBatch, min(left, time.Second))
		if err != nil {
			t.Fatalf("Receive: %v", err)
		}
		out = append(out, got...)
	}
	return out
}

// none checks that nothing is received within wait.
func none(t *testing.T, q queue.Queue, wait time.Duration, why string) {
	t.Helper()
	got, err := q.Receive(context.Background(), queue.MaxBatch, wait)
	if err != nil {
		t.Fatalf("Receive: %v", err)
	}
	if len(got) > 0 {
		t.Fatalf("%s: received %d (%q)", why, len(got), got[0].Body)
	}
}

func bodies(rs []queue.Received) []string {
	var out []string
	for _, r := range rs {
		out = append(out, r.Body)
	}
	slices.Sort(out)
	return out
}

func cfg() queue.Config { return queue.Config{VisibilityTimeout: Visibility, MaxReceiveCount: 3} }

// sendReceiveDelete: what is sent is received once, with a receive count
// of 1, distinct ids and receipts; deleted, it never comes back.
func sendReceiveDelete(t *testing.T, open Open) {
	p := open(t, cfg())
	ctx := context.Background()
	var msgs []queue.Message
	for i := range 12 { // more than one batch
		msgs = append(msgs, queue.Message{Body: fmt.Sprintf("m%02d", i)})
	}
	if err := p.Queue.Send(ctx, msgs...); err != nil {
		t.Fatal(err)
	}
	got := receiveAll(t, p.Queue, 12, 5*time.Second)
	var want []string
	for _, m := range msgs {
		want = append(want, m.Body)
	}
	if !slices.Equal(bodies(got), want) {
		t.Fatalf("received %v, want %v", bodies(got), want)
	}
	ids := map[string]bool{}
	for _, r := range got {
		if r.ReceiveCount != 1 || r.ID == "" || r.Receipt == "" || ids[r.ID] || r.SentAt.IsZero() {
			t.Errorf("received %+v (first receive, distinct id, a receipt, a send time)", r)
		}
		ids[r.ID] = true
		if err := p.Queue.Delete(ctx, r.Receipt); err != nil {
			t.Fatalf("Delete: %v", err)
		}
	}
	p.Pass(Visibility + time.Second)
	none(t, p.Queue, 200*time.Millisecond, "deleted messages")
}

// visibilityTimeout: a received message not deleted is invisible until
// the timeout passes, then received again with a count of 2 and a new
// receipt.
func visibilityTimeout(t *testing.T, open Open) {
	p := open(t, cfg())
	ctx := context.Background()
	if err := p.Queue.Send(ctx, queue.Message{Body: "v"}); err != nil {
		t.Fatal(err)
	}
	first := receiveAll(t, p.Queue, 1, 5*time.Second)
	if len(first) != 1 {
		t.Fatalf("received %d", len(first))
	}
	none(t, p.Queue, 100*time.Millisecond, "within the visibility timeout")
	p.Pass(Visibility + time.Second)
	again := receiveAll(t, p.Queue, 1, 5*time.Second)
	if len(again) != 1 || again[0].ID != first[0].ID || again[0].ReceiveCount != 2 || again[0].Receipt == first[0].Receipt {
		t.Fatalf("after the timeout: %+v, want %s again with count 2 and a new receipt", again, first[0].ID)
	}
}

// delay: a delayed message is not received before its delay.
func delay(t *testing.T, open Open) {
	p := open(t, cfg())
	ctx := context.Background()
	if err := p.Queue.Send(ctx, queue.Message{Body: "later", Delay: 2 * time.Second}, queue.Message{Body: "now"}); err != nil {
		t.Fatal(err)
	}
	got := receiveAll(t, p.Queue, 1, 5*time.Second)
	if !slices.Equal(bodies(got), []string{"now"}) {
		t.Fatalf("received %v, want only the undelayed one", bodies(got))
	}
	if err := p.Queue.Delete(ctx, got[0].Receipt); err != nil {
		t.Fatal(err)
	}
	none(t, p.Queue, 100*time.Millisecond, "before the delay")
	p.Pass(3 * time.Second)
	if got := receiveAll(t, p.Queue, 1, 5*time.Second); !slices.Equal(bodies(got), []string{"later"}) {
		t.Fatalf("after the delay: %v", bodies(got))
	}
}

// changeVisibility: 0 makes a received message visible at once; a longer
// one keeps it away past the queue's timeout.
func changeVisibility(t *testing.T, open Open) {
	p := open(t, cfg())
	ctx := context.Background()
	if err := p.Queue.Send(ctx, queue.Message{Body: "c"}); err != nil {
		t.Fatal(err)
	}
	r := receiveAll(t, p.Queue, 1, 5*time.Second)
	if len(r) != 1 {
		t.Fatal("not received")
	}
	if err := p.Queue.ChangeVisibility(ctx, r[0].Receipt, 0); err != nil {
		t.Fatal(err)
	}
	r = receiveAll(t, p.Queue, 1, 5*time.Second)
	if len(r) != 1 || r[0].ReceiveCount != 2 {
		t.Fatalf("after visibility 0: %+v", r)
	}
	if err := p.Queue.ChangeVisibility(ctx, r[0].Receipt, 2*Visibility); err != nil {
		t.Fatal(err)
	}
	p.Pass(Visibility + time.Second)
	none(t, p.Queue, 100*time.Millisecond, "past the queue's timeout but within the changed one")
	p.Pass(Visibility)
	if r = receiveAll(t, p.Queue, 1, 5*time.Second); len(r) != 1 || r[0].ReceiveCount != 3 {
		t.Fatalf("after the changed visibility: %+v", r)
	}
}

// partialBatch: deleting part of a received batch leaves exactly the rest
// to come back — what a consumer's partial batch failure relies on.
func partialBatch(t *testing.T, open Open) {
	p := open(t, cfg())
	ctx := context.Background()
	if err := p.Queue.Send(ctx, queue.Message{Body: "a"}, queue.Message{Body: "b"}, queue.Message{Body: "c"}, queue.Message{Body: "d"}); err != nil {
		t.Fatal(err)
	}
	got := receiveAll(t, p.Queue, 4, 5*time.Second)
	if len(got) != 4 {
		t.Fatalf("received %d", len(got))
	}
	for _, r := range got {
		if r.Body == "a" || r.Body == "c" {
			if err := p.Queue.Delete(ctx, r.Receipt); err != nil {
				t.Fatal(err)
			}
		}
	}
	p.Pass(Visibility + time.Second)
	if again := receiveAll(t, p.Queue, 2, 5*time.Second); !slices.Equal(bodies(again), []string{"b", "d"}) {
		t.Fatalf("came back %v, want the undeleted b and d", bodies(again))
	}
}

// redrive: a message received MaxReceiveCount times without a delete
// moves to the dead-letter queue, body intact, and is not received from
// the queue again.
func redrive(t *testing.T, open Open) {
	p := open(t, cfg())
	ctx := context.Background()
	if err := p.Queue.Send(ctx, queue.Message{Body: "poison"}); err != nil {
		t.Fatal(err)
	}
	for i := 1; i <= cfg().MaxReceiveCount; i++ {
		r := receiveAll(t, p.Queue, 1, 5*time.Second)
		if len(r) != 1 || r[0].ReceiveCount != i {
			t.Fatalf("receive %d: %+v", i, r)
		}
		if err := p.Queue.ChangeVisibility(ctx, r[0].Receipt, 0); err != nil {
			t.Fatal(err)
		}
	}
	none(t, p.Queue, 500*time.Millisecond, "after MaxReceiveCount receives")
	dl := receiveAll(t, p.DLQ, 1, 5*time.Second)
	if len(dl) != 1 || dl[0].Body != "poison" {
		t.Fatalf("dead-letter queue holds %+v", dl)
	}
}

// badInput: out-of-range requests are errors, and a receipt that names no
// received message is ErrReceiptInvalid or an error.
func badInput(t *testing.T, open Open) {
	p := open(t, cfg())
	ctx := context.Background()
	if err := p.Queue.Send(ctx, queue.Message{Body: "x", Delay: queue.MaxDelay + time.Second}); err == nil {
		t.Error("a delay past MaxDelay was accepted")
	}
	if _, err := p.Queue.Receive(ctx, queue.MaxBatch+1, 0); err == nil {
		t.Error("a receive of more than MaxBatch was accepted")
	}
	if err := p.Queue.Send(ctx, queue.Message{Body: "y"}); err != nil {
		t.Fatal(err)
	}
	r := receiveAll(t, p.Queue, 1, 5*time.Second)
	if len(r) != 1 {
		t.Fatal("not received")
	}
	if err := p.Queue.Delete(ctx, r[0].Receipt); err != nil {
		t.Fatal(err)
	}
	// SQS accepts a second delete of the same receipt; a visibility change
	// of a deleted message is refused.
	if err := p.Queue.ChangeVisibility(ctx, r[0].Receipt, time.Second); err == nil {
		t.Error("changing the visibility of a deleted message succeeded")
	} else if !errors.Is(err, queue.ErrReceiptInvalid) {
		t.Logf("ChangeVisibility of a deleted message: %v", err)
	}
}
