package cloud_test

import (
	"bytes"
	"context"
	"encoding/base64"
	"encoding/json"
	"errors"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/a2awire/a2awire/local/cloud"
	"github.com/a2awire/a2awire/shared/capture"
	"github.com/a2awire/a2awire/shared/lambdahttp"
	"github.com/a2awire/a2awire/shared/logging"
	"github.com/a2awire/a2awire/shared/routes"
	"github.com/aws/aws-lambda-go/events"
	"github.com/aws/aws-lambda-go/lambdacontext"
)

const invokePath = "/agents/a2awire-punctual/invoke"

// probe is an HTTP function for gateway tests: it records the event it got
// and answers from the request's X-Probe-* headers.
type probe struct {
	calls atomic.Int32
	last  atomic.Pointer[events.APIGatewayV2HTTPRequest]
	// hold, when set, keeps a request with an X-Probe-Hold header until
	// it is closed; returned counts those that have come back.
	hold     chan struct{}
	returned atomic.Int32
	// entered, when set, is told of each held request as it starts.
	entered chan struct{}
}

func (p *probe) handle(ctx context.Context, e events.APIGatewayV2HTTPRequest) (events.APIGatewayV2HTTPResponse, error) {
	p.calls.Add(1)
	p.last.Store(&e)
	if e.Headers["x-probe-hold"] != "" {
		if p.entered != nil {
			p.entered <- struct{}{}
		}
		<-p.hold
		defer p.returned.Add(1)
	}
	if d, err := time.ParseDuration(e.Headers["x-probe-sleep"]); err == nil {
		time.Sleep(d)
	}
	resp := events.APIGatewayV2HTTPResponse{StatusCode: 200, Headers: map[string]string{"Content-Type": "application/json"}, Body: `{"ok":true}`}
	switch e.Headers["x-probe-answer"] {
	case "huge":
		resp.Body = strings.Repeat("x", cloud.MaxResponsePayload)
	case "big":
		resp.Body = strings.Repeat("x", 1<<20)
	case "error":
		return resp, errors.New("function failed")
	}
	return resp, nil
}

// gateway serves every route's function with one probe, under timeout.
func gateway(t *testing.T, timeout time.Duration, o cloud.GatewayOptions, log *slog.Logger) (*cloud.Gateway, *probe) {
	t.Helper()
	p := &probe{}
	entries := map[string]*cloud.Entry{}
	for _, fn := range routes.Functions() {
		entries[fn] = cloud.NewEntry(fn, p.handle, timeout)
	}
	if log == nil {
		log = logging.Discard()
	}
	gw, err := cloud.NewGateway(entries, log, o)
	if err != nil {
		t.Fatal(err)
	}
	return gw, p
}

func serve(gw http.Handler, r *http.Request) (int, string) {
	w := httptest.NewRecorder()
	gw.ServeHTTP(w, r)
	return w.Code, w.Body.String()
}

func post(body io.Reader, header ...string) *http.Request {
	r := httptest.NewRequest("POST", invokePath, body)
	for i := 0; i+1 < len(header); i += 2 {
		r.Header.Set(header[i], header[i+1])
	}
	return r
}

// TestGatewayFunctionTimeoutIs500: a function that overruns is answered
// 500 at its timeout over a real connection while it still runs, as API
// Gateway answers for a Lambda that timed out: the client does not wait
// for the function, is told not to reuse the connection (still busy with
// it), and gets one response; the access line is written once.
func TestGatewayFunctionTimeoutIs500(t *testing.T) {
	logs := &capture.Buffer{}
	gw, p := gateway(t, 100*time.Millisecond, cloud.GatewayOptions{}, logging.New(logs, logging.JSON, slog.LevelInfo))
	p.hold = make(chan struct{})
	srv := httptest.NewServer(gw)
	req, err := http.NewRequest("POST", srv.URL+invokePath, strings.NewReader("{}"))
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("X-Probe-Hold", "1")
	client := srv.Client()
	client.Timeout = 5 * time.Second // the function is held far longer: only an answer at the deadline arrives in time
	resp, err := client.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != 500 || string(body) != `{"message":"Internal Server Error"}` || !resp.Close {
		t.Errorf("overrun: %d %s, connection close %v", resp.StatusCode, body, resp.Close)
	}
	if n := p.returned.Load(); n != 0 {
		t.Fatalf("the client was answered only after the function returned")
	}
	// Close waits for the request's goroutine, which returns once the
	// function does.
	close(p.hold)
	srv.Close()
	if n := p.returned.Load(); n != 1 {
		t.Fatalf("%d held invocations returned, want 1", n)
	}
	lines := strings.Split(strings.TrimSpace(logs.String()), "\n")
	var access []map[string]any
	for _, l := range lines {
		var rec map[string]any
		if err := json.Unmarshal([]byte(l), &rec); err != nil {
			t.Fatalf("log line %q: %v", l, err)
		}
		if rec["msg"] == "request" {
			access = append(access, rec)
		}
	}
	if len(access) != 1 || access[0]["status"] != 500.0 {
		t.Errorf("access lines %v, want one with status 500", access)
	}
}

// TestGatewayDeadlineRaceAnswersOnce: functions that return right at
// their deadline are answered once each, 200 or 500, never both and never
// garbled (run under -race, it also checks that the deadline's watch and
// the request's goroutine never write at the same time).
func TestGatewayDeadlineRaceAnswersOnce(t *testing.T) {
	gw, _ := gateway(t, 20*time.Millisecond, cloud.GatewayOptions{}, nil)
	srv := httptest.NewServer(gw)
	defer srv.Close()
	var wg sync.WaitGroup
	var ok, timedOut atomic.Int32
	for i := range 8 {
		wg.Go(func() {
			for j := range 10 {
				sleep := time.Duration(15+(i+j)%10) * time.Millisecond // 15–24 ms around the 20 ms deadline
				req, _ := http.NewRequest("POST", srv.URL+invokePath, strings.NewReader("{}"))
				req.Header.Set("X-Probe-Sleep", sleep.String())
				resp, err := srv.Client().Do(req)
				if err != nil {
					t.Error(err)
					return
				}
				body, _ := io.ReadAll(resp.Body)
				resp.Body.Close()
				switch {
				case resp.StatusCode == 200 && string(body) == `{"ok":true}`:
					ok.Add(1)
				case resp.StatusCode == 500 && string(body) == `{"message":"Internal Server Error"}`:
					timedOut.Add(1)
				default:
					t.Errorf("sleep %v: %d %q", sleep, resp.StatusCode, body)
				}
			}
		})
	}
	wg.Wait()
	t.Logf("%d answered 200, %d answered 500", ok.Load(), timedOut.Load())
	if ok.Load()+timedOut.Load() != 80 {
		t.Errorf("%d answered 200 and %d 500, want 80 in all", ok.Load(), timedOut.Load())
	}
}

func TestGatewayIntegrationTimeoutIs503(t *testing.T) {
	gw, _ := gateway(t, 5*time.Second, cloud.GatewayOptions{IntegrationTimeout: 100 * time.Millisecond}, nil)
	status, body := serve(gw, post(strings.NewReader("{}"), "X-Probe-Sleep", "1s"))
	if status != 503 || body != `{"message":"Service Unavailable"}` {
		t.Errorf("integration timeout: %d %s", status, body)
	}
}

func TestGatewayRefusesRouteFunctionsAbove30s(t *testing.T) {
	entries := map[string]*cloud.Entry{}
	for _, fn := range routes.Functions() {
		entries[fn] = cloud.NewEntry(fn, (&probe{}).handle, 31*time.Second)
	}
	if _, err := cloud.NewGateway(entries, logging.Discard(), cloud.GatewayOptions{}); err == nil || !strings.Contains(err.Error(), "integration timeout") {
		t.Errorf("31 s route function: err = %v", err)
	}
	delete(entries, routes.Functions()[0])
	if _, err := cloud.NewGateway(entries, logging.Discard(), cloud.GatewayOptions{}); err == nil {
		t.Error("a route function without an entry was accepted")
	}
}

func TestGatewayFunctionErrorAndPanicAre500(t *testing.T) {
	gw, _ := gateway(t, time.Second, cloud.GatewayOptions{}, nil)
	if status, body := serve(gw, post(strings.NewReader("{}"), "X-Probe-Answer", "error")); status != 500 || body != `{"message":"Internal Server Error"}` {
		t.Errorf("function error: %d %s", status, body)
	}
}

// TestGatewayReservedConcurrencyIs500: a function at its reserved
// concurrency is not called, and its caller gets what API Gateway answers
// for an invocation Lambda refuses (500 Internal Server Error, not 429);
// other functions are not held back, and the slot is free again once the
// running invocation returns.
func TestGatewayReservedConcurrencyIs500(t *testing.T) {
	p := &probe{hold: make(chan struct{}), entered: make(chan struct{}, 1)}
	entries := map[string]*cloud.Entry{}
	for _, fn := range routes.Functions() {
		entries[fn] = cloud.NewEntry(fn, p.handle, 20*time.Second)
	}
	entries["fixture-punctual"].WithReservedConcurrency(1)
	gw, err := cloud.NewGateway(entries, logging.Discard(), cloud.GatewayOptions{})
	if err != nil {
		t.Fatal(err)
	}
	first := make(chan int, 1)
	go func() {
		status, _ := serve(gw, post(strings.NewReader("{}"), "X-Probe-Hold", "1"))
		first <- status
	}()
	<-p.entered
	if status, body := serve(gw, post(strings.NewReader("{}"))); status != 500 || body != `{"message":"Internal Server Error"}` {
		t.Errorf("at the reservation: %d %s, want 500 Internal Server Error", status, body)
	}
	if n := p.calls.Load(); n != 1 {
		t.Errorf("%d calls, want 1: the throttled invocation reached the function", n)
	}
	other := httptest.NewRequest("POST", "/agents/a2awire-clean/invoke", strings.NewReader("{}"))
	if status, _ := serve(gw, other); status != 200 {
		t.Errorf("an unreserved function: %d, want 200", status)
	}
	close(p.hold)
	if status := <-first; status != 200 {
		t.Errorf("the held invocation: %d, want 200", status)
	}
	if status, _ := serve(gw, post(strings.NewReader("{}"))); status != 200 {
		t.Errorf("after the slot is free: %d, want 200", status)
	}
}

// TestEntryReservationFreedAtDeadline: an invocation that overruns gives
// its slot back at its deadline (Lambda stops the environment then), not
// when the local function finally returns; a refused one is ErrThrottled.
func TestEntryReservationFreedAtDeadline(t *testing.T) {
	hold := make(chan struct{})
	defer close(hold)
	entered := make(chan struct{}, 2)
	e := cloud.NewEntry("fn", func(ctx context.Context, _ json.RawMessage) (string, error) {
		entered <- struct{}{}
		<-hold
		return "late", nil
	}, 500*time.Millisecond).WithReservedConcurrency(1)
	done := make(chan error, 1)
	go func() { _, err := e.Invoke(context.Background(), []byte("{}")); done <- err }()
	<-entered
	if _, err := e.Invoke(context.Background(), []byte("{}")); !errors.Is(err, cloud.ErrThrottled) {
		t.Errorf("second invocation: %v, want ErrThrottled", err)
	}
	if err := <-done; !errors.Is(err, cloud.ErrTimeout) {
		t.Fatalf("first invocation: %v", err)
	}
	// The function is still held, yet a new invocation is admitted and
	// runs to its own deadline.
	if _, err := e.Invoke(context.Background(), []byte("{}")); !errors.Is(err, cloud.ErrTimeout) {
		t.Errorf("after the slot was freed: %v, want the function's timeout", err)
	}
}

func TestGatewayBodyLimits(t *testing.T) {
	gw, p := gateway(t, 20*time.Second, cloud.GatewayOptions{}, nil)
	// 7 MB: above Lambda's 6 MB event limit, though within API Gateway's 10 MB.
	for name, r := range map[string]*http.Request{
		"7 MB":         post(bytes.NewReader(make([]byte, 7<<20)), "Content-Type", "application/json"),
		"11 MB":        post(bytes.NewReader(make([]byte, 11<<20))),
		"7 MB chunked": post(io.MultiReader(bytes.NewReader(make([]byte, 7<<20))), "Content-Type", "application/json"),
		// 5 MB of binary is 6.7 MB once base64'd into the event.
		"5 MB binary": post(bytes.NewReader(make([]byte, 5<<20)), "Content-Type", "application/octet-stream"),
	} {
		if name == "7 MB chunked" {
			r.ContentLength = -1
		}
		if status, body := serve(gw, r); status != 413 || body != `{"message":"Request Entity Too Large"}` {
			t.Errorf("%s: %d %s", name, status, body)
		}
	}
	if n := p.calls.Load(); n != 0 {
		t.Errorf("the function was called %d times for bodies it may not get", n)
	}
	if status, _ := serve(gw, post(bytes.NewReader(make([]byte, 4<<20)), "Content-Type", "application/octet-stream")); status != 200 {
		t.Errorf("4 MB binary body: %d", status)
	}
}

// TestGatewayBodyArrivesWhole: a body read in chunks reaches the function
// byte for byte, announced or chunked.
func TestGatewayBodyArrivesWhole(t *testing.T) {
	gw, p := gateway(t, 10*time.Second, cloud.GatewayOptions{}, nil)
	body := make([]byte, 100_001)
	for i := range body {
		body[i] = byte(i * 7)
	}
	for _, chunked := range []bool{false, true} {
		r := post(bytes.NewReader(body), "Content-Type", "application/octet-stream")
		if chunked {
			r.ContentLength = -1
		}
		if status, _ := serve(gw, r); status != 200 {
			t.Fatalf("status %d", status)
		}
		e := p.last.Load()
		got, err := base64.StdEncoding.DecodeString(e.Body)
		if err != nil || !e.IsBase64Encoded || !bytes.Equal(got, body) {
			t.Errorf("chunked=%v: the function got %d bytes, not the %d sent (%v)", chunked, len(got), len(body), err)
		}
	}
}

func TestGatewayResponseLimit(t *testing.T) {
	gw, _ := gateway(t, 5*time.Second, cloud.GatewayOptions{}, nil)
	if status, body := serve(gw, post(strings.NewReader("{}"), "X-Probe-Answer", "huge")); status != 500 || body != `{"message":"Internal Server Error"}` {
		t.Errorf("6 MB response: %d %.80s", status, body)
	}
}

func TestGatewayRequestLineAndHeadersLimit(t *testing.T) {
	gw, p := gateway(t, time.Second, cloud.GatewayOptions{}, nil)
	r := post(strings.NewReader("{}"), "X-Big", strings.Repeat("a", 10240))
	if status, body := serve(gw, r); status != 431 || body != `{"message":"Request Header Fields Too Large"}` {
		t.Errorf("10 KB header: %d %s", status, body)
	}
	if p.calls.Load() != 0 {
		t.Error("function called")
	}
	if status, _ := serve(gw, post(strings.NewReader("{}"), "X-Big", strings.Repeat("a", 9000))); status != 200 {
		t.Errorf("9 KB header: %d", status)
	}
}

func TestGatewayBase64ByContentType(t *testing.T) {
	gw, p := gateway(t, time.Second, cloud.GatewayOptions{}, nil)
	for ctype, want := range map[string]bool{
		"application/json": false, "application/json; charset=utf-8": false, "text/plain": false,
		"application/problem+json": false, "application/xml": false,
		"application/octet-stream": true, "application/x-www-form-urlencoded": true, "": true, "image/png": true,
	} {
		serve(gw, post(strings.NewReader(`{"a":1}`), "Content-Type", ctype))
		e := p.last.Load()
		body := e.Body
		if e.IsBase64Encoded {
			b, _ := base64.StdEncoding.DecodeString(body)
			body = string(b)
		}
		if e.IsBase64Encoded != want || body != `{"a":1}` {
			t.Errorf("%q: isBase64Encoded %v body %q, want %v", ctype, e.IsBase64Encoded, e.Body, want)
		}
	}
}

func TestGatewayForwardedHeaders(t *testing.T) {
	gw, p := gateway(t, time.Second, cloud.GatewayOptions{}, nil)
	r := post(strings.NewReader("{}"), "X-Forwarded-For", "203.0.113.7")
	r.RemoteAddr = "192.0.2.1:4444"
	serve(gw, r)
	h := p.last.Load().Headers
	if h["x-forwarded-for"] != "203.0.113.7, 192.0.2.1" || h["x-forwarded-proto"] != "https" || h["x-forwarded-port"] != "443" {
		t.Errorf("headers %v", h)
	}
}

// failingWriter is a client that hangs up once the status line is sent.
type failingWriter struct {
	*httptest.ResponseRecorder
	headers int
}

func (f *failingWriter) WriteHeader(code int) { f.headers++; f.ResponseRecorder.WriteHeader(code) }
func (f *failingWriter) Write([]byte) (int, error) {
	return 0, errors.New("write tcp: broken pipe")
}

// WriteString fails as Write does: the embedded recorder's would succeed,
// and the gateway writes a text body with io.WriteString.
func (f *failingWriter) WriteString(string) (int, error) {
	return 0, errors.New("write tcp: broken pipe")
}

func TestGatewayClientGoneIsNotA500(t *testing.T) {
	var buf bytes.Buffer
	// The function has 20 s: a timeout is not what is tested, and
	// building and copying its 1 MiB answer under the race detector can take
	// more than a second on a loaded machine (it then answers 500).
	gw, _ := gateway(t, 20*time.Second, cloud.GatewayOptions{}, logging.New(&buf, logging.JSON, slog.LevelInfo))
	w := &failingWriter{ResponseRecorder: httptest.NewRecorder()}
	gw.ServeHTTP(w, post(strings.NewReader("{}"), "X-Probe-Answer", "big"))
	if w.headers != 1 || w.Code != 200 {
		t.Errorf("WriteHeader called %d times, status %d", w.headers, w.Code)
	}
	var rec map[string]any
	if err := json.Unmarshal(buf.Bytes(), &rec); err != nil {
		t.Fatalf("want exactly one log line (the access line): %v\n%s", err, buf.String())
	}
	if rec["status"] != 200.0 || rec["client_gone"] != true {
		t.Errorf("access line %v", rec)
	}
}

// TestGatewayBodyBudget: bodies buffered at once are capped; a request that
// cannot get its bytes in time is answered 503, and others go on once the
// budget frees up.
func TestGatewayBodyBudget(t *testing.T) {
	gw, _ := gateway(t, time.Second, cloud.GatewayOptions{BodyBudget: 64 << 10, BodyWait: 200 * time.Millisecond}, nil)
	// A slow client has sent 48 KiB, so holds all 64 KiB of budget (its
	// bytes are reserved 32 KiB at a time), and sends no more.
	pr, pw := io.Pipe()
	slowDone := make(chan int)
	go func() {
		r := post(pr, "Content-Type", "application/json")
		r.ContentLength = -1
		status, _ := serve(gw, r)
		slowDone <- status
	}()
	if _, err := pw.Write(make([]byte, 48<<10)); err != nil {
		t.Fatal(err)
	}
	// The gateway has read those bytes; the budget is spent.
	time.Sleep(50 * time.Millisecond)
	if status, body := serve(gw, post(strings.NewReader(`{"task":"ping"}`), "Content-Type", "application/json")); status != 503 || body != `{"message":"Service Unavailable"}` {
		t.Errorf("request over the budget: %d %s", status, body)
	}
	pw.CloseWithError(errors.New("client gone"))
	if status := <-slowDone; status != 400 {
		t.Errorf("broken body: %d", status)
	}
	if status, _ := serve(gw, post(strings.NewReader(`{"task":"ping"}`), "Content-Type", "application/json")); status != 200 {
		t.Errorf("after the budget freed up: %d", status)
	}
}

func TestGatewayUnknownRoute(t *testing.T) {
	gw, _ := gateway(t, time.Second, cloud.GatewayOptions{}, nil)
	if status, body := serve(gw, httptest.NewRequest("GET", "/no/such/route", nil)); status != 404 || body != `{"message":"Not Found"}` {
		t.Errorf("unknown route: %d %s", status, body)
	}
}

// TestGatewayEventNamesRouteAndFunction: through the gateway every route's
// event carries that route's key (in the event and its request context),
// and the function's Lambda context its request id and function ARN.
func TestGatewayEventNamesRouteAndFunction(t *testing.T) {
	type seen struct {
		routeKey, contextRouteKey, requestID, arn string
	}
	var got atomic.Pointer[seen]
	entries := map[string]*cloud.Entry{}
	for _, fn := range routes.Functions() {
		entries[fn] = cloud.NewEntry(fn, func(ctx context.Context, e events.APIGatewayV2HTTPRequest) (events.APIGatewayV2HTTPResponse, error) {
			lc, _ := lambdacontext.FromContext(ctx)
			s := seen{routeKey: e.RouteKey, contextRouteKey: e.RequestContext.RouteKey, requestID: e.RequestContext.RequestID}
			if lc != nil {
				s.arn = lc.InvokedFunctionArn
				if lc.AwsRequestID != e.RequestContext.RequestID {
					s.requestID = "lambda context has " + lc.AwsRequestID
				}
			}
			got.Store(&s)
			return events.APIGatewayV2HTTPResponse{StatusCode: 204}, nil
		}, time.Second)
	}
	gw, err := cloud.NewGateway(entries, logging.Discard(), cloud.GatewayOptions{})
	if err != nil {
		t.Fatal(err)
	}
	for _, r := range routes.All() {
		method := r.Method
		if method == "ANY" {
			method = "POST"
		}
		// A concrete path for the pattern: every parameter is "p", a
		// greedy one "p/q".
		var segs []string
		for _, s := range strings.Split(r.Path, "/") {
			switch {
			case strings.HasSuffix(s, "+}"):
				s = "p/q"
			case strings.HasPrefix(s, "{"):
				s = "p"
			}
			segs = append(segs, s)
		}
		path := strings.Join(segs, "/")
		matched, _, ok := routes.Match(method, path)
		if !ok {
			t.Fatalf("%s %s does not match its own route", method, path)
		}
		got.Store(nil)
		w := httptest.NewRecorder()
		gw.ServeHTTP(w, httptest.NewRequest(method, path, nil))
		s := got.Load()
		if w.Code != 204 || s == nil {
			t.Fatalf("%s %s: status %d, function called: %v", method, path, w.Code, s != nil)
		}
		want := seen{routeKey: matched.Key(), contextRouteKey: matched.Key(), requestID: w.Header().Get("Apigw-Requestid"),
			arn: cloud.FunctionARN(matched.Function)}
		if *s != want {
			t.Errorf("%s %s: function saw %+v, want %+v", method, path, *s, want)
		}
	}
}

// TestGatewayRequestsShareNoHeaders: the header maps the gateway reuses
// between requests carry nothing from one request's event or response to
// the next.
func TestGatewayRequestsShareNoHeaders(t *testing.T) {
	var last atomic.Pointer[events.APIGatewayV2HTTPRequest]
	entries := map[string]*cloud.Entry{}
	for _, fn := range routes.Functions() {
		entries[fn] = cloud.NewEntry(fn, func(_ context.Context, e events.APIGatewayV2HTTPRequest) (events.APIGatewayV2HTTPResponse, error) {
			last.Store(&e)
			return events.APIGatewayV2HTTPResponse{StatusCode: 200, Body: "ok",
				Headers: map[string]string{"X-Seen-" + e.Headers["x-tag"]: "1"}}, nil
		}, time.Second)
	}
	gw, err := cloud.NewGateway(entries, logging.Discard(), cloud.GatewayOptions{})
	if err != nil {
		t.Fatal(err)
	}
	for i := range 50 {
		tag := "b"
		r := post(strings.NewReader("{}"), "X-Tag", tag)
		if i%2 == 0 {
			tag = "a"
			r = post(strings.NewReader("{}"), "X-Tag", tag, "X-Only-A", "1")
		}
		w := httptest.NewRecorder()
		gw.ServeHTTP(w, r)
		e := last.Load()
		if w.Code != 200 || e == nil || e.Headers["x-tag"] != tag {
			t.Fatalf("request %d: status %d, event %v", i, w.Code, e)
		}
		if _, leaked := e.Headers["x-only-a"]; leaked != (tag == "a") {
			t.Fatalf("request %d (tag %s): event headers %v", i, tag, e.Headers)
		}
		var seen []string
		for k := range w.Header() {
			if strings.HasPrefix(k, "X-Seen-") {
				seen = append(seen, k)
			}
		}
		if len(seen) != 1 || seen[0] != "X-Seen-"+strings.ToUpper(tag) {
			t.Fatalf("request %d (tag %s): response headers %v", i, tag, w.Header())
		}
	}
}

// TestGatewayDeliversInvalidUTF8AsSent: through the gateway, a JSON body
// with a byte that is not UTF-8 reaches the function's HTTP handler (behind
// lambdahttp.Entry, which decodes base64 as aws-lambda-go-api-proxy does)
// exactly as the client sent it, so a strict decoder can refuse it and a
// content-digest over it still matches.
func TestGatewayDeliversInvalidUTF8AsSent(t *testing.T) {
	var got []byte
	h := lambdahttp.Entry(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		got, _ = io.ReadAll(r.Body)
		w.WriteHeader(204)
	}))
	entries := map[string]*cloud.Entry{}
	for _, fn := range routes.Functions() {
		entries[fn] = cloud.NewEntry(fn, h, time.Second)
	}
	gw, err := cloud.NewGateway(entries, logging.Discard(), cloud.GatewayOptions{})
	if err != nil {
		t.Fatal(err)
	}
	body := "{\"echo\":{\"x\":\"\xff(\",\"\xfe\":1}}"
	if status, _ := serve(gw, post(strings.NewReader(body), "Content-Type", "application/json")); status != 204 || string(got) != body {
		t.Errorf("%d, the function read %q, want %q", status, got, body)
	}
}
