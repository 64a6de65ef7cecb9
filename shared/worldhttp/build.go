package worldhttp

import (
	"fmt"
	"net/http"

	"github.com/a2awire/a2awire/shared/egress"
	"github.com/a2awire/a2awire/shared/function"
	"github.com/a2awire/a2awire/shared/inbox"
	"github.com/a2awire/a2awire/shared/lambdahttp"
	"github.com/a2awire/a2awire/shared/queue"
	"github.com/a2awire/a2awire/shared/queue/sqsqueue"
	"github.com/a2awire/a2awire/shared/ratelimit"
	"github.com/a2awire/a2awire/shared/registry"
	"github.com/a2awire/a2awire/shared/routes"
	"github.com/a2awire/a2awire/shared/webhook"
	"github.com/a2awire/a2awire/shared/webhook/delivery"
	"github.com/a2awire/a2awire/shared/world"
)

// The builders of the world functions, one per function, named in the
// route table's function settings: each reads its configuration from env
// (FromEnv) over env's store and serves env.Name's routes.

// BuildPut builds world-put.
func BuildPut(env function.Env) (any, error) {
	return build(env, func(d Deps) (http.Handler, error) { return NewPut(d.Options, d.World) })
}

// BuildGet builds world-get.
func BuildGet(env function.Env) (any, error) {
	return build(env, func(d Deps) (http.Handler, error) { return NewGet(d.Options, d.World) })
}

// BuildJoin builds world-join.
func BuildJoin(env function.Env) (any, error) {
	return build(env, func(d Deps) (http.Handler, error) { return NewJoin(d.Options, d.World, d.World) })
}

// BuildLeave builds world-leave.
func BuildLeave(env function.Env) (any, error) {
	return build(env, func(d Deps) (http.Handler, error) { return NewLeave(d.Options, d.World) })
}

// BuildAgents builds world-agents.
func BuildAgents(env function.Env) (any, error) {
	return build(env, func(d Deps) (http.Handler, error) { return NewAgents(d.Options, d.World) })
}

// BuildSend builds world-send, over the action queue, which also takes
// the messages of the worlds that batch them.
func BuildSend(env function.Env) (any, error) {
	q, err := actionQueue(env)
	if err != nil {
		return nil, err
	}
	return build(env, func(d Deps) (http.Handler, error) {
		return NewSend(d.Options, inbox.New(d.Store, inbox.WithQueue(q, d.World)))
	})
}

// BuildMessages builds world-messages.
func BuildMessages(env function.Env) (any, error) {
	return build(env, func(d Deps) (http.Handler, error) { return NewMessages(d.Options, inbox.New(d.Store)) })
}

// BuildPing builds world-ping, whose live probe is a signed ping event to
// the target's webhook, sent as the dispatcher sends deliveries (env's
// egress policy, the network key signing v1a).
func BuildPing(env function.Env) (any, error) {
	return build(env, func(d Deps) (http.Handler, error) {
		prober, err := webhook.NewDispatcher(webhook.Config{
			Store:      d.Store,
			Client:     egress.NewClient(WithAttemptTimeout(env.Egress)),
			NetworkKey: env.NetworkKey,
			Actions:    d.World,
			Now:        env.Now,
			Log:        env.Log,
		})
		if err != nil {
			return nil, err
		}
		return NewPing(d.Options, d.World, prober)
	})
}

// BuildAct builds world-act, over the action queue of the worlds that
// batch their actions.
func BuildAct(env function.Env) (any, error) {
	q, err := actionQueue(env)
	if err != nil {
		return nil, err
	}
	return buildWith(env, []world.Option{world.WithActionQueue(q)}, func(d Deps) (http.Handler, error) { return NewAct(d.Options, d.World) })
}

// actionQueue is the queue of batched actions and messages: env's own
// (the harness's) or Amazon SQS's.
func actionQueue(env function.Env) (queue.Queue, error) {
	if env.Queues != nil {
		return env.Queues(routes.ActionQueue)
	}
	return sqsqueue.FromEnv(env.Env, routes.ActionQueue)
}

// BuildEvents builds world-events.
func BuildEvents(env function.Env) (any, error) {
	return build(env, func(d Deps) (http.Handler, error) { return NewEvents(d.Options, d.World) })
}

// BuildKick builds world-kick.
func BuildKick(env function.Env) (any, error) {
	return build(env, func(d Deps) (http.Handler, error) { return NewKick(d.Options, d.World, d.World) })
}

// BuildBan builds world-ban.
func BuildBan(env function.Env) (any, error) {
	return build(env, func(d Deps) (http.Handler, error) { return NewBan(d.Options, d.World, d.World) })
}

// BuildUnban builds world-unban.
func BuildUnban(env function.Env) (any, error) {
	return build(env, func(d Deps) (http.Handler, error) { return NewUnban(d.Options, d.World, d.World) })
}

// BuildBans builds world-bans.
func BuildBans(env function.Env) (any, error) {
	return build(env, func(d Deps) (http.Handler, error) { return NewBans(d.Options, d.World, d.World) })
}

// BuildAgentWorlds builds agent-worlds: the agent's key from its index of
// worlds, else from the registry.
func BuildAgentWorlds(env function.Env) (any, error) {
	return build(env, func(d Deps) (http.Handler, error) {
		return NewAgentWorlds(d.Options, d.World, registry.New(d.Store))
	})
}

// BuildCard builds world-card.
func BuildCard(env function.Env) (any, error) {
	return build(env, func(d Deps) (http.Handler, error) { return NewCard(d.Options, d.World) })
}

// WithAttemptTimeout is o with the timeout of one webhook attempt, the
// client options of everything that calls a member's webhook.
func WithAttemptTimeout(o egress.Options) egress.Options {
	o.Timeout = delivery.AttemptTimeout
	return o
}

// build is every world builder: the dependencies from env, the handler
// from them, its Lambda entry.
func build(env function.Env, handler func(Deps) (http.Handler, error)) (any, error) {
	return buildWith(env, nil, handler)
}

// buildWith is build with options of the world service.
func buildWith(env function.Env, wopts []world.Option, handler func(Deps) (http.Handler, error)) (any, error) {
	st, err := env.NeedStore(env.Name)
	if err != nil {
		return nil, err
	}
	// RATE_LIMIT_SEND / _READ / _AGENTS / _PING / _ACTIONS are requests
	// per agent per minute (unset keeps the defaults); BASE_URL is the
	// public URL the Agent Card names (empty: the request's).
	limits, err := ratelimit.LimitsFromEnv(env.Env)
	if err != nil {
		return nil, fmt.Errorf("worldhttp: %w", err)
	}
	d := NewDeps(st, limits, env.Env("BASE_URL"), env.Log, env.Now, wopts...)
	d.Options.Function = env.Name
	h, err := handler(d)
	if err != nil {
		return nil, err
	}
	return lambdahttp.Entry(h), nil
}
