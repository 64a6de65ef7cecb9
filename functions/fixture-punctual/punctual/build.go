package punctual

import (
	"github.com/a2awire/a2awire/shared/function"
	"github.com/a2awire/a2awire/shared/lambdahttp"
)

// Build builds the fixture's function: its provider behind the Lambda entry.
func Build(env function.Env) (any, error) { return lambdahttp.Entry(New(env.Log)), nil }
