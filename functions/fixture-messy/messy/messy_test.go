package messy_test

import (
	"context"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"
	"unicode/utf8"

	"github.com/a2awire/a2awire/functions/fixture-messy/messy"
	"github.com/a2awire/a2awire/shared/logging"
	"github.com/a2awire/a2awire/shared/protocol"
)

func invoke(t *testing.T, ctx context.Context, h http.Handler, body string) *httptest.ResponseRecorder {
	t.Helper()
	r := httptest.NewRequestWithContext(ctx, http.MethodPost, "/agents/a2awire-messy/invoke", strings.NewReader(body))
	r.Header.Set("Content-Type", "application/json")
	w := httptest.NewRecorder()
	h.ServeHTTP(w, r)
	if err := protocol.Verify(w.Code, w.Header(), w.Body.Bytes(), protocol.Expect{Agent: messy.Name, Capability: "messy-echo"}); err != nil {
		t.Errorf("response %d %s is not conformant: %v", w.Code, w.Body, err)
	}
	return w
}

// TestEcho covers the success path: the input comes back under output.echo
// unchanged, with noise around it in output and metadata.
func TestEcho(t *testing.T) {
	h := messy.New(logging.Discard())
	tests := []struct {
		name string
		body string
		echo string
	}{
		{"object", `{"task":"messy-echo","input":{"a":1,"nested":{"b":[true,null,"x"]}}}`, `{"a":1,"nested":{"b":[true,null,"x"]}}`},
		{"absent input echoes {}", `{"task":"messy-echo"}`, `{}`},
		{"null input echoes {}", `{"task":"messy-echo","input":null}`, `{}`},
		{"big numbers survive", `{"task":"messy-echo","input":{"n":12345678901234567890}}`, `{"n":12345678901234567890}`},
		{"slow with no delay", `{"task":"messy-echo","input":{"simulate":"slow"}}`, `{"simulate":"slow"}`},
		{"slow", `{"task":"messy-echo","input":{"simulate":"slow","delay_ms":50}}`, `{"simulate":"slow","delay_ms":50}`},
		{"delay without simulate is only echoed", `{"task":"messy-echo","input":{"delay_ms":5000}}`, `{"delay_ms":5000}`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			w := invoke(t, context.Background(), h, tt.body)
			if w.Code != http.StatusOK {
				t.Fatalf("status %d: %s", w.Code, w.Body)
			}
			var resp struct {
				Output   map[string]json.RawMessage `json:"output"`
				Metadata map[string]json.RawMessage `json:"metadata"`
			}
			if err := json.Unmarshal(w.Body.Bytes(), &resp); err != nil {
				t.Fatal(err)
			}
			if got := string(resp.Output["echo"]); got != tt.echo {
				t.Errorf("echo %s, want %s", got, tt.echo)
			}
			if len(resp.Output) < 3 {
				t.Errorf("output has no extra fields: %s", w.Body)
			}
			for _, k := range []string{"trace_id", "region", "cost_usd", "tokens_used", "model"} {
				if _, ok := resp.Metadata[k]; !ok {
					t.Errorf("metadata.%s missing: %s", k, w.Body)
				}
			}
			if string(resp.Metadata["model"]) != `"`+messy.Model+`"` || string(resp.Metadata["tokens_used"]) != "42" {
				t.Errorf("metadata model/tokens_used: %s", w.Body)
			}
		})
	}
}

// TestSimulate covers every simulate value and the input checks.
func TestSimulate(t *testing.T) {
	h := messy.New(logging.Discard())
	tests := []struct {
		name       string
		input      string
		status     int
		code       protocol.Code
		retryAfter string
	}{
		{"invalid_input", `{"simulate":"invalid_input"}`, 400, protocol.InvalidInput, ""},
		{"upstream_error", `{"simulate":"upstream_error"}`, 502, protocol.Upstream, ""},
		{"unavailable", `{"simulate":"unavailable"}`, 503, protocol.Unavailable, "1"},
		{"unknown value", `{"simulate":"explode"}`, 400, protocol.InvalidInput, ""},
		{"empty value", `{"simulate":""}`, 400, protocol.InvalidInput, ""},
		{"case matters", `{"simulate":"SLOW"}`, 400, protocol.InvalidInput, ""},
		{"not a string", `{"simulate":1}`, 400, protocol.InvalidInput, ""},
		{"delay over 5000", `{"simulate":"slow","delay_ms":5001}`, 400, protocol.InvalidInput, ""},
		{"negative delay", `{"simulate":"slow","delay_ms":-1}`, 400, protocol.InvalidInput, ""},
		{"fractional delay", `{"simulate":"slow","delay_ms":1.5}`, 400, protocol.InvalidInput, ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			w := invoke(t, context.Background(), h, `{"task":"messy-echo","input":`+tt.input+`}`)
			var body protocol.ErrorBody
			_ = json.Unmarshal(w.Body.Bytes(), &body)
			if w.Code != tt.status || body.Error != tt.code {
				t.Fatalf("got %d %s, want %d %s: %s", w.Code, body.Error, tt.status, tt.code, w.Body)
			}
			if got := w.Header().Get("Retry-After"); got != tt.retryAfter {
				t.Errorf("Retry-After %q, want %q", got, tt.retryAfter)
			}
		})
	}
}

// TestSlow checks that slow really waits, and that it gives up with 503 when
// the request's deadline comes first instead of overrunning it.
func TestSlow(t *testing.T) {
	h := messy.New(logging.Discard())
	start := time.Now()
	w := invoke(t, context.Background(), h, `{"task":"messy-echo","input":{"simulate":"slow","delay_ms":300}}`)
	if el := time.Since(start); w.Code != http.StatusOK || el < 300*time.Millisecond {
		t.Errorf("slow 300 ms: status %d after %s", w.Code, el)
	}
	var resp protocol.Response
	_ = json.Unmarshal(w.Body.Bytes(), &resp)
	if resp.Metadata.DurationMS < 300 {
		t.Errorf("duration_ms %d, want ≥ 300", resp.Metadata.DurationMS)
	}

	ctx, cancel := context.WithTimeout(context.Background(), 100*time.Millisecond)
	defer cancel()
	start = time.Now()
	w = invoke(t, ctx, h, `{"task":"messy-echo","input":{"simulate":"slow","delay_ms":5000}}`)
	if el := time.Since(start); w.Code != http.StatusServiceUnavailable || el > 2*time.Second {
		t.Errorf("slow past the deadline: status %d after %s, want 503 at the deadline", w.Code, el)
	}
}

// TestIgnoresTaskID: messy is stateless, so a task id changes nothing: a
// repeat runs again (fresh trace id, no replay) and an overlong id is no
// error.
func TestIgnoresTaskID(t *testing.T) {
	h := messy.New(logging.Discard())
	var traces []string
	for _, id := range []string{"same", "same", strings.Repeat("x", 300)} {
		r := httptest.NewRequest(http.MethodPost, "/agents/a2awire-messy/invoke", strings.NewReader(`{"task":"messy-echo","input":{}}`))
		r.Header.Set("Content-Type", "application/json")
		r.Header.Set(protocol.TaskIDHeader, id)
		w := httptest.NewRecorder()
		h.ServeHTTP(w, r)
		if w.Code != http.StatusOK || w.Header().Get(protocol.ReplayedHeader) != "" {
			t.Fatalf("task id %.20q: %d replayed=%q %s", id, w.Code, w.Header().Get(protocol.ReplayedHeader), w.Body)
		}
		var resp struct{ Metadata map[string]any }
		_ = json.Unmarshal(w.Body.Bytes(), &resp)
		traces = append(traces, resp.Metadata["trace_id"].(string))
	}
	if traces[0] == traces[1] {
		t.Errorf("a repeated task id was replayed: trace %s twice", traces[0])
	}
}

// TestEchoIsStrict: messy echoes only strict JSON — invalid UTF-8 and
// duplicated keys are 422 before anything is echoed, so its answer is always
// valid UTF-8 — and its control keys match case-sensitively.
func TestEchoIsStrict(t *testing.T) {
	h := messy.New(logging.Discard())
	for _, body := range []string{
		"{\"task\":\"messy-echo\",\"input\":{\"x\":\"\xff\xfe\"}}",
		`{"task":"messy-echo","input":{"simulate":"slow","simulate":"upstream_error"}}`,
	} {
		w := invoke(t, context.Background(), h, body)
		if w.Code != http.StatusUnprocessableEntity || !utf8.Valid(w.Body.Bytes()) {
			t.Errorf("%q: %d %q", body, w.Code, w.Body)
		}
	}
	w := invoke(t, context.Background(), h, `{"task":"messy-echo","input":{"SIMULATE":"upstream_error"}}`)
	if w.Code != http.StatusOK {
		t.Errorf("SIMULATE was read as simulate: %d %s", w.Code, w.Body)
	}
	w = invoke(t, context.Background(), h, `{"task":"messy-echo","input":{"simulate":"`+strings.Repeat("z", 100000)+`"}}`)
	if w.Code != http.StatusBadRequest || w.Body.Len() > 400 {
		t.Errorf("unknown simulate: %d, %d bytes", w.Code, w.Body.Len())
	}
}
