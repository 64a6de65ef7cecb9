package clean_test

import (
	"encoding/json"
	"maps"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"testing"

	"github.com/a2awire/a2awire/functions/fixture-clean/clean"
	"github.com/a2awire/a2awire/shared/logging"
	"github.com/a2awire/a2awire/shared/protocol"
)

// invoke POSTs body to h and checks the response against the protocol's
// conformance rules before returning it.
func invoke(t *testing.T, h http.Handler, method, contentType, body string) *httptest.ResponseRecorder {
	t.Helper()
	r := httptest.NewRequest(method, "/agents/a2awire-clean/invoke", strings.NewReader(body))
	if contentType != "" {
		r.Header.Set("Content-Type", contentType)
	}
	w := httptest.NewRecorder()
	h.ServeHTTP(w, r)
	if err := protocol.Verify(w.Code, w.Header(), w.Body.Bytes(), protocol.Expect{Agent: clean.Name, Capability: "word-count"}); err != nil {
		t.Errorf("response %d %s is not conformant: %v", w.Code, w.Body, err)
	}
	return w
}

func wordCount(text any) string {
	b, _ := json.Marshal(map[string]any{"task": "word-count", "input": map[string]any{"text": text}})
	return string(b)
}

func TestWordCount(t *testing.T) {
	h := clean.New(logging.Discard())
	tests := []struct {
		name                    string
		text                    string
		words, characters, line int
	}{
		{"empty", "", 0, 0, 0},
		{"one word", "hello", 1, 5, 1},
		{"two words", "hello world", 2, 11, 1},
		{"spaces around", "  leading   and trailing  ", 3, 26, 1},
		{"tabs and newlines separate words", "a\tb\nc", 3, 5, 2},
		{"trailing newline ends the line", "a\n", 1, 2, 1},
		{"two lines", "a\nb", 2, 3, 2},
		{"two lines terminated", "a\nb\n", 2, 4, 2},
		{"blank line", "\n", 0, 1, 1},
		{"two blank lines", "\n\n", 0, 2, 2},
		{"CRLF", "a\r\nb\r\n", 2, 6, 2},
		{"only spaces", "   ", 0, 3, 1},
		{"code points not bytes", "héllo 世界", 2, 8, 1},
		{"emoji with modifier is two code points", "👍🏽", 1, 2, 1},
		{"combining mark counts", "e\u0301", 1, 2, 1},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			w := invoke(t, h, http.MethodPost, "application/json", wordCount(tt.text))
			if w.Code != http.StatusOK {
				t.Fatalf("status %d: %s", w.Code, w.Body)
			}
			var resp struct {
				Output   clean.Output   `json:"output"`
				Metadata map[string]any `json:"metadata"`
			}
			if err := json.Unmarshal(w.Body.Bytes(), &resp); err != nil {
				t.Fatal(err)
			}
			want := clean.Output{Words: tt.words, Characters: tt.characters, Lines: tt.line}
			if resp.Output != want {
				t.Errorf("output %+v, want %+v", resp.Output, want)
			}
			// The reference provider adds nothing to the required metadata.
			if keys := slices.Sorted(maps.Keys(resp.Metadata)); !slices.Equal(keys, []string{"agent", "capability", "duration_ms"}) {
				t.Errorf("metadata keys %v, want exactly agent, capability, duration_ms", keys)
			}
		})
	}
}

func TestWordCountErrors(t *testing.T) {
	h := clean.New(logging.Discard())
	big := strings.Repeat("a", protocol.DefaultMaxBody)
	tests := []struct {
		name        string
		method, ct  string
		body        string
		status      int
		code        protocol.Code
		messageHint string
	}{
		{"missing text", "POST", "application/json", `{"task":"word-count","input":{}}`, 400, protocol.InvalidInput, "input.text"},
		{"absent input defaults to {} so text is missing", "POST", "application/json", `{"task":"word-count"}`, 400, protocol.InvalidInput, "input.text"},
		{"null text", "POST", "application/json", `{"task":"word-count","input":{"text":null}}`, 400, protocol.InvalidInput, "input.text"},
		{"number text", "POST", "application/json", `{"task":"word-count","input":{"text":42}}`, 400, protocol.InvalidInput, "input.text"},
		{"array text", "POST", "application/json", `{"task":"word-count","input":{"text":["a"]}}`, 400, protocol.InvalidInput, "input.text"},
		{"object text", "POST", "application/json", `{"task":"word-count","input":{"text":{}}}`, 400, protocol.InvalidInput, "input.text"},
		{"unknown capability", "POST", "application/json", `{"task":"char-count","input":{"text":"a"}}`, 400, protocol.UnsupportedCapability, "word-count"},
		{"GET", "GET", "", "", 405, protocol.MethodNotAllowed, "POST"},
		{"text/plain", "POST", "text/plain", wordCount("a"), 415, protocol.UnsupportedMediaType, "application/json"},
		{"not JSON", "POST", "application/json", `{"task":`, 422, protocol.InvalidRequest, "JSON"},
		{"input not an object", "POST", "application/json", `{"task":"word-count","input":"a"}`, 422, protocol.InvalidRequest, "object"},
		{"body over 1 MiB", "POST", "application/json", wordCount(big), 413, protocol.PayloadTooLarge, "larger"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			w := invoke(t, h, tt.method, tt.ct, tt.body)
			var body protocol.ErrorBody
			_ = json.Unmarshal(w.Body.Bytes(), &body)
			if w.Code != tt.status || body.Error != tt.code {
				t.Fatalf("got %d %s, want %d %s: %s", w.Code, body.Error, tt.status, tt.code, w.Body)
			}
			if !strings.Contains(body.Message, tt.messageHint) {
				t.Errorf("message %q does not mention %q", body.Message, tt.messageHint)
			}
		})
	}
}

// TestLargeText checks that a text just under the body limit is counted.
func TestLargeText(t *testing.T) {
	h := clean.New(logging.Discard())
	text := strings.Repeat("word ", (protocol.DefaultMaxBody-100)/5)
	w := invoke(t, h, http.MethodPost, "application/json; charset=utf-8", wordCount(text))
	if w.Code != http.StatusOK {
		t.Fatalf("status %d: %.200s", w.Code, w.Body)
	}
	var resp struct{ Output clean.Output }
	_ = json.Unmarshal(w.Body.Bytes(), &resp)
	if resp.Output.Words != len(text)/5 || resp.Output.Characters != len(text) {
		t.Errorf("output %+v for %d words", resp.Output, len(text)/5)
	}
}
