package webhookhttp

import (
	"net/http"

	"github.com/a2awire/a2awire/shared/auth"
	"github.com/a2awire/a2awire/shared/function"
	"github.com/a2awire/a2awire/shared/lambdahttp"
	"github.com/a2awire/a2awire/shared/webhook"
	"github.com/a2awire/a2awire/shared/world"
)

// The builders of the member webhook functions, named in the route table's
// function settings. URLs are validated with env's egress policy.

// BuildSet builds world-webhook-set.
func BuildSet(env function.Env) (any, error) {
	return build(env, func(o Options, s *webhook.Store) (http.Handler, error) { return NewSet(o, s) })
}

// BuildShow builds world-webhook-show.
func BuildShow(env function.Env) (any, error) {
	return build(env, func(o Options, s *webhook.Store) (http.Handler, error) { return NewShow(o, s) })
}

// BuildRemove builds world-webhook-remove.
func BuildRemove(env function.Env) (any, error) {
	return build(env, func(o Options, s *webhook.Store) (http.Handler, error) { return NewRemove(o, s) })
}

// BuildReplay builds world-webhook-replay.
func BuildReplay(env function.Env) (any, error) {
	return build(env, func(o Options, s *webhook.Store) (http.Handler, error) { return NewReplay(o, s) })
}

// build is every webhook route's builder: the member-key auth over the
// world in the path, the webhook store, the Lambda entry.
func build(env function.Env, handler func(Options, *webhook.Store) (http.Handler, error)) (any, error) {
	st, err := env.NeedStore(env.Name)
	if err != nil {
		return nil, err
	}
	o := Options{
		Log:      env.Log,
		URLs:     env.Egress,
		Function: env.Name,
		Auth: Auth{
			Verifier:  auth.NewVerifier(auth.NewNonces(st), nil),
			ParamKeys: MemberKeys(world.New(st, world.WithClock(env.Now))),
		},
	}
	h, err := handler(o, webhook.NewStore(st, webhook.WithClock(env.Clock())))
	if err != nil {
		return nil, err
	}
	return lambdahttp.Entry(h), nil
}
