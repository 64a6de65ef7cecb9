// Command world-webhook-remove is the Lambda entry of DELETE /v0/worlds/{world}/webhook
// (package webhookhttp, NewRemove, over package webhook). It reads its
// environment once at start through worldhttp.FromEnv: TABLE_NAME and the
// DynamoDB client's settings. URLs are held to https and public hosts.
package main

import (
	"log/slog"
	"os"

	"github.com/a2awire/a2awire/shared/lambdahttp"
	"github.com/a2awire/a2awire/shared/logging"
	"github.com/a2awire/a2awire/shared/webhook"
	"github.com/a2awire/a2awire/shared/webhookhttp"
	"github.com/a2awire/a2awire/shared/worldhttp"
	"github.com/aws/aws-lambda-go/lambda"
)

func main() {
	log := logging.New(os.Stdout, logging.JSON, slog.LevelInfo)
	if err := run(log); err != nil {
		log.Error("world-webhook-remove: start", "err", err)
		os.Exit(1)
	}
}

// run builds the handler from the environment and starts Lambda.
func run(log *slog.Logger) error {
	deps, err := worldhttp.FromEnv(os.Getenv, log)
	if err != nil {
		return err
	}
	h, err := webhookhttp.NewRemove(webhookhttp.Options{Log: log, Auth: webhookhttp.Auth{
		Verifier:  deps.Options.Verifier,
		ParamKeys: webhookhttp.MemberKeys(deps.World),
	}}, webhook.NewStore(deps.Store))
	if err != nil {
		return err
	}
	lambda.Start(lambdahttp.Entry(h))
	return nil
}
