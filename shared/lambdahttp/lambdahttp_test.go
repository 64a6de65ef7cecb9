package lambdahttp_test

import (
	"context"
	"encoding/json"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"

	"github.com/a2awire/a2awire/shared/lambdahttp"
	"github.com/a2awire/a2awire/shared/protocol"
	"github.com/aws/aws-lambda-go/events"
)

func event(method, body string, headers map[string]string) events.APIGatewayV2HTTPRequest {
	return events.APIGatewayV2HTTPRequest{
		Version: "2.0", RouteKey: "ANY /agents/a/invoke", RawPath: "/agents/a/invoke",
		Headers: headers, Body: body,
		RequestContext: events.APIGatewayV2HTTPRequestContext{
			DomainName: "example.com",
			HTTP:       events.APIGatewayV2HTTPRequestContextHTTPDescription{Method: method, Path: "/agents/a/invoke"},
		},
	}
}

// TestEntryKeepsHeadersAndMethod: the handler behind Entry reads each header
// as the event carried it — commas and spaces included, through r.Header and
// RawHeader alike — and the method unchanged.
func TestEntryKeepsHeadersAndMethod(t *testing.T) {
	t.Parallel()
	type seen struct {
		Method, Get, Raw string
		Lines            []string
		RawOK            bool
		Missing          bool
	}
	var got seen
	h := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		got.Method = r.Method
		got.Get = r.Header.Get("X-A2AWire-Task-Id")
		got.Lines = r.Header.Values("Signature-Input")
		got.Raw, got.RawOK = lambdahttp.RawHeader(r, "x-a2awire-TASK-id")
		_, ok := lambdahttp.RawHeader(r, "X-Absent")
		got.Missing = !ok
		w.WriteHeader(204)
	})
	entry := lambdahttp.Entry(h)
	res, err := entry(context.Background(), event("post", "", map[string]string{
		"x-a2awire-task-id": "order-7, a,b ",
		"signature-input":   `sig1=("@method" "@path");keyid="k,1"`,
	}))
	if err != nil || res.StatusCode != 204 {
		t.Fatalf("%v %+v", err, res)
	}
	want := seen{Method: "post", Get: "order-7, a,b ", Raw: "order-7, a,b ", RawOK: true, Missing: true,
		Lines: []string{`sig1=("@method" "@path");keyid="k,1"`}}
	if g, w := mustJSON(got), mustJSON(want); g != w {
		t.Errorf("handler saw %s, want %s", g, w)
	}
}

// TestRawHeaderNetHTTP: under plain net/http, repeated lines are joined with
// "," as API Gateway joins them.
func TestRawHeaderNetHTTP(t *testing.T) {
	t.Parallel()
	r := httptest.NewRequest(http.MethodPost, "/", nil)
	r.Header.Add("X-A2AWire-Task-Id", "x")
	r.Header.Add("X-A2AWire-Task-Id", "a")
	r.Header.Set("X-One", "p, q")
	if v, ok := lambdahttp.RawHeader(r, "x-a2awire-task-id"); !ok || v != "x,a" {
		t.Errorf("RawHeader = %q %v, want x,a", v, ok)
	}
	if v, ok := lambdahttp.RawHeader(r, "X-One"); !ok || v != "p, q" {
		t.Errorf("RawHeader = %q %v", v, ok)
	}
	if v, ok := lambdahttp.RawHeader(r, "X-None"); ok || v != "" {
		t.Errorf("RawHeader of an absent header = %q %v", v, ok)
	}
}

// TestTaskIDsThroughEntry: through the Lambda entry, x,a, x,b and x, b are
// three tasks of a stateful provider, a repeat of x,a is a replay, and a
// lower-case post is 405 (issue 9).
func TestTaskIDsThroughEntry(t *testing.T) {
	t.Parallel()
	var (
		mu    sync.Mutex
		calls []string
	)
	p := protocol.NewProvider("ids", protocol.WithLogger(slog.New(slog.DiscardHandler)), protocol.WithIdempotency(newIdem()))
	p.HandleFunc("run", func(ctx context.Context, _ json.RawMessage) (any, error) {
		mu.Lock()
		defer mu.Unlock()
		calls = append(calls, protocol.TaskID(ctx))
		return map[string]int{"n": len(calls)}, nil
	})
	entry := lambdahttp.Entry(p)
	invoke := func(method, id string) events.APIGatewayV2HTTPResponse {
		t.Helper()
		res, err := entry(context.Background(), event(method, `{"task":"run"}`,
			map[string]string{"content-type": "application/json", "x-a2awire-task-id": id}))
		if err != nil {
			t.Fatal(err)
		}
		return res
	}
	for _, id := range []string{"x,a", "x,b", "x, b"} {
		if res := invoke("POST", id); res.StatusCode != 200 || header(res, protocol.ReplayedHeader) != "" {
			t.Fatalf("%q: %d %v %s", id, res.StatusCode, res.Headers, res.Body)
		}
	}
	res := invoke("POST", "x,a")
	if res.StatusCode != 200 || header(res, protocol.ReplayedHeader) != "true" || !strings.Contains(res.Body, `"n":1`) {
		t.Errorf("repeat of x,a: %d %v %s", res.StatusCode, res.Headers, res.Body)
	}
	if strings.Join(calls, "|") != "x,a|x,b|x, b" {
		t.Errorf("the capability ran for %q", calls)
	}
	if res := invoke("post", "x,c"); res.StatusCode != 405 || header(res, "Allow") != "POST" {
		t.Errorf("post: %d %v", res.StatusCode, res.Headers)
	}
}

func mustJSON(v any) string {
	b, _ := json.Marshal(v)
	return string(b)
}

// idem is an in-memory idempotency store: enough to tell tasks apart.
type idem struct {
	mu   sync.Mutex
	done map[string]*protocol.Recorded
}

func newIdem() *idem { return &idem{done: map[string]*protocol.Recorded{}} }

func (m *idem) Begin(_ context.Context, k protocol.TaskKey) (protocol.Claim, *protocol.Recorded, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if r, ok := m.done[k.TaskID]; ok {
		if r == nil {
			return protocol.Claim{}, nil, protocol.Errorf(protocol.RequestInProgress, "in progress")
		}
		return protocol.Claim{}, r, nil
	}
	m.done[k.TaskID] = nil
	return protocol.Claim{TaskKey: k}, nil, nil
}

func (m *idem) Commit(_ context.Context, c protocol.Claim, r protocol.Recorded) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.done[c.TaskID] = &r
	return nil
}

func (m *idem) Abort(_ context.Context, c protocol.Claim) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	delete(m.done, c.TaskID)
	return nil
}

func header(res events.APIGatewayV2HTTPResponse, name string) string {
	return res.Headers[http.CanonicalHeaderKey(name)]
}

type parentKey struct{}

// TestEntryHeaderNamesAndContext: every event header reaches the handler
// under its canonical name with one line (however the event spelled the
// name), the handler's context carries the invocation context's values
// and ends when it ends, nothing of the adapter's split lines is left, and
// the event's cookies arrive as Cookie lines.
func TestEntryHeaderNamesAndContext(t *testing.T) {
	t.Parallel()
	var (
		lines   map[string][]string
		val     any
		ended   bool
		rawHost string
	)
	h := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		lines = map[string][]string(r.Header.Clone())
		val = r.Context().Value(parentKey{})
		rawHost, _ = lambdahttp.RawHeader(r, "HOST")
		<-r.Context().Done()
		ended = true
		w.WriteHeader(204)
	})
	ctx, cancel := context.WithCancel(context.WithValue(context.Background(), parentKey{}, "parent"))
	cancel()
	ev := event("POST", "", map[string]string{
		"content-type":      "application/json",
		"x-forwarded-proto": "https",
		"X-cUSTOM-thing":    "a, b",
		"x-a2awire-task-id": "t,1",
		"host":              "example.com",
	})
	ev.Cookies = []string{"a=1", "b=2"} // API Gateway moves Cookie lines here
	res, err := lambdahttp.Entry(h)(ctx, ev)
	if err != nil || res.StatusCode != 204 {
		t.Fatalf("%v %+v", err, res)
	}
	want := map[string][]string{
		"Content-Type": {"application/json"}, "X-Forwarded-Proto": {"https"}, "X-Custom-Thing": {"a, b"},
		"X-A2awire-Task-Id": {"t,1"}, "Host": {"example.com"}, "Cookie": {"a=1", "b=2"},
	}
	if g, w := mustJSON(lines), mustJSON(want); g != w {
		t.Errorf("handler's header lines %s, want %s", g, w)
	}
	if val != "parent" || !ended || rawHost != "example.com" {
		t.Errorf("context value %v, ended %v, raw host %q", val, ended, rawHost)
	}
}

// TestRouteOf: behind Entry a handler reads the route the gateway matched
// and its path parameters from the event (the request context's routeKey
// first, the top-level copy when it is empty); under a plain server there
// is none.
func TestRouteOf(t *testing.T) {
	t.Parallel()
	var got lambdahttp.Route
	var ok bool
	entry := lambdahttp.Entry(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		got, ok = lambdahttp.RouteOf(r.Context())
		w.WriteHeader(http.StatusNoContent)
	}))
	ev := event("POST", "", nil)
	ev.RouteKey = "POST /v0/worlds/{world}/messages"
	ev.RequestContext.RouteKey = ev.RouteKey
	ev.PathParameters = map[string]string{"world": "a b"}
	if _, err := entry(context.Background(), ev); err != nil {
		t.Fatal(err)
	}
	if !ok || got.Key != "POST /v0/worlds/{world}/messages" || got.Params["world"] != "a b" {
		t.Errorf("RouteOf = %+v %v", got, ok)
	}
	ev.RequestContext.RouteKey = ""
	if _, err := entry(context.Background(), ev); err != nil {
		t.Fatal(err)
	}
	if !ok || got.Key != ev.RouteKey {
		t.Errorf("top-level routeKey: RouteOf = %+v %v", got, ok)
	}
	if _, ok := lambdahttp.RouteOf(httptest.NewRequest("GET", "/", nil).Context()); ok {
		t.Error("RouteOf found a route without an event")
	}
}
