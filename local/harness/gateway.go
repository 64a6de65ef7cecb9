// Package harness is the in-process API Gateway behind `go run ./local`.
//
// For each HTTP request it finds the route in the shared route table, builds
// the events.APIGatewayV2HTTPRequest that API Gateway would send, invokes
// that function's Lambda entry (the same httpadapter-wrapped handler its
// main runs) and writes the APIGatewayV2HTTPResponse back: the cloud path,
// in one process.
package harness

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"maps"
	"net"
	"net/http"
	"slices"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/a2awire/a2awire/shared/routes"
	"github.com/aws/aws-lambda-go/events"
	"github.com/aws/aws-lambda-go/lambdacontext"
)

// Entry is a Lambda entry point for API Gateway v2 events, the signature
// httpadapter's ProxyWithContext has.
type Entry func(context.Context, events.APIGatewayV2HTTPRequest) (events.APIGatewayV2HTTPResponse, error)

// MaxPayload is API Gateway HTTP API's request payload limit.
const MaxPayload = 10 << 20

// Gateway routes HTTP requests to Lambda entries by the route table.
type Gateway struct {
	entries map[string]Entry
	log     *slog.Logger
	now     func() time.Time
}

// NewGateway returns a gateway over entries, keyed by function name. Every
// function of the route table must have an entry.
func NewGateway(entries map[string]Entry, log *slog.Logger) (*Gateway, error) {
	for _, fn := range routes.Functions() {
		if entries[fn] == nil {
			return nil, fmt.Errorf("harness: no entry for function %q", fn)
		}
	}
	return &Gateway{entries: entries, log: log, now: time.Now}, nil
}

// ServeHTTP answers like API Gateway: 404 {"message":"Not Found"} for an
// unknown route, the function's response otherwise.
func (g *Gateway) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	start := g.now()
	// The request id is chosen here so the access line and the function's
	// own log lines (which read it from the event) can be joined on it.
	id := newRequestID()
	status, fn := g.serve(w, r, id, start)
	g.log.InfoContext(r.Context(), "request",
		"method", r.Method, "path", r.URL.Path, "status", status,
		"duration_ms", g.now().Sub(start).Milliseconds(), "function", fn, "request_id", id)
}

func (g *Gateway) serve(w http.ResponseWriter, r *http.Request, requestID string, start time.Time) (int, string) {
	route, params, ok := routes.Match(r.Method, r.URL.Path)
	if !ok {
		return gatewayError(w, http.StatusNotFound, "Not Found"), "-"
	}
	body, err := io.ReadAll(io.LimitReader(r.Body, MaxPayload+1))
	if err != nil {
		return gatewayError(w, http.StatusBadRequest, "Bad Request"), route.Function
	}
	if len(body) > MaxPayload {
		return gatewayError(w, http.StatusRequestEntityTooLarge, "Request Entity Too Large"), route.Function
	}
	event := BuildEvent(r, route, params, body, start)
	event.RequestContext.RequestID = requestID

	timeout := time.Duration(routes.Config(route.Function).TimeoutSeconds) * time.Second
	ctx, cancel := context.WithTimeout(r.Context(), timeout)
	defer cancel()
	ctx = lambdacontext.NewContext(ctx, &lambdacontext.LambdaContext{
		AwsRequestID:       event.RequestContext.RequestID,
		InvokedFunctionArn: "arn:aws:lambda:local:000000000000:function:" + route.Function,
	})
	resp, err := g.invoke(ctx, route.Function, event)
	if err != nil {
		g.log.ErrorContext(ctx, "function failed", "function", route.Function, "err", err)
		return gatewayError(w, http.StatusInternalServerError, "Internal Server Error"), route.Function
	}
	if err := WriteResponse(w, resp); err != nil {
		g.log.ErrorContext(ctx, "bad function response", "function", route.Function, "err", err)
		return gatewayError(w, http.StatusInternalServerError, "Internal Server Error"), route.Function
	}
	return statusOf(resp), route.Function
}

// invoke calls the entry as the Lambda runtime would, turning a panic into
// an invocation error instead of a dead harness.
func (g *Gateway) invoke(ctx context.Context, fn string, event events.APIGatewayV2HTTPRequest) (resp events.APIGatewayV2HTTPResponse, err error) {
	defer func() {
		if v := recover(); v != nil {
			err = fmt.Errorf("panic: %v", v)
		}
	}()
	return g.entries[fn](ctx, event)
}

// Invoke runs one function's entry on an event, as `make invoke` does.
func (g *Gateway) Invoke(ctx context.Context, fn string, event events.APIGatewayV2HTTPRequest) (events.APIGatewayV2HTTPResponse, error) {
	if g.entries[fn] == nil {
		return events.APIGatewayV2HTTPResponse{}, fmt.Errorf("harness: unknown function %q", fn)
	}
	return g.invoke(ctx, fn, event)
}

func gatewayError(w http.ResponseWriter, status int, msg string) int {
	b, _ := json.Marshal(map[string]string{"message": msg})
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	_, _ = w.Write(b)
	return status
}

func statusOf(resp events.APIGatewayV2HTTPResponse) int {
	if resp.StatusCode == 0 {
		return http.StatusOK
	}
	return resp.StatusCode
}

// BuildEvent turns an HTTP request into the payload-format-2.0 event API
// Gateway sends for route: lower-cased headers with repeated values joined by
// commas, cookies split out, query parameters, path parameters, the request
// context, and a base64 body when the body is not UTF-8.
func BuildEvent(r *http.Request, route routes.Route, params map[string]string, body []byte, now time.Time) events.APIGatewayV2HTTPRequest {
	headers := map[string]string{}
	var cookies []string
	for k, vs := range r.Header {
		lk := strings.ToLower(k)
		if lk == "cookie" {
			for _, v := range vs {
				for c := range strings.SplitSeq(v, ";") {
					if c = strings.TrimSpace(c); c != "" {
						cookies = append(cookies, c)
					}
				}
			}
			continue
		}
		headers[lk] = strings.Join(vs, ",")
	}
	if r.Host != "" {
		headers["host"] = r.Host
	}
	sourceIP := r.RemoteAddr
	if host, _, err := net.SplitHostPort(r.RemoteAddr); err == nil {
		sourceIP = host
	}
	headers["x-forwarded-for"] = sourceIP
	headers["x-forwarded-proto"] = "http"
	if r.ContentLength >= 0 && len(body) > 0 {
		headers["content-length"] = fmt.Sprint(len(body))
	}

	var query map[string]string
	if q := r.URL.Query(); len(q) > 0 {
		query = make(map[string]string, len(q))
		for k, vs := range q {
			query[k] = strings.Join(vs, ",")
		}
	}
	if len(params) == 0 {
		params = nil
	}

	e := events.APIGatewayV2HTTPRequest{
		Version:               "2.0",
		RouteKey:              route.Key(),
		RawPath:               r.URL.EscapedPath(),
		RawQueryString:        r.URL.RawQuery,
		Cookies:               cookies,
		Headers:               headers,
		QueryStringParameters: query,
		PathParameters:        params,
		RequestContext: events.APIGatewayV2HTTPRequestContext{
			RouteKey:     route.Key(),
			AccountID:    "000000000000",
			Stage:        "$default",
			RequestID:    newRequestID(),
			APIID:        "local",
			DomainName:   r.Host,
			DomainPrefix: strings.Split(r.Host, ".")[0],
			Time:         now.UTC().Format("02/Jan/2006:15:04:05 -0700"),
			TimeEpoch:    now.UnixMilli(),
			HTTP: events.APIGatewayV2HTTPRequestContextHTTPDescription{
				Method:    r.Method,
				Path:      r.URL.Path,
				Protocol:  r.Proto,
				SourceIP:  sourceIP,
				UserAgent: r.UserAgent(),
			},
		},
	}
	if len(body) > 0 {
		if utf8.Valid(body) {
			e.Body = string(body)
		} else {
			e.Body = base64.StdEncoding.EncodeToString(body)
			e.IsBase64Encoded = true
		}
	}
	return e
}

func newRequestID() string {
	var b [16]byte
	_, _ = rand.Read(b[:])
	return hex.EncodeToString(b[:])
}

// WriteResponse writes a Lambda response as API Gateway would: status,
// headers (single and multi-value), cookies as Set-Cookie, and the body
// decoded from base64 when flagged.
func WriteResponse(w http.ResponseWriter, resp events.APIGatewayV2HTTPResponse) error {
	body := []byte(resp.Body)
	if resp.IsBase64Encoded {
		var err error
		if body, err = base64.StdEncoding.DecodeString(resp.Body); err != nil {
			return fmt.Errorf("decode base64 body: %w", err)
		}
	}
	h := w.Header()
	for _, k := range slices.Sorted(maps.Keys(resp.MultiValueHeaders)) {
		for _, v := range resp.MultiValueHeaders[k] {
			h.Add(k, v)
		}
	}
	for k, v := range resp.Headers {
		h.Set(k, v)
	}
	for _, c := range resp.Cookies {
		h.Add("Set-Cookie", c)
	}
	h.Set("Content-Length", fmt.Sprint(len(body)))
	w.WriteHeader(statusOf(resp))
	_, err := io.Copy(w, bytes.NewReader(body))
	return err
}
