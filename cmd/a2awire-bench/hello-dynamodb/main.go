// Command hello-dynamodb is the trivial Lambda plus a DynamoDB client built
// at start the way every function builds it (dynamo.ClientFromEnv; no
// call is made): the cold-start rows report it beside the baseline, so a
// function's INIT reads as the floor every DynamoDB function pays (the AWS
// SDK's package initialization, mostly) plus its own.
package main

import (
	"context"
	"encoding/json"
	"fmt"
	"os"

	"github.com/a2awire/a2awire/shared/store/dynamo"
	"github.com/aws/aws-lambda-go/events"
	"github.com/aws/aws-lambda-go/lambda"
)

func main() {
	client, err := dynamo.ClientFromEnv(os.Getenv)
	if err != nil {
		fmt.Fprintln(os.Stderr, "hello-dynamodb:", err)
		os.Exit(1)
	}
	lambda.Start(func(context.Context, json.RawMessage) (events.APIGatewayV2HTTPResponse, error) {
		if client == nil {
			return events.APIGatewayV2HTTPResponse{StatusCode: 500}, nil
		}
		return events.APIGatewayV2HTTPResponse{StatusCode: 200, Headers: map[string]string{"Content-Type": "application/json"},
			Body: `{"hello":"dynamodb"}`}, nil
	})
}
