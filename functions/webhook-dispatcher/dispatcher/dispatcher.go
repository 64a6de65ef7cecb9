// Package dispatcher is the webhook-dispatcher function's handler: the
// table stream's batches (filtered to event INSERTs by the trigger)
// decoded into events and handed to webhook.Dispatcher.Enqueue, which
// puts one delivery per recipient webhook on the delivery queue and makes
// no attempt, so a slow receiver never holds up the stream; the handler
// reports in batchItemFailures only the records whose deliveries could not
// be enqueued. The Lambda event types stay here: the webhook domain takes
// decoded events.
package dispatcher

import (
	"context"

	"github.com/aws/aws-lambda-go/events"

	"github.com/a2awire/a2awire/shared/store"
	"github.com/a2awire/a2awire/shared/webhook"
	"github.com/a2awire/a2awire/shared/world"
)

// Function is the function's name (its functions/ folder).
const Function = "webhook-dispatcher"

// Handler is what the main passes to lambda.Start.
type Handler func(context.Context, events.DynamoDBEvent) (events.DynamoDBEventResponse, error)

// New returns the stream handler over d. Every INSERT of an event item is
// enqueued; other records — the webhook's own items, stats, members,
// which the trigger's filter already keeps away — are skipped, so
// deliveries never feed themselves. A record that is an event
// item but does not decode is logged and skipped: retrying cannot mend it.
func New(d *webhook.Dispatcher) Handler {
	return func(ctx context.Context, ev events.DynamoDBEvent) (events.DynamoDBEventResponse, error) {
		var evs []world.Event
		var seqs []string // seqs[i] is the sequence number of evs[i]'s record
		for _, rec := range ev.Records {
			if rec.EventName != store.EventInsert {
				continue
			}
			it, err := store.FromStreamImage(rec.Change.NewImage)
			if err != nil || !world.IsEvent(it) {
				continue
			}
			e, err := world.DecodeEvent(it)
			if err != nil {
				d.Log().ErrorContext(ctx, "webhook: undeliverable event item", "seq", rec.Change.SequenceNumber, "err", err)
				continue
			}
			evs = append(evs, e)
			seqs = append(seqs, rec.Change.SequenceNumber)
		}
		var resp events.DynamoDBEventResponse
		for i, err := range d.Enqueue(ctx, evs) {
			if err != nil {
				d.Log().ErrorContext(ctx, "webhook: record not enqueued", "seq", seqs[i], "err", err)
				resp.BatchItemFailures = append(resp.BatchItemFailures, events.DynamoDBBatchItemFailure{ItemIdentifier: seqs[i]})
			}
		}
		return resp, nil
	}
}
