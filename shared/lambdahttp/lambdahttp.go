// Package lambdahttp runs a net/http handler as the Lambda entry of an API
// Gateway HTTP API route, with the request's headers and method exactly as
// the gateway delivered them.
//
// aws-lambda-go-api-proxy's httpadapter splits every header value on commas
// (and trims the pieces) and upper-cases the method. That turns the task id
// "order-7,a" into the two lines "order-7" and "a" — the same task as
// "order-7,b" for a reader taking the first — and "post" into POST. Entry
// undoes both before the handler runs: each header the event carried is one
// line with the event's value, and the method is the event's. Every Lambda
// main and the local harness use it, so the cloud and local paths read the
// same values: task ids are taken exactly as sent.
//
// The package depends on the event types and the adapter only, never on a
// store client, so a function without table access links no DynamoDB code.
package lambdahttp

import (
	"context"
	"net/http"
	"net/textproto"
	"strings"

	"github.com/aws/aws-lambda-go/events"
	"github.com/awslabs/aws-lambda-go-api-proxy/httpadapter"
)

// Handler is the Lambda entry function of an HTTP API route: what
// lambda.Start takes, and what the local harness invokes.
type Handler = func(context.Context, events.APIGatewayV2HTTPRequest) (events.APIGatewayV2HTTPResponse, error)

type rawKey struct{}

// raw is what the event carried, before the adapter rewrote it.
type raw struct {
	headers map[string]string
	method  string
	route   Route
}

// rawContext is the invocation's context with the raw event values: one
// allocation per request instead of a context.WithValue and its value.
type rawContext struct {
	context.Context
	raw raw
}

func (c *rawContext) Value(key any) any {
	if _, ok := key.(rawKey); ok {
		return &c.raw
	}
	return c.Context.Value(key)
}

// Entry returns the Lambda entry for h: httpadapter.NewV2(h).ProxyWithContext,
// except that h sees each event header as one line with its value as sent,
// the event's method unchanged, the raw headers through RawHeader, and the
// matched route and path parameters through RouteOf.
func Entry(h http.Handler) Handler {
	adapter := httpadapter.NewV2(restore(h))
	return func(ctx context.Context, ev events.APIGatewayV2HTTPRequest) (events.APIGatewayV2HTTPResponse, error) {
		ctx = &rawContext{Context: ctx, raw: raw{headers: ev.Headers, method: ev.RequestContext.HTTP.Method, route: eventRoute(ev)}}
		// restore sets every header from the event's values, so the
		// adapter need not split, trim and add them first only to have
		// them replaced (a quarter of its cost). It reads the headers for
		// nothing else; the cookies it turns into Cookie lines are a
		// separate field.
		ev.Headers = nil
		return adapter.ProxyWithContext(ctx, ev)
	}
}

// Route is the route API Gateway matched for an invocation: its routeKey
// ("POST /v0/worlds/{world}/messages") and the path parameters it bound,
// unescaped, exactly as the event carried them. Behind Entry a handler
// reads it here rather than matching the path again, so the gateway's
// match is the only one.
type Route struct {
	Key    string
	Params map[string]string
}

// RouteOf returns the route of the event behind Entry, and false under a
// plain net/http server (or for an event without a routeKey).
func RouteOf(ctx context.Context) (Route, bool) {
	if rw, ok := ctx.Value(rawKey{}).(*raw); ok && rw.route.Key != "" {
		return rw.route, true
	}
	return Route{}, false
}

// eventRoute is the route an event names: the request context's routeKey
// (the top-level field is its copy) and the path parameters.
func eventRoute(ev events.APIGatewayV2HTTPRequest) Route {
	key := ev.RequestContext.RouteKey
	if key == "" {
		key = ev.RouteKey
	}
	return Route{Key: key, Params: ev.PathParameters}
}

// restore puts the event's header values and method back on the request the
// adapter built.
func restore(h http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if rw, ok := r.Context().Value(rawKey{}).(*raw); ok {
			// Every header becomes one line; the one-value lists are
			// carved from one allocation.
			vals := make([]string, len(rw.headers))
			i := 0
			for k, v := range rw.headers {
				vals[i] = v
				r.Header[canonicalKey(k)] = vals[i : i+1 : i+1]
				i++
			}
			if rw.method != "" {
				r.Method = rw.method
			}
		}
		h.ServeHTTP(w, r)
	})
}

// canonicalKey is textproto.CanonicalMIMEHeaderKey(k), without a fresh
// string per request for the header names API Gateway and a2awire
// clients send in lower case.
func canonicalKey(k string) string {
	if c, ok := canonicalKeys[k]; ok {
		return c
	}
	return textproto.CanonicalMIMEHeaderKey(k)
}

// canonicalKeys maps lower-case header names to their canonical form;
// read-only.
var canonicalKeys = func() map[string]string {
	m := map[string]string{}
	for _, k := range []string{"Accept", "Accept-Encoding", "Accept-Language", "Authorization", "Cache-Control",
		"Connection", "Content-Digest", "Content-Length", "Content-Type", "Host", "Idempotency-Key", "If-None-Match",
		"Origin", "Referer", "Signature", "Signature-Input", "User-Agent", "X-A2awire-Task-Id", "X-Forwarded-For",
		"X-Forwarded-Port", "X-Forwarded-Proto", "X-Request-Id"} {
		m[strings.ToLower(k)] = textproto.CanonicalMIMEHeaderKey(k)
	}
	return m
}()

// RawHeader returns the value of header name as the client sent it, and
// whether it was sent. Behind Entry it is the event's value, commas and
// spaces untouched. Under a plain net/http server the header's lines are
// joined with "," — what API Gateway does with repeated lines — so a handler
// reads the same value on both paths.
func RawHeader(r *http.Request, name string) (string, bool) {
	if rw, ok := r.Context().Value(rawKey{}).(*raw); ok {
		if v, ok := rw.headers[strings.ToLower(name)]; ok {
			return v, true
		}
		for k, v := range rw.headers {
			if strings.EqualFold(k, name) {
				return v, true
			}
		}
		return "", false
	}
	vals := r.Header.Values(name)
	if len(vals) == 0 {
		return "", false
	}
	return strings.Join(vals, ","), true
}
