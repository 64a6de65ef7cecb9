// Package committer is the world-commit function's handler: a batch of the
// action queue's messages (an SQS event source mapping gathering up to
// 1,000 for a second, partial batch responses) committed by
// world.Service.CommitQueued, each world's actions and direct messages many
// to a transaction (a message's event made by package inbox). A write that
// committed, now or before, is acknowledged; one that can never commit
// (its member or a message's recipient left, its world is gone) is logged and
// acknowledged too, since it was a member's action only while it was one;
// a body that is not a queued action, and any other failure, names the
// message in batchItemFailures, so it comes back after the queue's
// visibility timeout (and after 5 receives lands on world-actions-dead,
// from which SQS's redrive returns it: a redriven action that committed
// meanwhile is a no-op, world.QueuedMarkerTTL). The Lambda event types
// stay here: the world domain takes plain actions.
package committer

import (
	"context"
	"log/slog"
	"strconv"

	"github.com/aws/aws-lambda-go/events"

	"github.com/a2awire/a2awire/shared/function"
	"github.com/a2awire/a2awire/shared/inbox"
	"github.com/a2awire/a2awire/shared/world"
)

// Function is the function's name (its functions/ folder).
const Function = "world-commit"

// Handler is what the main passes to lambda.Start.
type Handler func(context.Context, events.SQSEvent) (events.SQSEventResponse, error)

// Committer commits queued actions (world.Service).
type Committer interface {
	CommitQueued(ctx context.Context, qs []world.QueuedAction) []error
}

// Build builds the function over env's table.
func Build(env function.Env) (any, error) {
	st, err := env.NeedStore(env.Name)
	if err != nil {
		return nil, err
	}
	// The inbox makes a queued message's event: its message.received with
	// the message attached.
	msgs := inbox.New(st, inbox.WithClock(env.Now))
	return New(world.New(st, world.WithClock(env.Now), world.WithQueuedMessages(msgs.QueuedEvent)), env.Logger()), nil
}

// New returns the queue handler over c.
func New(c Committer, log *slog.Logger) Handler {
	return func(ctx context.Context, ev events.SQSEvent) (events.SQSEventResponse, error) {
		var (
			qs   []world.QueuedAction
			ids  []string
			resp events.SQSEventResponse
		)
		for _, r := range ev.Records {
			q, err := world.ParseQueuedAction(r.Body)
			if err != nil {
				// Only world-act sends here: kept, it reaches the
				// dead-letter queue, where someone can look at it.
				log.ErrorContext(ctx, "message is not a queued action; kept for the dead-letter queue", "message", r.MessageId, "err", err)
				resp.BatchItemFailures = append(resp.BatchItemFailures, events.SQSBatchItemFailure{ItemIdentifier: r.MessageId})
				continue
			}
			n, _ := strconv.Atoi(r.Attributes["ApproximateReceiveCount"])
			q.Redelivered = n > 1
			qs, ids = append(qs, q), append(ids, r.MessageId)
		}
		if len(qs) == 0 {
			return resp, nil
		}
		committed := 0
		for i, err := range c.CommitQueued(ctx, qs) {
			switch {
			case err == nil:
				committed++
			case world.Dropped(err):
				log.WarnContext(ctx, "queued action dropped", "world", qs[i].World, "actionId", qs[i].ActionID, "awnId", qs[i].AWNID, "err", err)
			default:
				log.ErrorContext(ctx, "queued action not committed; it comes back", "world", qs[i].World, "actionId", qs[i].ActionID, "err", err)
				resp.BatchItemFailures = append(resp.BatchItemFailures, events.SQSBatchItemFailure{ItemIdentifier: ids[i]})
			}
		}
		log.InfoContext(ctx, "queued actions", "messages", len(ev.Records), "committed", committed, "kept", len(resp.BatchItemFailures))
		return resp, nil
	}
}
