package lambdahttp_test

import (
	"context"
	"encoding/json"

	"github.com/a2awire/a2awire/shared/lambdahttp"
	"github.com/a2awire/a2awire/shared/protocol"
	"github.com/aws/aws-lambda-go/lambda"
)

// A provider's Lambda main: build the handler, then start Lambda with its
// Entry, never with httpadapter directly.
func ExampleEntry() {
	p := protocol.NewProvider("my-agent")
	p.HandleFunc("ping", func(context.Context, json.RawMessage) (any, error) {
		return map[string]bool{"pong": true}, nil
	})
	lambda.Start(lambdahttp.Entry(p))
}
