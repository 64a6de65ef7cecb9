// Package httperr renders domain errors on HTTP: one table maps each
// apierror.Kind to its status, for every surface, and one renderer per
// surface writes the body — the registry's {"error", "message"} with
// snake_case codes, the worlds' {"ok": false, "error": {"code", "message"}}
// with UPPER_SNAKE codes — with Retry-After for RateLimited and Unavailable
// (RetryAfter). The invocation protocol's renderer is its provider kit's
// (shared/protocol writes {"error", "message", "details"} and stores the
// bytes for replay), and takes its statuses and Retry-After from here. The domain packages return
// *apierror.Error and know nothing of statuses; only this package and the
// handlers that call it do.
//
// Anything that is not an *apierror.Error renders as an internal error
// whose text never reaches the client.
package httperr

import (
	"encoding/json"
	"net/http"
	"strconv"
	"strings"
	"time"

	"github.com/a2awire/a2awire/shared/apierror"
)

// statuses is the one kind → status table.
var statuses = map[apierror.Kind]int{
	apierror.Internal:     http.StatusInternalServerError,
	apierror.Invalid:      http.StatusBadRequest,
	apierror.Unauthorized: http.StatusUnauthorized,
	apierror.NotJoined:    http.StatusUnauthorized,
	apierror.Forbidden:    http.StatusForbidden,
	apierror.NotFound:     http.StatusNotFound,
	apierror.Conflict:     http.StatusConflict,
	apierror.TooLarge:     http.StatusRequestEntityTooLarge,
	apierror.RateLimited:  http.StatusTooManyRequests,
	apierror.Unavailable:  http.StatusServiceUnavailable,
	// The invocation protocol's kinds.
	apierror.MethodNotAllowed: http.StatusMethodNotAllowed,
	apierror.UnsupportedMedia: http.StatusUnsupportedMediaType,
	apierror.Unprocessable:    http.StatusUnprocessableEntity,
	apierror.Upstream:         http.StatusBadGateway,
	// Credits and escrow.
	apierror.PaymentRequired: http.StatusPaymentRequired,
}

// worldCodes are the world surface's codes where they are not simply the
// upper-cased registry code (docs/worlds.md).
var worldCodes = map[apierror.Kind]string{
	apierror.Internal: "INTERNAL",
	apierror.Invalid:  "INVALID_REQUEST",
}

// Status is the HTTP status of a kind (500 for a kind the table lacks).
func Status(k apierror.Kind) int {
	if s, ok := statuses[k]; ok {
		return s
	}
	return http.StatusInternalServerError
}

// WorldCode is the UPPER_SNAKE code the world surface shows for e.
func WorldCode(e *apierror.Error) string {
	if e.Code != "" {
		return strings.ToUpper(e.Code) // a domain's own code: WORLD_CLOSED
	}
	if c, ok := worldCodes[e.Kind]; ok {
		return c
	}
	return strings.ToUpper(e.Kind.String())
}

// WriteRegistry renders err as {"error", "message"} with its status.
func WriteRegistry(w http.ResponseWriter, err error) {
	e := apierror.From(err)
	write(w, e, map[string]string{"error": e.RegistryCode(), "message": publicMessage(e)})
}

// WriteWorld renders err as {"ok": false, "error": {"code", "message"}}.
func WriteWorld(w http.ResponseWriter, err error) {
	e := apierror.From(err)
	write(w, e, map[string]any{"ok": false, "error": map[string]string{"code": WorldCode(e), "message": publicMessage(e)}})
}

func publicMessage(e *apierror.Error) string {
	if e.Message == "" {
		return http.StatusText(Status(e.Kind))
	}
	return e.Message
}

func write(w http.ResponseWriter, e *apierror.Error, body any) {
	h := w.Header()
	h.Set("Content-Type", "application/json")
	if v := RetryAfter(e.Kind, e.RetryAfter); v != "" {
		h.Set("Retry-After", v)
	}
	w.WriteHeader(Status(e.Kind))
	_ = json.NewEncoder(w).Encode(body)
}

// RetryAfter is the Retry-After header value of an error of kind k that
// asks the client to wait d: whole seconds, rounded up, at least 1; "1"
// when d is unset on a 429 or 503, which always carry the header (a client
// should not have to guess); "" otherwise. Every surface sends it so.
func RetryAfter(k apierror.Kind, d time.Duration) string {
	switch {
	case d > 0:
		return strconv.FormatInt(max(int64((d+time.Second-1)/time.Second), 1), 10)
	case k == apierror.RateLimited || k == apierror.Unavailable:
		return "1"
	}
	return ""
}
