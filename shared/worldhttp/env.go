package worldhttp

import (
	"log/slog"
	"time"

	"github.com/a2awire/a2awire/shared/auth"
	"github.com/a2awire/a2awire/shared/ratelimit"
	"github.com/a2awire/a2awire/shared/registry"
	"github.com/a2awire/a2awire/shared/store"
	"github.com/a2awire/a2awire/shared/store/guard"
	"github.com/a2awire/a2awire/shared/world"
)

// Deps are what a world function's handler is built from: the shared
// Options and the domains over one store. Each main passes the parts its
// constructor takes (NewSend: Options and inbox.New(Store)).
type Deps struct {
	Options Options
	Store   store.Store
	// World is the world domain; it is also Options.Members.
	World *world.Service
}

// NewDeps builds the dependencies over st: the verifier with its nonce
// guard, the world service (subjectIds from the registry's names), the
// rate limiter with limits, and the Agent Card's base URL. The Lambda mains
// (FromEnv) and the local harness both build them here, so the two cannot
// wire the functions differently.
func NewDeps(st store.Store, limits ratelimit.Limits, baseURL string, log *slog.Logger, now func() time.Time, wopts ...world.Option) Deps {
	// The guarded store writes each signed request's nonce, rate-limit
	// count and membership check with the domain's own first call.
	st = guard.Wrap(st)
	w := world.New(st, append([]world.Option{world.WithSubjects(registry.New(st)), world.WithClock(now)}, wopts...)...)
	var lopts []ratelimit.Option
	if now != nil {
		lopts = append(lopts, ratelimit.WithClock(now))
	}
	return Deps{
		Options: Options{
			Log:      log,
			Verifier: auth.NewVerifier(auth.NewNonces(st), nil),
			Members:  w,
			Limiter:  ratelimit.New(st, limits, lopts...),
			BaseURL:  baseURL,
			Now:      now,
		},
		Store: st,
		World: w,
	}
}
