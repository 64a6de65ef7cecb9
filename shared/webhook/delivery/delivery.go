// Package delivery makes one webhook delivery attempt: it builds
// the body, signs it afresh with Standard Webhooks' v1 and v1a, POSTs it
// through the caller's (SSRF-safe, shared/egress) client within 5 s, and
// reads what the receiver answered — its status, how long it took, a
// Retry-After, a 410, and an action it asks the world to take. Scheduling,
// retries and stats belong to shared/webhook; this package keeps no state.
package delivery

import (
	"bytes"
	"context"
	"crypto/ed25519"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"strconv"
	"strings"
	"time"

	"github.com/a2awire/a2awire/shared/ident"
	"github.com/a2awire/a2awire/shared/protocol"
	"github.com/a2awire/a2awire/shared/webhook/signature"
)

// AttemptTimeout bounds one attempt, connection to last byte read.
const AttemptTimeout = 5 * time.Second

// MaxResponseBytes is how much of a receiver's answer is read; a longer
// answer is cut there and carries no action.
const MaxResponseBytes = 64 << 10

// MaxRetryAfter caps a receiver's Retry-After, so a hostile value cannot
// park a delivery beyond the retry schedule's own longest wait.
const MaxRetryAfter = 24 * time.Hour

// UserAgent names the network's deliveries.
const UserAgent = "a2awire-webhook/1"

// Delivery is one event for one receiver.
type Delivery struct {
	WorldID string
	EventID string // also the webhook-id: the same on every retry, so receivers can deduplicate
	Type    string // the event type, "event" in the body
	// Payload is the event's data, a JSON object; empty means {}.
	Payload json.RawMessage
	// Timestamp is when the event happened ("timestamp" in the body).
	Timestamp time.Time
	// SignedAt is the webhook-timestamp of this attempt; zero means now.
	// Each retry is signed afresh, so receivers' tolerance holds.
	SignedAt time.Time
}

// Body is the JSON a receiver gets.
type Body struct {
	WorldID   string          `json:"worldId"`
	EventID   string          `json:"eventId"`
	Event     string          `json:"event"`
	Payload   json.RawMessage `json:"payload"`
	Timestamp string          `json:"timestamp"`
}

// Action is what a receiver's 2xx answer asks the world to do as its agent:
// {"action": "...", "params": {...}}. Params is nil when the answer had none.
type Action struct {
	Action string          `json:"action"`
	Params json.RawMessage `json:"params,omitempty"`
}

// Result is how an attempt went.
type Result struct {
	// Status is the receiver's HTTP status; 0 when none came back.
	Status int
	// Latency is from sending the request to the end of reading the answer.
	Latency time.Duration
	// RetryAfter is the receiver's Retry-After on a 429 or 503 (capped at
	// MaxRetryAfter); zero otherwise.
	RetryAfter time.Duration
	// Gone is true on a 410: the receiver asks for the webhook to be disabled.
	Gone bool
	// Action is the receiver's answer when a 2xx body was exactly an action;
	// nil otherwise.
	Action *Action
	// Ignored says why a 2xx answer with a body (not only spaces) was not
	// taken as an action — the dispatcher logs it, so a receiver whose
	// answers are dropped can be told why; "" when Action is set or the
	// body was empty.
	Ignored string
	// Err is nil when the receiver answered 2xx; else why not: a request
	// that could not be built, a refused address (errors.Is egress.ErrBlocked),
	// a network error or timeout, or a *StatusError.
	Err error
}

// OK reports a delivered attempt (2xx).
func (r Result) OK() bool { return r.Err == nil }

// StatusError is a non-2xx answer (3xx included: redirects are not followed).
type StatusError struct{ Status int }

func (e *StatusError) Error() string {
	return "delivery: receiver answered " + strconv.Itoa(e.Status)
}

// BuildBody returns the JSON body of d.
func BuildBody(d Delivery) ([]byte, error) {
	payload := d.Payload
	if len(bytes.TrimSpace(payload)) == 0 {
		payload = json.RawMessage("{}")
	}
	b, err := json.Marshal(Body{
		WorldID:   d.WorldID,
		EventID:   d.EventID,
		Event:     d.Type,
		Payload:   payload,
		Timestamp: d.Timestamp.UTC().Format(time.RFC3339Nano),
	})
	if err != nil {
		return nil, fmt.Errorf("delivery: body of event %s: %w", d.EventID, err)
	}
	return b, nil
}

// Doer sends a request: an *http.Client (egress.NewClient's, which refuses
// private addresses). The dispatcher holds one without importing net/http.
type Doer interface {
	Do(req *http.Request) (*http.Response, error)
}

// Deliver POSTs d to url through client, signed with secret (v1) and
// networkKey (v1a, left out when nil), within AttemptTimeout (or ctx's
// earlier deadline: a ping probe passes 2 s). It never panics on what a
// receiver sends and reads at most MaxResponseBytes of it.
func Deliver(ctx context.Context, client Doer, url string, d Delivery, secret string, networkKey ed25519.PrivateKey) Result {
	body, err := BuildBody(d)
	if err != nil {
		return Result{Err: err}
	}
	signedAt := d.SignedAt
	if signedAt.IsZero() {
		signedAt = time.Now()
	}
	h, err := signature.Headers(d.EventID, signedAt, body, secret, networkKey)
	if err != nil {
		return Result{Err: fmt.Errorf("delivery: sign event %s: %w", d.EventID, err)}
	}
	ctx, cancel := context.WithTimeout(ctx, AttemptTimeout)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, url, bytes.NewReader(body))
	if err != nil {
		return Result{Err: fmt.Errorf("delivery: request to webhook: %w", err)}
	}
	req.Header = h
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("User-Agent", UserAgent)
	req.Header.Set(signature.HeaderWorldID, d.WorldID)
	req.Header.Set(signature.HeaderEventID, d.EventID)

	start := time.Now()
	resp, err := client.Do(req)
	if err != nil {
		return Result{Latency: time.Since(start), Err: fmt.Errorf("delivery: post event %s: %w", d.EventID, err)}
	}
	defer resp.Body.Close()
	answer, readErr := io.ReadAll(io.LimitReader(resp.Body, MaxResponseBytes+1))
	r := Result{Status: resp.StatusCode, Latency: time.Since(start)}
	switch {
	case resp.StatusCode >= 200 && resp.StatusCode < 300:
		// Delivered once the status is in, even if the answer's body then
		// failed: the event reached the receiver; only the action is lost.
		switch {
		case readErr != nil:
			if len(bytes.TrimSpace(answer)) > 0 {
				r.Ignored = "the answer's body could not be read whole"
			}
		case len(answer) > MaxResponseBytes:
			r.Ignored = fmt.Sprintf("the answer is longer than %d bytes", MaxResponseBytes)
		default:
			r.Action, r.Ignored = parseAction(answer)
		}
		return r
	case resp.StatusCode == http.StatusGone:
		r.Gone = true
	case resp.StatusCode == http.StatusTooManyRequests || resp.StatusCode == http.StatusServiceUnavailable:
		r.RetryAfter = ParseRetryAfter(resp.Header.Get("Retry-After"), time.Now())
	}
	r.Err = &StatusError{Status: resp.StatusCode}
	return r
}

// actionName is the network's one action-name rule (ident.ActionName),
// the rule of world manifests and POST …/actions:
// ^[a-z0-9][a-z0-9._-]{0,63}$. The world validates again against its
// manifest when the action is forwarded.
var actionName = ident.ActionName

// parseAction reads a 2xx answer strictly: one JSON object, valid UTF-8, no
// repeated key, only "action" (a valid name) and "params" (an object, if
// present). Anything else — an empty body, "ok", extra keys — is no action;
// for a body that is not empty, why not.
func parseAction(b []byte) (*Action, string) {
	t := bytes.TrimSpace(b)
	if len(t) == 0 {
		return nil, ""
	}
	if t[0] != '{' {
		return nil, "the answer is not a JSON object"
	}
	if err := protocol.CheckJSON(t); err != nil {
		return nil, "the answer is not one JSON object in UTF-8 without repeated keys"
	}
	// A map keeps the keys exactly as sent (encoding/json would match struct
	// fields case-insensitively); CheckJSON has refused repeated keys.
	var m map[string]json.RawMessage
	if err := json.Unmarshal(t, &m); err != nil {
		return nil, "the answer is not one JSON object"
	}
	var a Action
	for k, v := range m {
		switch k {
		case "action":
			if json.Unmarshal(v, &a.Action) != nil {
				return nil, `"action" is not a string`
			}
			if !actionName.Match(a.Action) {
				return nil, fmt.Sprintf(`"action" %.80q is not an action name: 1–64 characters of a-z, 0-9, '.', '_' and '-', starting with a letter or digit`, a.Action)
			}
		case "params":
			if len(v) == 0 || v[0] != '{' {
				return nil, `"params" is not a JSON object`
			}
			a.Params = v
		default:
			return nil, fmt.Sprintf(`the answer has a key other than "action" and "params": %.40q`, k)
		}
	}
	if a.Action == "" {
		return nil, `the answer has no "action"`
	}
	return &a, ""
}

// ParseRetryAfter reads a Retry-After value — delay seconds or an HTTP date
// — as a wait from now, clamped to [0, MaxRetryAfter]; zero when absent or
// malformed.
func ParseRetryAfter(v string, now time.Time) time.Duration {
	v = strings.TrimSpace(v)
	if v == "" {
		return 0
	}
	var d time.Duration
	if n, err := strconv.ParseInt(v, 10, 64); err == nil {
		if n <= 0 {
			return 0
		}
		if n > int64(MaxRetryAfter/time.Second) {
			return MaxRetryAfter
		}
		d = time.Duration(n) * time.Second
	} else if t, err := http.ParseTime(v); err == nil {
		d = t.Sub(now)
	} else {
		return 0
	}
	return min(max(d, 0), MaxRetryAfter)
}
