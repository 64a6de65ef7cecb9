package main

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/a2awire/a2awire/local/harness"
	"github.com/a2awire/a2awire/shared/protocol"
	"github.com/a2awire/a2awire/shared/store/memory"
)

// result is one in-process run of the CLI.
type result struct {
	code           int
	stdout, stderr string
}

// awn runs the CLI with args and the environment env (nothing else of the
// process environment leaks in), bounded so a hung probe fails the test.
func awn(t *testing.T, env map[string]string, args ...string) result {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	var out, errb bytes.Buffer
	code := run(ctx, args, func(k string) string { return env[k] }, &out, &errb)
	return result{code: code, stdout: out.String(), stderr: errb.String()}
}

func (r result) String() string {
	return fmt.Sprintf("exit %d\n--- stdout\n%s--- stderr\n%s", r.code, r.stdout, r.stderr)
}

// gateway serves every function through the in-process API Gateway on
// loopback, with a fresh memory store.
func gateway(t *testing.T) string {
	t.Helper()
	gw, err := harness.New(harness.Options{Log: slog.New(slog.DiscardHandler), Store: memory.New()})
	if err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer(gw)
	t.Cleanup(srv.Close)
	return srv.URL
}

func punctualURL(base string) string { return base + "/agents/a2awire-punctual/invoke" }

// decodeStrict decodes one JSON document and fails on anything after it.
func decodeStrict(t *testing.T, s string, v any) {
	t.Helper()
	dec := json.NewDecoder(strings.NewReader(s))
	if err := dec.Decode(v); err != nil {
		t.Fatalf("stdout is not JSON: %v\n%s", err, s)
	}
	if dec.More() {
		t.Fatalf("stdout holds more than one JSON document:\n%s", s)
	}
}

func keys(m map[string]json.RawMessage) []string {
	var ks []string
	for k := range m {
		ks = append(ks, k)
	}
	slices.Sort(ks)
	return ks
}

func TestInvokeHuman(t *testing.T) {
	t.Parallel()
	base := gateway(t)
	r := awn(t, nil, "invoke", punctualURL(base), "--task", "ping", "--input", `{"echo":"hi"}`)
	if r.code != 0 {
		t.Fatalf("%v", r)
	}
	for _, want := range []string{`"pong": true`, `"echo": "hi"`, "agent:", "a2awire-punctual", "capability:", "ping", "duration_ms:", "task_id:"} {
		if !strings.Contains(r.stdout, want) {
			t.Errorf("stdout lacks %q:\n%s", want, r.stdout)
		}
	}
	if r.stderr != "" {
		t.Errorf("stderr: %s", r.stderr)
	}
}

// TestInvokeJSON: --json before or after the arguments prints the
// provider's response, one document.
func TestInvokeJSON(t *testing.T) {
	t.Parallel()
	base := gateway(t)
	for _, args := range [][]string{
		{"--json", "invoke", punctualURL(base), "--task", "ping"},
		{"invoke", "--json", punctualURL(base), "--task", "ping"},
		{"invoke", punctualURL(base), "--task", "ping", "--json"},
	} {
		r := awn(t, nil, args...)
		if r.code != 0 {
			t.Fatalf("%v: %v", args, r)
		}
		var resp struct {
			Output   map[string]any `json:"output"`
			Metadata map[string]any `json:"metadata"`
		}
		decodeStrict(t, r.stdout, &resp)
		if resp.Output["pong"] != true || resp.Metadata["agent"] != "a2awire-punctual" || resp.Metadata["capability"] != "ping" {
			t.Errorf("%v: response %+v", args, resp)
		}
		if _, ok := resp.Metadata["duration_ms"].(float64); !ok {
			t.Errorf("%v: duration_ms %v", args, resp.Metadata["duration_ms"])
		}
	}
}

// TestInvokeErrors: a refusal prints "error: <code>: <message>" on stderr
// and exits 1 with nothing on stdout, also for answers outside the protocol.
func TestInvokeErrors(t *testing.T) {
	t.Parallel()
	base := gateway(t)
	closed := httptest.NewServer(http.NotFoundHandler())
	closed.Close()
	tests := []struct {
		name   string
		args   []string
		stderr string
	}{
		{"invalid input", []string{"invoke", punctualURL(base), "--task", "latency-benchmark", "--input", `{"delay_ms":-1}`},
			"error: invalid_input: input.delay_ms must be between 0 and 5000\n"},
		{"unsupported capability", []string{"--json", "invoke", punctualURL(base), "--task", "nope"},
			"error: unsupported_capability: "},
		{"not a provider", []string{"invoke", base + "/agents/nobody/invoke", "--task", "ping"},
			`error: 404 Not Found: {"message":"Not Found"}`},
		{"connection refused", []string{"invoke", closed.URL + "/invoke", "--task", "ping", "--attempts", "1"},
			"awn: invoke " + closed.URL},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			r := awn(t, nil, tc.args...)
			if r.code != 1 || r.stdout != "" || !strings.HasPrefix(r.stderr, tc.stderr) {
				t.Fatalf("want exit 1, empty stdout, stderr starting %q; got %v", tc.stderr, r)
			}
		})
	}
}

// TestInvokeRetriesWithOneTaskID: --task-id reaches the provider on every
// attempt, and a 503 with Retry-After is retried.
func TestInvokeRetriesWithOneTaskID(t *testing.T) {
	t.Parallel()
	var (
		mu  sync.Mutex
		ids []string
	)
	p := protocol.NewProvider("test-provider", protocol.WithLogger(slog.New(slog.DiscardHandler)))
	p.HandleFunc("echo", func(_ context.Context, in json.RawMessage) (any, error) { return in, nil })
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		ids = append(ids, r.Header.Get(protocol.TaskIDHeader))
		n := len(ids)
		mu.Unlock()
		if n == 1 {
			w.Header().Set("Retry-After", "0")
			w.Header().Set("Content-Type", "application/json")
			w.WriteHeader(http.StatusServiceUnavailable)
			_, _ = w.Write([]byte(`{"error":"unavailable","message":"try again"}`))
			return
		}
		p.ServeHTTP(w, r)
	}))
	t.Cleanup(srv.Close)
	r := awn(t, nil, "invoke", srv.URL, "--task", "echo", "--input", `{"a":1}`, "--task-id", "order-42")
	if r.code != 0 {
		t.Fatalf("%v", r)
	}
	if !slices.Equal(ids, []string{"order-42", "order-42"}) {
		t.Errorf("task ids %v", ids)
	}
	for _, want := range []string{"task_id:      order-42", "attempts:     2"} {
		if !strings.Contains(r.stdout, want) {
			t.Errorf("stdout lacks %q:\n%s", want, r.stdout)
		}
	}
}

// TestUsage: every mistake on the command line exits 2, says what is wrong
// on stderr and prints nothing on stdout.
func TestUsage(t *testing.T) {
	t.Parallel()
	ep := "http://127.0.0.1:1/agents/a2awire-punctual/invoke"
	tests := []struct {
		args   []string
		stderr string
	}{
		{nil, "no command given"},
		{[]string{"frobnicate"}, `unknown command "frobnicate"`},
		{[]string{"--bogus", "invoke"}, "unknown flag: --bogus"},
		{[]string{"invoke", ep}, `required flag(s) "task" not set`},
		{[]string{"invoke", ep, "--task", ""}, "--task must name a capability"},
		{[]string{"invoke"}, "accepts 1 arg(s), received 0"},
		{[]string{"invoke", ep, "--task", "ping", "--input", "{not json"}, "--input {not json: "},
		{[]string{"invoke", ep, "--task", "ping", "--input", "[1]"}, "--input [1]: "},
		{[]string{"invoke", ep, "--task", "ping", "--input", "null"}, "not a JSON object"},
		{[]string{"invoke", ep, "--task", "ping", "--timeout", "0s"}, "--timeout must be positive"},
		{[]string{"invoke", ep, "--task", "ping", "--timeout", "soon"}, `invalid argument "soon"`},
		{[]string{"invoke", ep, "--task", "ping", "--attempts", "0"}, "--attempts must be at least 1"},
		{[]string{"invoke", ep, "--task", "ping", "--task-id", strings.Repeat("x", 256)}, "--task-id is longer than 255"},
		{[]string{"invoke", "a2awire-punctual", "--task", "ping"}, "needs the registry"},
		{[]string{"invoke", "Not A Name", "--task", "ping"}, "neither an endpoint URL nor an agent name"},
		{[]string{"invoke", "ftp://example.com/x", "--task", "ping"}, "not an absolute http(s) endpoint URL"},
		{[]string{"conform"}, "conform needs an endpoint (or --fixtures)"},
		{[]string{"conform", ep}, "--task is required"},
		{[]string{"conform", ep, "--task", "ping", "--bad-input", "5"}, "--bad-input 5: "},
		{[]string{"conform", ep, "a", "--task", "ping"}, "accepts at most 1 arg(s)"},
		{[]string{"conform", "--fixtures", ep}, "takes no endpoint argument"},
		{[]string{"conform", "--fixtures", "--task", "ping"}, "--task cannot be combined"},
		{[]string{"conform", "--fixtures", "--stateful"}, "--stateful cannot be combined"},
		{[]string{"conform", "--fixtures", "--url", "localhost:8080"}, "is not an absolute http(s) URL"},
		{[]string{"conform", "a2awire-ledger", "--task", "ping"}, "needs the registry"},
	}
	for _, tc := range tests {
		r := awn(t, nil, tc.args...)
		if r.code != 2 || r.stdout != "" || !strings.Contains(r.stderr, tc.stderr) {
			t.Errorf("awn %q: want exit 2, empty stdout and %q on stderr; got %v", tc.args, tc.stderr, r)
		}
		if r.code == 2 && !strings.Contains(r.stderr, "--help' for usage.") {
			t.Errorf("awn %q: no usage hint: %s", tc.args, r.stderr)
		}
	}
}

// TestHelp: asking for help is not a mistake.
func TestHelp(t *testing.T) {
	t.Parallel()
	for _, args := range [][]string{{"--help"}, {"conform", "--help"}, {"help", "invoke"}} {
		r := awn(t, nil, args...)
		if r.code != 0 || !strings.Contains(r.stdout, "Usage:") {
			t.Errorf("awn %q: %v", args, r)
		}
	}
}
