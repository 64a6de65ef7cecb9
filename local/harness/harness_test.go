package harness_test

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"reflect"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/a2awire/a2awire/local/harness"
	"github.com/a2awire/a2awire/shared/lambdahttp"
	"github.com/a2awire/a2awire/shared/logging"
	"github.com/a2awire/a2awire/shared/routes"
	"github.com/a2awire/a2awire/shared/store/memory"
	"github.com/aws/aws-lambda-go/events"
)

func testOptions(t *testing.T) harness.Options {
	t.Helper()
	return harness.Options{Log: logging.Discard()}
}

func mustHarness(t *testing.T, o harness.Options) *harness.Harness {
	t.Helper()
	h, err := harness.New(o)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { h.Close() })
	return h
}

// TestHandlersCoverRoutesAndFolders keeps the harness's list of functions,
// the route table and the functions/ folders in step.
func TestHandlersCoverRoutesAndFolders(t *testing.T) {
	var handlers []string
	for name := range harness.Handlers(testOptions(t), memory.New()) {
		handlers = append(handlers, name)
	}
	slices.Sort(handlers)
	dirs, err := os.ReadDir("../../functions")
	if err != nil {
		t.Fatal(err)
	}
	var folders []string
	for _, d := range dirs {
		if d.IsDir() {
			folders = append(folders, d.Name())
		}
	}
	if !slices.Equal(handlers, routes.Functions()) {
		t.Errorf("harness functions %v != route table functions %v", handlers, routes.Functions())
	}
	if !slices.Equal(handlers, folders) {
		t.Errorf("harness functions %v != functions/ folders %v", handlers, folders)
	}
}

// expectation is one events/expected.json entry: the status and the JSON
// body the sample event gets, with the keys under Ignore (dotted paths,
// values that change per run) left out of the comparison.
type expectation struct {
	Status int             `json:"status,omitempty"`
	Body   json.RawMessage `json:"body,omitempty"`
	Ignore []string        `json:"ignore,omitempty"`
	// Trigger marks a stream or schedule sample (see TestTriggerSampleEvents).
	Trigger string `json:"trigger,omitempty"`
}

func readExpected(t *testing.T) map[string]expectation {
	t.Helper()
	raw, err := os.ReadFile("../../events/expected.json")
	if err != nil {
		t.Fatal(err)
	}
	var expected map[string]expectation
	if err := json.Unmarshal(raw, &expected); err != nil {
		t.Fatalf("events/expected.json: %v", err)
	}
	return expected
}

// TestSampleEvents runs every API Gateway sample in events/ through its
// function's Lambda entry, as `make invoke` does, and checks the status and
// body recorded for it in events/expected.json.
func TestSampleEvents(t *testing.T) {
	expected := readExpected(t)
	files, err := filepath.Glob("../../events/*.json")
	if err != nil {
		t.Fatal(err)
	}
	h := mustHarness(t, testOptions(t))
	seen := 0
	for _, path := range files {
		name := filepath.Base(path)
		if name == "expected.json" {
			continue
		}
		seen++
		want, ok := expected[name]
		if !ok {
			t.Errorf("no expectation for %s in events/expected.json", name)
			continue
		}
		if want.Trigger != "" {
			continue
		}
		t.Run(name, func(t *testing.T) {
			fn := functionOf(name)
			if fn == "" {
				t.Fatalf("%s does not start with a function name", name)
			}
			b, err := os.ReadFile(path)
			if err != nil {
				t.Fatal(err)
			}
			ctx, cancel := context.WithTimeout(context.Background(), 15*time.Second)
			defer cancel()
			out, err := h.Invoke(ctx, fn, b)
			if err != nil {
				t.Fatal(err)
			}
			var resp events.APIGatewayV2HTTPResponse
			if err := json.Unmarshal(out, &resp); err != nil {
				t.Fatal(err)
			}
			if resp.StatusCode != want.Status {
				t.Errorf("status %d, want %d; body %s", resp.StatusCode, want.Status, resp.Body)
			}
			if got, exp := normalize(t, []byte(resp.Body), want.Ignore), normalize(t, want.Body, want.Ignore); !reflect.DeepEqual(got, exp) {
				t.Errorf("body %s\nwant %s (ignoring %v)", resp.Body, want.Body, want.Ignore)
			}
		})
	}
	if seen != len(expected) {
		t.Errorf("events/expected.json lists %d files, events/ holds %d", len(expected), seen)
	}
}

// normalize decodes a JSON body and deletes the ignored dotted paths.
func normalize(t *testing.T, body []byte, ignore []string) any {
	t.Helper()
	if len(body) == 0 {
		return nil
	}
	var v any
	if err := json.Unmarshal(body, &v); err != nil {
		t.Fatalf("body is not JSON: %v: %s", err, body)
	}
	for _, path := range ignore {
		parts := strings.Split(path, ".")
		m, _ := v.(map[string]any)
		for _, p := range parts[:len(parts)-1] {
			m, _ = m[p].(map[string]any)
		}
		if _, ok := m[parts[len(parts)-1]]; !ok {
			t.Errorf("ignored key %s is not in the body %s", path, body)
		}
		delete(m, parts[len(parts)-1])
	}
	return v
}

// functionOf returns the longest function name that prefixes the file name.
func functionOf(file string) string {
	best := ""
	for _, fn := range routes.Functions() {
		if strings.HasPrefix(file, fn+"-") && len(fn) > len(best) {
			best = fn
		}
	}
	return best
}

// TestEndToEnd serves the harness on 127.0.0.1:0 and calls punctual over
// real HTTP.
func TestEndToEnd(t *testing.T) {
	srv := httptest.NewServer(mustHarness(t, testOptions(t)))
	defer srv.Close()
	url := srv.URL + "/agents/a2awire-punctual/invoke"

	post := func(ctype string, body io.Reader) (*http.Response, map[string]any) {
		t.Helper()
		resp, err := http.Post(url, ctype, body)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		var m map[string]any
		if err := json.NewDecoder(resp.Body).Decode(&m); err != nil {
			t.Fatalf("status %d: body is not JSON: %v", resp.StatusCode, err)
		}
		return resp, m
	}

	resp, m := post("application/json", strings.NewReader(`{"task":"ping","input":{"echo":"hi"}}`))
	out, _ := m["output"].(map[string]any)
	meta, _ := m["metadata"].(map[string]any)
	if resp.StatusCode != 200 || out["pong"] != true || out["echo"] != "hi" ||
		meta["agent"] != "a2awire-punctual" || meta["capability"] != "ping" {
		t.Fatalf("ping: %d %v", resp.StatusCode, m)
	}
	if d, ok := meta["duration_ms"].(float64); !ok || d != float64(int64(d)) || d < 0 {
		t.Errorf("duration_ms = %v", meta["duration_ms"])
	}

	errorCases := []struct {
		name   string
		ctype  string
		body   io.Reader
		status int
		code   string
	}{
		{"unknown task", "application/json", strings.NewReader(`{"task":"nope"}`), 400, "unsupported_capability"},
		{"text/plain", "text/plain", strings.NewReader(`{"task":"ping"}`), 415, "unsupported_media_type"},
		{"malformed", "application/json", strings.NewReader(`{]`), 422, "invalid_request"},
		{"2 MiB", "application/json", bytes.NewReader(bytes.Repeat([]byte(" "), 2<<20)), 413, "payload_too_large"},
	}
	for _, c := range errorCases {
		resp, m := post(c.ctype, c.body)
		if resp.StatusCode != c.status || m["error"] != c.code || m["message"] == "" || len(m) < 2 {
			t.Errorf("%s: %d %v, want %d %s", c.name, resp.StatusCode, m, c.status, c.code)
		}
	}

	get, err := http.Get(url)
	if err != nil {
		t.Fatal(err)
	}
	get.Body.Close()
	if get.StatusCode != 405 || get.Header.Get("Allow") != "POST" {
		t.Errorf("GET: %d Allow=%q", get.StatusCode, get.Header.Get("Allow"))
	}

	nf, err := http.Get(srv.URL + "/no/such/route")
	if err != nil {
		t.Fatal(err)
	}
	b, _ := io.ReadAll(nf.Body)
	nf.Body.Close()
	if nf.StatusCode != 404 || string(b) != `{"message":"Not Found"}` {
		t.Errorf("unknown route: %d %s", nf.StatusCode, b)
	}
}

// TestTaskIDsWithCommas: through the harness, x,a and x,b and "x, b" are
// three tasks, and a repeat of x,a is a replay (issue 9).
func TestTaskIDsWithCommas(t *testing.T) {
	srv := httptest.NewServer(mustHarness(t, testOptions(t)))
	defer srv.Close()
	record := func(id string) (int, string, map[string]any) {
		t.Helper()
		req, _ := http.NewRequest("POST", srv.URL+"/agents/a2awire-ledger/invoke",
			strings.NewReader(`{"task":"record-entry","input":{"account":"commas","amount_cents":100}}`))
		req.Header.Set("Content-Type", "application/json")
		req.Header.Set("X-A2AWire-Task-Id", id)
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		var m map[string]any
		_ = json.NewDecoder(resp.Body).Decode(&m)
		return resp.StatusCode, resp.Header.Get("X-A2AWire-Replayed"), m
	}
	for _, id := range []string{"x,a", "x,b", "x, b"} {
		if status, replayed, m := record(id); status != 200 || replayed == "true" {
			t.Errorf("task %q: %d replayed=%q %v", id, status, replayed, m)
		}
	}
	if status, replayed, _ := record("x,a"); status != 200 || replayed != "true" {
		t.Errorf("repeat of x,a: %d replayed=%q, want a replay", status, replayed)
	}
	req, _ := http.NewRequest("POST", srv.URL+"/agents/a2awire-ledger/invoke", strings.NewReader(`{"task":"balance","input":{"account":"commas"}}`))
	req.Header.Set("Content-Type", "application/json")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var m struct {
		Output struct {
			Entries int `json:"entries"`
		} `json:"output"`
	}
	if err := json.NewDecoder(resp.Body).Decode(&m); err != nil || m.Output.Entries != 3 {
		t.Errorf("entries = %d (%v), want 3", m.Output.Entries, err)
	}
}

// TestAccessLog: one access line per request, and its request_id is the
// one the function saw (its own log lines carry the same id), so the two
// can be joined.
func TestAccessLog(t *testing.T) {
	var buf bytes.Buffer
	h := mustHarness(t, harness.Options{Log: logging.New(&buf, logging.JSON, slog.LevelInfo)})
	buf.Reset() // what the builders logged at start
	r := httptest.NewRequest("POST", "/agents/a2awire-messy/invoke", strings.NewReader(`{"task":"messy-echo","input":{"simulate":"upstream_error"}}`))
	r.Header.Set("Content-Type", "application/json")
	w := httptest.NewRecorder()
	h.ServeHTTP(w, r)
	h.ServeHTTP(httptest.NewRecorder(), httptest.NewRequest("GET", "/nowhere", nil))

	var recs []map[string]any
	dec := json.NewDecoder(&buf)
	for dec.More() {
		var rec map[string]any
		if err := dec.Decode(&rec); err != nil {
			t.Fatalf("log: %v", err)
		}
		recs = append(recs, rec)
	}
	var access, fn []map[string]any
	for _, rec := range recs {
		if rec["msg"] == "request" {
			access = append(access, rec)
		} else {
			fn = append(fn, rec)
		}
	}
	if len(access) != 2 || len(fn) == 0 {
		t.Fatalf("want 2 access lines and the function's own line(s); got %v", recs)
	}
	for i, want := range []map[string]any{
		{"method": "POST", "path": "/agents/a2awire-messy/invoke", "status": 502.0, "function": "fixture-messy"},
		{"method": "GET", "path": "/nowhere", "status": 404.0, "function": "-"},
	} {
		for k, v := range want {
			if access[i][k] != v {
				t.Errorf("access log %s = %v, want %v (%v)", k, access[i][k], v, access[i])
			}
		}
		if _, ok := access[i]["duration_ms"].(float64); !ok {
			t.Errorf("access log without duration_ms: %v", access[i])
		}
		if id, _ := access[i]["request_id"].(string); len(id) != 32 {
			t.Errorf("access log without request_id: %v", access[i])
		}
	}
	id := access[0]["request_id"]
	if fn[0]["request_id"] != id {
		t.Errorf("the function logged request_id %v, the access line %v: they must be the same", fn[0]["request_id"], id)
	}
	if w.Header().Get("Apigw-Requestid") != id {
		t.Errorf("Apigw-Requestid %q, want %v", w.Header().Get("Apigw-Requestid"), id)
	}
	if access[0]["request_id"] == access[1]["request_id"] {
		t.Error("two requests share a request id")
	}
}

// TestEveryBuilderBuilds: the builder the route table names for each
// function builds in the harness's Env (none answers as a failed init), and
// each function that serves routes gets lambdahttp.Entry's handler, the
// one that keeps headers as the gateway sent them (a streaming function
// its plain http.Handler).
func TestEveryBuilderBuilds(t *testing.T) {
	st := memory.New()
	t.Cleanup(func() { _ = st.Close() })
	for name, h := range harness.Handlers(testOptions(t), st) {
		if _, failed := h.(func(context.Context, json.RawMessage) (json.RawMessage, error)); failed {
			t.Errorf("%s: its builder failed", name)
		}
		_, isEntry := h.(lambdahttp.Handler)
		if routes.Streamed(name) {
			// A streaming function is its http.Handler, served by
			// lambdaurl in AWS and directly by the harness.
			if _, ok := h.(http.Handler); !ok || isEntry {
				t.Errorf("%s streams: want a plain http.Handler, got %T", name, h)
			}
			continue
		}
		if serves := len(routes.ForFunction(name)) > 0; serves != isEntry {
			t.Errorf("%s: serves routes %v, is lambdahttp.Entry's handler %v (%T)", name, serves, isEntry, h)
		}
	}
}

// run starts h's triggers (h.Run) until stop, which cancels them, waits
// for Run to return and fails t if it returned an error. The context is
// Run's, for calls that should end with it.
func run(t *testing.T, h *harness.Harness) (ctx context.Context, stop func()) {
	t.Helper()
	ctx, cancel := context.WithCancel(t.Context())
	end := h.Start(ctx)
	return ctx, func() {
		cancel()
		if err := end(); err != nil {
			t.Error(err)
		}
	}
}
