// Package dispatcher is the webhook-dispatcher function's handler: the
// table stream's batches handed to webhook.Dispatcher, which delivers each
// new event to the webhooks that may see it and reports in
// batchItemFailures only the records it could not schedule.
package dispatcher

import (
	"context"

	"github.com/aws/aws-lambda-go/events"

	"github.com/a2awire/a2awire/shared/webhook"
)

// Function is the function's name (its functions/ folder).
const Function = "webhook-dispatcher"

// Handler is what the main passes to lambda.Start.
type Handler func(context.Context, events.DynamoDBEvent) (events.DynamoDBEventResponse, error)

// New returns the stream handler over d.
func New(d *webhook.Dispatcher) Handler { return d.HandleStream }
