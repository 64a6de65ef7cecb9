// Package deleter is the function world-deleter: it removes what a deleted
// world leaves (world.Service.Purge), started by the stream record of the
// world's deletion marker. Its stream trigger is filtered to those records
// (type worlddeletion, inserted or changed); records of anything else are
// ignored, so an unfiltered feed is served the same.
//
// A round runs until the world is gone or its deadline is near; a round
// that stops early bumps the marker's step, and that change is the record
// of the next round. A round that fails reports its record
// (batchItemFailures) and the stream retries it, so a crash anywhere
// resumes from what is left: every step of Purge can start over.
package deleter

import (
	"context"
	"log/slog"
	"time"

	"github.com/aws/aws-lambda-go/events"

	"github.com/a2awire/a2awire/shared/function"
	"github.com/a2awire/a2awire/shared/ratelimit"
	"github.com/a2awire/a2awire/shared/store"
	"github.com/a2awire/a2awire/shared/webhook"
	"github.com/a2awire/a2awire/shared/world"
)

// Function is the function's folder and name.
const Function = "world-deleter"

// Partitions names the per-agent partitions in a world that packages
// other than world own: the agent's pending webhook retries, its dead
// letters, its webhook's counters and its rate windows.
func Partitions(worldID, awnID string) []string {
	return []string{
		webhook.RetryPK(worldID, awnID),
		webhook.DeadLetterPK(worldID, awnID),
		world.WebhookStatsKey(worldID, awnID).PK,
		ratelimit.WindowKey(worldID, awnID, "", time.Time{}).PK,
	}
}

// Service is the world service the deleter purges with: every per-agent
// partition named.
func Service(st store.Store, opts ...world.Option) *world.Service {
	return world.New(st, append(opts, world.WithAgentPartitions(Partitions))...)
}

// Handler is the function's Lambda handler.
type Handler func(context.Context, events.DynamoDBEvent) (events.DynamoDBEventResponse, error)

// New returns the handler over s: one round per deletion marker record.
func New(s *world.Service, log *slog.Logger) Handler {
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	return func(ctx context.Context, ev events.DynamoDBEvent) (events.DynamoDBEventResponse, error) {
		var resp events.DynamoDBEventResponse
		for _, rec := range ev.Records {
			if rec.EventName != store.EventInsert && rec.EventName != store.EventModify {
				continue
			}
			it, err := store.FromStreamImage(rec.Change.NewImage)
			if err != nil || it.Str(world.AttrType) != world.TypeDeletion {
				continue
			}
			id := it.Str("id")
			done, err := s.Purge(ctx, id, world.PurgeOptions{})
			if err == nil && !done {
				err = s.NextPurgeRound(ctx, id)
			}
			if err != nil {
				log.ErrorContext(ctx, "world deletion round failed; the stream retries it", "world", id, "seq", rec.Change.SequenceNumber, "err", err)
				resp.BatchItemFailures = append(resp.BatchItemFailures, events.DynamoDBBatchItemFailure{ItemIdentifier: rec.Change.SequenceNumber})
				continue
			}
			log.InfoContext(ctx, "world deletion round", "world", id, "done", done)
		}
		return resp, nil
	}
}

// Build builds world-deleter over env's table.
func Build(env function.Env) (any, error) {
	st, err := env.NeedStore(env.Name)
	if err != nil {
		return nil, err
	}
	var opts []world.Option
	if env.Now != nil {
		opts = append(opts, world.WithClock(env.Now))
	}
	return New(Service(st, opts...), env.Log), nil
}
