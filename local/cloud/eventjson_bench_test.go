package cloud

import (
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-lambda-go/events"
)

// BenchmarkEventJSON measures the four JSON steps every request through the
// harness takes: the gateway encodes the event, the entry parses it, the
// entry encodes the function's response, the gateway parses that. The event
// is the one the gateway builds for a small JSON POST to a route with a
// path parameter; the response is the shape fixture-punctual answers, a
// JSON document as its body and so full of \" escapes.
func BenchmarkEventJSON(b *testing.B) {
	const body = `{"task":"ping","input":{"echo":"hi"}}`
	r := httptest.NewRequest(http.MethodPost, "/agents/a2awire-punctual/invoke", strings.NewReader(body))
	r.Header.Set("Content-Type", "application/json")
	r.Header.Set("User-Agent", "Go-http-client/1.1")
	r.Header.Set("Content-Length", "37")
	r.RemoteAddr = "127.0.0.1:40000"
	r.Host = "127.0.0.1:8080"
	now := time.Date(2026, 12, 2, 1, 0, 0, 0, time.UTC)
	ev := buildEvent(r, "POST /agents/{name}/invoke", map[string]string{"name": "a2awire-punctual"}, []byte(body), now,
		"0123456789abcdef0123456789abcdef", map[string]string{})
	resp := events.APIGatewayV2HTTPResponse{
		StatusCode: 200,
		Headers:    map[string]string{"Content-Length": "159", "Content-Type": "application/json"},
		Body: `{"output":{"pong":true,"echo":"hi","server_time":"2026-12-02T01:19:57.988011375Z"},` +
			`"metadata":{"agent":"a2awire-punctual","capability":"ping","duration_ms":0}}`,
		Cookies: []string{},
	}
	event, err := AppendEvent(nil, &ev)
	if err != nil {
		b.Fatal(err)
	}
	response := string(AppendResponse(nil, &resp))

	var buf []byte
	b.Run("encodeEvent", func(b *testing.B) {
		b.SetBytes(int64(len(event)))
		b.ReportAllocs()
		for b.Loop() {
			buf, _ = AppendEvent(buf[:0], &ev)
		}
	})
	b.Run("parseEvent", func(b *testing.B) {
		b.SetBytes(int64(len(event)))
		b.ReportAllocs()
		for b.Loop() {
			if _, ok := parseEvent(event); !ok {
				b.Fatal("event not taken")
			}
		}
	})
	b.Run("encodeResponse", func(b *testing.B) {
		b.SetBytes(int64(len(response)))
		b.ReportAllocs()
		for b.Loop() {
			buf = AppendResponse(buf[:0], &resp)
		}
	})
	// As the gateway does it: the response's headers into a map it reuses.
	headers := map[string]string{}
	b.Run("parseResponse", func(b *testing.B) {
		b.SetBytes(int64(len(response)))
		b.ReportAllocs()
		for b.Loop() {
			clear(headers)
			if _, ok := parseResponse(response, headers); !ok {
				b.Fatal("response not taken")
			}
		}
	})
}
