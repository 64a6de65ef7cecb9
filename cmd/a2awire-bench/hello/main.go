// Command hello is the trivial Go Lambda the cold-start rows are measured
// against: aws-lambda-go's runtime and one function answering a fixed API
// Gateway v2 response, nothing else initialized.
package main

import (
	"context"
	"encoding/json"

	"github.com/aws/aws-lambda-go/events"
	"github.com/aws/aws-lambda-go/lambda"
)

func main() {
	lambda.Start(func(context.Context, json.RawMessage) (events.APIGatewayV2HTTPResponse, error) {
		return events.APIGatewayV2HTTPResponse{StatusCode: 200, Headers: map[string]string{"Content-Type": "application/json"},
			Body: `{"hello":"world"}`}, nil
	})
}
