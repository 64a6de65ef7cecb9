package llm_test

import (
	"context"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"testing"
	"time"

	"github.com/a2awire/a2awire/functions/fixture-translator/llm"
)

func TestEndpoint(t *testing.T) {
	for base, want := range map[string]string{
		"http://127.0.0.1:9":                       "http://127.0.0.1:9/v1/chat/completions",
		"http://127.0.0.1:9/":                      "http://127.0.0.1:9/v1/chat/completions",
		"http://127.0.0.1:9/v1":                    "http://127.0.0.1:9/v1/chat/completions",
		"http://127.0.0.1:9/v1/chat/completions":   "http://127.0.0.1:9/v1/chat/completions",
		"https://example.com/openai/v1/":           "https://example.com/openai/v1/chat/completions",
		"https://example.com/api/chat/completions": "https://example.com/api/chat/completions",
	} {
		if got := (llm.Config{URL: base}).Endpoint(); got != want {
			t.Errorf("Endpoint(%q) = %q, want %q", base, got, want)
		}
	}
}

// TestComplete runs the client against a fake server on 127.0.0.1 and
// checks the request it sends and how it reads each kind of answer.
func TestComplete(t *testing.T) {
	tests := []struct {
		name    string
		status  int
		body    string
		delay   time.Duration
		want    llm.Completion
		wantErr bool
	}{
		{"answer", 200, `{"model":"fake-1-2026","choices":[{"message":{"role":"assistant","content":" Hola \n"}}],"usage":{"prompt_tokens":20,"completion_tokens":3,"total_tokens":23}}`, 0,
			llm.Completion{Content: "Hola", Model: "fake-1-2026", TotalTokens: 23}, false},
		{"no model, no total", 200, `{"choices":[{"message":{"content":"Hola"}}],"usage":{"prompt_tokens":20,"completion_tokens":3}}`, 0,
			llm.Completion{Content: "Hola", Model: "fake-1", TotalTokens: 23}, false},
		{"no usage", 200, `{"choices":[{"message":{"content":"Hola"}}]}`, 0,
			llm.Completion{Content: "Hola", Model: "fake-1"}, false},
		{"500", 500, `{"error":{"message":"boom"}}`, 0, llm.Completion{}, true},
		{"401", 401, `{"error":{"message":"bad key"}}`, 0, llm.Completion{}, true},
		{"not JSON", 200, `<html>`, 0, llm.Completion{}, true},
		{"no choices", 200, `{"choices":[]}`, 0, llm.Completion{}, true},
		{"null content", 200, `{"choices":[{"message":{"content":null}}]}`, 0, llm.Completion{}, true},
		{"blank content", 200, `{"choices":[{"message":{"content":"  "}}]}`, 0, llm.Completion{}, true},
		{"timeout", 200, `{"choices":[{"message":{"content":"late"}}]}`, 2 * time.Second, llm.Completion{}, true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var got struct {
				Model    string        `json:"model"`
				Messages []llm.Message `json:"messages"`
			}
			srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				if r.Method != http.MethodPost || r.URL.Path != "/v1/chat/completions" {
					t.Errorf("request %s %s", r.Method, r.URL.Path)
				}
				if a := r.Header.Get("Authorization"); a != "Bearer sk-test" {
					t.Errorf("Authorization %q", a)
				}
				raw, _ := io.ReadAll(r.Body)
				if err := json.Unmarshal(raw, &got); err != nil {
					t.Errorf("request body %s: %v", raw, err)
				}
				select {
				case <-time.After(tt.delay):
				case <-r.Context().Done():
					return
				}
				w.Header().Set("Content-Type", "application/json")
				w.WriteHeader(tt.status)
				_, _ = io.WriteString(w, tt.body)
			}))
			defer srv.Close()
			c := llm.New(llm.Config{URL: srv.URL, APIKey: "sk-test", Model: "fake-1", Timeout: 200 * time.Millisecond}, srv.Client())
			start := time.Now()
			res, err := c.Complete(context.Background(), []llm.Message{{Role: "user", Content: "Hello"}})
			if (err != nil) != tt.wantErr {
				t.Fatalf("err = %v, want error %v", err, tt.wantErr)
			}
			if res != tt.want {
				t.Errorf("completion %+v, want %+v", res, tt.want)
			}
			if time.Since(start) > time.Second {
				t.Errorf("took %s, past the 200 ms timeout", time.Since(start))
			}
			srv.Close() // waits for the handler, which wrote got
			if got.Model != "fake-1" || len(got.Messages) != 1 || got.Messages[0].Content != "Hello" {
				t.Errorf("sent %+v", got)
			}
		})
	}
}

func TestStatusError(t *testing.T) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		http.Error(w, "rate limited", http.StatusTooManyRequests)
	}))
	defer srv.Close()
	_, err := llm.New(llm.Config{URL: srv.URL}, nil).Complete(context.Background(), nil)
	var se *llm.StatusError
	if !errors.As(err, &se) || se.Status != http.StatusTooManyRequests {
		t.Fatalf("err = %v, want StatusError 429", err)
	}
}
