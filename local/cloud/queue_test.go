package cloud_test

import (
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/a2awire/a2awire/local/cloud"
	"github.com/a2awire/a2awire/shared/capture"
	"github.com/a2awire/a2awire/shared/queue"
	"github.com/a2awire/a2awire/shared/routes"
	"github.com/aws/aws-lambda-go/events"
)

// TestQueueLogsEachBatch: a batch the function took writes one "queue
// batch" line naming the function, the queue, the messages and how many
// it kept for a retry (its batchItemFailures).
func TestQueueLogsEachBatch(t *testing.T) {
	q := queue.NewMemory(queue.Config{VisibilityTimeout: time.Minute})
	if err := q.Send(t.Context(), queue.Message{Body: "a"}, queue.Message{Body: "b"}); err != nil {
		t.Fatal(err)
	}
	took := make(chan struct{}, 1)
	fn := func(_ context.Context, e events.SQSEvent) (events.SQSEventResponse, error) {
		var resp events.SQSEventResponse
		for _, r := range e.Records {
			if r.Body == "b" {
				resp.BatchItemFailures = append(resp.BatchItemFailures, events.SQSBatchItemFailure{ItemIdentifier: r.MessageId})
			}
		}
		took <- struct{}{}
		return resp, nil
	}
	logs := &capture.Buffer{}
	m := &cloud.QueueMapping{Entry: cloud.NewEntry("fn-queue", fn, time.Second), Queue: q, Log: slog.New(slog.NewTextHandler(logs, nil)),
		Trigger: routes.Trigger{Kind: routes.QueueTrigger, Queue: "jobs", BatchSize: 10, MaxConcurrency: 1, ReportBatchItemFailures: true}}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- m.Run(ctx) }()
	select {
	case <-took:
	case <-time.After(10 * time.Second):
		t.Fatal("the function got no batch")
	}
	want := `level=INFO msg="queue batch" function=fn-queue queue=jobs messages=2 kept=1 duration_ms=`
	deadline := time.Now().Add(5 * time.Second)
	for !strings.Contains(logs.String(), want) {
		if time.Now().After(deadline) {
			t.Fatalf("log lacks %q:\n%s", want, logs.String())
		}
		time.Sleep(time.Millisecond)
	}
	cancel()
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(logs.String(), `outcome="some kept for a retry"`) {
		t.Errorf("outcome missing:\n%s", logs.String())
	}
}

// batchRun is a running mapping whose function records every batch it is
// given and acknowledges it whole.
type batchRun struct {
	q       *queue.Memory
	batches chan events.SQSEvent
	done    chan error // Run's result
}

// startBatches sends msgs to a fresh queue, then starts a mapping of trig
// on it (one poller unless trig says otherwise), stopped when the test
// ends.
func startBatches(t *testing.T, trig routes.Trigger, msgs ...queue.Message) *batchRun {
	t.Helper()
	r := &batchRun{q: queue.NewMemory(queue.Config{VisibilityTimeout: time.Minute}), batches: make(chan events.SQSEvent, 100), done: make(chan error, 1)}
	if err := r.q.Send(t.Context(), msgs...); err != nil {
		t.Fatal(err)
	}
	fn := func(_ context.Context, e events.SQSEvent) error {
		r.batches <- e
		return nil
	}
	trig.Kind, trig.Queue = routes.QueueTrigger, "jobs"
	if trig.MaxConcurrency == 0 {
		trig.MaxConcurrency = 1 // one poller: no batch is split with another's
	}
	m := &cloud.QueueMapping{Entry: cloud.NewEntry("fn-batch", fn, 10*time.Second), Queue: r.q, Trigger: trig, Log: slog.New(slog.DiscardHandler)}
	ctx, cancel := context.WithCancel(context.Background())
	go func() { r.done <- m.Run(ctx) }()
	t.Cleanup(func() {
		cancel()
		if err := <-r.done; err != nil {
			t.Errorf("Run: %v", err)
		}
	})
	return r
}

// take waits for batches until they hold n messages, and returns them.
func (r *batchRun) take(t *testing.T, n int) []events.SQSEvent {
	t.Helper()
	var out []events.SQSEvent
	deadline := time.After(15 * time.Second)
	for got := 0; got < n; {
		select {
		case e := <-r.batches:
			out = append(out, e)
			got += len(e.Records)
		case err := <-r.done:
			r.done <- err // for the cleanup
			t.Fatalf("Run ended early: %v", err)
		case <-deadline:
			t.Fatalf("%d of %d messages in %d batches", got, n, len(out))
		}
	}
	return out
}

func sizes(bs []events.SQSEvent) []int {
	var out []int
	for _, b := range bs {
		out = append(out, len(b.Records))
	}
	return out
}

func bodies(n, size int) []queue.Message {
	msgs := make([]queue.Message, n)
	for i := range msgs {
		msgs[i] = queue.Message{Body: fmt.Sprintf("%0*d", size, i)}
	}
	return msgs
}

// TestQueueWindowGathers: with a window, the mapping receives (10 at a
// time) until the window ends, so 25 waiting messages make one batch of
// 25 under a batch size of 1000, as world-commit's trigger asks.
func TestQueueWindowGathers(t *testing.T) {
	r := startBatches(t, routes.Trigger{BatchSize: 1000, BatchWindowSeconds: 1}, bodies(25, 4)...)
	if got := sizes(r.take(t, 25)); !slices.Equal(got, []int{25}) {
		t.Errorf("batches of %v, want one of 25", got)
	}
}

// TestQueueWindowBatchSize: with a window, a batch ends when it holds the
// batch size, and the rest waits for the next: 25 messages under a batch
// size of 20 make batches of 20 and 5.
func TestQueueWindowBatchSize(t *testing.T) {
	r := startBatches(t, routes.Trigger{BatchSize: 20, BatchWindowSeconds: 1}, bodies(25, 4)...)
	if got := sizes(r.take(t, 25)); !slices.Equal(got, []int{20, 5}) {
		t.Errorf("batches of %v, want 20 and 5", got)
	}
}

// TestQueueWindowPayload: with a window, a batch ends before the message
// that would take the event past Lambda's 6 MB request payload; that
// message opens the next batch, received once, not made visible again.
// 30 messages of SQS's largest body (7.5 MB in all) come in two batches,
// the first as full as the limit allows; without the limit the one event
// would be refused and nothing delivered.
func TestQueueWindowPayload(t *testing.T) {
	r := startBatches(t, routes.Trigger{BatchSize: 1000, BatchWindowSeconds: 1}, bodies(30, queue.MaxBody)...)
	bs := r.take(t, 30)
	seen := map[string]bool{}
	for i, b := range bs {
		raw, err := json.Marshal(b)
		if err != nil {
			t.Fatal(err)
		}
		if len(raw) > cloud.MaxRequestPayload {
			t.Errorf("batch %d: %d bytes, over %d", i, len(raw), cloud.MaxRequestPayload)
		}
		for _, rec := range b.Records {
			if seen[rec.MessageId] || rec.Attributes["ApproximateReceiveCount"] != "1" {
				t.Errorf("message %s again, or received %s times", rec.MessageId, rec.Attributes["ApproximateReceiveCount"])
			}
			seen[rec.MessageId] = true
		}
	}
	if len(bs) != 2 {
		t.Fatalf("batches of %v, want two", sizes(bs))
	}
	first, _ := json.Marshal(bs[0])
	next, _ := json.Marshal(bs[1].Records[0])
	if len(first)+1+len(next) <= cloud.MaxRequestPayload {
		t.Errorf("batches of %v: the first (%d bytes) had room for the next message (%d)", sizes(bs), len(first), len(next))
	}
}

// TestQueueNoWindow: without a window a batch is one receive, at most 10
// messages (SQS's most per receive): 25 make batches of 10, 10 and 5.
func TestQueueNoWindow(t *testing.T) {
	r := startBatches(t, routes.Trigger{BatchSize: 10}, bodies(25, 4)...)
	if got := sizes(r.take(t, 25)); !slices.Equal(got, []int{10, 10, 5}) {
		t.Errorf("batches of %v, want 10, 10 and 5", got)
	}
}

// TestQueueBatchSizeLimits: Run refuses a batch size over 10 without a
// window and over 10000 with one, as Lambda does, and takes 10000 with a
// window.
func TestQueueBatchSizeLimits(t *testing.T) {
	ctx, cancel := context.WithCancel(t.Context())
	cancel() // an accepted mapping stops at once
	for _, c := range []struct {
		size, window int
		ok           bool
	}{{10, 0, true}, {11, 0, false}, {cloud.MaxWindowBatch, 1, true}, {cloud.MaxWindowBatch + 1, 1, false}} {
		m := &cloud.QueueMapping{Entry: cloud.NewEntry("fn-batch", func(context.Context, events.SQSEvent) error { return nil }, time.Second),
			Queue: queue.NewMemory(queue.Config{}), Log: slog.New(slog.DiscardHandler),
			Trigger: routes.Trigger{Kind: routes.QueueTrigger, Queue: "jobs", BatchSize: c.size, BatchWindowSeconds: c.window}}
		if err := m.Run(ctx); (err == nil) != c.ok {
			t.Errorf("batch size %d, window %d s: Run = %v, want accepted %v", c.size, c.window, err, c.ok)
		}
	}
}
