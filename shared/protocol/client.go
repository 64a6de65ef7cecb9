package protocol

import (
	"bytes"
	"context"
	crand "crypto/rand"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"net"
	"net/http"
	"strconv"
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

// Invoke POSTs req to endpoint. It retries on 5xx, 429, timeouts and
// connection errors, reusing one task id and honouring Retry-After, until
// MaxAttempts or ctx ends. A provider's error answer is returned as a
// *RemoteError together with the Result; a transport failure as a plain error.
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
		res     *Result
		lastErr error
	)
	for n := 1; n <= attempts; n++ {
		res, lastErr = c.attempt(ctx, endpoint, body, inv.taskID)
		if res != nil {
			res.Attempts = n
		}
		wait, retry := c.shouldRetry(ctx, res, lastErr, n)
		if !retry || n == attempts {
			break
		}
		t := time.NewTimer(wait)
		select {
		case <-ctx.Done():
			t.Stop()
			if lastErr == nil {
				lastErr = ctx.Err()
			}
			return res, fmt.Errorf("invoke %s: %w", endpoint, lastErr)
		case <-t.C:
		}
	}
	if lastErr != nil {
		return res, fmt.Errorf("invoke %s: %w", endpoint, lastErr)
	}
	if res.Status != http.StatusOK {
		re := &RemoteError{Status: res.Status}
		if res.Error != nil {
			re.Body = *res.Error
		}
		return res, re
	}
	return res, nil
}

func (c *Client) shouldRetry(ctx context.Context, res *Result, err error, n int) (time.Duration, bool) {
	if ctx.Err() != nil {
		return 0, false
	}
	if err != nil {
		var ne net.Error
		if errors.As(err, &ne) || errors.Is(err, context.DeadlineExceeded) || errors.Is(err, io.ErrUnexpectedEOF) ||
			errors.Is(err, io.EOF) || isConnError(err) {
			return c.backoff(n), true
		}
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

func isConnError(err error) bool {
	var oe *net.OpError
	return errors.As(err, &oe)
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

func (c *Client) attempt(ctx context.Context, endpoint string, body []byte, taskID string) (*Result, error) {
	timeout := c.AttemptTimeout
	if timeout <= 0 {
		timeout = 30 * time.Second
	}
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	hreq, err := http.NewRequestWithContext(ctx, http.MethodPost, endpoint, bytes.NewReader(body))
	if err != nil {
		return nil, fmt.Errorf("build request: %w", err)
	}
	hreq.Header.Set("Content-Type", "application/json")
	hreq.Header.Set("Accept", "application/json")
	hreq.Header.Set(TaskIDHeader, taskID)
	hc := c.HTTP
	if hc == nil {
		hc = http.DefaultClient
	}
	resp, err := hc.Do(hreq)
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	limit := c.MaxResponse
	if limit <= 0 {
		limit = 8 << 20
	}
	raw, err := io.ReadAll(io.LimitReader(resp.Body, limit))
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
	if resp.StatusCode == http.StatusOK {
		var r Response
		if err := json.Unmarshal(raw, &r); err == nil {
			res.Response = &r
		}
	} else {
		var e ErrorBody
		if err := json.Unmarshal(raw, &e); err == nil && e.Error != "" {
			res.Error = &e
		}
	}
	return res, nil
}
