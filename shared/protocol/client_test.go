package protocol_test

import (
	"context"
	"errors"
	"net"
	"net/http"
	"net/http/httptest"
	"sync"
	"testing"
	"time"

	"github.com/a2awire/a2awire/shared/protocol"
)

// script answers each attempt with the next handler and records task ids.
type script struct {
	mu    sync.Mutex
	steps []http.HandlerFunc
	ids   []string
}

func (s *script) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	s.mu.Lock()
	s.ids = append(s.ids, r.Header.Get(protocol.TaskIDHeader))
	n := len(s.ids) - 1
	s.mu.Unlock()
	if n >= len(s.steps) {
		n = len(s.steps) - 1
	}
	s.steps[n](w, r)
}

func errorStatus(status int, code protocol.Code, retryAfter string) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		if retryAfter != "" {
			w.Header().Set("Retry-After", retryAfter)
		}
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(status)
		_, _ = w.Write([]byte(`{"error":"` + string(code) + `","message":"m"}`))
	}
}

func hangUp(w http.ResponseWriter, r *http.Request) {
	conn, _, err := w.(http.Hijacker).Hijack()
	if err == nil {
		conn.Close()
	}
}

func success(w http.ResponseWriter, r *http.Request) { newTestProvider().ServeHTTP(w, r) }

func fastClient() *protocol.Client {
	return &protocol.Client{MaxAttempts: 3, Backoff: func(int) time.Duration { return time.Millisecond }}
}

func TestClientRetriesReuseTaskID(t *testing.T) {
	tests := []struct {
		name     string
		steps    []http.HandlerFunc
		attempts int
		status   int
		wantErr  bool
	}{
		{"503 then 200", []http.HandlerFunc{errorStatus(503, protocol.Unavailable, "0"), success}, 2, 200, false},
		{"500, 502 then 200", []http.HandlerFunc{errorStatus(500, protocol.Internal, ""), errorStatus(502, protocol.Upstream, ""), success}, 3, 200, false},
		{"429 then 200", []http.HandlerFunc{errorStatus(429, protocol.RateLimited, "0"), success}, 2, 200, false},
		{"connection dropped then 200", []http.HandlerFunc{hangUp, success}, 2, 200, false},
		{"400 is final", []http.HandlerFunc{errorStatus(400, protocol.InvalidInput, ""), success}, 1, 400, true},
		{"409 is final", []http.HandlerFunc{errorStatus(409, protocol.RequestInProgress, ""), success}, 1, 409, true},
		{"503 every time", []http.HandlerFunc{errorStatus(503, protocol.Unavailable, "0")}, 3, 503, true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			s := &script{steps: tt.steps}
			srv := httptest.NewServer(s)
			defer srv.Close()
			res, err := fastClient().Invoke(context.Background(), srv.URL, protocol.Request{Task: "echo"}, protocol.WithTaskID("task-42"))
			if (err != nil) != tt.wantErr {
				t.Fatalf("err = %v, wantErr %v", err, tt.wantErr)
			}
			if res == nil || res.Status != tt.status || res.Attempts != tt.attempts {
				t.Fatalf("result = %+v, want status %d after %d attempts", res, tt.status, tt.attempts)
			}
			for _, id := range s.ids {
				if id != "task-42" {
					t.Errorf("attempt carried task id %q", id)
				}
			}
			var re *protocol.RemoteError
			if tt.wantErr && (!errors.As(err, &re) || re.Status != tt.status || re.Body.Error == "") {
				t.Errorf("error %v is not a RemoteError with the body", err)
			}
			if !tt.wantErr && (res.Response == nil || res.Response.Metadata.Capability != "echo") {
				t.Errorf("response not decoded: %+v", res.Response)
			}
		})
	}
}

func TestClientHonoursRetryAfter(t *testing.T) {
	s := &script{steps: []http.HandlerFunc{errorStatus(503, protocol.Unavailable, "1"), success}}
	srv := httptest.NewServer(s)
	defer srv.Close()
	start := time.Now()
	if _, err := fastClient().Invoke(context.Background(), srv.URL, protocol.Request{Task: "echo"}); err != nil {
		t.Fatal(err)
	}
	if d := time.Since(start); d < 900*time.Millisecond {
		t.Errorf("retried after %v, want about the 1 s Retry-After", d)
	}
	if len(s.ids) != 2 || s.ids[0] == "" || s.ids[0] != s.ids[1] {
		t.Errorf("task ids %q: a generated id must be reused", s.ids)
	}
}

func TestClientStopsAtContextDeadline(t *testing.T) {
	s := &script{steps: []http.HandlerFunc{errorStatus(503, protocol.Unavailable, "30")}}
	srv := httptest.NewServer(s)
	defer srv.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 100*time.Millisecond)
	defer cancel()
	start := time.Now()
	_, err := fastClient().Invoke(ctx, srv.URL, protocol.Request{Task: "echo"})
	if err == nil || time.Since(start) > 2*time.Second {
		t.Fatalf("err = %v after %v; want a prompt failure at the deadline", err, time.Since(start))
	}
}

func TestClientAttemptTimeoutRetries(t *testing.T) {
	slow := func(w http.ResponseWriter, r *http.Request) {
		select {
		case <-r.Context().Done():
		case <-time.After(2 * time.Second):
		}
	}
	s := &script{steps: []http.HandlerFunc{slow, success}}
	srv := httptest.NewServer(s)
	defer srv.Close()
	c := fastClient()
	c.AttemptTimeout = 100 * time.Millisecond
	res, err := c.Invoke(context.Background(), srv.URL, protocol.Request{Task: "echo"})
	if err != nil || res.Attempts != 2 {
		t.Fatalf("res %+v err %v; want success on attempt 2", res, err)
	}
}

func TestClientConnectionRefused(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := ln.Addr().String()
	ln.Close()
	_, err = fastClient().Invoke(context.Background(), "http://"+addr, protocol.Request{Task: "echo"})
	var re *protocol.RemoteError
	if err == nil || errors.As(err, &re) {
		t.Fatalf("err = %v, want a transport error", err)
	}
}
