// Command fixture-clean is the Lambda entry of the a2awire-clean fixture.
package main

import (
	"log/slog"
	"os"

	"github.com/a2awire/a2awire/functions/fixture-clean/clean"
	"github.com/a2awire/a2awire/shared/lambdahttp"
	"github.com/a2awire/a2awire/shared/logging"
	"github.com/aws/aws-lambda-go/lambda"
)

func main() {
	log := logging.New(os.Stdout, logging.JSON, slog.LevelInfo)
	h := clean.New(log)
	lambda.Start(lambdahttp.Entry(h))
}
