// Command webhook-retry is the Lambda entry of the webhook retries,
// invoked every minute by a schedule (package retry). It reads its
// environment once at start: TABLE_NAME and NETWORK_SIGNING_KEY (the
// network's Ed25519 seed, standard base64; empty signs v1 only).
package main

import (
	"fmt"
	"log/slog"
	"os"

	"github.com/a2awire/a2awire/functions/webhook-retry/retry"
	"github.com/a2awire/a2awire/shared/logging"
	"github.com/a2awire/a2awire/shared/store/dynamo"
	"github.com/a2awire/a2awire/shared/webhook"
	"github.com/a2awire/a2awire/shared/world"
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
	table := os.Getenv("TABLE_NAME")
	if table == "" {
		return fmt.Errorf("TABLE_NAME is not set")
	}
	key, err := webhook.ParseNetworkKey(os.Getenv(webhook.NetworkKeyEnv))
	if err != nil {
		return err
	}
	client, err := dynamo.ClientFromEnv(os.Getenv)
	if err != nil {
		return fmt.Errorf("DynamoDB client: %w", err)
	}
	st := dynamo.New(client, table)
	// Receivers' answers become their agents' actions through the world
	// service, with the checks and event of POST /actions.
	d, err := webhook.NewDispatcher(webhook.Config{Store: st, NetworkKey: key, Actions: world.New(st), Log: log})
	if err != nil {
		return err
	}
	lambda.Start(retry.New(d, log))
	return nil
}
