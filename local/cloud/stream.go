package cloud

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"time"

	"github.com/a2awire/a2awire/shared/routes"
	"github.com/a2awire/a2awire/shared/store"
	"github.com/aws/aws-lambda-go/events"
)

// Backoff is the wait before retrying a failed batch: Initial, doubled on
// each consecutive failure, never above Max.
type Backoff struct {
	Initial, Max time.Duration
}

// DefaultBackoff is the retry wait of stream triggers.
var DefaultBackoff = Backoff{Initial: 100 * time.Millisecond, Max: 10 * time.Second}

func (b Backoff) wait(failures int) time.Duration {
	d := b.Initial
	for i := 1; i < failures && d < b.Max; i++ {
		d *= 2
	}
	return min(d, b.Max)
}

// Stream is a DynamoDB stream event source mapping: it reads a store.Feed
// as the function's consumer and invokes the function with
// events.DynamoDBEvent batches, with the trigger's batch size and window.
// A batch that fails (an error, a panic, a timeout, an unreadable
// response) is retried with capped backoff until it succeeds: records are
// never skipped. Records that match none of the trigger's filters are
// consumed without invoking the function, as Lambda's FilterCriteria
// drops them. With ReportBatchItemFailures the function's
// batchItemFailures are honoured: the feed is committed up to just before
// the first failed record and reading resumes there.
type Stream struct {
	Entry   *Entry
	Feed    store.Feed
	Trigger routes.Trigger
	Log     *slog.Logger
	// Backoff between retries; zero means DefaultBackoff.
	Backoff Backoff
}

// Run drives the mapping until ctx ends. It returns nil on a clean stop.
func (s *Stream) Run(ctx context.Context) error {
	size := s.Trigger.BatchSize
	if size <= 0 {
		size = routes.DefaultStreamBatchSize
	}
	backoff := s.Backoff
	if backoff == (Backoff{}) {
		backoff = DefaultBackoff
	}
	window := time.Duration(s.Trigger.BatchWindowSeconds) * time.Second
	filter, err := NewFilter(s.Trigger.Patterns())
	if err != nil {
		return fmt.Errorf("stream trigger of %s: %w", s.Entry.Name(), err)
	}
	consumer := s.Entry.Name()
	failures := 0
	for {
		recs, err := s.Feed.Read(ctx, consumer, size)
		if ctx.Err() != nil {
			return nil
		}
		if err == nil && len(recs) < size && window > 0 {
			// The batching window: gather up to a full batch before
			// invoking. Reading again returns the same records first.
			if !sleep(ctx, window) {
				return nil
			}
			recs, err = s.Feed.Read(ctx, consumer, size)
		}
		if err == nil && len(recs) == 0 {
			continue
		}
		if err == nil {
			var commit string
			commit, err = s.deliverFiltered(ctx, filter, recs)
			if ctx.Err() != nil {
				return nil
			}
			if commit != "" {
				// Committing what the function acknowledged must not be
				// cut short by a shutdown that raced it.
				if cerr := s.Feed.Commit(context.WithoutCancel(ctx), consumer, commit); cerr != nil {
					err = errors.Join(err, fmt.Errorf("commit: %w", cerr))
				}
			}
		}
		if err == nil {
			failures = 0
			continue
		}
		failures++
		wait := backoff.wait(failures)
		s.Log.ErrorContext(ctx, "stream batch failed; retrying", "function", consumer,
			"records", len(recs), "attempt", failures, "retry_in", wait.String(), "err", err)
		if !sleep(ctx, wait) {
			return nil
		}
	}
}

// deliverFiltered hands the records that pass the trigger's filter to
// deliver and returns the sequence number to commit ("" for none): records
// the filter passes over are consumed as if acknowledged, as Lambda drops
// them before it builds a batch, so a batch of only those invokes nothing.
func (s *Stream) deliverFiltered(ctx context.Context, filter *Filter, recs []events.DynamoDBEventRecord) (string, error) {
	var kept []events.DynamoDBEventRecord
	var at []int // at[i] is kept[i]'s index in recs
	for i, r := range recs {
		ok, err := filter.MatchValue(r)
		if err != nil {
			return "", err
		}
		if ok {
			kept = append(kept, r)
			at = append(at, i)
		}
	}
	acked := 0
	var err error
	if len(kept) > 0 {
		start := time.Now()
		acked, err = s.deliver(ctx, kept)
		if err == nil {
			// One line per batch the function took, as the gateway writes
			// one per request; a failed batch has its own error line (Run).
			s.Log.LogAttrs(ctx, slog.LevelInfo, "stream batch", slog.String("function", s.Entry.Name()),
				slog.Int("records", len(kept)), slog.Int("filtered_out", len(recs)-len(kept)),
				slog.Int64("duration_ms", time.Since(start).Milliseconds()), slog.String("outcome", "ok"))
		}
	}
	// Everything before the first kept record not acknowledged is consumed.
	upTo := len(recs) - 1
	if acked < len(kept) {
		upTo = at[acked] - 1
	}
	if upTo < 0 {
		return "", err
	}
	return recs[upTo].Change.SequenceNumber, err
}

// deliver invokes the function on one batch (trimmed to Lambda's payload
// limit) and returns how many of its first records were acknowledged and
// an error when part or all of the batch must be retried.
func (s *Stream) deliver(ctx context.Context, recs []events.DynamoDBEventRecord) (int, error) {
	var payload []byte
	for {
		var err error
		payload, err = json.Marshal(events.DynamoDBEvent{Records: recs})
		if err != nil {
			return 0, fmt.Errorf("encode batch: %w", err)
		}
		// Like the event source mapping, hand over fewer records rather
		// than an event Lambda would refuse.
		if len(payload) <= MaxRequestPayload || len(recs) == 1 {
			break
		}
		recs = recs[:len(recs)/2]
	}
	out, err := s.Entry.Invoke(ctx, payload)
	if err != nil {
		return 0, err
	}
	if !s.Trigger.ReportBatchItemFailures {
		return len(recs), nil
	}
	var resp events.DynamoDBEventResponse
	if len(out) > 0 && string(out) != "null" {
		if err := json.Unmarshal(out, &resp); err != nil {
			return 0, fmt.Errorf("unreadable batch response (whole batch retried): %w", err)
		}
	}
	if len(resp.BatchItemFailures) == 0 {
		return len(recs), nil
	}
	// Lambda checkpoints before the lowest failed sequence number; a
	// failure naming no record of the batch fails the whole batch.
	first := len(recs)
	for _, f := range resp.BatchItemFailures {
		i := indexOf(recs, f.ItemIdentifier)
		if i < 0 {
			return 0, fmt.Errorf("batchItemFailures names %q, not a record of the batch (whole batch retried)", f.ItemIdentifier)
		}
		first = min(first, i)
	}
	return first, fmt.Errorf("function reported record %s failed", recs[first].Change.SequenceNumber)
}

func indexOf(recs []events.DynamoDBEventRecord, seq string) int {
	for i, r := range recs {
		if seq != "" && r.Change.SequenceNumber == seq {
			return i
		}
	}
	return -1
}

// sleep waits d or until ctx ends; it reports whether d passed.
func sleep(ctx context.Context, d time.Duration) bool {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return true
	case <-ctx.Done():
		return false
	}
}
