package dispatcher

import (
	"github.com/a2awire/a2awire/shared/function"
	"github.com/a2awire/a2awire/shared/webhook"
)

// Build builds the dispatcher function over env (webhook.Build).
func Build(env function.Env) (any, error) {
	d, err := webhook.Build(env)
	if err != nil {
		return nil, err
	}
	return New(d), nil
}
