// Package llm is a minimal client for OpenAI-compatible chat completion
// endpoints (POST /v1/chat/completions), the one upstream of the translator
// fixture. It sends a Bearer key and a model and reads back the first
// choice's message and the token usage; nothing else of the API is needed.
//
// Every call is bounded by a timeout so that a slow upstream leaves the
// caller time to fall back before its own deadline.
package llm

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strings"
	"time"
)

// DefaultTimeout bounds one completion when Config.Timeout is zero. It is
// well inside the translator's Lambda timeout, leaving time for the fallback.
const DefaultTimeout = 8 * time.Second

// maxResponse bounds the response body read from the upstream.
const maxResponse = 4 << 20

// Config says where and how to call the endpoint.
type Config struct {
	// URL is the server's base URL (e.g. https://api.openai.com or
	// http://127.0.0.1:11434); "/v1/chat/completions" is appended unless
	// the URL already ends in "/chat/completions", and "/chat/completions"
	// when it ends in "/v1". Empty means no LLM is configured.
	URL string
	// APIKey is sent as "Authorization: Bearer <key>" when not empty.
	APIKey string
	// Model is the model name sent with each request.
	Model string
	// Timeout bounds one call (default DefaultTimeout).
	Timeout time.Duration
}

// Enabled reports whether an endpoint is configured.
func (c Config) Enabled() bool { return c.URL != "" }

// Endpoint is the full chat completions URL for c.URL.
func (c Config) Endpoint() string {
	u := strings.TrimRight(c.URL, "/")
	switch {
	case strings.HasSuffix(u, "/chat/completions"):
		return u
	case strings.HasSuffix(u, "/v1"):
		return u + "/chat/completions"
	}
	return u + "/v1/chat/completions"
}

// Message is one chat message.
type Message struct {
	Role    string `json:"role"`
	Content string `json:"content"`
}

// Completion is what a call returns.
type Completion struct {
	// Content is choices[0].message.content, trimmed of surrounding space.
	Content string
	// Model is the model the server says answered, or the configured one
	// when the server does not say.
	Model string
	// TotalTokens is usage.total_tokens (prompt + completion when the
	// server reports only those).
	TotalTokens int64
}

// Client calls one endpoint. It is safe for concurrent use.
type Client struct {
	cfg  Config
	http *http.Client
}

// New returns a client for cfg; hc nil means http.DefaultClient. The caller
// builds it once (in a Lambda main, outside the handler) so connections are
// reused across invocations.
func New(cfg Config, hc *http.Client) *Client {
	if cfg.Timeout <= 0 {
		cfg.Timeout = DefaultTimeout
	}
	if hc == nil {
		hc = http.DefaultClient
	}
	return &Client{cfg: cfg, http: hc}
}

// Model is the configured model name.
func (c *Client) Model() string { return c.cfg.Model }

type request struct {
	Model       string    `json:"model,omitempty"`
	Messages    []Message `json:"messages"`
	Temperature float64   `json:"temperature"`
}

type response struct {
	Model   string `json:"model"`
	Choices []struct {
		Message struct {
			Content *string `json:"content"`
		} `json:"message"`
	} `json:"choices"`
	Usage *struct {
		PromptTokens     int64 `json:"prompt_tokens"`
		CompletionTokens int64 `json:"completion_tokens"`
		TotalTokens      int64 `json:"total_tokens"`
	} `json:"usage"`
}

// StatusError is a non-2xx answer from the endpoint.
type StatusError struct {
	Status int
	// Body is the start of the response body, for logs only.
	Body string
}

func (e *StatusError) Error() string {
	return fmt.Sprintf("llm: endpoint answered %d: %s", e.Status, e.Body)
}

// ErrEmpty means the endpoint answered without any content.
var ErrEmpty = errors.New("llm: response has no content")

// Complete sends messages at temperature 0 and returns the first choice. It
// fails on a transport error, the timeout, a non-2xx status, a body that is
// not a chat completion, and an empty answer.
func (c *Client) Complete(ctx context.Context, messages []Message) (Completion, error) {
	body, err := json.Marshal(request{Model: c.cfg.Model, Messages: messages})
	if err != nil {
		return Completion{}, fmt.Errorf("llm: encode request: %w", err)
	}
	ctx, cancel := context.WithTimeout(ctx, c.cfg.Timeout)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, c.cfg.Endpoint(), bytes.NewReader(body))
	if err != nil {
		return Completion{}, fmt.Errorf("llm: build request: %w", err)
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Accept", "application/json")
	if c.cfg.APIKey != "" {
		req.Header.Set("Authorization", "Bearer "+c.cfg.APIKey)
	}
	resp, err := c.http.Do(req)
	if err != nil {
		return Completion{}, fmt.Errorf("llm: %w", err)
	}
	defer resp.Body.Close()
	raw, err := io.ReadAll(io.LimitReader(resp.Body, maxResponse+1))
	if err != nil {
		return Completion{}, fmt.Errorf("llm: read response: %w", err)
	}
	if resp.StatusCode < 200 || resp.StatusCode > 299 {
		return Completion{}, &StatusError{Status: resp.StatusCode, Body: snippet(raw)}
	}
	if len(raw) > maxResponse {
		return Completion{}, fmt.Errorf("llm: response larger than %d bytes", maxResponse)
	}
	var r response
	if err := json.Unmarshal(raw, &r); err != nil {
		return Completion{}, fmt.Errorf("llm: decode response: %w", err)
	}
	if len(r.Choices) == 0 || r.Choices[0].Message.Content == nil {
		return Completion{}, ErrEmpty
	}
	content := strings.TrimSpace(*r.Choices[0].Message.Content)
	if content == "" {
		return Completion{}, ErrEmpty
	}
	out := Completion{Content: content, Model: r.Model}
	if out.Model == "" {
		out.Model = c.cfg.Model
	}
	if u := r.Usage; u != nil {
		out.TotalTokens = u.TotalTokens
		if out.TotalTokens == 0 {
			out.TotalTokens = u.PromptTokens + u.CompletionTokens
		}
	}
	return out, nil
}

func snippet(b []byte) string {
	const n = 200
	if len(b) > n {
		b = b[:n]
	}
	return strings.ToValidUTF8(string(b), "?")
}
