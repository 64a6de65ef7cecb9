// Package deadletter is the webhook-deadletter function's handler: the
// messages of the delivery queue's dead-letter queue — deliveries the
// workers kept failing on — kept as their webhooks' dead letters
// (webhook.Dispatcher.DeadLetterJobs), where the owner sees them counted
// and can replay them. Messages it cannot keep are its batchItemFailures.
package deadletter

import (
	"context"
	"strconv"

	"github.com/aws/aws-lambda-go/events"

	"github.com/a2awire/a2awire/shared/function"
	"github.com/a2awire/a2awire/shared/webhook"
)

// Function is the function's name (its functions/ folder).
const Function = "webhook-deadletter"

// Handler is what the main passes to lambda.Start.
type Handler func(context.Context, events.SQSEvent) (events.SQSEventResponse, error)

// Build builds the function over env (webhook.BuildDeadLetters: no
// delivery queue).
func Build(env function.Env) (any, error) {
	d, err := webhook.BuildDeadLetters(env)
	if err != nil {
		return nil, err
	}
	return New(d), nil
}

// New returns the queue handler over d.
func New(d *webhook.Dispatcher) Handler {
	return func(ctx context.Context, ev events.SQSEvent) (events.SQSEventResponse, error) {
		msgs := make([]webhook.Received, 0, len(ev.Records))
		for _, r := range ev.Records {
			n, _ := strconv.Atoi(r.Attributes["ApproximateReceiveCount"])
			msgs = append(msgs, webhook.Received{ID: r.MessageId, Body: r.Body, Receipt: r.ReceiptHandle, ReceiveCount: n})
		}
		var resp events.SQSEventResponse
		for _, id := range d.DeadLetterJobs(ctx, msgs) {
			resp.BatchItemFailures = append(resp.BatchItemFailures, events.SQSBatchItemFailure{ItemIdentifier: id})
		}
		return resp, nil
	}
}
