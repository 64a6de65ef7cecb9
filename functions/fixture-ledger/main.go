// Command fixture-ledger is the Lambda entry of the a2awire-ledger fixture.
// It reads TABLE_NAME once at start and keeps its entries, balances and
// idempotency records in that DynamoDB table.
package main

import (
	"context"
	"log/slog"
	"os"

	"github.com/a2awire/a2awire/functions/fixture-ledger/ledger"
	"github.com/a2awire/a2awire/shared/lambdahttp"
	"github.com/a2awire/a2awire/shared/logging"
	"github.com/a2awire/a2awire/shared/store/dynamo"
	"github.com/aws/aws-lambda-go/lambda"
	"github.com/aws/aws-sdk-go-v2/config"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
)

func main() {
	log := logging.New(os.Stdout, logging.JSON, slog.LevelInfo)
	table := os.Getenv("TABLE_NAME")
	if table == "" {
		log.Error("TABLE_NAME is not set")
		os.Exit(1)
	}
	cfg, err := config.LoadDefaultConfig(context.Background())
	if err != nil {
		log.Error("load AWS config", "err", err)
		os.Exit(1)
	}
	h := ledger.New(log, dynamo.New(dynamodb.NewFromConfig(cfg), table))
	lambda.Start(lambdahttp.Entry(h))
}
