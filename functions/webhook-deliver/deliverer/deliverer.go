// Package deliverer is the webhook-deliver function's handler: a batch of
// the delivery queue's messages (an SQS event source mapping with partial
// batch responses) handed to webhook.Dispatcher.Work, which makes the
// attempts under each endpoint's concurrency cap. The messages Work keeps
// (an early retry waiting in the queue, one it could not settle) are the
// batchItemFailures; Lambda deletes the rest. The Lambda event types stay
// here: the webhook domain takes plain messages.
package deliverer

import (
	"context"
	"strconv"

	"github.com/aws/aws-lambda-go/events"

	"github.com/a2awire/a2awire/shared/function"
	"github.com/a2awire/a2awire/shared/webhook"
)

// Function is the function's name (its functions/ folder).
const Function = "webhook-deliver"

// Handler is what the main passes to lambda.Start.
type Handler func(context.Context, events.SQSEvent) (events.SQSEventResponse, error)

// Build builds the function over env (webhook.Build).
func Build(env function.Env) (any, error) {
	d, err := webhook.Build(env)
	if err != nil {
		return nil, err
	}
	return New(d), nil
}

// New returns the queue handler over d.
func New(d *webhook.Dispatcher) Handler {
	return func(ctx context.Context, ev events.SQSEvent) (events.SQSEventResponse, error) {
		return failures(d.Work(ctx, Received(ev))), nil
	}
}

// Received converts an SQS batch to the webhook domain's messages.
func Received(ev events.SQSEvent) []webhook.Received {
	out := make([]webhook.Received, 0, len(ev.Records))
	for _, r := range ev.Records {
		n, _ := strconv.Atoi(r.Attributes["ApproximateReceiveCount"])
		out = append(out, webhook.Received{ID: r.MessageId, Body: r.Body, Receipt: r.ReceiptHandle, ReceiveCount: n})
	}
	return out
}

func failures(ids []string) events.SQSEventResponse {
	var resp events.SQSEventResponse
	for _, id := range ids {
		resp.BatchItemFailures = append(resp.BatchItemFailures, events.SQSBatchItemFailure{ItemIdentifier: id})
	}
	return resp
}
