package registryapi

import (
	"github.com/a2awire/a2awire/shared/function"
	"github.com/a2awire/a2awire/shared/lambdahttp"
)

// Build builds the registry function over env's table: BASE_URL is the URL
// the network's Agent Card names (empty: the request's), the network's
// public key owns the fixtures and is served as the network's key
// directory, and http:// endpoints are allowed where env's egress policy
// allows http (the local harness). Discovery cursors are sealed with a key
// derived from the network's signing key (its seed), so every instance
// accepts the others' cursors; the registry signs nothing with it. Without
// it they are keyed per instance, and a next page that reaches another
// instance answers 400.
func Build(env function.Env) (any, error) {
	st, err := env.NeedStore(env.Name)
	if err != nil {
		return nil, err
	}
	var secret []byte
	if env.NetworkKey != nil {
		secret = env.NetworkKey.Seed()
	} else {
		env.Logger().Warn("registry: " + function.NetworkKeyEnv + " is not set, so discovery cursors are keyed per instance and may fail (400) when the next page reaches another instance")
	}
	h, err := New(Options{
		CursorSecret:           secret,
		Log:                    env.Log,
		Store:                  st,
		NetworkKey:             env.NetworkPublicKey,
		BaseURL:                env.Env("BASE_URL"),
		A2ABaseURL:             env.Env("A2A_BASE_URL"),
		AllowInsecureEndpoints: env.Egress.AllowHTTP,
	})
	if err != nil {
		return nil, err
	}
	return lambdahttp.Entry(h), nil
}
