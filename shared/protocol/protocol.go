// Package protocol implements A2AWire, the invocation protocol by which a buyer
// sends a task to a provider: one HTTP POST, three JSON shapes
// (docs/protocol.md).
//
// It holds the wire types, the mapping of each error code to its kind of
// error (whose status is the one table's, shared/httperr), the provider kit (Provider, Handle) that turns typed Go functions into a
// conformant endpoint, the buyer Client, and Verify, which checks a response
// against the conformance checklist.
package protocol

import (
	"bytes"
	"encoding/json"
	"fmt"
	"maps"
	"slices"
	"time"

	"github.com/a2awire/a2awire/shared/apierror"
	"github.com/a2awire/a2awire/shared/httperr"
)

// Header names and limits of the protocol.
const (
	// TaskIDHeader carries the buyer's idempotency key.
	TaskIDHeader = "X-A2AWire-Task-Id"
	// ReplayedHeader marks a stored response returned for a repeated task id.
	ReplayedHeader = "X-A2AWire-Replayed"
	// MaxTaskIDLength is the longest task id a stateful provider accepts.
	MaxTaskIDLength = 255
	// DefaultMaxBody is the default request body limit (1 MiB).
	DefaultMaxBody = 1 << 20
)

// Request is an invocation: which capability to run and its input.
type Request struct {
	Task string `json:"task"`
	// Input is a JSON object; absent or null means {}.
	Input json.RawMessage `json:"input,omitempty"`
}

// Response is a successful (200) invocation result.
type Response struct {
	Output   json.RawMessage `json:"output"`
	Metadata Metadata        `json:"metadata"`
}

// Metadata describes who answered and how. Fields beyond the standard ones
// travel in Extra, so providers can add telemetry and buyers keep what they
// do not know.
type Metadata struct {
	Agent      string
	Capability string
	// DurationMS is wall time spent on the task, an integer ≥ 0.
	DurationMS int64
	// TokensUsed and Model appear when a model was used.
	TokensUsed *int64
	Model      string
	// Extra holds every other field; keys that collide with the standard
	// ones are ignored when marshalling.
	Extra map[string]any
}

// MarshalJSON writes the standard fields first, then Extra in key order.
func (m Metadata) MarshalJSON() ([]byte, error) {
	var b bytes.Buffer
	b.WriteByte('{')
	write := func(k string, v any) error {
		if b.Len() > 1 {
			b.WriteByte(',')
		}
		kb, _ := json.Marshal(k)
		vb, err := json.Marshal(v)
		if err != nil {
			return fmt.Errorf("metadata field %q: %w", k, err)
		}
		b.Write(kb)
		b.WriteByte(':')
		b.Write(vb)
		return nil
	}
	if err := write("agent", m.Agent); err != nil {
		return nil, err
	}
	if err := write("capability", m.Capability); err != nil {
		return nil, err
	}
	if err := write("duration_ms", m.DurationMS); err != nil {
		return nil, err
	}
	if m.TokensUsed != nil {
		if err := write("tokens_used", *m.TokensUsed); err != nil {
			return nil, err
		}
	}
	if m.Model != "" {
		if err := write("model", m.Model); err != nil {
			return nil, err
		}
	}
	for _, k := range slices.Sorted(maps.Keys(m.Extra)) {
		switch k {
		case "agent", "capability", "duration_ms", "tokens_used", "model":
			continue
		}
		if err := write(k, m.Extra[k]); err != nil {
			return nil, err
		}
	}
	b.WriteByte('}')
	return b.Bytes(), nil
}

// UnmarshalJSON reads the standard fields strictly enough to be useful and
// keeps every other field in Extra.
func (m *Metadata) UnmarshalJSON(data []byte) error {
	var raw map[string]json.RawMessage
	if err := json.Unmarshal(data, &raw); err != nil {
		return err
	}
	*m = Metadata{}
	for k, v := range raw {
		var err error
		switch k {
		case "agent":
			err = json.Unmarshal(v, &m.Agent)
		case "capability":
			err = json.Unmarshal(v, &m.Capability)
		case "duration_ms":
			err = json.Unmarshal(v, &m.DurationMS)
		case "tokens_used":
			err = json.Unmarshal(v, &m.TokensUsed)
		case "model":
			err = json.Unmarshal(v, &m.Model)
		default:
			var x any
			err = json.Unmarshal(v, &x)
			if m.Extra == nil {
				m.Extra = map[string]any{}
			}
			m.Extra[k] = x
		}
		if err != nil {
			return fmt.Errorf("metadata.%s: %w", k, err)
		}
	}
	return nil
}

// Code is a machine-readable error code.
type Code string

// Error codes of the protocol.
const (
	InvalidInput          Code = "invalid_input"
	UnsupportedCapability Code = "unsupported_capability"
	MethodNotAllowed      Code = "method_not_allowed"
	RequestInProgress     Code = "request_in_progress"
	IdempotencyKeyReused  Code = "idempotency_key_reused"
	PayloadTooLarge       Code = "payload_too_large"
	UnsupportedMediaType  Code = "unsupported_media_type"
	InvalidRequest        Code = "invalid_request"
	RateLimited           Code = "rate_limited"
	Internal              Code = "internal_error"
	Upstream              Code = "upstream_error"
	Unavailable           Code = "unavailable"
)

// kinds maps each code to its kind of error; the status is the kind's, from
// the one kind → status table every surface shares (shared/httperr).
var kinds = map[Code]apierror.Kind{
	InvalidInput:          apierror.Invalid,
	UnsupportedCapability: apierror.Invalid,
	MethodNotAllowed:      apierror.MethodNotAllowed,
	RequestInProgress:     apierror.Conflict,
	IdempotencyKeyReused:  apierror.Conflict,
	PayloadTooLarge:       apierror.TooLarge,
	UnsupportedMediaType:  apierror.UnsupportedMedia,
	InvalidRequest:        apierror.Unprocessable,
	RateLimited:           apierror.RateLimited,
	Internal:              apierror.Internal,
	Upstream:              apierror.Upstream,
	Unavailable:           apierror.Unavailable,
}

// Kind returns the kind of error code is; unknown codes are internal errors.
func (c Code) Kind() apierror.Kind {
	if k, ok := kinds[c]; ok {
		return k
	}
	return apierror.Internal
}

// Status returns the HTTP status for code (httperr.Status of its kind);
// unknown codes are internal errors.
func (c Code) Status() int { return httperr.Status(c.Kind()) }

// Detail locates one validation problem of a 422 response.
type Detail struct {
	Loc []string `json:"loc"`
	Msg string   `json:"msg"`
}

// ErrorBody is the error shape every non-200 response carries.
type ErrorBody struct {
	Error   Code     `json:"error"`
	Message string   `json:"message"`
	Details []Detail `json:"details,omitempty"`
}

// Error is a failure a provider reports to its buyer. Message is sent to the
// client; Err is the cause, logged and never sent.
type Error struct {
	Code    Code
	Message string
	Details []Detail
	// RetryAfter, when set, becomes the Retry-After header (whole seconds, at least 1).
	RetryAfter time.Duration
	Err        error
}

// Errorf returns an *Error with a formatted client-facing message.
func Errorf(code Code, format string, args ...any) *Error {
	return &Error{Code: code, Message: fmt.Sprintf(format, args...)}
}

func (e *Error) Error() string {
	if e.Err != nil {
		return fmt.Sprintf("%s: %s: %v", e.Code, e.Message, e.Err)
	}
	return fmt.Sprintf("%s: %s", e.Code, e.Message)
}

// Unwrap returns the cause.
func (e *Error) Unwrap() error { return e.Err }

// Status is the HTTP status of the error's code.
func (e *Error) Status() int { return e.Code.Status() }

// Body is the error as sent on the wire.
func (e *Error) Body() ErrorBody {
	return ErrorBody{Error: e.Code, Message: e.Message, Details: e.Details}
}
