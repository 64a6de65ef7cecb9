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
		{[]string{"invoke", ep, "--task", "ping", "--input", "{not json"}, `--input "{not json" is not valid JSON: unexpected character 'n'; expected a quoted key`},
		{[]string{"invoke", ep, "--task", "ping", "--input", `{"a":1`}, `--input "{\"a\":1" is not valid JSON: the JSON ends early`},
		{[]string{"invoke", ep, "--task", "ping", "--input", `{"a":1,"a":2}`}, `is not valid JSON: duplicate key "a"`},
		{[]string{"invoke", ep, "--task", "ping", "--input", `{} {}`}, "there is data after the JSON value"},
		{[]string{"invoke", ep, "--task", "ping", "--input", "[1]"}, `--input "[1]" must be a JSON object such as '{"key": "value"}', not an array`},
		{[]string{"invoke", ep, "--task", "ping", "--input", "null"}, "must be a JSON object such as '{\"key\": \"value\"}', not null"},
		{[]string{"invoke", ep, "--task", "ping", "--task-id", "caf\u00e9"}, `--task-id "caf\u00e9" must be printable ASCII`},
		{[]string{"invoke", ep, "--task", "ping", "--timeout", "0s"}, "--timeout must be positive"},
		{[]string{"invoke", ep, "--task", "ping", "--timeout", "soon"}, `invalid argument "soon"`},
		{[]string{"invoke", ep, "--task", "ping", "--attempts", "0"}, "--attempts must be at least 1"},
		{[]string{"invoke", ep, "--task", "ping", "--task-id", strings.Repeat("x", 256)}, "--task-id is longer than 255"},
		{[]string{"invoke", "Not A Name", "--task", "ping"}, "neither an endpoint URL nor an agent name"},
		{[]string{"invoke", "ftp://example.com/x", "--task", "ping"}, "not an absolute http(s) endpoint URL"},
		{[]string{"conform"}, "conform needs an endpoint (or --fixtures)"},
		{[]string{"conform", ep}, "--task is required"},
		{[]string{"conform", ep, "--task", "ping", "--bad-input", "5"}, `--bad-input "5" must be a JSON object`},
		{[]string{"conform", ep, "a", "--task", "ping"}, "accepts at most 1 arg(s)"},
		{[]string{"conform", "--fixtures", ep}, "takes no endpoint argument"},
		{[]string{"conform", "--fixtures", "--task", "ping"}, "--task cannot be combined"},
		{[]string{"conform", "--fixtures", "--stateful"}, "--stateful cannot be combined"},
		{[]string{"conform", "--fixtures", "--url", "localhost:8080"}, "is not an absolute http(s) URL"},
	}
	for _, tc := range tests {
		r := awn(t, nil, tc.args...)
		if r.code != 2 || r.stdout != "" || !strings.Contains(r.stderr, tc.stderr) {
			t.Errorf("awn %q: want exit 2, empty stdout and %q on stderr; got %v", tc.args, tc.stderr, r)
		}
		if strings.Contains(r.stderr, "json:") || strings.Contains(r.stderr, "invalid character") {
			t.Errorf("awn %q: a Go decoder error reached the user: %s", tc.args, r.stderr)
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

// serveRaw answers every request with status and body as given.
func serveRaw(t *testing.T, status int, body string) string {
	t.Helper()
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(status)
		_, _ = w.Write([]byte(body))
	}))
	t.Cleanup(srv.Close)
	return srv.URL
}

// TestInvokeSameExitInBothModes: answers that are not a usable response
// exit 1 in text and --json mode alike, with nothing on stdout: a 200
// carrying an error, a 200 with bytes after its JSON, and an answer over
// 8 MiB, which is said to be cut.
func TestInvokeSameExitInBothModes(t *testing.T) {
	t.Parallel()
	big := `{"output":{"pad":"` + strings.Repeat("x", 9<<20) + `"},"metadata":{"agent":"a","capability":"c","duration_ms":0}}`
	tests := []struct {
		name, url, stderr string
	}{
		{"error in a 200", serveRaw(t, 200, `{"error":"invalid_input","message":"no"}`),
			"error: invalid_input: no (sent with status 200, which the protocol forbids)"},
		{"bytes after a 200", serveRaw(t, 200, `{"output":{},"metadata":{"agent":"a","capability":"c","duration_ms":0}}junk`),
			"error: the provider answered 200 with a body that is not a response"},
		{"over 8 MiB", serveRaw(t, 200, big), "error: the response was larger than 8 MiB and was cut"},
	}
	for _, tc := range tests {
		for _, mode := range [][]string{nil, {"--json"}} {
			r := awn(t, nil, append(mode, "invoke", tc.url, "--task", "c")...)
			if r.code != 1 || r.stdout != "" || !strings.HasPrefix(r.stderr, tc.stderr) {
				t.Errorf("%s %v: want exit 1, empty stdout, stderr %q; got %v", tc.name, mode, tc.stderr, r)
			}
		}
	}
}

// TestInvokeEscapesProviderText: text mode shows a provider's control
// characters (escape sequences, CR/LF, C1, bidi overrides) escaped, in the
// output, the metadata and error messages; --json prints the JSON as sent.
func TestInvokeEscapesProviderText(t *testing.T) {
	t.Parallel()
	// The output holds C1 CSI and a bidi override raw, as valid JSON may.
	ok := serveRaw(t, 200, `{"output":{"s":"a`+"\u009b"+`31mb`+"\u202e"+`"},"metadata":{"agent":"evil\u001b[2J","capability":"c","duration_ms":0,`+
		`"model":"m\r\nfake: line","note\u0007":"x\u007f"}}`)
	r := awn(t, nil, "invoke", ok, "--task", "c")
	if r.code != 0 {
		t.Fatalf("%v", r)
	}
	for _, raw := range []string{"\x1b", "\r", "\u009b", "\u202e", "\a", "\x7f", "\nfake: line"} {
		if strings.Contains(r.stdout, raw) {
			t.Errorf("stdout carries %q raw:\n%s", raw, r.stdout)
		}
	}
	for _, esc := range []string{`evil\x1b[2J`, `m\x0d\x0afake: line`, `a\x9b31mb\u202e`, `note\x07:`, `x\x7f`} {
		if !strings.Contains(r.stdout, esc) {
			t.Errorf("stdout lacks %s:\n%s", esc, r.stdout)
		}
	}
	r = awn(t, nil, "--json", "invoke", ok, "--task", "c")
	if r.code != 0 || !strings.Contains(r.stdout, `"evil\u001b[2J"`) || !strings.Contains(r.stdout, `"m\r\nfake: line"`) {
		t.Errorf("--json is not the JSON as sent: %v", r)
	}
	bad := serveRaw(t, 400, `{"error":"invalid_input","message":"no\u001b]0;pwned\u0007\r\nawn: ok"}`)
	r = awn(t, nil, "invoke", bad, "--task", "c")
	if r.code != 1 || strings.ContainsAny(r.stderr[:len(r.stderr)-1], "\x1b\a\r\n") || !strings.Contains(r.stderr, `no\x1b]0;pwned\x07\x0d\x0aawn: ok`) {
		t.Errorf("error message not escaped: %q", r.stderr)
	}
}
