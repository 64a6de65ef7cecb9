package worldhttp

import (
	"errors"
	"fmt"
	"log/slog"

	"github.com/a2awire/a2awire/shared/auth"
	"github.com/a2awire/a2awire/shared/ratelimit"
	"github.com/a2awire/a2awire/shared/registry"
	"github.com/a2awire/a2awire/shared/store"
	"github.com/a2awire/a2awire/shared/store/dynamo"
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
func NewDeps(st store.Store, limits ratelimit.Limits, baseURL string, log *slog.Logger) Deps {
	w := world.New(st, world.WithSubjects(registry.New(st)))
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

// FromEnv reads a world function's environment once: TABLE_NAME (the
// DynamoDB table, required), the DynamoDB client (dynamo.ClientFromEnv),
// RATE_LIMIT_SEND / _READ / _AGENTS / _PING / _ACTIONS (requests per agent
// per minute; unset keeps the defaults) and BASE_URL (the public URL the
// Agent Card names; empty takes it from each request).
func FromEnv(getenv func(string) string, log *slog.Logger) (Deps, error) {
	table := getenv("TABLE_NAME")
	if table == "" {
		return Deps{}, errors.New("worldhttp: TABLE_NAME is not set")
	}
	limits, err := ratelimit.LimitsFromEnv(getenv)
	if err != nil {
		return Deps{}, fmt.Errorf("worldhttp: %w", err)
	}
	client, err := dynamo.ClientFromEnv(getenv)
	if err != nil {
		return Deps{}, fmt.Errorf("worldhttp: DynamoDB client: %w", err)
	}
	return NewDeps(dynamo.New(client, table), limits, getenv("BASE_URL"), log), nil
}
