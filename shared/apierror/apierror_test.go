package apierror_test

import (
	"encoding/json"
	"errors"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/a2awire/a2awire/shared/apierror"
)

func TestRenderPerSurface(t *testing.T) {
	cases := []struct {
		err              error
		status           int
		regCode, wldCode string
		message          string
	}{
		{&apierror.Error{Kind: apierror.Conflict, Code: "name_taken", Message: "taken"}, 409, "name_taken", "CONFLICT", "taken"},
		{apierror.New(apierror.Invalid, "bad %s", "x"), 400, "invalid_input", "INVALID_REQUEST", "bad x"},
		{apierror.New(apierror.NotJoined, "join first"), 401, "not_joined", "NOT_JOINED", "join first"},
		{apierror.New(apierror.NotFound, "no such world"), 404, "not_found", "NOT_FOUND", "no such world"},
		{errors.New("dynamo: secret table name"), 500, "internal_error", "INTERNAL", "internal error; try again later"},
	}
	for _, c := range cases {
		rec := httptest.NewRecorder()
		apierror.WriteRegistry(rec, c.err)
		var reg map[string]string
		if err := json.Unmarshal(rec.Body.Bytes(), &reg); err != nil {
			t.Fatal(err)
		}
		if rec.Code != c.status || reg["error"] != c.regCode || reg["message"] != c.message {
			t.Errorf("registry %v: %d %v", c.err, rec.Code, reg)
		}
		rec = httptest.NewRecorder()
		apierror.WriteWorld(rec, c.err)
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

func TestRetryAfter(t *testing.T) {
	rec := httptest.NewRecorder()
	apierror.WriteWorld(rec, &apierror.Error{Kind: apierror.RateLimited, Message: "slow down", RetryAfter: 1500 * time.Millisecond})
	if rec.Code != 429 || rec.Header().Get("Retry-After") != "2" {
		t.Fatalf("%d Retry-After %q", rec.Code, rec.Header().Get("Retry-After"))
	}
	rec = httptest.NewRecorder()
	apierror.WriteRegistry(rec, apierror.New(apierror.Unavailable, "busy"))
	if rec.Code != 503 || rec.Header().Get("Retry-After") != "1" {
		t.Fatalf("%d Retry-After %q", rec.Code, rec.Header().Get("Retry-After"))
	}
}

func TestWrappedErrorKeepsKind(t *testing.T) {
	err := errors.Join(errors.New("context"), apierror.New(apierror.Forbidden, "not yours"))
	if apierror.KindOf(err) != apierror.Forbidden {
		t.Fatalf("kind %v", apierror.KindOf(err))
	}
}

func TestQuoteIsShort(t *testing.T) {
	q := apierror.Quote(strings.Repeat("é", 1<<20))
	if len(q) > 120 || !strings.Contains(q, "bytes") {
		t.Fatalf("quote %q", q)
	}
	if apierror.Quote("a\x1b") != `"a\x1b"` {
		t.Fatalf("not escaped: %s", apierror.Quote("a\x1b"))
	}
}
