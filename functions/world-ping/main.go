// Command world-ping is the Lambda entry of POST /v0/worlds/{world}/ping
// (package worldhttp, NewPing). It reads its environment once at start
// through dynamo.FromEnv (TABLE_NAME, the DynamoDB client's settings) and
// worldhttp.FromEnv (RATE_LIMIT_* and BASE_URL); and NETWORK_SIGNING_KEY, the key that signs
// the live probe (webhook.NetworkKeyEnv; empty signs v1 only).
package main

import (
	"log/slog"
	"os"

	"github.com/a2awire/a2awire/shared/lambdahttp"
	"github.com/a2awire/a2awire/shared/logging"
	"github.com/a2awire/a2awire/shared/store/dynamo"
	"github.com/a2awire/a2awire/shared/webhook"
	"github.com/a2awire/a2awire/shared/worldhttp"
	"github.com/aws/aws-lambda-go/lambda"
)

func main() {
	log := logging.New(os.Stdout, logging.JSON, slog.LevelInfo)
	if err := run(log); err != nil {
		log.Error("world-ping: start", "err", err)
		os.Exit(1)
	}
}

// run builds the handler from the environment and starts Lambda.
func run(log *slog.Logger) error {
	st, err := dynamo.FromEnv(os.Getenv)
	if err != nil {
		return err
	}
	deps, err := worldhttp.FromEnv(os.Getenv, st, log)
	if err != nil {
		return err
	}
	// The live probe: a signed ping event to the target's webhook, through
	// the cloud-mode egress client (https, public addresses only).
	key, err := webhook.ParseNetworkKey(os.Getenv(webhook.NetworkKeyEnv))
	if err != nil {
		return err
	}
	prober, err := webhook.NewDispatcher(webhook.Config{Store: deps.Store, NetworkKey: key, Log: log})
	if err != nil {
		return err
	}
	h, err := worldhttp.NewPing(deps.Options, deps.World, prober)
	if err != nil {
		return err
	}
	lambda.Start(lambdahttp.Entry(h))
	return nil
}
