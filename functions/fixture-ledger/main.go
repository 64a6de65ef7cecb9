// Command fixture-ledger is the Lambda entry of the a2awire-ledger fixture.
// It reads TABLE_NAME once at start and keeps its entries, balances and
// idempotency records in that DynamoDB table.
//
// The DynamoDB client comes from dynamo.ClientFromEnv (the variables Lambda
// sets) rather than config.LoadDefaultConfig, which doubled the INIT.
package main

import (
	"log/slog"
	"os"

	"github.com/a2awire/a2awire/functions/fixture-ledger/ledger"
	"github.com/a2awire/a2awire/shared/lambdahttp"
	"github.com/a2awire/a2awire/shared/logging"
	"github.com/a2awire/a2awire/shared/store/dynamo"
	"github.com/aws/aws-lambda-go/lambda"
)

func main() {
	log := logging.New(os.Stdout, logging.JSON, slog.LevelInfo)
	table := os.Getenv("TABLE_NAME")
	if table == "" {
		log.Error("TABLE_NAME is not set")
		os.Exit(1)
	}
	client, err := dynamo.ClientFromEnv(os.Getenv)
	if err != nil {
		log.Error("DynamoDB client", "err", err)
		os.Exit(1)
	}
	h := ledger.New(log, dynamo.New(client, table))
	lambda.Start(lambdahttp.Entry(h))
}
