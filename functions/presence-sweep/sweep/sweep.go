// Package sweep is the presence-sweep function's handler: on each scheduled
// tick it announces the members whose presence lapsed without a write
// (world.Service.SweepPresence: a poll or stream that stopped), so that
// presence.changed (offline) reaches the world within a tick of the lapse.
package sweep

import (
	"context"
	"fmt"
	"log/slog"

	"github.com/aws/aws-lambda-go/events"

	"github.com/a2awire/a2awire/shared/function"
	"github.com/a2awire/a2awire/shared/world"
)

// Function is the function's name (its functions/ folder).
const Function = "presence-sweep"

// Handler is what the main passes to lambda.Start.
type Handler func(context.Context, events.EventBridgeEvent) error

// New returns the scheduled handler over s. A run that fails is returned,
// so the invocation is reported failed; what it did not decide stays due
// for the next tick.
func New(s *world.Service, log *slog.Logger) Handler {
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	return func(ctx context.Context, _ events.EventBridgeEvent) error {
		rep, err := s.SweepPresence(ctx)
		if rep.Due > 0 {
			log.InfoContext(ctx, "presence sweep", "due", rep.Due, "offline", rep.Offline, "moved", rep.Moved, "dropped", rep.Dropped, "raced", rep.Raced)
		}
		if err != nil {
			return fmt.Errorf("presence-sweep: %w", err)
		}
		return nil
	}
}

// Build builds presence-sweep over env's table and clock.
func Build(env function.Env) (any, error) {
	st, err := env.NeedStore(env.Name)
	if err != nil {
		return nil, err
	}
	var opts []world.Option
	if env.Now != nil {
		opts = append(opts, world.WithClock(env.Now))
	}
	return New(world.New(st, opts...), env.Logger()), nil
}
