package a2abridge

import (
	"net/http"

	"github.com/a2awire/a2awire/shared/function"
)

// Build builds the bridge over env's table (Tasks, and the registry it
// reads profiles from) with env's egress policy on provider calls.
// A2A_BASE_URL, when set, is the origin the cards name (else each
// request's); BASE_URL the network's URL the cards name as provider. The
// bridge streams (SendStreamingMessage), so it is served as a streaming
// function: behind a function URL in AWS, by the harness directly.
func Build(env function.Env) (http.Handler, error) {
	st, err := env.NeedStore(env.Name)
	if err != nil {
		return nil, err
	}
	h, err := New(Options{
		Log:        env.Log,
		Store:      st,
		Egress:     env.Egress,
		BaseURL:    env.Env("A2A_BASE_URL"),
		NetworkURL: env.Env("BASE_URL"),
		Now:        env.Now,
	})
	if err != nil {
		return nil, err
	}
	return h, nil
}
