// Command webhook-retry is the Lambda entry of the webhook retries,
// invoked every minute by a schedule (package retry). It reads its
// environment once at start: TABLE_NAME and NETWORK_SIGNING_KEY (the
// network's Ed25519 seed, standard base64; empty signs v1 only).
package main

import (
	"log/slog"
	"os"

	"github.com/a2awire/a2awire/functions/webhook-retry/retry"
	"github.com/a2awire/a2awire/shared/logging"
	"github.com/a2awire/a2awire/shared/store/dynamo"
	"github.com/a2awire/a2awire/shared/webhook"
	"github.com/aws/aws-lambda-go/lambda"
)

func main() {
	log := logging.New(os.Stdout, logging.JSON, slog.LevelInfo)
	if err := run(log); err != nil {
		log.Error("webhook-retry: start", "err", err)
		os.Exit(1)
	}
}

// run builds the retry worker from the environment and starts Lambda.
func run(log *slog.Logger) error {
	st, err := dynamo.FromEnv(os.Getenv)
	if err != nil {
		return err
	}
	d, err := webhook.FromEnv(os.Getenv, st, log)
	if err != nil {
		return err
	}
	lambda.Start(retry.New(d, log))
	return nil
}
