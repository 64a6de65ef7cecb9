package httperr_test

import (
	"encoding/json"
	"errors"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/a2awire/a2awire/shared/apierror"
	"github.com/a2awire/a2awire/shared/httperr"
	"github.com/a2awire/a2awire/shared/protocol"
)

// TestRenderPerSurface: each kind renders with its status and each
// surface's code and shape; an error that is not an *apierror.Error
// renders as internal, its text hidden.
func TestRenderPerSurface(t *testing.T) {
	cases := []struct {
		err              error
		status           int
		regCode, wldCode string
		message          string
	}{
		// A domain's own code shows on both surfaces, upper-cased on the worlds'.
		{&apierror.Error{Kind: apierror.Conflict, Code: "world_closed", Message: "closed"}, 409, "world_closed", "WORLD_CLOSED", "closed"},
		{apierror.New(apierror.Conflict, "taken"), 409, "conflict", "CONFLICT", "taken"},
		{apierror.New(apierror.Invalid, "bad %s", "x"), 400, "invalid_input", "INVALID_REQUEST", "bad x"},
		{apierror.New(apierror.NotJoined, "join first"), 401, "not_joined", "NOT_JOINED", "join first"},
		{apierror.New(apierror.NotFound, "no such world"), 404, "not_found", "NOT_FOUND", "no such world"},
		{errors.New("dynamo: secret table name"), 500, "internal_error", "INTERNAL", "internal error; try again later"},
	}
	for _, c := range cases {
		rec := httptest.NewRecorder()
		httperr.WriteRegistry(rec, c.err)
		var reg map[string]string
		if err := json.Unmarshal(rec.Body.Bytes(), &reg); err != nil {
			t.Fatal(err)
		}
		if rec.Code != c.status || reg["error"] != c.regCode || reg["message"] != c.message {
			t.Errorf("registry %v: %d %v", c.err, rec.Code, reg)
		}
		rec = httptest.NewRecorder()
		httperr.WriteWorld(rec, c.err)
		var wld struct {
			OK    *bool             `json:"ok"`
			Error map[string]string `json:"error"`
		}
		if err := json.Unmarshal(rec.Body.Bytes(), &wld); err != nil {
			t.Fatal(err)
		}
		if rec.Code != c.status || wld.OK == nil || *wld.OK || wld.Error["code"] != c.wldCode || wld.Error["message"] != c.message {
			t.Errorf("world %v: %d %s", c.err, rec.Code, rec.Body)
		}
		if strings.Contains(rec.Body.String(), "secret") {
			t.Errorf("internal text leaked: %s", rec.Body)
		}
	}
}

// TestRetryAfter: RateLimited and Unavailable carry Retry-After in whole
// seconds, rounded up, at least 1.
func TestRetryAfter(t *testing.T) {
	rec := httptest.NewRecorder()
	httperr.WriteWorld(rec, &apierror.Error{Kind: apierror.RateLimited, Message: "slow down", RetryAfter: 1500 * time.Millisecond})
	if rec.Code != 429 || rec.Header().Get("Retry-After") != "2" {
		t.Fatalf("%d Retry-After %q", rec.Code, rec.Header().Get("Retry-After"))
	}
	rec = httptest.NewRecorder()
	httperr.WriteRegistry(rec, apierror.New(apierror.Unavailable, "busy"))
	if rec.Code != 503 || rec.Header().Get("Retry-After") != "1" {
		t.Fatalf("%d Retry-After %q", rec.Code, rec.Header().Get("Retry-After"))
	}
}

// TestInvocationCodesAgree: every code of the invocation surface answers
// the status the invocation contract gives it (docs/protocol.md), through
// its kind and this package's one table; and where a code is a kind's own
// (invalid_input, payload_too_large, rate_limited, internal_error,
// unavailable) it is that kind, so one failure never answers two statuses.
func TestInvocationCodesAgree(t *testing.T) {
	contract := map[protocol.Code]int{
		protocol.InvalidInput: 400, protocol.UnsupportedCapability: 400, protocol.MethodNotAllowed: 405,
		protocol.RequestInProgress: 409, protocol.IdempotencyKeyReused: 409, protocol.PayloadTooLarge: 413,
		protocol.UnsupportedMediaType: 415, protocol.InvalidRequest: 422, protocol.RateLimited: 429,
		protocol.Internal: 500, protocol.Upstream: 502, protocol.Unavailable: 503,
	}
	for code, want := range contract {
		if got := code.Status(); got != want || httperr.Status(code.Kind()) != want {
			t.Errorf("protocol code %s answers %d (kind %v), the contract %d", code, got, code.Kind(), want)
		}
	}
	for _, k := range []apierror.Kind{apierror.Invalid, apierror.TooLarge, apierror.RateLimited, apierror.Internal, apierror.Unavailable} {
		if code := protocol.Code(k.String()); code.Kind() != k {
			t.Errorf("protocol code %s is kind %v, not %v", code, code.Kind(), k)
		}
	}
}
