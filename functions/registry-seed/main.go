// Command registry-seed is the Lambda behind the deploy's
// Custom::FixtureRegistrations resource: on Create and Update it registers
// the five fixtures below the stage URL, owned by the network key, both
// given as the resource's properties; Delete is a no-op (package
// fixtures/seed, CustomResource). It reads TABLE_NAME once at start and
// answers CloudFormation through cfn.LambdaWrap.
package main

import (
	"fmt"
	"log/slog"
	"os"

	"github.com/a2awire/a2awire/shared/fixtures/seed"
	"github.com/a2awire/a2awire/shared/logging"
	"github.com/a2awire/a2awire/shared/store/dynamo"
	"github.com/aws/aws-lambda-go/lambda"
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
	client, err := dynamo.ClientFromEnv(os.Getenv)
	if err != nil {
		return err
	}
	lambda.Start(seed.Handler(dynamo.New(client, table)))
	return nil
}
