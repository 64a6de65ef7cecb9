// Package retry is the webhook-retry function's handler: on each scheduled
// tick it works the webhook retries that have come due
// (webhook.Dispatcher.RunRetries).
package retry

import (
	"context"
	"fmt"
	"log/slog"

	"github.com/aws/aws-lambda-go/events"

	"github.com/a2awire/a2awire/shared/webhook"
)

// Function is the function's name (its functions/ folder).
const Function = "webhook-retry"

// Handler is what the main passes to lambda.Start.
type Handler func(context.Context, events.EventBridgeEvent) error

// New returns the scheduled handler over d. A failed run is returned, so
// the invocation is reported failed; the retries it did not settle stay
// due (or come due again when their lease ends) for the next tick.
func New(d *webhook.Dispatcher, log *slog.Logger) Handler {
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	return func(ctx context.Context, _ events.EventBridgeEvent) error {
		rep, err := d.RunRetries(ctx)
		if err != nil {
			return fmt.Errorf("webhook-retry: %w", err)
		}
		if rep.Due > 0 {
			log.InfoContext(ctx, "webhook retries", "due", rep.Due, "sent", rep.Sent)
		}
		return nil
	}
}
