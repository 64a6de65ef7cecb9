package ledger

import (
	"github.com/a2awire/a2awire/shared/function"
	"github.com/a2awire/a2awire/shared/lambdahttp"
)

// Build builds the ledger fixture's function over env's table.
func Build(env function.Env) (any, error) {
	st, err := env.NeedStore(env.Name)
	if err != nil {
		return nil, err
	}
	return lambdahttp.Entry(New(env.Log, st)), nil
}
