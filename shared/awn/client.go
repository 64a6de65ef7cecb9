package awn

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"time"

	"github.com/a2awire/a2awire/shared/auth"
	"github.com/a2awire/a2awire/shared/protocol"
)

// DefaultURL is where `go run ./local` (make local) listens.
const DefaultURL = "http://127.0.0.1:8080"

// MaxResponse bounds any answer the client reads (8 MiB, room for a
// provider's output): a client must not buffer whatever a misbehaving
// server sends.
const MaxResponse = 8 << 20

// requestTimeout bounds one request. A long poll waits at most PollWait on
// the server, so this leaves it room.
const requestTimeout = 30 * time.Second

// Retry pacing: without a Retry-After, a refused or failed safe request is
// sent again after firstBackoff, doubling up to maxBackoff.
const (
	firstBackoff = time.Second
	maxBackoff   = 30 * time.Second
)

// DefaultRetries is how many times a client built by New sends a safe
// request again after a 429, a 503 or a broken connection.
const DefaultRetries = 3

// Client talks to one A2AWire network. A Client with an identity
// (WithIdentity) signs every request with it (AWN-Ed25519, RFC 9421, the
// Signature-Agent header naming its entry in the network's key directory);
// one without reads the public routes only. A Client is safe for
// concurrent use.
type Client struct {
	base string
	// hc sends ordinary requests (with the signing transport when there
	// is an identity); stream has no overall timeout, for the event stream.
	hc, stream *http.Client
	id         *Identity
	retries    int
	sleep      func(ctx context.Context, d time.Duration) error
	now        func() time.Time
	transport  http.RoundTripper
}

// Option configures a Client built by New.
type Option func(*Client)

// WithIdentity signs every request with id.
func WithIdentity(id Identity) Option { return func(c *Client) { c.id = &id } }

// WithTransport sends requests through rt (default http.DefaultTransport):
// for proxies, custom TLS or tests.
func WithTransport(rt http.RoundTripper) Option { return func(c *Client) { c.transport = rt } }

// WithRetries sets how many times a safe request is sent again after a
// 429, a 503 or a broken connection (default DefaultRetries; 0 never
// retries). Only requests the server treats as safe to repeat are retried:
// reads (GET), and the signed writes the network makes idempotent — Join
// (the same membership), SetPresence and Ban (the same ban). Other writes
// are not: a retried send would be a second message, a retried unban a
// refusal.
func WithRetries(n int) Option { return func(c *Client) { c.retries = max(0, n) } }

// WithSleep replaces how the client waits between retries and polls:
// tests pass one that records the waits rather than taking them. It must
// return ctx's error when ctx ends first.
func WithSleep(sleep func(ctx context.Context, d time.Duration) error) Option {
	return func(c *Client) { c.sleep = sleep }
}

// New returns a client of the network at baseURL, an absolute http(s) URL
// such as DefaultURL.
func New(baseURL string, opts ...Option) (*Client, error) {
	u, err := url.Parse(baseURL)
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		return nil, &UsageError{Msg: fmt.Sprintf("%q is not an absolute http(s) URL", baseURL)}
	}
	c := &Client{base: strings.TrimRight(baseURL, "/"), retries: DefaultRetries, sleep: Sleep, now: time.Now}
	for _, o := range opts {
		o(c)
	}
	rt := c.transport
	if rt == nil {
		rt = http.DefaultTransport
	}
	if c.id != nil {
		s, err := auth.NewSigner(c.id.Key, auth.WithSignatureAgent(c.base+"/api/v1/keys/"+c.id.KeyID()))
		if err != nil {
			return nil, fmt.Errorf("awn: signer: %w", err)
		}
		rt = &auth.Transport{Signer: s, Base: rt}
	}
	c.hc = &http.Client{Timeout: requestTimeout, Transport: rt}
	c.stream = &http.Client{Transport: rt}
	return c, nil
}

// BaseURL is the network's URL, without a trailing slash.
func (c *Client) BaseURL() string { return c.base }

// Identity is the client's identity; ok is false on a public client.
func (c *Client) Identity() (id Identity, ok bool) {
	if c.id == nil {
		return Identity{}, false
	}
	return *c.id, true
}

// signed returns the identity, or ErrNoIdentity for a route that needs one.
func (c *Client) signed(op string) (*Identity, error) {
	if c.id == nil {
		return nil, fmt.Errorf("%s: %w", op, ErrNoIdentity)
	}
	return c.id, nil
}

// ErrNoIdentity is returned by the signed routes of a client built without
// WithIdentity.
var ErrNoIdentity = errors.New("awn: this route is signed and the client has no identity")

// UsageError is a request the client refuses before sending: a bad URL, a
// malformed name or id. Msg says what is wrong in words.
type UsageError struct {
	Msg string // what is wrong, in words
}

// Error is the message.
func (e *UsageError) Error() string { return e.Msg }

// Surface names which error envelope a route answers with: the registry's
// and escrow's {"error": code, "message"} or the worlds'
// {"ok": false, "error": {"code", "message"}}.
type Surface int

// The two envelopes.
const (
	RegistrySurface Surface = iota
	WorldSurface
)

// Error is the server's refusal of a request: any answer outside 2xx.
// Code is the server's error code (protocol.Code on the registry and escrow
// routes, such as "name_taken"; upper case on the world routes, such as
// "NOT_JOINED"); it is empty when the answer was not the route's error
// envelope (a proxy's 502, API Gateway's own 503), and Message then reads
// "503 Service Unavailable: <the body, clipped>". Compare codes with
// errors.As and the Code field, or IsCode.
type Error struct {
	// Method and Path name the request ("GET", "/v0/worlds/lobby/events").
	Method, Path string
	Surface      Surface // which envelope the route answers with
	Status       int     // the HTTP status
	Code         string  // the server's error code, "" when it sent none
	Message      string  // the server's message, or the status line and body
	// Details are the registry's per-field details, when it sent any.
	Details []protocol.Detail
	// RetryAfter is the server's Retry-After, zero when it sent none.
	RetryAfter time.Duration
}

// Error reads "CODE: message", the server's words, or the status line.
func (e *Error) Error() string {
	if e.Code == "" {
		return e.Message
	}
	return e.Code + ": " + e.Message
}

// Temporary reports an answer worth waiting out and asking again: rate
// limited (429) or busy (503).
func (e *Error) Temporary() bool {
	return e.Status == http.StatusTooManyRequests || e.Status == http.StatusServiceUnavailable
}

// IsCode reports whether err is (or wraps) an *Error with code, compared
// without regard to case (the world routes upper-case their codes).
func IsCode(err error, code string) bool {
	var e *Error
	return errors.As(err, &e) && strings.EqualFold(e.Code, code)
}

// ShapeError is a 2xx answer that is not the documented JSON (a proxy's
// page, a different server at the URL).
type ShapeError struct {
	Method, Path string  // the request
	Surface      Surface // which envelope the route answers with
	// NoEnvelope: a world route's 2xx answer was not {"ok": true, "data": …}.
	NoEnvelope bool
	// Body is the start of what the server sent.
	Body string
}

// Error names the request and quotes the start of the answer.
func (e *ShapeError) Error() string {
	if e.NoEnvelope {
		return fmt.Sprintf("the answer to %s %s is not the world envelope {\"ok\": true, \"data\": …}: %s", e.Method, e.Path, e.Body)
	}
	if e.Surface == RegistrySurface {
		return fmt.Sprintf("the registry's answer to %s %s is not the documented JSON: %s", e.Method, e.Path, e.Body)
	}
	return fmt.Sprintf("the answer to %s %s is not the documented JSON: %s", e.Method, e.Path, e.Body)
}

// Reply is a 2xx answer: its status and its JSON (on the world routes the
// envelope's data, on the others the whole body). Raw is what the server
// sent, so that fields this package does not know survive.
type Reply struct {
	Status int             // the HTTP status, 200 or 201
	Raw    json.RawMessage // the JSON, as sent
}

// Created reports a 201: the request made something new (a world, a
// membership, a registration) rather than updating it.
func (r Reply) Created() bool { return r.Status == http.StatusCreated }

// request is one call to the network.
type request struct {
	method, path string
	query        url.Values
	body         any
	surface      Surface
	// base overrides the client's URL (the stream's own origin).
	base string
	// idempotent marks a write the server makes safe to repeat (a join
	// answers the same membership, a ban the same ban): it is retried as
	// a read is. Each attempt is signed afresh (a new nonce).
	idempotent bool
}

// do sends r, retrying it when it is safe (a GET) and the failure is
// temporary, and returns the 2xx answer. A refusal is an *Error.
func (c *Client) do(ctx context.Context, r request) (Reply, error) {
	backoff := firstBackoff
	for attempt := 0; ; attempt++ {
		rep, err := c.once(ctx, r)
		if err == nil || (r.method != http.MethodGet && !r.idempotent) || attempt >= c.retries || ctx.Err() != nil {
			return rep, err
		}
		var e *Error
		wait := backoff
		switch {
		case errors.As(err, &e) && e.Temporary():
			if e.RetryAfter > 0 {
				wait = e.RetryAfter
			}
		case errors.As(err, &e), isShape(err):
			return rep, err
		}
		backoff = min(2*backoff, maxBackoff)
		if c.sleep(ctx, wait) != nil {
			return rep, err
		}
	}
}

func isShape(err error) bool {
	var s *ShapeError
	return errors.As(err, &s)
}

// once sends r one time.
func (c *Client) once(ctx context.Context, r request) (Reply, error) {
	base := c.base
	if r.base != "" {
		base = strings.TrimRight(r.base, "/")
	}
	u := base + r.path
	if len(r.query) > 0 {
		u += "?" + r.query.Encode()
	}
	what := r.method + " " + r.path
	var rd io.Reader
	if r.body != nil {
		b, err := json.Marshal(r.body)
		if err != nil {
			return Reply{}, fmt.Errorf("%s: encode request: %w", what, err)
		}
		rd = bytes.NewReader(b)
	}
	req, err := http.NewRequestWithContext(ctx, r.method, u, rd)
	if err != nil {
		return Reply{}, fmt.Errorf("%s: %w", what, err)
	}
	req.Header.Set("Accept", "application/json")
	if r.body != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	resp, err := c.hc.Do(req)
	if err != nil {
		return Reply{}, err // *url.Error names the method and URL
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(io.LimitReader(resp.Body, MaxResponse+1))
	if err != nil {
		return Reply{}, fmt.Errorf("%s: reading the answer: %w", what, err)
	}
	if len(b) > MaxResponse {
		return Reply{}, fmt.Errorf("%s: the answer is larger than %d MiB", what, MaxResponse>>20)
	}
	if r.surface == WorldSurface {
		return c.worldAnswer(r, resp, b)
	}
	if resp.StatusCode/100 == 2 {
		return Reply{Status: resp.StatusCode, Raw: b}, nil
	}
	e := c.refusal(r, resp, b)
	var body protocol.ErrorBody
	if json.Unmarshal(b, &body) == nil && body.Error != "" {
		e.Code, e.Message, e.Details = string(body.Error), body.Message, body.Details
	}
	return Reply{Status: resp.StatusCode}, e
}

// worldAnswer reads the world envelope.
func (c *Client) worldAnswer(r request, resp *http.Response, b []byte) (Reply, error) {
	var env struct {
		OK    bool            `json:"ok"`
		Data  json.RawMessage `json:"data"`
		Error *struct {
			Code    string `json:"code"`
			Message string `json:"message"`
		} `json:"error"`
	}
	envErr := json.Unmarshal(b, &env)
	if resp.StatusCode/100 == 2 {
		if envErr != nil || !env.OK {
			return Reply{}, &ShapeError{Method: r.method, Path: r.path, Surface: r.surface, NoEnvelope: true, Body: Clip(string(b), 200)}
		}
		return Reply{Status: resp.StatusCode, Raw: env.Data}, nil
	}
	e := c.refusal(r, resp, b)
	if envErr == nil && env.Error != nil && env.Error.Code != "" {
		e.Code, e.Message = env.Error.Code, env.Error.Message
	}
	return Reply{Status: resp.StatusCode}, e
}

// refusal is the *Error of a non-2xx answer before its envelope is read:
// the status line and the body, clipped.
func (c *Client) refusal(r request, resp *http.Response, b []byte) *Error {
	e := &Error{Method: r.method, Path: r.path, Surface: r.surface, Status: resp.StatusCode,
		RetryAfter: RetryAfter(resp.Header.Get("Retry-After"), c.now())}
	e.Message = fmt.Sprintf("%d %s", resp.StatusCode, http.StatusText(resp.StatusCode))
	if s := strings.TrimSpace(string(b)); s != "" {
		e.Message += ": " + Clip(s, 200)
	}
	return e
}

// decode parses a reply's JSON into v.
func decode(r request, raw json.RawMessage, v any) error {
	if err := json.Unmarshal(raw, v); err != nil {
		return &ShapeError{Method: r.method, Path: r.path, Surface: r.surface, Body: Clip(string(raw), 200)}
	}
	return nil
}

// call is do then decode into v (nil: no decoding).
func (c *Client) call(ctx context.Context, r request, v any) (Reply, error) {
	rep, err := c.do(ctx, r)
	if err != nil || v == nil {
		return rep, err
	}
	return rep, decode(r, rep.Raw, v)
}

// RetryAfter reads a Retry-After header: delay seconds or an HTTP date
// (relative to now). Zero when absent or unreadable.
func RetryAfter(v string, now time.Time) time.Duration {
	v = strings.TrimSpace(v)
	if v == "" {
		return 0
	}
	if s, err := strconv.Atoi(v); err == nil {
		if s < 0 {
			return 0
		}
		return time.Duration(s) * time.Second
	}
	if t, err := http.ParseTime(v); err == nil && t.After(now) {
		return t.Sub(now)
	}
	return 0
}

// Sleep waits d, or until ctx ends (then it returns ctx's error): the
// client's default wait.
func Sleep(ctx context.Context, d time.Duration) error {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return ctx.Err()
	case <-t.C:
		return nil
	}
}

// Clip shortens s to at most n runes, marking the cut with "…".
func Clip(s string, n int) string {
	if r := []rune(s); len(r) > n {
		return string(r[:n]) + "…"
	}
	return s
}

// IsUnreachable reports whether err is a failure to connect at all (no
// server listening, a name that does not resolve, a network down): the
// request never reached a server, which a person fixes by starting one or
// correcting the URL.
func IsUnreachable(err error) bool {
	var op *net.OpError
	if errors.As(err, &op) && op.Op == "dial" {
		return true
	}
	var dns *net.DNSError
	return errors.As(err, &dns)
}
