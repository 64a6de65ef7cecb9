package translator

import (
	"github.com/a2awire/a2awire/shared/function"
	"github.com/a2awire/a2awire/shared/lambdahttp"
)

// Build builds the translator fixture's function: its model endpoint from
// TRANSLATOR_LLM_URL, TRANSLATOR_LLM_API_KEY and TRANSLATOR_LLM_MODEL
// (none: the built-in dictionary only).
func Build(env function.Env) (any, error) {
	cfg := EnvConfig(env.Env)
	env.Logger().Info("translator configured", "llm", cfg.Enabled(), "model", cfg.Model)
	return lambdahttp.Entry(New(env.Log, cfg, nil)), nil
}
