package cloud_test

import (
	"context"
	"log/slog"
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
