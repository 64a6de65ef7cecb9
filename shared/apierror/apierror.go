// Package apierror is the one error type of the registry and world surfaces
// (one error model for both): domain code returns an *Error carrying a Kind,
// one table maps kinds to HTTP statuses, and each surface renders the error
// in its own shape — the registry as {"error", "message"} with snake_case
// codes, the worlds as {"ok": false, "error": {"code", "message"}} with
// UPPER_SNAKE codes.
//
// Anything that is not an *Error renders as an internal error whose text never
// reaches the client; Err carries the cause for logs only.
package apierror

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"strconv"
	"strings"
	"time"

	"github.com/a2awire/a2awire/shared/store"
)

// Kind classifies an error; it decides the status.
type Kind int

// Kinds of error, in the order of the status table.
const (
	Internal Kind = iota
	Invalid
	Unauthorized
	NotJoined
	Forbidden
	NotFound
	Conflict
	TooLarge
	RateLimited
	Unavailable
)

var kinds = map[Kind]struct {
	status int
	code   string // snake_case; the world surface upper-cases it
}{
	Internal:     {http.StatusInternalServerError, "internal_error"},
	Invalid:      {http.StatusBadRequest, "invalid_input"},
	Unauthorized: {http.StatusUnauthorized, "unauthorized"},
	NotJoined:    {http.StatusUnauthorized, "not_joined"},
	Forbidden:    {http.StatusForbidden, "forbidden"},
	NotFound:     {http.StatusNotFound, "not_found"},
	Conflict:     {http.StatusConflict, "conflict"},
	TooLarge:     {http.StatusRequestEntityTooLarge, "payload_too_large"},
	RateLimited:  {http.StatusTooManyRequests, "rate_limited"},
	Unavailable:  {http.StatusServiceUnavailable, "unavailable"},
}

// worldCodes are the world surface's codes where they are not simply the
// upper-cased registry code (docs/worlds.md).
var worldCodes = map[Kind]string{
	Internal: "INTERNAL",
	Invalid:  "INVALID_REQUEST",
}

// Status is the HTTP status of a kind.
func (k Kind) Status() int {
	if v, ok := kinds[k]; ok {
		return v.status
	}
	return http.StatusInternalServerError
}

func (k Kind) String() string {
	if v, ok := kinds[k]; ok {
		return v.code
	}
	return "Kind(" + strconv.Itoa(int(k)) + ")"
}

// Error is a domain error with a kind.
type Error struct {
	Kind Kind
	// Code overrides the kind's code on the registry surface (e.g.
	// "name_taken" for a Conflict); empty means the kind's code.
	Code string
	// Message is shown to the client: it names what was wrong in words and
	// quotes client values only as a short prefix (see Quote).
	Message string
	// RetryAfter is sent as Retry-After with RateLimited and Unavailable.
	RetryAfter time.Duration
	// Err is the cause, for logs; never shown.
	Err error
}

// New returns an *Error of kind with a formatted message.
func New(kind Kind, format string, args ...any) *Error {
	return &Error{Kind: kind, Message: fmt.Sprintf(format, args...)}
}

// Wrap returns an Internal (or other kind) error that hides err from clients.
func Wrap(kind Kind, err error, message string) *Error {
	return &Error{Kind: kind, Message: message, Err: err}
}

func (e *Error) Error() string {
	if e.Err != nil {
		return e.Kind.String() + ": " + e.Message + ": " + e.Err.Error()
	}
	return e.Kind.String() + ": " + e.Message
}

// Unwrap returns the cause.
func (e *Error) Unwrap() error { return e.Err }

// From returns err as an *Error: itself when it is one (anywhere in its
// chain), otherwise an Internal error that hides it.
func From(err error) *Error {
	var e *Error
	if errors.As(err, &e) {
		return e
	}
	return &Error{Kind: Internal, Message: "internal error; try again later", Err: err}
}

// KindOf returns the kind of err (Internal for foreign errors).
func KindOf(err error) Kind { return From(err).Kind }

// RegistryCode is the snake_case code the registry surface shows.
func (e *Error) RegistryCode() string {
	if e.Code != "" {
		return e.Code
	}
	return e.Kind.String()
}

// WorldCode is the UPPER_SNAKE code the world surface shows.
func (e *Error) WorldCode() string {
	if c, ok := worldCodes[e.Kind]; ok {
		return c
	}
	return strings.ToUpper(e.Kind.String())
}

// WriteRegistry renders err as {"error", "message"} with its status.
func WriteRegistry(w http.ResponseWriter, err error) {
	e := From(err)
	write(w, e, map[string]string{"error": e.RegistryCode(), "message": e.publicMessage()})
}

// WriteWorld renders err as {"ok": false, "error": {"code", "message"}}.
func WriteWorld(w http.ResponseWriter, err error) {
	e := From(err)
	write(w, e, map[string]any{"ok": false, "error": map[string]string{"code": e.WorldCode(), "message": e.publicMessage()}})
}

func (e *Error) publicMessage() string {
	if e.Message == "" {
		return http.StatusText(e.Kind.Status())
	}
	return e.Message
}

func write(w http.ResponseWriter, e *Error, body any) {
	h := w.Header()
	h.Set("Content-Type", "application/json")
	if e.Kind == RateLimited || e.Kind == Unavailable {
		secs := int((e.RetryAfter + time.Second - 1) / time.Second)
		if secs < 1 {
			secs = 1
		}
		h.Set("Retry-After", strconv.Itoa(secs))
	}
	w.WriteHeader(e.Kind.Status())
	_ = json.NewEncoder(w).Encode(body)
}

// Quote renders a client-supplied value for a message: escaped, and cut to a
// short prefix with its full length, so a huge value is never echoed whole.
func Quote(s string) string {
	const max = 64
	if len(s) <= max {
		return strconv.Quote(s)
	}
	cut := max
	for cut > 0 && !utf8Start(s[cut]) {
		cut--
	}
	return strconv.Quote(s[:cut]) + fmt.Sprintf("… (%d bytes)", len(s))
}

func utf8Start(b byte) bool { return b&0xC0 != 0x80 }

// StoreRetryAfter is what a busy store asks the client to wait.
const StoreRetryAfter = time.Second

// FromStore maps a failure of the item API during op (e.g. "join world"):
// an overloaded store or a request that ran out of time is Unavailable with
// Retry-After, anything else Internal. The cause keeps op for logs; the
// client sees neither.
func FromStore(op string, err error) *Error {
	err = fmt.Errorf("%s: %w", op, err)
	if errors.Is(err, store.ErrUnavailable) || errors.Is(err, context.DeadlineExceeded) || errors.Is(err, context.Canceled) {
		return &Error{Kind: Unavailable, RetryAfter: StoreRetryAfter, Message: "the service is busy; retry shortly", Err: err}
	}
	return Wrap(Internal, err, "internal error; try again later")
}
