package awn

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"time"

	"github.com/a2awire/a2awire/shared/protocol"
)

// NewInvoker returns the buyer client of the invocation protocol
// (protocol.Client), unsigned: providers are invoked as the protocol says,
// without the agent's signature. Each invocation is tried up to
// maxAttempts times, each attempt within attemptTimeout; the protocol's
// task id makes the retries safe.
func NewInvoker(maxAttempts int, attemptTimeout time.Duration) *protocol.Client {
	return &protocol.Client{HTTP: &http.Client{}, MaxAttempts: maxAttempts, AttemptTimeout: attemptTimeout, MaxResponse: MaxResponse}
}

// PlainHTTP is an unsigned *http.Client with the given overall timeout
// (0: none), for tools that speak HTTP themselves, such as the
// conformance runner (conform.Runner).
func PlainHTTP(timeout time.Duration) *http.Client { return &http.Client{Timeout: timeout} }

// StatusLine is an HTTP status as "404 Not Found".
func StatusLine(code int) string { return fmt.Sprintf("%d %s", code, http.StatusText(code)) }

// Endpoint returns the invocation URL of target: a URL as given, or a
// registered agent's name looked up in the registry.
func (c *Client) Endpoint(ctx context.Context, name string) (string, error) {
	p, err := c.Agent(ctx, name)
	if err != nil {
		return "", err
	}
	u, perr := url.Parse(p.Endpoint)
	if perr != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		return "", fmt.Errorf("the registry lists %q with the endpoint %s, which is not an absolute http(s) URL", name, protocol.Quote(p.Endpoint))
	}
	return p.Endpoint, nil
}

// Reach sends one GET to endpoint (redirects not followed) and returns the
// transport error, if any: any HTTP answer at all means something is
// listening there.
func Reach(ctx context.Context, endpoint string, timeout time.Duration) error {
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, endpoint, nil)
	if err != nil {
		return err
	}
	hc := PlainHTTP(0)
	hc.CheckRedirect = func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }
	resp, err := hc.Do(req)
	if err != nil {
		var ue *url.Error
		if errors.As(err, &ue) {
			return ue.Err
		}
		return err
	}
	_, _ = io.Copy(io.Discard, io.LimitReader(resp.Body, 1<<16))
	return resp.Body.Close()
}
