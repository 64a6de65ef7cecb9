package main

import (
	"bytes"
	"context"
	"crypto/ed25519"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"time"

	"github.com/a2awire/a2awire/shared/auth"
	"github.com/a2awire/a2awire/shared/protocol"
	"github.com/a2awire/a2awire/shared/world"
)

// worldTimeout bounds one world request. A long poll waits at most
// pollWait on the server, so this leaves it room.
const worldTimeout = 30 * time.Second

// worldClient talks to the network's /v0/worlds surface. Its answers come in
// the world envelope, {"ok": true, "data": …} or {"ok": false, "error":
// {"code", "message"}}, unlike the registry's.
type worldClient struct {
	a      *app
	base   string
	client *http.Client
	// pub is the agent's key: nil on a public client.
	pub ed25519.PublicKey
}

// world returns a client for the public world routes (GET of a manifest).
func (a *app) world() (*worldClient, error) {
	base, err := a.base()
	if err != nil {
		return nil, err
	}
	return &worldClient{a: a, base: base, client: &http.Client{Timeout: worldTimeout}}, nil
}

// signedWorld returns a client that signs every request as the registry
// client does: the agent's key, Signature-Agent naming its key directory
// entry.
func (a *app) signedWorld() (*worldClient, error) {
	r, priv, err := a.signedRegistry()
	if err != nil {
		return nil, err
	}
	return &worldClient{a: a, base: r.base, client: &http.Client{Timeout: worldTimeout, Transport: r.client.Transport},
		pub: priv.Public().(ed25519.PublicKey)}, nil
}

// publicKey is the agent's key as the world routes take it in a body.
func (w *worldClient) publicKey() string { return base64.StdEncoding.EncodeToString(w.pub) }

// refusal is a world answer other than 2xx: the envelope's code and message
// when the server sent one, the HTTP status otherwise. It is not yet
// reported: the caller decides (events --follow waits out a 429 quietly).
type refusal struct {
	Status  int
	Code    string
	Message string
	// RetryAfter is the server's Retry-After, zero when it sent none.
	RetryAfter time.Duration
	what       string
}

// Error reads "CODE: message", the server's words, made safe for a terminal.
func (e *refusal) Error() string {
	if e.Code == "" {
		return escapeControls(e.Message, false)
	}
	return escapeControls(e.Code, false) + ": " + escapeControls(e.Message, false)
}

// retryable reports an answer worth waiting out: rate limited or busy.
func (e *refusal) retryable() bool {
	return e.Status == http.StatusTooManyRequests || e.Status == http.StatusServiceUnavailable
}

// call sends one request and returns the envelope's data on a 2xx answer
// with the status. A non-2xx answer is a *refusal; anything else (no
// answer, not the envelope) an error naming the request.
func (w *worldClient) call(ctx context.Context, method, path string, query url.Values, body any) (int, json.RawMessage, error) {
	u := w.base + path
	if len(query) > 0 {
		u += "?" + query.Encode()
	}
	what := method + " " + path
	var rd io.Reader
	if body != nil {
		b, err := json.Marshal(body)
		if err != nil {
			return 0, nil, fmt.Errorf("%s: encode request: %w", what, err)
		}
		rd = bytes.NewReader(b)
	}
	req, err := http.NewRequestWithContext(ctx, method, u, rd)
	if err != nil {
		return 0, nil, fmt.Errorf("%s: %w", what, err)
	}
	req.Header.Set("Accept", "application/json")
	if body != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	resp, err := w.client.Do(req)
	if err != nil {
		return 0, nil, err // *url.Error names the method and URL
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(io.LimitReader(resp.Body, maxResponse+1))
	if err != nil {
		return 0, nil, fmt.Errorf("%s: reading the answer: %w", what, err)
	}
	if len(b) > maxResponse {
		return 0, nil, fmt.Errorf("%s: the answer is larger than %d MiB", what, maxResponse>>20)
	}
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
			return 0, nil, fmt.Errorf("the answer to %s is not the world envelope {\"ok\": true, \"data\": …}: %s", what, escapeControls(clip(string(b), 200), false))
		}
		return resp.StatusCode, env.Data, nil
	}
	ref := &refusal{Status: resp.StatusCode, what: what, RetryAfter: retryAfter(resp.Header.Get("Retry-After"), time.Now())}
	if envErr == nil && env.Error != nil && env.Error.Code != "" {
		ref.Code, ref.Message = env.Error.Code, env.Error.Message
	} else {
		// Not the world envelope: API Gateway's own 503/500 say
		// {"message": …}; anything else is shown clipped.
		ref.Message = fmt.Sprintf("%d %s", resp.StatusCode, http.StatusText(resp.StatusCode))
		if s := strings.TrimSpace(string(b)); s != "" {
			ref.Message += ": " + clip(s, 200)
		}
	}
	return resp.StatusCode, nil, ref
}

// do is call with a refusal reported on stderr as "error: CODE: message",
// ending the command with exit 1.
func (w *worldClient) do(ctx context.Context, method, path string, query url.Values, body any) (int, json.RawMessage, error) {
	status, data, err := w.call(ctx, method, path, query, body)
	var ref *refusal
	if errors.As(err, &ref) {
		return status, nil, w.a.refused(ref)
	}
	return status, data, err
}

// refused reports ref on stderr and returns the exit-1 error.
func (a *app) refused(ref *refusal) error {
	msg := "error: " + ref.Error()
	if ref.RetryAfter > 0 {
		msg += fmt.Sprintf(" (retry after %s)", ref.RetryAfter)
	}
	fmt.Fprintln(a.stderr, msg)
	return failed(fmt.Errorf("%s: %w", ref.what, ref))
}

// retryAfter reads a Retry-After header: delay seconds or an HTTP date.
// Zero when absent or unreadable.
func retryAfter(v string, now time.Time) time.Duration {
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

// decodeData parses a world answer's data into v, naming the request when it
// is not the documented shape.
func decodeData(what string, data json.RawMessage, v any) error {
	if err := json.Unmarshal(data, v); err != nil {
		return fmt.Errorf("the answer to %s is not the documented JSON: %s", what, escapeControls(clip(string(data), 200), false))
	}
	return nil
}

// worldPath is the path of the world id (and of a route under it).
func worldPath(id string, sub ...string) string {
	p := "/v0/worlds/" + url.PathEscape(id)
	for _, s := range sub {
		p += "/" + s
	}
	return p
}

// checkWorld validates a world name as the server does (world.ValidID), so
// a typo is a usage error, not a round trip.
func checkWorld(id string) error {
	if !world.ValidID(id) {
		return usageErrorf("%s is not a world name: 1 to 63 lowercase letters, digits and '-', not starting with '-'", protocol.Quote(id))
	}
	return nil
}

// checkAgentID validates an awnId as the server does (world.ValidAWNID):
// "aw:sha256:" and 64 lowercase hex digits, as `awn whoami` and `awn
// agents` print it.
func checkAgentID(id string) error {
	if !world.ValidAWNID(id) {
		return usageErrorf("%s is not an agent id: %s followed by 64 lowercase hex digits (see 'awn agents <world>')", protocol.Quote(id), auth.AWNIDPrefix)
	}
	return nil
}

// compactJSON renders raw on one line for human output, made safe for a
// terminal; a JSON string is shown as its text when bare is true.
func compactJSON(raw json.RawMessage, bare bool) string {
	if len(raw) == 0 {
		return ""
	}
	if bare {
		var s string
		if json.Unmarshal(raw, &s) == nil {
			return escapeControls(s, false)
		}
	}
	var b bytes.Buffer
	if err := json.Compact(&b, raw); err != nil {
		return escapeControls(string(raw), false)
	}
	return escapeControls(b.String(), false)
}
