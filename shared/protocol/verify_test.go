package protocol_test

import (
	"net/http"
	"strings"
	"testing"

	"github.com/a2awire/a2awire/shared/protocol"
)

func TestVerify(t *testing.T) {
	js := http.Header{"Content-Type": {"application/json"}}
	want := protocol.Expect{Agent: "a", Capability: "c"}
	tests := []struct {
		name    string
		status  int
		header  http.Header
		body    string
		problem string // substring of the violation; empty means conformant
	}{
		{"good 200", 200, js, `{"output":{"x":1},"metadata":{"agent":"a","capability":"c","duration_ms":3,"extra":true}}`, ""},
		{"good 400", 400, js, `{"error":"invalid_input","message":"m"}`, ""},
		{"good 422 details", 422, js, `{"error":"invalid_request","message":"m","details":[{"loc":["body"],"msg":"x"}]}`, ""},
		{"good 405", 405, http.Header{"Content-Type": {"application/json"}, "Allow": {"POST"}}, `{"error":"method_not_allowed","message":"m"}`, ""},
		{"not JSON type", 200, http.Header{"Content-Type": {"text/plain"}}, `{"output":{},"metadata":{"agent":"a","capability":"c","duration_ms":0}}`, "Content-Type"},
		{"not an object", 200, js, `[]`, "not a JSON object"},
		{"no output", 200, js, `{"metadata":{"agent":"a","capability":"c","duration_ms":0}}`, "output is missing"},
		{"output not object", 200, js, `{"output":"x","metadata":{"agent":"a","capability":"c","duration_ms":0}}`, "output is not"},
		{"error inside 200", 200, js, `{"output":{"error":"boom","message":"m"},"metadata":{"agent":"a","capability":"c","duration_ms":0}}`, "wraps an error"},
		{"error with other fields", 200, js, `{"output":{"error":{"code":1},"trace":"t"},"metadata":{"agent":"a","capability":"c","duration_ms":0}}`, "wraps an error"},
		{"null error field is fine", 200, js, `{"output":{"error":null,"n":1},"metadata":{"agent":"a","capability":"c","duration_ms":0}}`, ""},
		{"error beside 200", 200, js, `{"error":"x","output":{},"metadata":{"agent":"a","capability":"c","duration_ms":0}}`, "carries an error"},
		{"no metadata", 200, js, `{"output":{}}`, "metadata is missing"},
		{"wrong agent", 200, js, `{"output":{},"metadata":{"agent":"b","capability":"c","duration_ms":0}}`, "registered name"},
		{"wrong capability", 200, js, `{"output":{},"metadata":{"agent":"a","capability":"d","duration_ms":0}}`, "want the task"},
		{"float duration", 200, js, `{"output":{},"metadata":{"agent":"a","capability":"c","duration_ms":1.5}}`, "duration_ms"},
		{"negative duration", 200, js, `{"output":{},"metadata":{"agent":"a","capability":"c","duration_ms":-1}}`, "duration_ms"},
		{"string duration", 200, js, `{"output":{},"metadata":{"agent":"a","capability":"c","duration_ms":"1"}}`, "duration_ms"},
		{"error without message", 400, js, `{"error":"invalid_input"}`, "message"},
		{"error without code", 500, js, `{"message":"m"}`, "error is missing"},
		{"code with wrong status", 500, js, `{"error":"invalid_input","message":"m"}`, "want 400"},
		{"405 without Allow", 405, js, `{"error":"method_not_allowed","message":"m"}`, "Allow"},
		{"503 without Retry-After", 503, js, `{"error":"unavailable","message":"m"}`, "Retry-After"},
		{"201 is not the protocol", 201, js, `{"output":{}}`, "neither 200"},
		{"bytes after a 200", 200, js, `{"output":{},"metadata":{"agent":"a","capability":"c","duration_ms":0}}garbage`, "data after the JSON value"},
		{"a second document after a 200", 200, js, `{"output":{},"metadata":{"agent":"a","capability":"c","duration_ms":0}} {}`, "data after the JSON value"},
		{"bytes after an error", 400, js, `{"error":"invalid_input","message":"m"}]`, "data after the JSON value"},
		{"duplicate key", 200, js, `{"output":{},"output":{"error":"x"},"metadata":{"agent":"a","capability":"c","duration_ms":0}}`, "duplicate key"},
		{"invalid UTF-8", 400, js, "{\"error\":\"invalid_input\",\"message\":\"\xff\"}", "UTF-8"},
		{"null message", 400, js, `{"error":"invalid_input","message":null}`, "message is missing or not a string (got null)"},
		{"null error", 400, js, `{"error":null,"message":"m"}`, "error is missing"},
		{"numeric message", 400, js, `{"error":"invalid_input","message":5}`, "message is missing or not a string"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			err := protocol.Verify(tt.status, tt.header, []byte(tt.body), want)
			switch {
			case tt.problem == "" && err != nil:
				t.Errorf("conformant response rejected: %v", err)
			case tt.problem != "" && err == nil:
				t.Errorf("violation %q not found", tt.problem)
			case tt.problem != "" && !strings.Contains(err.Error(), tt.problem):
				t.Errorf("err = %v, want it to mention %q", err, tt.problem)
			}
		})
	}
}
