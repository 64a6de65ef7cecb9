package cloud

import (
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"strconv"
	"sync"
	"time"

	"github.com/aws/aws-lambda-go/events"

	"github.com/a2awire/a2awire/shared/queue"
	"github.com/a2awire/a2awire/shared/routes"
)

// QueuePoll is how long a poller long-polls the queue per receive.
const QueuePoll = time.Second

// QueueMapping is an SQS event source mapping: MaxConcurrency pollers,
// each receiving up to the trigger's batch size and invoking the function
// with an events.SQSEvent. After an invocation it deletes what the
// function acknowledged — the whole batch, or with ReportBatchItemFailures
// all but the messages named in batchItemFailures; after a failed
// invocation (an error, a panic, a timeout, an unreadable response) or a
// failure naming no message of the batch, nothing, as Lambda does. What is
// not deleted comes back when its visibility timeout ends, and the queue
// moves a message to its dead-letter queue after maxReceiveCount receives.
type QueueMapping struct {
	Entry   *Entry
	Queue   queue.Queue
	Trigger routes.Trigger
	Log     *slog.Logger
}

// Run drives the mapping until ctx ends; nil on a clean stop.
func (m *QueueMapping) Run(ctx context.Context) error {
	size := m.Trigger.BatchSize
	if size <= 0 {
		size = routes.DefaultQueueBatchSize
	}
	if size > queue.MaxBatch {
		return fmt.Errorf("queue trigger of %s: batch size %d over %d", m.Entry.Name(), size, queue.MaxBatch)
	}
	n := m.Trigger.MaxConcurrency
	if n <= 0 {
		n = routes.DefaultQueueConcurrency
	}
	var wg sync.WaitGroup
	for range n {
		wg.Go(func() { m.poll(ctx, size) })
	}
	wg.Wait()
	return nil
}

func (m *QueueMapping) poll(ctx context.Context, size int) {
	for ctx.Err() == nil {
		msgs, err := m.Queue.Receive(ctx, size, QueuePoll)
		if ctx.Err() != nil {
			return
		}
		if err != nil {
			m.Log.ErrorContext(ctx, "queue receive failed", "function", m.Entry.Name(), "err", err)
			if !sleep(ctx, QueuePoll) {
				return
			}
			continue
		}
		if len(msgs) == 0 {
			continue
		}
		m.invoke(ctx, msgs)
	}
}

// invoke hands one batch to the function and deletes what it acknowledged.
func (m *QueueMapping) invoke(ctx context.Context, msgs []queue.Received) {
	ev := events.SQSEvent{Records: make([]events.SQSMessage, 0, len(msgs))}
	for _, r := range msgs {
		ev.Records = append(ev.Records, events.SQSMessage{
			MessageId: r.ID, ReceiptHandle: r.Receipt, Body: r.Body, EventSource: "aws:sqs",
			EventSourceARN: "arn:aws:sqs:local:000000000000:" + m.Trigger.Queue,
			Attributes: map[string]string{
				"ApproximateReceiveCount": strconv.Itoa(r.ReceiveCount),
				"SentTimestamp":           strconv.FormatInt(r.SentAt.UnixMilli(), 10),
			},
		})
	}
	payload, err := json.Marshal(ev)
	if err == nil {
		start := time.Now()
		var out []byte
		out, err = m.Entry.Invoke(ctx, payload)
		if err == nil {
			var keep map[string]bool
			keep, err = m.failures(out, msgs)
			if err == nil {
				outcome := "ok"
				if len(keep) > 0 {
					outcome = "some kept for a retry"
				}
				m.Log.LogAttrs(ctx, slog.LevelInfo, "queue batch", slog.String("function", m.Entry.Name()), slog.String("queue", m.Trigger.Queue),
					slog.Int("messages", len(msgs)), slog.Int("kept", len(keep)),
					slog.Int64("duration_ms", time.Since(start).Milliseconds()), slog.String("outcome", outcome))
				for _, r := range msgs {
					if keep[r.ID] {
						continue
					}
					// An acknowledged message is deleted even if a
					// shutdown raced the invocation.
					if derr := m.Queue.Delete(context.WithoutCancel(ctx), r.Receipt); derr != nil {
						m.Log.WarnContext(ctx, "queue delete failed; the message comes back", "function", m.Entry.Name(), "message", r.ID, "err", derr)
					}
				}
				return
			}
		}
	}
	if ctx.Err() == nil {
		m.Log.ErrorContext(ctx, "queue batch failed; its messages come back after the visibility timeout", "function", m.Entry.Name(),
			"messages", len(msgs), "err", err)
	}
}

// failures reads the function's response: the messages to keep.
func (m *QueueMapping) failures(out []byte, msgs []queue.Received) (map[string]bool, error) {
	if !m.Trigger.ReportBatchItemFailures {
		return nil, nil
	}
	var resp events.SQSEventResponse
	if len(out) > 0 && string(out) != "null" {
		if err := json.Unmarshal(out, &resp); err != nil {
			return nil, fmt.Errorf("unreadable batch response (whole batch kept): %w", err)
		}
	}
	keep := map[string]bool{}
	for _, f := range resp.BatchItemFailures {
		found := false
		for _, r := range msgs {
			if r.ID == f.ItemIdentifier {
				found = true
				break
			}
		}
		if !found {
			return nil, fmt.Errorf("batchItemFailures names %q, not a message of the batch (whole batch kept)", f.ItemIdentifier)
		}
		keep[f.ItemIdentifier] = true
	}
	return keep, nil
}
