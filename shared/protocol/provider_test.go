package protocol_test

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/a2awire/a2awire/shared/logging"
	"github.com/a2awire/a2awire/shared/protocol"
)

type echoIn struct {
	N    int    `json:"n"`
	Fail string `json:"fail"`
}

// newTestProvider returns a provider whose "echo" capability fails on demand,
// so every status of the protocol can be provoked.
func newTestProvider(opts ...protocol.Option) *protocol.Provider {
	opts = append([]protocol.Option{protocol.WithLogger(logging.Discard())}, opts...)
	p := protocol.NewProvider("test-agent", opts...)
	protocol.Handle(p, "echo", func(ctx context.Context, in echoIn) (map[string]any, error) {
		switch in.Fail {
		case "invalid":
			return nil, protocol.Errorf(protocol.InvalidInput, "n is unusable")
		case "rate":
			return nil, &protocol.Error{Code: protocol.RateLimited, Message: "slow down", RetryAfter: 2 * time.Second}
		case "upstream":
			return nil, protocol.Errorf(protocol.Upstream, "the model failed")
		case "unavailable":
			return nil, &protocol.Error{Code: protocol.Unavailable, Message: "try later", RetryAfter: time.Second}
		case "internal":
			return nil, errors.New("db password is hunter2")
		case "panic":
			panic("secret panic detail")
		case "notobject":
			return nil, nil
		}
		protocol.SetMetadata(ctx, "engine", "test")
		return map[string]any{"n": in.N}, nil
	})
	return p
}

type call struct {
	method, ctype, body string
	header              map[string]string
}

func do(t *testing.T, h http.Handler, c call) *httptest.ResponseRecorder {
	t.Helper()
	if c.method == "" {
		c.method = http.MethodPost
	}
	if c.ctype == "" {
		c.ctype = "application/json"
	}
	r := httptest.NewRequest(c.method, "/agents/test-agent/invoke", strings.NewReader(c.body))
	r.Header.Set("Content-Type", c.ctype)
	for k, v := range c.header {
		r.Header.Set(k, v)
	}
	w := httptest.NewRecorder()
	h.ServeHTTP(w, r)
	return w
}

func mustErrorBody(t *testing.T, w *httptest.ResponseRecorder) protocol.ErrorBody {
	t.Helper()
	var e protocol.ErrorBody
	if err := json.Unmarshal(w.Body.Bytes(), &e); err != nil {
		t.Fatalf("body %q is not the error shape: %v", w.Body, err)
	}
	if e.Error == "" || e.Message == "" {
		t.Fatalf("error body lacks error or message: %q", w.Body)
	}
	return e
}

// TestStatusTable has one case per row of the protocol's status table
// (docs/protocol.md).
func TestStatusTable(t *testing.T) {
	p := newTestProvider()
	small := newTestProvider(protocol.WithMaxBody(64))
	tests := []struct {
		name       string
		h          http.Handler
		call       call
		status     int
		code       protocol.Code
		header     string // a response header that must be present
		headerWant string
	}{
		{"400 invalid_input from handler", p, call{body: `{"task":"echo","input":{"fail":"invalid"}}`}, 400, protocol.InvalidInput, "", ""},
		{"400 invalid_input wrong type", p, call{body: `{"task":"echo","input":{"n":"five"}}`}, 400, protocol.InvalidInput, "", ""},
		{"400 unsupported_capability", p, call{body: `{"task":"nope"}`}, 400, protocol.UnsupportedCapability, "", ""},
		{"405 GET", p, call{method: http.MethodGet}, 405, protocol.MethodNotAllowed, "Allow", "POST"},
		{"405 PUT", p, call{method: http.MethodPut, body: `{"task":"echo"}`}, 405, protocol.MethodNotAllowed, "Allow", "POST"},
		{"413 body over limit", small, call{body: `{"task":"echo","input":{"pad":"` + strings.Repeat("x", 100) + `"}}`}, 413, protocol.PayloadTooLarge, "", ""},
		{"415 text/plain", p, call{ctype: "text/plain", body: `{"task":"echo"}`}, 415, protocol.UnsupportedMediaType, "", ""},
		{"415 form", p, call{ctype: "application/x-www-form-urlencoded", body: `task=echo`}, 415, protocol.UnsupportedMediaType, "", ""},
		{"422 not JSON", p, call{body: `{]`}, 422, protocol.InvalidRequest, "", ""},
		{"422 empty body", p, call{body: ``}, 422, protocol.InvalidRequest, "", ""},
		{"422 array", p, call{body: `[1]`}, 422, protocol.InvalidRequest, "", ""},
		{"422 task missing", p, call{body: `{"input":{}}`}, 422, protocol.InvalidRequest, "", ""},
		{"422 task not string", p, call{body: `{"task":5}`}, 422, protocol.InvalidRequest, "", ""},
		{"422 task null", p, call{body: `{"task":null}`}, 422, protocol.InvalidRequest, "", ""},
		{"422 task empty", p, call{body: `{"task":""}`}, 422, protocol.InvalidRequest, "", ""},
		{"422 input array", p, call{body: `{"task":"echo","input":[]}`}, 422, protocol.InvalidRequest, "", ""},
		{"422 input string", p, call{body: `{"task":"echo","input":"x"}`}, 422, protocol.InvalidRequest, "", ""},
		{"422 trailing data", p, call{body: `{"task":"echo"} {}`}, 422, protocol.InvalidRequest, "", ""},
		{"429 rate_limited", p, call{body: `{"task":"echo","input":{"fail":"rate"}}`}, 429, protocol.RateLimited, "Retry-After", "2"},
		{"500 plain error", p, call{body: `{"task":"echo","input":{"fail":"internal"}}`}, 500, protocol.Internal, "", ""},
		{"500 panic", p, call{body: `{"task":"echo","input":{"fail":"panic"}}`}, 500, protocol.Internal, "", ""},
		{"500 output not an object", p, call{body: `{"task":"echo","input":{"fail":"notobject"}}`}, 500, protocol.Internal, "", ""},
		{"502 upstream_error", p, call{body: `{"task":"echo","input":{"fail":"upstream"}}`}, 502, protocol.Upstream, "", ""},
		{"503 unavailable", p, call{body: `{"task":"echo","input":{"fail":"unavailable"}}`}, 503, protocol.Unavailable, "Retry-After", "1"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			w := do(t, tt.h, tt.call)
			if w.Code != tt.status {
				t.Fatalf("status = %d, want %d; body %s", w.Code, tt.status, w.Body)
			}
			e := mustErrorBody(t, w)
			if e.Error != tt.code {
				t.Errorf("error = %q, want %q", e.Error, tt.code)
			}
			if ct := w.Header().Get("Content-Type"); ct != "application/json" {
				t.Errorf("Content-Type = %q", ct)
			}
			if tt.header != "" && w.Header().Get(tt.header) != tt.headerWant {
				t.Errorf("%s = %q, want %q", tt.header, w.Header().Get(tt.header), tt.headerWant)
			}
			if tt.code == protocol.InvalidRequest && len(e.Details) == 0 {
				t.Errorf("422 without details: %s", w.Body)
			}
			for _, secret := range []string{"hunter2", "secret panic", "panic"} {
				if strings.Contains(w.Body.String(), secret) {
					t.Errorf("internal detail %q leaked: %s", secret, w.Body)
				}
			}
			if err := protocol.Verify(w.Code, w.Header(), w.Body.Bytes(), protocol.Expect{}); err != nil {
				t.Errorf("Verify rejected the kit's own error response: %v", err)
			}
		})
	}
}

func TestSuccessShape(t *testing.T) {
	p := newTestProvider()
	for _, body := range []string{
		`{"task":"echo","input":{"n":7}}`,
		`{"task":"echo"}`,
		`{"task":"echo","input":null}`,
	} {
		w := do(t, p, call{ctype: "application/json; charset=utf-8", body: body})
		if w.Code != 200 {
			t.Fatalf("%s: status %d: %s", body, w.Code, w.Body)
		}
		var got struct {
			Output   map[string]any `json:"output"`
			Metadata map[string]any `json:"metadata"`
		}
		if err := json.Unmarshal(w.Body.Bytes(), &got); err != nil {
			t.Fatal(err)
		}
		if got.Metadata["agent"] != "test-agent" || got.Metadata["capability"] != "echo" || got.Metadata["engine"] != "test" {
			t.Errorf("metadata = %v", got.Metadata)
		}
		if _, ok := got.Metadata["duration_ms"].(float64); !ok {
			t.Errorf("duration_ms missing: %v", got.Metadata)
		}
		if err := protocol.Verify(w.Code, w.Header(), w.Body.Bytes(), protocol.Expect{Agent: "test-agent", Capability: "echo"}); err != nil {
			t.Errorf("Verify: %v", err)
		}
	}
}

func TestDurationIsMeasured(t *testing.T) {
	now := time.Unix(100, 0)
	var mu sync.Mutex
	clock := func() time.Time {
		mu.Lock()
		defer mu.Unlock()
		now = now.Add(1500 * time.Microsecond)
		return now
	}
	w := do(t, newTestProvider(protocol.WithClock(clock)), call{body: `{"task":"echo"}`})
	var got protocol.Response
	if err := json.Unmarshal(w.Body.Bytes(), &got); err != nil {
		t.Fatal(err)
	}
	if got.Metadata.DurationMS != 1 {
		t.Errorf("duration_ms = %d, want 1 (whole ms of 1.5 ms)", got.Metadata.DurationMS)
	}
}

func TestMetadataJSON(t *testing.T) {
	tokens := int64(57)
	m := protocol.Metadata{Agent: "a", Capability: "c", DurationMS: 12, TokensUsed: &tokens, Model: "m",
		Extra: map[string]any{"engine": "llm", "agent": "ignored"}}
	b, err := json.Marshal(m)
	if err != nil {
		t.Fatal(err)
	}
	want := `{"agent":"a","capability":"c","duration_ms":12,"tokens_used":57,"model":"m","engine":"llm"}`
	if string(b) != want {
		t.Fatalf("marshal = %s\nwant      %s", b, want)
	}
	var back protocol.Metadata
	if err := json.Unmarshal(b, &back); err != nil {
		t.Fatal(err)
	}
	if back.Agent != "a" || back.DurationMS != 12 || *back.TokensUsed != 57 || back.Model != "m" || back.Extra["engine"] != "llm" {
		t.Errorf("round trip = %+v", back)
	}
	if err := json.Unmarshal([]byte(`{"duration_ms":1.5}`), &back); err == nil {
		t.Error("fractional duration_ms accepted")
	}
}

func TestRegisterTwicePanics(t *testing.T) {
	defer func() {
		if recover() == nil {
			t.Error("no panic on duplicate capability")
		}
	}()
	p := newTestProvider()
	p.HandleFunc("echo", func(context.Context, json.RawMessage) (any, error) { return nil, nil })
}

// fakeIdem is an in-memory Idempotency that records what the kit asked.
type fakeIdem struct {
	mu      sync.Mutex
	records map[string]protocol.Recorded
	hashes  map[string]string
	running map[string]bool
	aborts  int
}

func newFakeIdem() *fakeIdem {
	return &fakeIdem{records: map[string]protocol.Recorded{}, hashes: map[string]string{}, running: map[string]bool{}}
}

func (f *fakeIdem) Begin(_ context.Context, k protocol.TaskKey) (protocol.Claim, *protocol.Recorded, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if h, ok := f.hashes[k.TaskID]; ok && h != k.RequestHash {
		return protocol.Claim{}, nil, protocol.Errorf(protocol.IdempotencyKeyReused, "reused")
	}
	if f.running[k.TaskID] {
		return protocol.Claim{}, nil, protocol.Errorf(protocol.RequestInProgress, "in progress")
	}
	if r, ok := f.records[k.TaskID]; ok {
		return protocol.Claim{}, &r, nil
	}
	f.running[k.TaskID], f.hashes[k.TaskID] = true, k.RequestHash
	return protocol.Claim{TaskKey: k}, nil, nil
}

func (f *fakeIdem) Commit(_ context.Context, k protocol.Claim, r protocol.Recorded) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	delete(f.running, k.TaskID)
	f.records[k.TaskID] = r
	return nil
}

func (f *fakeIdem) Abort(_ context.Context, k protocol.Claim) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	delete(f.running, k.TaskID)
	delete(f.hashes, k.TaskID)
	f.aborts++
	return nil
}

func TestIdempotencyHook(t *testing.T) {
	idem := newFakeIdem()
	p := newTestProvider(protocol.WithIdempotency(idem))
	hdr := map[string]string{protocol.TaskIDHeader: "t-1"}

	first := do(t, p, call{body: `{"task":"echo","input":{"n":1}}`, header: hdr})
	again := do(t, p, call{body: `{"task":"echo", "input": {"n": 1}}`, header: hdr})
	if first.Code != 200 || again.Code != 200 || !bytes.Equal(first.Body.Bytes(), again.Body.Bytes()) {
		t.Fatalf("replay differs: %d %s / %d %s", first.Code, first.Body, again.Code, again.Body)
	}
	if first.Header().Get(protocol.ReplayedHeader) != "" || again.Header().Get(protocol.ReplayedHeader) != "true" {
		t.Errorf("replayed header: first %q, again %q", first.Header().Get(protocol.ReplayedHeader), again.Header().Get(protocol.ReplayedHeader))
	}

	reused := do(t, p, call{body: `{"task":"echo","input":{"n":2}}`, header: hdr})
	if reused.Code != 409 || mustErrorBody(t, reused).Error != protocol.IdempotencyKeyReused {
		t.Errorf("different body: %d %s", reused.Code, reused.Body)
	}

	failHdr := map[string]string{protocol.TaskIDHeader: "t-2"}
	for i := range 2 {
		w := do(t, p, call{body: `{"task":"echo","input":{"fail":"upstream"}}`, header: failHdr})
		if w.Code != 502 || w.Header().Get(protocol.ReplayedHeader) != "" {
			t.Errorf("attempt %d after a 5xx: %d replayed=%q (a failure must not be stored)", i, w.Code, w.Header().Get(protocol.ReplayedHeader))
		}
	}
	if idem.aborts != 2 {
		t.Errorf("aborts = %d, want 2", idem.aborts)
	}

	long := map[string]string{protocol.TaskIDHeader: strings.Repeat("x", protocol.MaxTaskIDLength+1)}
	if w := do(t, p, call{body: `{"task":"echo"}`, header: long}); w.Code != 400 || mustErrorBody(t, w).Error != protocol.InvalidInput {
		t.Errorf("256-char task id: %d %s", w.Code, w.Body)
	}
	ok := map[string]string{protocol.TaskIDHeader: strings.Repeat("y", protocol.MaxTaskIDLength)}
	if w := do(t, p, call{body: `{"task":"echo"}`, header: ok}); w.Code != 200 {
		t.Errorf("255-char task id: %d %s", w.Code, w.Body)
	}

	// Stateless providers ignore the header entirely, even an oversized one.
	if w := do(t, newTestProvider(), call{body: `{"task":"echo"}`, header: long}); w.Code != 200 {
		t.Errorf("stateless provider with long task id: %d", w.Code)
	}
}

func TestTaskIDReachesTheCapability(t *testing.T) {
	p := protocol.NewProvider("ids", protocol.WithLogger(logging.Discard()))
	p.HandleFunc("id", func(ctx context.Context, _ json.RawMessage) (any, error) {
		return map[string]string{"task_id": protocol.TaskID(ctx)}, nil
	})
	for _, id := range []string{"", "abc"} {
		hdr := map[string]string{}
		if id != "" {
			hdr[protocol.TaskIDHeader] = id
		}
		w := do(t, p, call{body: `{"task":"id"}`, header: hdr})
		var got protocol.Response
		if err := json.Unmarshal(w.Body.Bytes(), &got); err != nil {
			t.Fatal(err)
		}
		if want := `{"task_id":"` + id + `"}`; string(got.Output) != want {
			t.Errorf("output %s, want %s", got.Output, want)
		}
	}
}
