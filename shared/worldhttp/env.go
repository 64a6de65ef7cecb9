package worldhttp

import (
	"fmt"
	"log/slog"

	"github.com/a2awire/a2awire/shared/auth"
	"github.com/a2awire/a2awire/shared/ratelimit"
	"github.com/a2awire/a2awire/shared/registry"
	"github.com/a2awire/a2awire/shared/store"
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
func NewDeps(st store.Store, limits ratelimit.Limits, baseURL string, log *slog.Logger, opts ...world.Option) Deps {
	w := world.New(st, append([]world.Option{world.WithSubjects(registry.New(st))}, opts...)...)
	return Deps{
		Options: Options{
			Log:      log,
			Verifier: auth.NewVerifier(auth.NewNonces(st), nil),
			Members:  w,
			Limiter:  ratelimit.New(st, limits),
			BaseURL:  baseURL,
		},
		Store: st,
		World: w,
	}
}

// FromEnv reads the rest of a world function's environment once, over st
// (the main's table, dynamo.FromEnv): RATE_LIMIT_SEND / _READ / _AGENTS /
// _PING / _ACTIONS (requests per agent per minute; unset keeps the
// defaults) and BASE_URL (the public URL the Agent Card names; empty takes
// it from each request). The store comes in rather than being opened here
// so that no handler package links an engine (the store's layering test).
func FromEnv(getenv func(string) string, st store.Store, log *slog.Logger, opts ...world.Option) (Deps, error) {
	limits, err := ratelimit.LimitsFromEnv(getenv)
	if err != nil {
		return Deps{}, fmt.Errorf("worldhttp: %w", err)
	}
	return NewDeps(st, limits, getenv("BASE_URL"), log, opts...), nil
}
