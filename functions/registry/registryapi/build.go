package registryapi

import (
	"github.com/a2awire/a2awire/shared/function"
	"github.com/a2awire/a2awire/shared/lambdahttp"
)

// Build builds the registry function over env's table: BASE_URL is the URL
// the network's Agent Card names (empty: the request's), the network's
// public key owns the fixtures and is served as the network's key
// directory, and http:// endpoints are allowed where env's egress policy
// allows http (the local harness).
func Build(env function.Env) (any, error) {
	st, err := env.NeedStore(env.Name)
	if err != nil {
		return nil, err
	}
	h, err := New(Options{
		Log:                    env.Log,
		Store:                  st,
		NetworkKey:             env.NetworkPublicKey,
		BaseURL:                env.Env("BASE_URL"),
		AllowInsecureEndpoints: env.Egress.AllowHTTP,
	})
	if err != nil {
		return nil, err
	}
	return lambdahttp.Entry(h), nil
}
