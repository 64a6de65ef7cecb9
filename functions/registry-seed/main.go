// Command registry-seed is the Lambda behind the deploy's
// Custom::FixtureRegistrations resource: on Create and Update it registers
// the five fixtures below the stage URL, owned by the network key, both
// given as the resource's properties; Delete is a no-op (package
// fixtures/seed, CustomResource). It reads TABLE_NAME once at start and
// answers CloudFormation through cfn.LambdaWrap.
package main

import (
	"context"
	"fmt"
	"log/slog"
	"os"

	"github.com/a2awire/a2awire/shared/fixtures/seed"
	"github.com/a2awire/a2awire/shared/logging"
	"github.com/a2awire/a2awire/shared/store/dynamo"
	"github.com/aws/aws-lambda-go/lambda"
	"github.com/aws/aws-sdk-go-v2/config"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
)

func main() {
	log := logging.New(os.Stdout, logging.JSON, slog.LevelInfo)
	if err := run(); err != nil {
		log.Error("registry-seed: start", "err", err)
		os.Exit(1)
	}
}

// run builds the store from the environment and starts Lambda.
func run() error {
	table := os.Getenv("TABLE_NAME")
	if table == "" {
		return fmt.Errorf("TABLE_NAME is not set")
	}
	cfg, err := config.LoadDefaultConfig(context.Background())
	if err != nil {
		return fmt.Errorf("load AWS config: %w", err)
	}
	lambda.Start(seed.Handler(dynamo.New(dynamodb.NewFromConfig(cfg), table)))
	return nil
}
