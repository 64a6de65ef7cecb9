package translator_test

import (
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/a2awire/a2awire/functions/fixture-translator/llm"
	"github.com/a2awire/a2awire/functions/fixture-translator/translator"
	"github.com/a2awire/a2awire/shared/logging"
	"github.com/a2awire/a2awire/shared/protocol"
)

// fakeLLM is an OpenAI-compatible chat endpoint on 127.0.0.1 whose
// behaviour each test picks.
type fakeLLM struct {
	*httptest.Server
	mode   atomic.Value // "ok", "500", "slow", "garbage"
	system atomic.Value // the last system prompt
}

func newFakeLLM(t *testing.T) *fakeLLM {
	f := &fakeLLM{}
	f.mode.Store("ok")
	f.Server = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path != "/v1/chat/completions" || r.Header.Get("Authorization") != "Bearer sk-fake" {
			http.Error(w, "wrong path or key", http.StatusUnauthorized)
			return
		}
		var req struct {
			Model    string        `json:"model"`
			Messages []llm.Message `json:"messages"`
		}
		raw, _ := io.ReadAll(r.Body)
		if err := json.Unmarshal(raw, &req); err != nil || len(req.Messages) != 2 {
			http.Error(w, "bad request", http.StatusBadRequest)
			return
		}
		f.system.Store(req.Messages[0].Content)
		switch f.mode.Load().(string) {
		case "500":
			http.Error(w, `{"error":{"message":"overloaded"}}`, http.StatusInternalServerError)
			return
		case "slow":
			select {
			case <-time.After(5 * time.Second):
			case <-r.Context().Done():
				return
			}
		case "garbage":
			_, _ = io.WriteString(w, "not json")
			return
		}
		// The fake "translates" by tagging the text.
		out := map[string]any{
			"model":   req.Model + "-2026",
			"choices": []any{map[string]any{"message": map[string]any{"role": "assistant", "content": "[llm] " + req.Messages[1].Content}}},
			"usage":   map[string]any{"prompt_tokens": 30, "completion_tokens": 7, "total_tokens": 37},
		}
		w.Header().Set("Content-Type", "application/json")
		_ = json.NewEncoder(w).Encode(out)
	}))
	t.Cleanup(f.Close)
	return f
}

type result struct {
	status int
	header http.Header
	out    translator.Output
	meta   map[string]json.RawMessage
	err    protocol.ErrorBody
	raw    string
}

func translate(t *testing.T, h http.Handler, input string) result {
	t.Helper()
	body := `{"task":"translation","input":` + input + `}`
	r := httptest.NewRequest(http.MethodPost, "/agents/a2awire-translator/invoke", strings.NewReader(body))
	r.Header.Set("Content-Type", "application/json")
	w := httptest.NewRecorder()
	h.ServeHTTP(w, r)
	if err := protocol.Verify(w.Code, w.Header(), w.Body.Bytes(), protocol.Expect{Agent: translator.Name, Capability: "translation"}); err != nil {
		t.Errorf("response %d %s is not conformant: %v", w.Code, w.Body, err)
	}
	res := result{status: w.Code, header: w.Header(), raw: w.Body.String()}
	var resp struct {
		Output   translator.Output          `json:"output"`
		Metadata map[string]json.RawMessage `json:"metadata"`
	}
	_ = json.Unmarshal(w.Body.Bytes(), &resp)
	_ = json.Unmarshal(w.Body.Bytes(), &res.err)
	res.out, res.meta = resp.Output, resp.Metadata
	return res
}

func (r result) metaString(k string) string {
	var s string
	_ = json.Unmarshal(r.meta[k], &s)
	return s
}

func TestTranslation(t *testing.T) {
	f := newFakeLLM(t)
	withLLM := translator.New(logging.Discard(), llm.Config{URL: f.URL, APIKey: "sk-fake", Model: "fake", Timeout: 300 * time.Millisecond}, f.Client())
	// An endpoint nobody listens on: the LLM is configured but unreachable.
	dead := httptest.NewServer(http.NotFoundHandler())
	deadURL := dead.URL
	dead.Close()
	unreachable := translator.New(logging.Discard(), llm.Config{URL: deadURL, Model: "fake"}, nil)
	noLLM := translator.New(logging.Discard(), llm.Config{}, nil)

	tests := []struct {
		name   string
		h      http.Handler
		mode   string
		input  string
		status int
		code   protocol.Code
		engine string
		text   string
		tokens string
		model  string
		prompt string // what the system prompt must mention
	}{
		// No LLM: the dictionary answers supported pairs, 400 otherwise.
		{name: "fallback en→es, source defaults to en", h: noLLM, input: `{"text":"Hello, my friend!","target_lang":"es"}`,
			status: 200, engine: "fallback", text: "Hola, mi amigo!"},
		{name: "fallback de→en", h: noLLM, input: `{"text":"Guten Morgen","source_lang":"de","target_lang":"en"}`,
			status: 200, engine: "fallback", text: "Good morning"},
		{name: "fallback fr→es", h: noLLM, input: `{"text":"Merci beaucoup.","source_lang":"fr","target_lang":"es"}`,
			status: 200, engine: "fallback", text: "Muchas gracias."},
		{name: "fallback with region subtags", h: noLLM, input: `{"text":"water","source_lang":"en-US","target_lang":"es-MX"}`,
			status: 200, engine: "fallback", text: "agua"},
		{name: "fallback keeps unknown words", h: noLLM, input: `{"text":"Hello Zanzibar","target_lang":"de"}`,
			status: 200, engine: "fallback", text: "Hallo Zanzibar"},
		{name: "unsupported pair without LLM", h: noLLM, input: `{"text":"Hello","target_lang":"ja"}`,
			status: 400, code: protocol.InvalidInput},
		{name: "unsupported source without LLM", h: noLLM, input: `{"text":"Ciao","source_lang":"it","target_lang":"en"}`,
			status: 400, code: protocol.InvalidInput},

		// LLM configured and answering: engine llm with tokens and model,
		// for any pair.
		{name: "llm answers", h: withLLM, mode: "ok", input: `{"text":"Hello","target_lang":"es"}`,
			status: 200, engine: "llm", text: "[llm] Hello", tokens: "37", model: "fake-2026", prompt: `from the language with code "en" to the language with code "es"`},
		{name: "llm serves pairs the dictionary cannot", h: withLLM, mode: "ok", input: `{"text":"Hello","target_lang":"ja"}`,
			status: 200, engine: "llm", text: "[llm] Hello", tokens: "37", model: "fake-2026", prompt: `to the language with code "ja"`},

		// LLM failing: the dictionary answers what it can, 502 otherwise.
		{name: "llm 500 falls back", h: withLLM, mode: "500", input: `{"text":"Hello","target_lang":"fr"}`,
			status: 200, engine: "fallback", text: "Bonjour"},
		{name: "llm timeout falls back", h: withLLM, mode: "slow", input: `{"text":"Thank you","target_lang":"de"}`,
			status: 200, engine: "fallback", text: "Danke"},
		{name: "llm garbage falls back", h: withLLM, mode: "garbage", input: `{"text":"cat","target_lang":"es"}`,
			status: 200, engine: "fallback", text: "gato"},
		{name: "llm unreachable falls back", h: unreachable, input: `{"text":"dog","target_lang":"es"}`,
			status: 200, engine: "fallback", text: "perro"},
		{name: "llm 500 and unsupported pair", h: withLLM, mode: "500", input: `{"text":"Hello","target_lang":"ja"}`,
			status: 502, code: protocol.Upstream},
		{name: "llm timeout and unsupported pair", h: withLLM, mode: "slow", input: `{"text":"Hello","target_lang":"ja"}`,
			status: 502, code: protocol.Upstream},
		{name: "llm unreachable and unsupported pair", h: unreachable, input: `{"text":"Hello","source_lang":"ko","target_lang":"en"}`,
			status: 502, code: protocol.Upstream},

		// Bad values are the buyer's, whatever the engine.
		{name: "missing text", h: withLLM, mode: "ok", input: `{"target_lang":"es"}`, status: 400, code: protocol.InvalidInput},
		{name: "blank text", h: withLLM, mode: "ok", input: `{"text":"  ","target_lang":"es"}`, status: 400, code: protocol.InvalidInput},
		{name: "text not a string", h: noLLM, input: `{"text":1,"target_lang":"es"}`, status: 400, code: protocol.InvalidInput},
		{name: "missing target_lang", h: withLLM, mode: "ok", input: `{"text":"Hello"}`, status: 400, code: protocol.InvalidInput},
		{name: "target_lang not a code", h: withLLM, mode: "ok", input: `{"text":"Hello","target_lang":"Spanish please"}`, status: 400, code: protocol.InvalidInput},
		{name: "source_lang not a code", h: noLLM, input: `{"text":"Hello","source_lang":"e","target_lang":"es"}`, status: 400, code: protocol.InvalidInput},
		{name: "same language", h: withLLM, mode: "ok", input: `{"text":"Hello","source_lang":"es","target_lang":"ES"}`, status: 400, code: protocol.InvalidInput},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if tt.mode != "" {
				f.mode.Store(tt.mode)
			}
			start := time.Now()
			r := translate(t, tt.h, tt.input)
			if r.status != tt.status {
				t.Fatalf("status %d, want %d: %s", r.status, tt.status, r.raw)
			}
			if time.Since(start) > 2*time.Second {
				t.Errorf("took %s; the LLM timeout is 300 ms", time.Since(start))
			}
			if tt.status != 200 {
				if r.err.Error != tt.code {
					t.Errorf("error %q, want %q: %s", r.err.Error, tt.code, r.raw)
				}
				if strings.Contains(r.raw, "overloaded") || strings.Contains(r.raw, "127.0.0.1") {
					t.Errorf("upstream detail leaked to the client: %s", r.raw)
				}
				return
			}
			if r.out.Translation != tt.text {
				t.Errorf("translation %q, want %q", r.out.Translation, tt.text)
			}
			if got := r.metaString("engine"); got != tt.engine {
				t.Errorf("engine %q, want %q", got, tt.engine)
			}
			if got := string(r.meta["tokens_used"]); got != tt.tokens {
				t.Errorf("tokens_used %q, want %q", got, tt.tokens)
			}
			if got := r.metaString("model"); got != tt.model {
				t.Errorf("model %q, want %q", got, tt.model)
			}
			if sys, _ := f.system.Load().(string); tt.prompt != "" && !strings.Contains(sys, tt.prompt) {
				t.Errorf("system prompt %q does not say %q", sys, tt.prompt)
			}
		})
	}
}

// TestNoLLMCallWithoutConfig checks that an empty URL means no upstream at
// all, not a call to some default.
func TestNoLLMCallWithoutConfig(t *testing.T) {
	cfg := translator.EnvConfig(func(k string) string {
		return map[string]string{translator.EnvModel: "m", translator.EnvAPIKey: "k"}[k]
	})
	if cfg.Enabled() {
		t.Fatalf("config without URL is enabled: %+v", cfg)
	}
	cfg = translator.EnvConfig(func(k string) string {
		return map[string]string{translator.EnvURL: " http://127.0.0.1:1 ", translator.EnvModel: "m", translator.EnvAPIKey: "k"}[k]
	})
	if want := (llm.Config{URL: "http://127.0.0.1:1", APIKey: "k", Model: "m"}); cfg != want {
		t.Fatalf("EnvConfig = %+v, want %+v", cfg, want)
	}
}

// TestLongLanguageTagNotEchoed: a language tag of 450 KB is refused as
// not a tag, and the refusal does not repeat it.
func TestLongLanguageTagNotEchoed(t *testing.T) {
	h := translator.New(logging.Discard(), llm.Config{}, nil)
	long := "en" + strings.Repeat("-abcdefgh", 50000)
	for _, input := range []string{
		`{"text":"hello","target_lang":"` + long + `"}`,
		`{"text":"hello","target_lang":"es","source_lang":"` + long + `"}`,
		`{"text":"hello","target_lang":"` + long + `","source_lang":"` + long + `"}`,
	} {
		r := translate(t, h, input)
		if r.status != http.StatusBadRequest || len(r.raw) > 400 {
			t.Errorf("%d, %d bytes: %.200s", r.status, len(r.raw), r.raw)
		}
	}
}
