// Command fixture-punctual is the Lambda entry of the a2awire-punctual fixture.
package main

import (
	"log/slog"
	"os"

	"github.com/a2awire/a2awire/functions/fixture-punctual/punctual"
	"github.com/a2awire/a2awire/shared/lambdahttp"
	"github.com/a2awire/a2awire/shared/logging"
	"github.com/aws/aws-lambda-go/lambda"
)

func main() {
	log := logging.New(os.Stdout, logging.JSON, slog.LevelInfo)
	h := punctual.New(log)
	lambda.Start(lambdahttp.Entry(h))
}
