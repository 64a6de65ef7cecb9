package punctual_test

import (
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/a2awire/a2awire/functions/fixture-punctual/punctual"
	"github.com/a2awire/a2awire/shared/logging"
	"github.com/a2awire/a2awire/shared/protocol"
)

func invoke(t *testing.T, body string) (int, map[string]any, map[string]any, protocol.ErrorBody) {
	t.Helper()
	r := httptest.NewRequest(http.MethodPost, "/agents/a2awire-punctual/invoke", strings.NewReader(body))
	r.Header.Set("Content-Type", "application/json")
	w := httptest.NewRecorder()
	punctual.New(logging.Discard()).ServeHTTP(w, r)
	if err := protocol.Verify(w.Code, w.Header(), w.Body.Bytes(), protocol.Expect{Agent: punctual.Name}); err != nil {
		t.Errorf("non-conformant response %s: %v", w.Body, err)
	}
	var ok struct {
		Output   map[string]any `json:"output"`
		Metadata map[string]any `json:"metadata"`
	}
	var bad protocol.ErrorBody
	if w.Code == 200 {
		_ = json.Unmarshal(w.Body.Bytes(), &ok)
	} else {
		_ = json.Unmarshal(w.Body.Bytes(), &bad)
	}
	return w.Code, ok.Output, ok.Metadata, bad
}

func TestPing(t *testing.T) {
	tests := []struct {
		body    string
		echo    any
		hasEcho bool
	}{
		{`{"task":"ping","input":{"echo":"hi"}}`, "hi", true},
		{`{"task":"ping","input":{"echo":{"n":[1,2]}}}`, map[string]any{"n": []any{1.0, 2.0}}, true},
		{`{"task":"ping"}`, nil, false},
	}
	for _, tt := range tests {
		status, out, meta, _ := invoke(t, tt.body)
		if status != 200 || out["pong"] != true {
			t.Fatalf("%s: status %d output %v", tt.body, status, out)
		}
		echo, has := out["echo"]
		if has != tt.hasEcho {
			t.Errorf("%s: echo present = %v", tt.body, has)
		}
		if b1, _ := json.Marshal(echo); tt.hasEcho && string(b1) != mustJSON(tt.echo) {
			t.Errorf("%s: echo = %s", tt.body, b1)
		}
		if _, err := time.Parse(time.RFC3339, out["server_time"].(string)); err != nil {
			t.Errorf("server_time: %v", err)
		}
		if meta["agent"] != "a2awire-punctual" || meta["capability"] != "ping" {
			t.Errorf("metadata %v", meta)
		}
	}
}

func mustJSON(v any) string {
	b, _ := json.Marshal(v)
	return string(b)
}

func TestLatencyBenchmark(t *testing.T) {
	tests := []struct {
		input   string
		status  int
		delay   float64
		payload int
	}{
		{`{}`, 200, 0, 0},
		{`{"delay_ms":30,"payload_bytes":100}`, 200, 30, 100},
		{`{"payload_bytes":65536}`, 200, 0, 65536},
		{`{"delay_ms":5001}`, 400, 0, 0},
		{`{"delay_ms":-1}`, 400, 0, 0},
		{`{"payload_bytes":65537}`, 400, 0, 0},
		{`{"delay_ms":"10"}`, 400, 0, 0},
		{`{"delay_ms":1.5}`, 400, 0, 0},
	}
	for _, tt := range tests {
		status, out, _, bad := invoke(t, `{"task":"latency-benchmark","input":`+tt.input+`}`)
		if status != tt.status {
			t.Fatalf("%s: status %d, want %d (%v)", tt.input, status, tt.status, bad)
		}
		if status != 200 {
			if bad.Error != protocol.InvalidInput {
				t.Errorf("%s: error %q", tt.input, bad.Error)
			}
			continue
		}
		payload := out["payload"].(string)
		if len(payload) != tt.payload || strings.Trim(payload, "abcdefghijklmnopqrstuvwxyz0123456789") != "" {
			t.Errorf("%s: payload of %d bytes, want %d ASCII", tt.input, len(payload), tt.payload)
		}
		if out["delay_ms"] != tt.delay || out["actual_ms"].(float64) < tt.delay {
			t.Errorf("%s: delay_ms %v actual_ms %v", tt.input, out["delay_ms"], out["actual_ms"])
		}
	}
}

func TestUnsupportedCapability(t *testing.T) {
	status, _, _, bad := invoke(t, `{"task":"nope"}`)
	if status != 400 || bad.Error != protocol.UnsupportedCapability {
		t.Errorf("status %d error %q", status, bad.Error)
	}
}
