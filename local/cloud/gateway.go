package cloud

import (
	"bytes"
	"context"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"maps"
	"mime"
	"net"
	"net/http"
	"net/textproto"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"
	"unicode/utf8"

	"github.com/a2awire/a2awire/shared/routes"
	"github.com/aws/aws-lambda-go/events"
	"github.com/aws/aws-lambda-go/lambdacontext"
)

// API Gateway HTTP API's limits.
const (
	// MaxBody is the largest request body API Gateway accepts.
	MaxBody = 10 << 20
	// MaxRequestLineAndHeaders is the quota on the request line and header
	// values together.
	MaxRequestLineAndHeaders = 10240
	// IntegrationTimeout is the longest API Gateway waits for a Lambda
	// integration; functions that serve routes may not be configured longer.
	IntegrationTimeout = 30 * time.Second
)

// GatewayOptions tune a Gateway; zero values take the defaults.
type GatewayOptions struct {
	// IntegrationTimeout replaces IntegrationTimeout (for tests).
	IntegrationTimeout time.Duration
	// BodyBudget caps the request-body bytes buffered at once across all
	// requests (default 64 MiB); a request that cannot get its bytes
	// within BodyWait (default 5 s) is answered 503.
	BodyBudget int64
	BodyWait   time.Duration
}

// Gateway is API Gateway HTTP API with Lambda proxy integrations (payload
// format 2.0) in front of the functions, mounted from the route table.
type Gateway struct {
	entries     map[string]*Entry
	routeKeys   map[[2]string]string // route.Key() by {method, path}, built once
	log         *slog.Logger
	now         func() time.Time
	integration time.Duration
	bodyWait    time.Duration
	bodies      *budget
	chunks      sync.Pool // of chunkSize buffers for reading bodies
	events      sync.Pool // of *eventBuffer
}

// NewGateway returns a gateway over entries, keyed by function name. Every
// function that serves a route must have an entry, with a timeout within
// API Gateway's integration timeout.
func NewGateway(entries map[string]*Entry, log *slog.Logger, o GatewayOptions) (*Gateway, error) {
	for _, r := range routes.All() {
		if routes.Streamed(r.Function) {
			// Served by a function URL in AWS, not by the API: the
			// gateway answers 404 for it, as API Gateway does.
			continue
		}
		e := entries[r.Function]
		if e == nil {
			return nil, fmt.Errorf("gateway: no entry for function %q (route %s)", r.Function, r.Key())
		}
		if e.Timeout() > IntegrationTimeout {
			return nil, fmt.Errorf("gateway: function %q serves route %s but its timeout %v exceeds API Gateway's %v integration timeout",
				r.Function, r.Key(), e.Timeout(), IntegrationTimeout)
		}
	}
	keys := map[[2]string]string{}
	for _, r := range routes.All() {
		keys[[2]string{r.Method, r.Path}] = r.Key()
	}
	g := &Gateway{
		entries:     entries,
		routeKeys:   keys,
		log:         log,
		now:         time.Now,
		integration: orDefault(o.IntegrationTimeout, IntegrationTimeout),
		bodyWait:    orDefault(o.BodyWait, 5*time.Second),
		bodies:      newBudget(orDefault(o.BodyBudget, 64<<20)),
	}
	g.chunks.New = func() any { b := make([]byte, chunkSize); return &b }
	g.events.New = func() any {
		eb := &eventBuffer{}
		eb.enc = json.NewEncoder(&eb.buf)
		return eb
	}
	return g, nil
}

// eventBuffer is where the gateway writes an event's JSON: a buffer and an
// encoding/json encoder bound to it, reused between requests so that
// writing an event allocates nothing for its bytes.
type eventBuffer struct {
	buf bytes.Buffer
	enc *json.Encoder
}

// maxPooledEvent is the largest event buffer kept for reuse: one carrying
// a large body goes to the collector rather than stay held by the pool.
const maxPooledEvent = 64 << 10

// encode writes v as json.Marshal does and returns the bytes, which are
// valid until the buffer is reused.
func (eb *eventBuffer) encode(v any) ([]byte, error) {
	eb.buf.Reset()
	if err := eb.enc.Encode(v); err != nil {
		return nil, err
	}
	// Encode ends the value with a newline, which Marshal does not write.
	return eb.buf.Bytes()[:eb.buf.Len()-1], nil
}

func (g *Gateway) putEventBuffer(eb *eventBuffer) {
	if eb.buf.Cap() <= maxPooledEvent {
		g.events.Put(eb)
	}
}

func orDefault[T comparable](v, def T) T {
	var zero T
	if v == zero {
		return def
	}
	return v
}

// ServeHTTP answers as API Gateway does and writes one access line per
// request, carrying the request id the function sees in its event.
func (g *Gateway) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	start := g.now()
	// The request id is chosen here so the access line and the function's
	// own log lines (which read it from the event) can be joined on it.
	id := NewRequestID()
	w.Header().Set("Apigw-Requestid", id)
	res := g.serve(w, r, id, start)
	if !res.answered {
		g.logAccess(r, id, start, res)
	}
}

// logAccess writes the access line of one request. The attributes are
// passed as slog.Attr values, which spares the boxing of each into an
// interface; the line carries its request id itself, so the record is made
// without the request's context, which the logger would only search for one.
func (g *Gateway) logAccess(r *http.Request, id string, start time.Time, res outcome) {
	ctx := context.Background()
	if !g.log.Enabled(ctx, slog.LevelInfo) {
		return
	}
	var buf [8]slog.Attr
	attrs := append(buf[:0], slog.String("method", r.Method), slog.String("path", r.URL.Path), slog.Int("status", res.status),
		slog.Int64("duration_ms", g.now().Sub(start).Milliseconds()), slog.String("function", res.function), slog.String("request_id", id))
	if res.err != nil {
		attrs = append(attrs, slog.String("error", res.err.Error()))
	}
	if res.clientGone {
		attrs = append(attrs, slog.Bool("client_gone", true))
	}
	g.log.LogAttrs(ctx, slog.LevelInfo, "request", attrs...)
}

type outcome struct {
	status     int
	function   string
	err        error
	clientGone bool
	// answered means the deadline's watch answered the request, and
	// wrote its access line.
	answered bool
}

func (g *Gateway) serve(w http.ResponseWriter, r *http.Request, requestID string, start time.Time) outcome {
	if n := requestLineAndHeaders(r); n > MaxRequestLineAndHeaders {
		return outcome{status: gatewayError(w, http.StatusRequestHeaderFieldsTooLarge, "Request Header Fields Too Large"), function: "-",
			err: fmt.Errorf("request line and headers are %d bytes, API Gateway allows %d", n, MaxRequestLineAndHeaders)}
	}
	route, params, ok := routes.Match(r.Method, r.URL.Path)
	if !ok {
		return outcome{status: gatewayError(w, http.StatusNotFound, "Not Found"), function: "-"}
	}
	fn := route.Function
	if g.entries[fn] == nil {
		return outcome{status: gatewayError(w, http.StatusNotFound, "Not Found"), function: "-"}
	}
	body, held, status, err := g.readBody(r)
	defer g.bodies.release(held)
	if status != 0 {
		return outcome{status: gatewayError(w, status, http.StatusText(status)), function: fn, err: err}
	}
	routeKey, ok := g.routeKeys[[2]string{route.Method, route.Path}]
	if !ok {
		routeKey = route.Key()
	}
	// The event reaches the function as Lambda delivers it: JSON bytes,
	// written here by encoding/json and decoded by lambda.NewHandler.
	eb := g.events.Get().(*eventBuffer)
	payload, err := eb.encode(buildEvent(r, routeKey, params, body, start, requestID))
	if err != nil {
		g.putEventBuffer(eb)
		return outcome{status: gatewayError(w, http.StatusInternalServerError, "Internal Server Error"), function: fn, err: err}
	}
	body = nil

	entry := g.entries[fn]
	// A client that goes away does not stop a Lambda invocation in AWS,
	// so the function's context does not end with the request's.
	ictx := context.WithoutCancel(r.Context())
	// The function's own timeout, which its entry enforces, ends the
	// invocation first when it is shorter than API Gateway's integration
	// timeout by more than scheduling noise: then a second timer would
	// never fire, and is not set.
	if entry.Timeout()+time.Second > g.integration {
		var cancel context.CancelFunc
		ictx, cancel = context.WithTimeout(ictx, g.integration)
		defer cancel()
	}
	ictx = lambdacontext.NewContext(ictx, &lambdacontext.LambdaContext{
		AwsRequestID:       requestID,
		InvokedFunctionArn: entry.arn,
	})
	// The function runs on this goroutine. When it overruns, the watch
	// at the deadline answers for it (and writes the access line) while
	// this goroutine waits for the function to return; ans lets only one
	// of them write the response.
	var ans answer
	out, err := entry.invokeHere(ictx, payload, func(err error) {
		ans.once(func() {
			// This goroutine is still in the function, so the
			// connection cannot serve another request until it
			// returns: the client is told not to wait for it.
			w.Header().Set("Connection", "close")
			res := g.respond(ictx, w, fn, nil, err)
			_ = http.NewResponseController(w).Flush()
			g.logAccess(r, requestID, start, res)
		})
	})
	// The function's decoder has read the event by now (the function
	// runs on this goroutine, even past its deadline), so its buffer can
	// serve the next request.
	payload = nil
	g.putEventBuffer(eb)
	var res outcome
	if !ans.once(func() { res = g.respond(ictx, w, fn, out, err) }) {
		return outcome{answered: true}
	}
	return res
}

// answer lets exactly one of a request's goroutine and its deadline's
// watch write the response.
type answer struct {
	mu      sync.Mutex
	written bool
}

// once runs write unless a response was written, and reports whether it
// ran. A write in progress holds the other caller until it is done, so the
// request's goroutine never returns (ending w's life) while the watch is
// still writing.
func (a *answer) once(write func()) bool {
	a.mu.Lock()
	defer a.mu.Unlock()
	if a.written {
		return false
	}
	a.written = true
	write()
	return true
}

// respond writes API Gateway's answer to an invocation's outcome: the
// function's response, or the gateway's error for a failed invocation.
func (g *Gateway) respond(ictx context.Context, w http.ResponseWriter, fn string, out []byte, err error) outcome {
	switch {
	case errors.Is(err, ErrRequestTooLarge):
		return outcome{status: gatewayError(w, http.StatusRequestEntityTooLarge, "Request Entity Too Large"), function: fn, err: err}
	case err != nil && !errors.Is(err, ErrTimeout) && ictx.Err() != nil:
		// API Gateway gave up before the function's own timeout.
		return outcome{status: gatewayError(w, http.StatusServiceUnavailable, "Service Unavailable"), function: fn,
			err: fmt.Errorf("integration timeout after %v", g.integration)}
	case errors.Is(err, ErrThrottled):
		// Lambda refused the invocation; API Gateway turns that into the
		// same 500 as a failure (it never answers 429 for it).
		g.log.WarnContext(ictx, "function throttled", "function", fn, "err", err)
		return outcome{status: gatewayError(w, http.StatusInternalServerError, "Internal Server Error"), function: fn, err: err}
	case err != nil:
		g.log.ErrorContext(ictx, "function failed", "function", fn, "err", err)
		return outcome{status: gatewayError(w, http.StatusInternalServerError, "Internal Server Error"), function: fn, err: err}
	}
	resp, respBody, err := decodeResponse(out)
	if err != nil {
		g.log.ErrorContext(ictx, "bad function response", "function", fn, "err", err)
		return outcome{status: gatewayError(w, http.StatusInternalServerError, "Internal Server Error"), function: fn, err: err}
	}
	status := writeResponse(w, resp, respBody)
	if err := respBody.write(w); err != nil {
		// The client hung up mid-response: nothing is wrong with the
		// function, and the status line is already sent.
		return outcome{status: status, function: fn, clientGone: true}
	}
	return outcome{status: status, function: fn}
}

// requestLineAndHeaders is the size API Gateway's 10,240-byte quota counts.
func requestLineAndHeaders(r *http.Request) int {
	n := len(r.Method) + 1 + len(r.RequestURI) + 1 + len(r.Proto)
	for k, vs := range r.Header {
		for _, v := range vs {
			n += len(k) + len(v)
		}
	}
	return n + len(r.Host)
}

// readBody buffers the request body within API Gateway's and Lambda's
// limits, taking its bytes from the gateway's body budget as they arrive
// (so slow clients hold only what they have sent); held is what the caller
// gives back with g.bodies.release.
// A non-zero status is the answer to send instead of invoking.
func (g *Gateway) readBody(r *http.Request) (body []byte, held int64, status int, err error) {
	// An event carries the body (base64 or escaped), so a body above
	// Lambda's request limit can never be delivered: refuse it unread.
	const limit = MaxRequestPayload
	if r.ContentLength > limit {
		return nil, held, http.StatusRequestEntityTooLarge, fmt.Errorf("body of %d bytes exceeds what a Lambda event can carry", r.ContentLength)
	}
	if r.Body == nil || r.ContentLength == 0 {
		return nil, held, 0, nil
	}
	// The wait's deadline is set up only when the budget runs short:
	// the usual request gets its bytes at once, without a timer.
	var ctx context.Context
	// The body is read in fixed chunks and copied once, at its final size,
	// so buffering costs what was sent and not a doubling slice's slack.
	var first [1]*[]byte // the usual body's one chunk, without a slice to hold it
	chunks := first[:0]
	defer func() {
		for _, c := range chunks {
			g.chunks.Put(c)
		}
	}()
	total := 0
	for {
		if total >= limit+1 {
			return nil, held, http.StatusRequestEntityTooLarge, errors.New("body exceeds what a Lambda event can carry")
		}
		if !g.bodies.tryAcquire(chunkSize) {
			if ctx == nil { // once per request: the wait is for the whole body
				var cancel context.CancelFunc
				ctx, cancel = context.WithTimeout(r.Context(), g.bodyWait)
				defer cancel()
			}
			if err := g.bodies.acquire(ctx, chunkSize); err != nil {
				return nil, held, http.StatusServiceUnavailable, fmt.Errorf("request body budget exhausted: %w", err)
			}
		}
		held += chunkSize
		c := g.chunks.Get().(*[]byte)
		chunks = append(chunks, c)
		n, err := io.ReadFull(r.Body, *c)
		total += n
		if err == io.EOF || err == io.ErrUnexpectedEOF {
			body = make([]byte, 0, total)
			for _, c := range chunks {
				body = append(body, (*c)[:min(chunkSize, total-len(body))]...)
			}
			return body, held, 0, nil
		}
		if err != nil {
			var maxErr *http.MaxBytesError
			if errors.As(err, &maxErr) {
				return nil, held, http.StatusRequestEntityTooLarge, err
			}
			return nil, held, http.StatusBadRequest, fmt.Errorf("read body: %w", err)
		}
	}
}

// chunkSize is the unit in which request bodies are read and budgeted.
const chunkSize = 32 << 10

// budget is a counting semaphore over bytes.
type budget struct {
	mu      sync.Mutex
	free    int64
	waiters int           // acquirers blocked on wake
	wake    chan struct{} // closed (and replaced) by a release while some wait
}

func newBudget(n int64) *budget { return &budget{free: n, wake: make(chan struct{})} }

// tryAcquire takes n bytes if they are free now.
func (b *budget) tryAcquire(n int64) bool {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.free >= n {
		b.free -= n
		return true
	}
	return false
}

func (b *budget) acquire(ctx context.Context, n int64) error {
	for {
		b.mu.Lock()
		if b.free >= n {
			b.free -= n
			b.mu.Unlock()
			return nil
		}
		wake := b.wake
		b.waiters++
		b.mu.Unlock()
		var err error
		select {
		case <-wake:
		case <-ctx.Done():
			err = ctx.Err()
		}
		b.mu.Lock()
		b.waiters--
		b.mu.Unlock()
		if err != nil {
			return err
		}
	}
}

func (b *budget) release(n int64) {
	if n == 0 {
		return
	}
	b.mu.Lock()
	b.free += n
	if b.waiters > 0 {
		close(b.wake)
		b.wake = make(chan struct{})
	}
	b.mu.Unlock()
}

// Invoke runs one function's entry on a raw event, as `make invoke` does.
func (g *Gateway) Invoke(ctx context.Context, fn string, payload []byte) ([]byte, error) {
	e := g.entries[fn]
	if e == nil {
		return nil, fmt.Errorf("gateway: unknown function %q", fn)
	}
	return e.Invoke(ctx, payload)
}

func gatewayError(w http.ResponseWriter, status int, msg string) int {
	b, _ := json.Marshal(map[string]string{"message": msg})
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("Content-Length", strconv.Itoa(len(b)))
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

// isTextType reports whether contentType is one of the types whose bodies
// API Gateway HTTP API hands to Lambda as text; every other body (and a
// body without a content type) arrives base64-encoded with isBase64Encoded
// set. textBody adds the second half of the rule.
func isTextType(contentType string) bool {
	if contentType == "application/json" { // the usual request's, without a parse
		return true
	}
	mt, _, err := mime.ParseMediaType(contentType)
	if err != nil {
		return false
	}
	switch {
	case strings.HasPrefix(mt, "text/"),
		mt == "application/json", mt == "application/javascript", mt == "application/xml",
		strings.HasSuffix(mt, "+json"), strings.HasSuffix(mt, "+xml"):
		return true
	}
	return false
}

// BuildEvent turns an HTTP request into the payload-format-2.0 event API
// Gateway sends for route: lower-cased headers with repeated values joined
// by commas, x-forwarded-for with the client's address appended, https as
// the forwarded protocol, cookies split out, query and path parameters, the
// request context, and the body as text or base64 by its content type.
func BuildEvent(r *http.Request, route routes.Route, params map[string]string, body []byte, now time.Time) events.APIGatewayV2HTTPRequest {
	return buildEvent(r, route.Key(), params, body, now, NewRequestID())
}

// buildEvent is BuildEvent with the route's key and the request id the
// gateway chose.
func buildEvent(r *http.Request, routeKey string, params map[string]string, body []byte, now time.Time, requestID string) events.APIGatewayV2HTTPRequest {
	headers := make(map[string]string, len(r.Header)+4)
	var cookies []string
	for k, vs := range r.Header {
		lk, ok := lowerHeaders[k]
		if !ok {
			lk = strings.ToLower(k)
		}
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
	if prior := headers["x-forwarded-for"]; prior != "" {
		headers["x-forwarded-for"] = prior + ", " + sourceIP
	} else {
		headers["x-forwarded-for"] = sourceIP
	}
	headers["x-forwarded-proto"] = "https"
	headers["x-forwarded-port"] = "443"
	if len(body) > 0 {
		headers["content-length"] = strconv.Itoa(len(body))
	}

	var query map[string]string
	if r.URL.RawQuery != "" {
		if q := r.URL.Query(); len(q) > 0 {
			query = make(map[string]string, len(q))
			for k, vs := range q {
				query[k] = strings.Join(vs, ",")
			}
		}
	}
	if len(params) == 0 {
		params = nil
	}

	e := events.APIGatewayV2HTTPRequest{
		Version:               "2.0",
		RouteKey:              routeKey,
		RawPath:               r.URL.EscapedPath(),
		RawQueryString:        r.URL.RawQuery,
		Cookies:               cookies,
		Headers:               headers,
		QueryStringParameters: query,
		PathParameters:        params,
		RequestContext: events.APIGatewayV2HTTPRequestContext{
			RouteKey:     routeKey,
			AccountID:    "000000000000",
			Stage:        "$default",
			RequestID:    requestID,
			APIID:        "local",
			DomainName:   r.Host,
			DomainPrefix: domainPrefix(r.Host),
			Time:         requestTime(now),
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
		if textBody(r.Header.Get("Content-Type"), body) {
			e.Body = string(body)
		} else {
			e.Body = base64.StdEncoding.EncodeToString(body)
			e.IsBase64Encoded = true
		}
	}
	return e
}

// textBody reports whether API Gateway passes body to Lambda as a string
// (isBase64Encoded false): its content type is a text type and the body is
// valid UTF-8. Payload format 2.0 base64-encodes "a binary payload"
// (https://docs.aws.amazon.com/apigateway/latest/developerguide/http-api-develop-integrations-lambda.html,
// the isBase64Encoded field), HTTP APIs infer which bodies are binary from
// the content-type header
// (https://aws.amazon.com/blogs/compute/handling-binary-data-using-amazon-api-gateway-http-apis/),
// and "a text payload is a UTF-8-encoded JSON string; a binary payload is
// anything other than a text payload"
// (https://docs.aws.amazon.com/apigateway/latest/developerguide/api-gateway-payload-encodings.html).
// A JSON string cannot carry bytes that are not UTF-8, so a text-typed body
// that is not UTF-8 is binary too: base64 hands the function the bytes the
// client sent. Putting it in the event as a string would turn each invalid
// byte into U+FFFD, so a decoder could not refuse it and a signed request
// would fail its content-digest instead.
func textBody(contentType string, body []byte) bool {
	return isTextType(contentType) && utf8.Valid(body)
}

// requestTimeLayout is the layout of requestContext.time, in UTC.
const requestTimeLayout = "02/Jan/2006:15:04:05 -0700"

// requestTime is now.UTC().Format(requestTimeLayout), written digit by
// digit: the layout parser costs more than the rest of the event's
// fields together. Years Format would write with other than four digits
// go to Format.
func requestTime(now time.Time) string {
	t := now.UTC()
	year, month, day := t.Date()
	if year < 1000 || year > 9999 {
		return t.Format(requestTimeLayout)
	}
	hour, minute, sec := t.Clock()
	two := func(b []byte, v int) { b[0], b[1] = byte('0'+v/10), byte('0'+v%10) }
	var b [26]byte // "02/Jan/2006:15:04:05 +0000"
	two(b[0:], day)
	b[2] = '/'
	copy(b[3:6], month.String()[:3])
	b[6] = '/'
	two(b[7:], year/100)
	two(b[9:], year%100)
	b[11] = ':'
	two(b[12:], hour)
	b[14] = ':'
	two(b[15:], minute)
	b[17] = ':'
	two(b[18:], sec)
	copy(b[20:], " +0000")
	return string(b[:])
}

// lowerHeaders spares the common header names a lower-casing copy per
// request; it is read-only.
var lowerHeaders = func() map[string]string {
	m := map[string]string{}
	for _, k := range []string{"Accept", "Accept-Encoding", "Accept-Language", "Authorization", "Cache-Control",
		"Connection", "Content-Digest", "Content-Length", "Content-Type", "Cookie", "Host", "Idempotency-Key",
		"Origin", "Referer", "Signature", "Signature-Input", "User-Agent", "X-Forwarded-For", "X-Request-Id"} {
		m[k] = strings.ToLower(k)
	}
	return m
}()

// domainPrefix is the first label of host, as API Gateway reports it.
func domainPrefix(host string) string {
	prefix, _, _ := strings.Cut(host, ".")
	return prefix
}

// decodeResponse reads a function's JSON answer, as API Gateway reads a
// Lambda response, and its body.
func decodeResponse(out []byte) (events.APIGatewayV2HTTPResponse, responseBody, error) {
	var resp events.APIGatewayV2HTTPResponse
	if err := json.Unmarshal(out, &resp); err != nil {
		return resp, responseBody{}, fmt.Errorf("response is not an API Gateway v2 response: %w", err)
	}
	if resp.StatusCode != 0 && (resp.StatusCode < 100 || resp.StatusCode > 599) {
		return resp, responseBody{}, fmt.Errorf("response status %d", resp.StatusCode)
	}
	if !resp.IsBase64Encoded {
		return resp, responseBody{text: resp.Body}, nil
	}
	bin, err := base64.StdEncoding.DecodeString(resp.Body)
	if err != nil {
		return resp, responseBody{}, fmt.Errorf("decode base64 body: %w", err)
	}
	return resp, responseBody{bin: bin, binary: true}, nil
}

// responseBody is the body a response carries: its text as the function
// gave it (written as it is, without a []byte copy), or the bytes its
// base64 decodes to.
type responseBody struct {
	text   string
	bin    []byte
	binary bool
}

func (b responseBody) len() int {
	if b.binary {
		return len(b.bin)
	}
	return len(b.text)
}

func (b responseBody) write(w io.Writer) error {
	var err error
	if b.binary {
		_, err = w.Write(b.bin)
	} else {
		_, err = io.WriteString(w, b.text)
	}
	return err
}

// writeResponse writes the status line and headers of a Lambda response as
// API Gateway would (single and multi-value headers, cookies as Set-Cookie)
// and returns the status; the caller writes the body.
func writeResponse(w http.ResponseWriter, resp events.APIGatewayV2HTTPResponse, body responseBody) int {
	h := w.Header()
	if len(resp.MultiValueHeaders) > 0 {
		for _, k := range slices.Sorted(maps.Keys(resp.MultiValueHeaders)) {
			for _, v := range resp.MultiValueHeaders[k] {
				h.Add(k, v)
			}
		}
	}
	// h.Set(k, v) for each header, with the one-value lists carved from
	// one allocation.
	vals := make([]string, len(resp.Headers)+1)
	i := 0
	for k, v := range resp.Headers {
		vals[i] = v
		h[textproto.CanonicalMIMEHeaderKey(k)] = vals[i : i+1 : i+1]
		i++
	}
	for _, c := range resp.Cookies {
		h.Add("Set-Cookie", c)
	}
	vals[i] = strconv.Itoa(body.len())
	h["Content-Length"] = vals[i : i+1 : i+1] // h.Set("Content-Length", …)
	status := statusOf(resp)
	w.WriteHeader(status)
	return status
}

// WriteResponse writes a Lambda response as API Gateway would: status,
// headers, cookies and the body decoded from base64 when flagged. A
// response API Gateway could not use is an error, and nothing is written.
func WriteResponse(w http.ResponseWriter, resp events.APIGatewayV2HTTPResponse) error {
	out, err := json.Marshal(resp)
	if err != nil {
		return err
	}
	resp, body, err := decodeResponse(out)
	if err != nil {
		return err
	}
	writeResponse(w, resp, body)
	return body.write(w)
}
