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

// MaxWindowBatch is the largest batch size of a queue trigger with a
// batching window (Lambda's limit for a standard queue); without a window
// it is queue.MaxBatch, what one receive returns.
const MaxWindowBatch = 10000

// batchEnvelope is the bytes of an events.SQSEvent's JSON around its
// records: {"Records":[ and ]}.
const batchEnvelope = len(`{"Records":[]}`)

// QueueMapping is an SQS event source mapping: MaxConcurrency pollers,
// each receiving a batch and invoking the function with an
// events.SQSEvent. Without a batching window a batch is one receive of up
// to the trigger's batch size (at most queue.MaxBatch). With one (Lambda
// then allows up to MaxWindowBatch), a poller keeps receiving until the
// batch is full, the window, counted from the batch's first message, has
// ended, or one more message would take the event past Lambda's request
// payload (MaxRequestPayload: the whole event, records and all, which is
// what Lambda and Entry.Invoke measure, not only the bodies). After an
// invocation it deletes what the
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
	// Lambda's rule: more than one receive's worth needs a window to
	// gather it in.
	limit := queue.MaxBatch
	if m.Trigger.BatchWindowSeconds > 0 {
		limit = MaxWindowBatch
	}
	if size > limit {
		return fmt.Errorf("queue trigger of %s: batch size %d over %d (window %d s)", m.Entry.Name(), size, limit, m.Trigger.BatchWindowSeconds)
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
	window := time.Duration(m.Trigger.BatchWindowSeconds) * time.Second
	var rest []queue.Received // received, but left out of the last batch by the payload limit
	for ctx.Err() == nil {
		msgs, next, err := m.gather(ctx, size, window, rest)
		rest = next
		if ctx.Err() != nil {
			return
		}
		if err != nil {
			m.Log.ErrorContext(ctx, "queue receive failed", "function", m.Entry.Name(), "err", err)
			if len(msgs) == 0 {
				if !sleep(ctx, QueuePoll) {
					return
				}
				continue
			}
			// What was gathered before the failure is still a batch.
		}
		if len(msgs) == 0 {
			continue
		}
		m.invoke(ctx, msgs)
	}
}

// gather receives one batch, starting with carried (what the previous
// batch left out). Without a window that is one receive: size is at most
// queue.MaxBatch and the window ends with its first message. With one,
// receives of at most queue.MaxBatch follow until the batch holds size
// messages, the window has ended (counted from the batch's first message,
// so an idle queue costs no wait) or the next message would take the
// event past MaxRequestPayload. A message is never split: the one that
// would pass the limit is returned as rest to open the next batch, still
// held under its receipt, rather than made visible again, which would
// count one more receive towards the queue's maxReceiveCount. No message
// for a whole QueuePoll gives an empty batch, so the caller sees ctx end.
func (m *QueueMapping) gather(ctx context.Context, size int, window time.Duration, carried []queue.Received) (batch, rest []queue.Received, err error) {
	pending := carried
	payload := batchEnvelope
	var end time.Time
	for {
		for len(pending) > 0 {
			n := m.recordSize(pending[0])
			// The first message always goes in: a body is at most
			// queue.MaxBody, far below the payload limit.
			if len(batch) > 0 && payload+n > MaxRequestPayload {
				return batch, pending, nil
			}
			if len(batch) == 0 {
				end = time.Now().Add(window)
			}
			batch, pending, payload = append(batch, pending[0]), pending[1:], payload+n
			if len(batch) == size {
				return batch, pending, nil
			}
		}
		wait := QueuePoll
		if len(batch) > 0 {
			if wait = time.Until(end); wait <= 0 {
				return batch, nil, nil
			}
		}
		got, rerr := m.Queue.Receive(ctx, min(size-len(batch), queue.MaxBatch), wait)
		if rerr != nil || len(got) == 0 {
			// Empty: the window ended, or a poll passed with no batch.
			return batch, nil, rerr
		}
		pending = got
	}
}

// recordSize is what r adds to the event's JSON: its record and a comma.
func (m *QueueMapping) recordSize(r queue.Received) int {
	b, err := json.Marshal(m.record(r))
	if err != nil {
		return MaxRequestPayload // strings always marshal
	}
	return len(b) + 1
}

// record is r as the event's record, as Lambda writes it.
func (m *QueueMapping) record(r queue.Received) events.SQSMessage {
	return events.SQSMessage{
		MessageId: r.ID, ReceiptHandle: r.Receipt, Body: r.Body, EventSource: "aws:sqs",
		EventSourceARN: "arn:aws:sqs:local:000000000000:" + m.Trigger.Queue,
		Attributes: map[string]string{
			"ApproximateReceiveCount": strconv.Itoa(r.ReceiveCount),
			"SentTimestamp":           strconv.FormatInt(r.SentAt.UnixMilli(), 10),
		},
	}
}

// invoke hands one batch to the function and deletes what it acknowledged.
func (m *QueueMapping) invoke(ctx context.Context, msgs []queue.Received) {
	ev := events.SQSEvent{Records: make([]events.SQSMessage, 0, len(msgs))}
	for _, r := range msgs {
		ev.Records = append(ev.Records, m.record(r))
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
