package logging_test

import (
	"bytes"
	"context"
	"encoding/json"
	"log/slog"
	"net/http"
	"testing"

	"github.com/a2awire/a2awire/shared/logging"
	"github.com/aws/aws-lambda-go/events"
	"github.com/aws/aws-lambda-go/lambdacontext"
	"github.com/awslabs/aws-lambda-go-api-proxy/httpadapter"
)

func TestRecordsCarryTheRequestID(t *testing.T) {
	var buf bytes.Buffer
	log := logging.New(&buf, logging.JSON, slog.LevelInfo).With("fn", "test")
	h := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		log.InfoContext(r.Context(), "inside")
		w.WriteHeader(http.StatusNoContent)
	})
	event := events.APIGatewayV2HTTPRequest{
		RawPath:        "/x",
		RequestContext: events.APIGatewayV2HTTPRequestContext{RequestID: "gw-123", HTTP: events.APIGatewayV2HTTPRequestContextHTTPDescription{Method: "GET", Path: "/x"}},
	}
	ctx := lambdacontext.NewContext(context.Background(), &lambdacontext.LambdaContext{AwsRequestID: "lambda-456"})
	if _, err := httpadapter.NewV2(h).ProxyWithContext(ctx, event); err != nil {
		t.Fatal(err)
	}
	log.InfoContext(ctx, "lambda only")
	log.Info("no context")

	dec := json.NewDecoder(&buf)
	want := []string{"gw-123", "lambda-456", ""}
	for i, w := range want {
		var rec map[string]any
		if err := dec.Decode(&rec); err != nil {
			t.Fatalf("record %d: %v", i, err)
		}
		got, _ := rec["request_id"].(string)
		if got != w || rec["fn"] != "test" {
			t.Errorf("record %d: request_id %q fn %v, want %q test", i, got, rec["fn"], w)
		}
	}
}

func TestTextFormatAndLevel(t *testing.T) {
	var buf bytes.Buffer
	log := logging.New(&buf, logging.Text, slog.LevelWarn)
	log.Info("dropped")
	log.Warn("kept")
	if got := buf.String(); !bytes.Contains([]byte(got), []byte("msg=kept")) || bytes.Contains([]byte(got), []byte("dropped")) {
		t.Errorf("text output = %q", got)
	}
}
