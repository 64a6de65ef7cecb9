// Package apierror is the one domain error type of the registry and world
// surfaces: domain code returns an *Error carrying a Kind (what went wrong,
// in the domain's terms), an optional surface code (Code, e.g. "name_taken")
// and an optional RetryAfter. It knows nothing of HTTP: package httperr
// holds the one kind → status table and renders the error in each surface's
// shape.
//
// Anything that is not an *Error renders as an internal error whose text never
// reaches the client; Err carries the cause for logs only.
package apierror

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"time"
)

// Kind classifies an error; httperr maps it to a status.
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
	// The kinds below are the invocation protocol's (shared/protocol maps
	// its codes to them); the registry and the worlds do not use them.
	MethodNotAllowed
	UnsupportedMedia
	Unprocessable
	Upstream
	// PaymentRequired is a payment the payer cannot cover (credits,
	// escrow: 402 insufficient_funds).
	PaymentRequired
)

// codes are the kinds' snake_case codes (the registry surface shows them;
// the world surface upper-cases them, httperr.WorldCode).
var codes = map[Kind]string{
	Internal:     "internal_error",
	Invalid:      "invalid_input",
	Unauthorized: "unauthorized",
	NotJoined:    "not_joined",
	Forbidden:    "forbidden",
	NotFound:     "not_found",
	Conflict:     "conflict",
	TooLarge:     "payload_too_large",
	RateLimited:  "rate_limited",
	Unavailable:  "unavailable",
	// The invocation protocol's.
	MethodNotAllowed: "method_not_allowed",
	UnsupportedMedia: "unsupported_media_type",
	Unprocessable:    "invalid_request",
	Upstream:         "upstream_error",
	PaymentRequired:  "payment_required",
}

func (k Kind) String() string {
	if c, ok := codes[k]; ok {
		return c
	}
	return "Kind(" + strconv.Itoa(int(k)) + ")"
}

// Error is a domain error with a kind.
type Error struct {
	Kind Kind
	// Code is a domain's own code for this error (e.g. "name_taken",
	// "world_closed", "banned"), shown instead of the kind's on every
	// surface (upper-cased on the worlds'); empty means the kind's code.
	Code string
	// Message is shown to the client: it names what was wrong in words and
	// quotes client values only as a short prefix (see Quote).
	Message string
	// RetryAfter is how long the client should wait; httperr sends it as
	// Retry-After with RateLimited and Unavailable.
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
// an overloaded store (an error answering Unavailable() true, as
// store.ErrUnavailable does) or a request that ran out of time is
// Unavailable with Retry-After, anything else Internal. The cause keeps op for logs; the
// client sees neither.
func FromStore(op string, err error) *Error {
	// A store call refused by the request's guard (shared/store/guard)
	// carries the guard's own verdict (429, nonce already used, …).
	var verdict *Error
	if errors.As(err, &verdict) {
		return verdict
	}
	err = fmt.Errorf("%s: %w", op, err)
	var busy interface{ Unavailable() bool }
	if (errors.As(err, &busy) && busy.Unavailable()) || errors.Is(err, context.DeadlineExceeded) || errors.Is(err, context.Canceled) {
		return &Error{Kind: Unavailable, RetryAfter: StoreRetryAfter, Message: "the service is busy; retry shortly", Err: err}
	}
	return Wrap(Internal, err, "internal error; try again later")
}
