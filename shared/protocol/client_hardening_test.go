package protocol_test

import (
	"context"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/a2awire/a2awire/shared/protocol"
)

// countingClient counts how often the client decided to retry.
func countingClient(retries *atomic.Int32) *protocol.Client {
	return &protocol.Client{MaxAttempts: 3, Backoff: func(int) time.Duration {
		retries.Add(1)
		return time.Millisecond
	}}
}

// TestClientDoesNotRetryHopeless: a bad URL scheme and a TLS failure are
// the same on every attempt, so they end the invocation at once.
func TestClientDoesNotRetryHopeless(t *testing.T) {
	t.Parallel()
	var hits atomic.Int32
	tlsSrv := httptest.NewTLSServer(http.HandlerFunc(func(http.ResponseWriter, *http.Request) { hits.Add(1) }))
	defer tlsSrv.Close()
	plain := httptest.NewServer(http.HandlerFunc(func(http.ResponseWriter, *http.Request) { hits.Add(1) }))
	defer plain.Close()
	for _, endpoint := range []string{
		"ftp://127.0.0.1:1/invoke",
		tlsSrv.URL, // certificate signed by an unknown authority
		"https://" + strings.TrimPrefix(plain.URL, "http://"), // TLS to a plain HTTP server
	} {
		var retries atomic.Int32
		_, err := countingClient(&retries).Invoke(context.Background(), endpoint, protocol.Request{Task: "echo"})
		if err == nil || retries.Load() != 0 {
			t.Errorf("%s: err %v after %d retries, want a failure without retry", endpoint, err, retries.Load())
		}
	}
	if hits.Load() != 0 {
		t.Errorf("%d requests reached a handler", hits.Load())
	}
}

// TestClientTimeoutRetriedWithinBudget: with the default AttemptTimeout, a
// hung first attempt is cut at a share of the budget and retried in it.
func TestClientTimeoutRetriedWithinBudget(t *testing.T) {
	t.Parallel()
	hang := func(w http.ResponseWriter, r *http.Request) {
		// Reading the body lets the server notice the client hanging up.
		_, _ = io.Copy(io.Discard, r.Body)
		<-r.Context().Done()
	}
	s := &script{steps: []http.HandlerFunc{hang, success}}
	srv := httptest.NewServer(s)
	defer srv.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Second)
	defer cancel()
	c := &protocol.Client{MaxAttempts: 2, Backoff: func(int) time.Duration { return time.Millisecond }}
	res, err := c.Invoke(ctx, srv.URL, protocol.Request{Task: "echo"})
	if err != nil || res.Attempts != 2 || res.Response == nil {
		t.Fatalf("res %+v err %v; want success on attempt 2 within the budget", res, err)
	}
}

// TestClientRetryAfterBeyondBudget: a Retry-After longer than what is left
// ends the invocation at once with the provider's answer, not a context
// error after sleeping into the deadline.
func TestClientRetryAfterBeyondBudget(t *testing.T) {
	t.Parallel()
	s := &script{steps: []http.HandlerFunc{errorStatus(503, protocol.Unavailable, "3600")}}
	srv := httptest.NewServer(s)
	defer srv.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	res, err := fastClient().Invoke(ctx, srv.URL, protocol.Request{Task: "echo"})
	var re *protocol.RemoteError
	if !errors.As(err, &re) || re.Status != 503 || re.Body.Error != protocol.Unavailable || res == nil || res.Status != 503 {
		t.Fatalf("res %+v err %v; want the 503 reported", res, err)
	}
	if ctx.Err() != nil || strings.Contains(err.Error(), "deadline") {
		t.Errorf("slept into the deadline: %v", err)
	}
	if len(s.ids) != 1 {
		t.Errorf("%d attempts", len(s.ids))
	}
}

// TestClientLastAnswerAtDeadline: when the budget ends during the wait or
// a later attempt, the last answer is reported.
func TestClientLastAnswerAtDeadline(t *testing.T) {
	t.Parallel()
	hang := func(w http.ResponseWriter, r *http.Request) {
		// Reading the body lets the server notice the client hanging up.
		_, _ = io.Copy(io.Discard, r.Body)
		<-r.Context().Done()
	}
	s := &script{steps: []http.HandlerFunc{errorStatus(503, protocol.Unavailable, "0"), hang}}
	srv := httptest.NewServer(s)
	defer srv.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 500*time.Millisecond)
	defer cancel()
	_, err := fastClient().Invoke(ctx, srv.URL, protocol.Request{Task: "echo"})
	var re *protocol.RemoteError
	if !errors.As(err, &re) || re.Status != 503 {
		t.Fatalf("err %v; want the 503", err)
	}
}

// TestClientRedirects: a 307/308 to the same origin is followed with the
// body and task id; one to another origin, and a 302, are not followed.
func TestClientRedirects(t *testing.T) {
	t.Parallel()
	var elsewhere atomic.Int32
	other := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		elsewhere.Add(1)
		success(w, r)
	}))
	defer other.Close()
	var gotBody, gotID atomic.Value
	mux := http.NewServeMux()
	mux.HandleFunc("/away", func(w http.ResponseWriter, r *http.Request) {
		http.Redirect(w, r, other.URL+"/steal", http.StatusTemporaryRedirect)
	})
	mux.HandleFunc("/moved", func(w http.ResponseWriter, r *http.Request) {
		http.Redirect(w, r, "/here", http.StatusPermanentRedirect)
	})
	mux.HandleFunc("/found", func(w http.ResponseWriter, r *http.Request) {
		http.Redirect(w, r, "/here", http.StatusFound)
	})
	mux.HandleFunc("/here", func(w http.ResponseWriter, r *http.Request) {
		b, _ := io.ReadAll(r.Body)
		gotBody.Store(string(b))
		gotID.Store(r.Header.Get(protocol.TaskIDHeader))
		r.Body = io.NopCloser(strings.NewReader(string(b)))
		success(w, r)
	})
	srv := httptest.NewServer(mux)
	defer srv.Close()

	_, err := fastClient().Invoke(context.Background(), srv.URL+"/away", protocol.Request{Task: "echo"})
	if err == nil || !strings.Contains(err.Error(), "307") || !strings.Contains(err.Error(), "not followed") || elsewhere.Load() != 0 {
		t.Errorf("cross-origin 307: err %v, %d requests elsewhere", err, elsewhere.Load())
	}
	res, err := fastClient().Invoke(context.Background(), srv.URL+"/moved", protocol.Request{Task: "echo"}, protocol.WithTaskID("t-308"))
	if err != nil || res.Status != 200 || gotID.Load() != "t-308" || !strings.Contains(gotBody.Load().(string), `"task":"echo"`) {
		t.Errorf("same-origin 308: %v %+v id %v body %v", err, res, gotID.Load(), gotBody.Load())
	}
	if _, err := fastClient().Invoke(context.Background(), srv.URL+"/found", protocol.Request{Task: "echo"}); err == nil || !strings.Contains(err.Error(), "302") {
		t.Errorf("302: %v", err)
	}
}

// TestClientMalformed200: a 200 with bytes after its JSON, or an error
// instead of output, is an error — not status 200 with no response — and is
// not retried, since the provider may have acted.
func TestClientMalformed200(t *testing.T) {
	t.Parallel()
	for _, body := range []string{
		`{"output":{},"metadata":{"agent":"a","capability":"echo","duration_ms":0}}trailing`,
		`{"error":"invalid_input","message":"no"}`,
		`{"output":"x","metadata":{}}`,
	} {
		var hits atomic.Int32
		srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
			hits.Add(1)
			w.Header().Set("Content-Type", "application/json")
			_, _ = io.WriteString(w, body)
		}))
		res, err := fastClient().Invoke(context.Background(), srv.URL, protocol.Request{Task: "echo"})
		srv.Close()
		if !errors.Is(err, protocol.ErrMalformedResponse) || res == nil || res.Response != nil || hits.Load() != 1 {
			t.Errorf("%s: res %+v err %v after %d requests", body, res, err, hits.Load())
		}
	}
}

// TestClientSaysWhenCut: an answer over MaxResponse is reported as cut.
func TestClientSaysWhenCut(t *testing.T) {
	t.Parallel()
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		_, _ = io.WriteString(w, `{"output":{"pad":"`+strings.Repeat("x", 500)+`"},"metadata":{"agent":"a","capability":"echo","duration_ms":0}}`)
	}))
	defer srv.Close()
	c := fastClient()
	c.MaxResponse = 100
	res, err := c.Invoke(context.Background(), srv.URL, protocol.Request{Task: "echo"})
	if !errors.Is(err, protocol.ErrResponseTooLarge) || res == nil || !res.Truncated || len(res.Body) != 100 {
		t.Fatalf("res %+v err %v", res, err)
	}
}
