package protocol

import (
	"bytes"
	"context"
	crand "crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"net"
	"net/http"
	"strconv"
	"strings"
	"syscall"
	"time"
)

// Client is a buyer: it invokes providers with retries that are safe because
// every attempt of one invocation carries the same task id.
type Client struct {
	// HTTP sends the requests (default http.DefaultClient).
	HTTP *http.Client
	// MaxAttempts bounds the attempts of one invocation (default 3).
	MaxAttempts int
	// AttemptTimeout bounds each attempt (default 30 s); the context bounds the whole.
	AttemptTimeout time.Duration
	// Backoff is the wait before attempt n+1 when the provider sent no
	// Retry-After (default: 200 ms doubling, with jitter, at most 5 s).
	Backoff func(attempt int) time.Duration
	// MaxResponse bounds the response body read (default 8 MiB).
	MaxResponse int64
}

// Result is what an invocation came back with.
type Result struct {
	// Status is the HTTP status of the last attempt.
	Status int
	Header http.Header
	// Body is the raw response body.
	Body []byte
	// Response is set on 200, Error on every other status with the error shape.
	Response *Response
	Error    *ErrorBody
	// TaskID is the id every attempt carried.
	TaskID   string
	Attempts int
	// Replayed reports that a stateful provider returned a stored response.
	Replayed bool
	// Truncated reports that the answer was longer than MaxResponse and
	// Body holds only its start.
	Truncated bool
}

// RemoteError is returned when the provider answered with an error status.
type RemoteError struct {
	Status int
	Body   ErrorBody
}

func (e *RemoteError) Error() string {
	return fmt.Sprintf("provider answered %d %s: %s", e.Status, e.Body.Error, e.Body.Message)
}

// InvokeOption adjusts one invocation.
type InvokeOption func(*invocation)

type invocation struct{ taskID string }

// WithTaskID sets the task id instead of a fresh random one.
func WithTaskID(id string) InvokeOption { return func(i *invocation) { i.taskID = id } }

// NewTaskID returns a random UUID (version 4).
func NewTaskID() string {
	var b [16]byte
	_, _ = crand.Read(b[:])
	b[6] = b[6]&0x0f | 0x40
	b[8] = b[8]&0x3f | 0x80
	return fmt.Sprintf("%x-%x-%x-%x-%x", b[0:4], b[4:6], b[6:8], b[8:10], b[10:16])
}

// ErrMalformedResponse is wrapped by the error Invoke returns when a
// provider answered 200 with a body that is not one strict JSON response
// object with an output object (trailing bytes, an error inside, no output).
// The provider may have acted, so it is not retried.
var ErrMalformedResponse = errors.New("the provider answered 200 with a body that is not a response")

// ErrResponseTooLarge is wrapped by the error Invoke returns when an answer
// was longer than MaxResponse; Result.Body then holds its first MaxResponse
// bytes and Result.Truncated is set.
var ErrResponseTooLarge = errors.New("the response is larger than the limit and was cut")

// Invoke POSTs req to endpoint. It retries 5xx, 429, attempt timeouts and
// failed or dropped connections, reusing one task id, until MaxAttempts or
// ctx ends; failures that cannot heal on retry (a bad URL, a TLS or
// certificate failure, a refused redirect) end it at once.
//
// Each attempt is bounded by AttemptTimeout and by a share of what is left
// of ctx's deadline, so a hung attempt still leaves time to retry. A
// Retry-After longer than what is left ends the invocation with the answer
// that asked for it rather than sleeping into the deadline: the last answer
// is what Invoke reports, never a bare "context deadline exceeded" when the
// provider did answer.
//
// Redirects: a 307 or 308 to the same origin (scheme, host and port) is
// followed with the body and task id; any other redirect is not followed —
// the body and task id never go to another origin, and a 301/302/303 would
// drop the body — and is returned as an error naming the Location.
//
// A provider's error answer is returned as a *RemoteError together with the
// Result; a transport failure as a plain error.
func (c *Client) Invoke(ctx context.Context, endpoint string, req Request, opts ...InvokeOption) (*Result, error) {
	inv := invocation{}
	for _, o := range opts {
		o(&inv)
	}
	if inv.taskID == "" {
		inv.taskID = NewTaskID()
	}
	if len(req.Input) == 0 {
		req.Input = json.RawMessage("{}")
	}
	body, err := json.Marshal(req)
	if err != nil {
		return nil, fmt.Errorf("invoke: encode request: %w", err)
	}
	attempts := c.MaxAttempts
	if attempts <= 0 {
		attempts = 3
	}
	var (
		res, last *Result // this attempt's, and the last that got an answer
		lastErr   error
	)
	for n := 1; n <= attempts; n++ {
		res, lastErr = c.attempt(ctx, endpoint, body, inv.taskID, attempts-n+1)
		if res != nil {
			res.Attempts = n
			last = res
		}
		wait, retry := c.shouldRetry(ctx, res, lastErr, n)
		if !retry || n == attempts {
			break
		}
		if dl, ok := ctx.Deadline(); ok && time.Until(dl) <= wait {
			// Sleeping would end at or past the deadline: report what the
			// provider said instead.
			break
		}
		t := time.NewTimer(wait)
		select {
		case <-ctx.Done():
			t.Stop()
			return c.finish(endpoint, last, lastErr, ctx.Err())
		case <-t.C:
		}
	}
	return c.finish(endpoint, last, lastErr, nil)
}

// finish turns the last outcome into Invoke's answer: the last answer the
// provider gave wins over a later transport failure or the context's end.
func (c *Client) finish(endpoint string, last *Result, lastErr, ctxErr error) (*Result, error) {
	if last == nil {
		if lastErr == nil {
			lastErr = ctxErr
		}
		return nil, fmt.Errorf("invoke %s: %w", endpoint, lastErr)
	}
	if last.Truncated {
		return last, fmt.Errorf("invoke %s: %w (%d bytes kept)", endpoint, ErrResponseTooLarge, len(last.Body))
	}
	switch {
	case last.Status == http.StatusOK && last.Response == nil:
		return last, fmt.Errorf("invoke %s: %w", endpoint, ErrMalformedResponse)
	case last.Status == http.StatusOK:
		return last, nil
	case last.Status >= 300 && last.Status < 400:
		return last, fmt.Errorf("invoke %s: answered %d %s redirecting to %s, which is not followed: only a 307 or 308 to the same origin is",
			endpoint, last.Status, http.StatusText(last.Status), Quote(last.Header.Get("Location")))
	}
	re := &RemoteError{Status: last.Status}
	if last.Error != nil {
		re.Body = *last.Error
	}
	return last, re
}

func (c *Client) shouldRetry(ctx context.Context, res *Result, err error, n int) (time.Duration, bool) {
	if ctx.Err() != nil {
		return 0, false
	}
	if err != nil {
		if transient(err) {
			return c.backoff(n), true
		}
		return 0, false
	}
	if res.Truncated {
		return 0, false
	}
	if res.Status >= 500 || res.Status == http.StatusTooManyRequests {
		if d, ok := parseRetryAfter(res.Header.Get("Retry-After"), time.Now()); ok {
			return d, true
		}
		return c.backoff(n), true
	}
	return 0, false
}

// transient reports whether a transport failure may heal on retry: an
// attempt that timed out, a connection that was refused, reset or dropped.
// A malformed URL, an unsupported scheme, TLS and certificate failures
// are the same on every attempt.
func transient(err error) bool {
	var (
		cv  *tls.CertificateVerificationError
		rh  tls.RecordHeaderError
		ua  x509.UnknownAuthorityError
		hn  x509.HostnameError
		ci  x509.CertificateInvalidError
		al  tls.AlertError
		ech *tls.ECHRejectionError
	)
	switch {
	case errors.As(err, &cv), errors.As(err, &rh), errors.As(err, &ua), errors.As(err, &hn),
		errors.As(err, &ci), errors.As(err, &al), errors.As(err, &ech):
		return false
	case errors.Is(err, context.DeadlineExceeded), errors.Is(err, io.ErrUnexpectedEOF), errors.Is(err, io.EOF),
		errors.Is(err, syscall.ECONNREFUSED), errors.Is(err, syscall.ECONNRESET), errors.Is(err, syscall.EPIPE):
		return true
	}
	var ne net.Error
	if errors.As(err, &ne) && ne.Timeout() {
		return true
	}
	var oe *net.OpError
	return errors.As(err, &oe) && !strings.Contains(oe.Err.Error(), "tls:")
}

func (c *Client) backoff(n int) time.Duration {
	if c.Backoff != nil {
		return c.Backoff(n)
	}
	d := 200 * time.Millisecond << (n - 1)
	d = min(d, 5*time.Second)
	return d/2 + rand.N(d/2+1)
}

// parseRetryAfter reads delta-seconds or an HTTP date.
func parseRetryAfter(v string, now time.Time) (time.Duration, bool) {
	if v == "" {
		return 0, false
	}
	if s, err := strconv.Atoi(v); err == nil && s >= 0 {
		return time.Duration(s) * time.Second, true
	}
	if t, err := http.ParseTime(v); err == nil {
		return max(t.Sub(now), 0), true
	}
	return 0, false
}

// attemptTimeout is the bound of one attempt when left attempts remain:
// AttemptTimeout (default 30 s), and at most an equal share of the time left
// before ctx's deadline, so that a hung attempt leaves room for the others.
func (c *Client) attemptTimeout(ctx context.Context, left int) time.Duration {
	timeout := c.AttemptTimeout
	if timeout <= 0 {
		timeout = 30 * time.Second
	}
	if dl, ok := ctx.Deadline(); ok && left > 1 {
		timeout = min(timeout, time.Until(dl)/time.Duration(left))
	}
	return timeout
}

// sameOriginRedirects follows a redirect only when it keeps the method (307,
// 308, so the body is re-sent) and the origin of the first request;
// anything else is handed back as the answer.
func sameOriginRedirects(next func(*http.Request, []*http.Request) error) func(*http.Request, []*http.Request) error {
	return func(req *http.Request, via []*http.Request) error {
		first := via[0]
		if req.Method != first.Method || req.URL.Scheme != first.URL.Scheme || req.URL.Host != first.URL.Host ||
			req.Response == nil || (req.Response.StatusCode != http.StatusTemporaryRedirect && req.Response.StatusCode != http.StatusPermanentRedirect) {
			return http.ErrUseLastResponse
		}
		if len(via) >= 5 {
			return errors.New("stopped after 5 redirects")
		}
		if next != nil {
			return next(req, via)
		}
		return nil
	}
}

func (c *Client) attempt(ctx context.Context, endpoint string, body []byte, taskID string, left int) (*Result, error) {
	ctx, cancel := context.WithTimeout(ctx, c.attemptTimeout(ctx, left))
	defer cancel()
	hreq, err := http.NewRequestWithContext(ctx, http.MethodPost, endpoint, bytes.NewReader(body))
	if err != nil {
		return nil, fmt.Errorf("build request: %w", err)
	}
	hreq.Header.Set("Content-Type", "application/json")
	hreq.Header.Set("Accept", "application/json")
	hreq.Header.Set(TaskIDHeader, taskID)
	hc := http.DefaultClient
	if c.HTTP != nil {
		hc = c.HTTP
	}
	// A copy shares the caller's transport (and its connections); only the
	// redirect policy is the protocol's.
	policy := *hc
	policy.CheckRedirect = sameOriginRedirects(hc.CheckRedirect)
	resp, err := policy.Do(hreq)
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	limit := c.MaxResponse
	if limit <= 0 {
		limit = 8 << 20
	}
	raw, err := io.ReadAll(io.LimitReader(resp.Body, limit+1))
	if err != nil {
		return nil, fmt.Errorf("read response: %w", err)
	}
	res := &Result{
		Status:   resp.StatusCode,
		Header:   resp.Header,
		Body:     raw,
		TaskID:   taskID,
		Replayed: resp.Header.Get(ReplayedHeader) == "true",
	}
	if int64(len(raw)) > limit {
		res.Body, res.Truncated = raw[:limit], true
		return res, nil
	}
	if resp.StatusCode == http.StatusOK {
		res.Response = decodeResponse(raw)
	} else {
		var e ErrorBody
		if err := json.Unmarshal(raw, &e); err == nil && e.Error != "" {
			res.Error = &e
		}
	}
	return res, nil
}

// decodeResponse reads a 200 body as the protocol's response: one strict
// JSON object, with an output object and no error field. Anything else is
// nil, which Invoke reports as ErrMalformedResponse.
func decodeResponse(raw []byte) *Response {
	if CheckJSON(raw) != nil {
		return nil
	}
	var top map[string]json.RawMessage
	if json.Unmarshal(raw, &top) != nil || top == nil {
		return nil
	}
	if _, ok := top["error"]; ok {
		return nil
	}
	if firstByte(top["output"]) != '{' {
		return nil
	}
	var r Response
	if json.Unmarshal(raw, &r) != nil {
		return nil
	}
	return &r
}
