// Command fixture-translator is the Lambda entry of the a2awire-translator
// fixture. It reads TRANSLATOR_LLM_URL, TRANSLATOR_LLM_API_KEY and
// TRANSLATOR_LLM_MODEL once at start; without a URL it serves from its
// built-in dictionary only.
package main

import (
	"log/slog"
	"os"

	"github.com/a2awire/a2awire/functions/fixture-translator/translator"
	"github.com/a2awire/a2awire/shared/lambdahttp"
	"github.com/a2awire/a2awire/shared/logging"
	"github.com/aws/aws-lambda-go/lambda"
)

func main() {
	log := logging.New(os.Stdout, logging.JSON, slog.LevelInfo)
	cfg := translator.EnvConfig(os.Getenv)
	log.Info("translator configured", "llm", cfg.Enabled(), "model", cfg.Model)
	h := translator.New(log, cfg, nil)
	lambda.Start(lambdahttp.Entry(h))
}
