package harness_test

import (
	"bytes"
	"context"
	"encoding/base64"
	"encoding/json"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/a2awire/a2awire/local/harness"
	"github.com/a2awire/a2awire/shared/logging"
	"github.com/a2awire/a2awire/shared/routes"
	"github.com/aws/aws-lambda-go/events"
)

func testOptions(t *testing.T) harness.Options {
	t.Helper()
	return harness.Options{Log: logging.Discard()}
}

func mustGateway(t *testing.T) *harness.Gateway {
	t.Helper()
	gw, err := harness.New(testOptions(t))
	if err != nil {
		t.Fatal(err)
	}
	return gw
}

// TestHandlersCoverRoutesAndFolders keeps the harness's list of functions,
// the route table and the functions/ folders in step.
func TestHandlersCoverRoutesAndFolders(t *testing.T) {
	var handlers []string
	for name := range harness.Handlers(testOptions(t)) {
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

// TestSampleEvents runs every events/*.json through its function's Lambda
// entry and checks the status recorded for it in events/expected.json.
func TestSampleEvents(t *testing.T) {
	raw, err := os.ReadFile("../../events/expected.json")
	if err != nil {
		t.Fatal(err)
	}
	var expected map[string]int
	if err := json.Unmarshal(raw, &expected); err != nil {
		t.Fatalf("events/expected.json: %v", err)
	}
	files, err := filepath.Glob("../../events/*.json")
	if err != nil {
		t.Fatal(err)
	}
	gw := mustGateway(t)
	seen := 0
	for _, path := range files {
		name := filepath.Base(path)
		if name == "expected.json" {
			continue
		}
		seen++
		t.Run(name, func(t *testing.T) {
			want, ok := expected[name]
			if !ok {
				t.Fatalf("no expected status for %s in events/expected.json", name)
			}
			fn := functionOf(name)
			if fn == "" {
				t.Fatalf("%s does not start with a function name", name)
			}
			b, err := os.ReadFile(path)
			if err != nil {
				t.Fatal(err)
			}
			var event events.APIGatewayV2HTTPRequest
			if err := json.Unmarshal(b, &event); err != nil {
				t.Fatal(err)
			}
			ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
			defer cancel()
			resp, err := gw.Invoke(ctx, fn, event)
			if err != nil {
				t.Fatal(err)
			}
			if resp.StatusCode != want {
				t.Errorf("status %d, want %d; body %s", resp.StatusCode, want, resp.Body)
			}
		})
	}
	if seen != len(expected) {
		t.Errorf("events/expected.json lists %d files, events/ holds %d", len(expected), seen)
	}
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

func TestBuildEvent(t *testing.T) {
	body := []byte{0xff, 0xfe, 0x00, 'x'}
	r := httptest.NewRequest(http.MethodPost, "http://127.0.0.1:8080/a/b%20c?x=1&x=2&y=3", bytes.NewReader(body))
	r.Header.Add("X-Multi", "one")
	r.Header.Add("X-Multi", "two")
	r.Header.Set("Cookie", "a=1; b=2")
	r.RemoteAddr = "127.0.0.9:5555"
	route := routes.Route{Method: "POST", Path: "/a/{name}", Function: "f"}
	now := time.Unix(1700000000, 0)
	e := harness.BuildEvent(r, route, map[string]string{"name": "b c"}, body, now)

	if e.Version != "2.0" || e.RouteKey != "POST /a/{name}" || e.RequestContext.RouteKey != e.RouteKey {
		t.Errorf("version/routeKey = %q %q", e.Version, e.RouteKey)
	}
	if e.RawPath != "/a/b%20c" || e.RawQueryString != "x=1&x=2&y=3" {
		t.Errorf("rawPath %q rawQueryString %q", e.RawPath, e.RawQueryString)
	}
	if e.Headers["x-multi"] != "one,two" || e.Headers["cookie"] != "" {
		t.Errorf("headers = %v", e.Headers)
	}
	if !slices.Equal(e.Cookies, []string{"a=1", "b=2"}) {
		t.Errorf("cookies = %q", e.Cookies)
	}
	if e.QueryStringParameters["x"] != "1,2" || e.QueryStringParameters["y"] != "3" {
		t.Errorf("query = %v", e.QueryStringParameters)
	}
	if e.PathParameters["name"] != "b c" {
		t.Errorf("path params = %v", e.PathParameters)
	}
	h := e.RequestContext.HTTP
	if h.Method != "POST" || h.Path != "/a/b c" || h.SourceIP != "127.0.0.9" {
		t.Errorf("requestContext.http = %+v", h)
	}
	if e.RequestContext.RequestID == "" || e.RequestContext.TimeEpoch != now.UnixMilli() || e.RequestContext.Stage != "$default" {
		t.Errorf("requestContext = %+v", e.RequestContext)
	}
	if !e.IsBase64Encoded || e.Body != base64.StdEncoding.EncodeToString(body) {
		t.Errorf("non-UTF-8 body not base64: %v %q", e.IsBase64Encoded, e.Body)
	}

	text := harness.BuildEvent(httptest.NewRequest("GET", "/", nil), route, nil, []byte(`{"a":"é"}`), now)
	if text.IsBase64Encoded || text.Body != `{"a":"é"}` {
		t.Errorf("UTF-8 body = %v %q", text.IsBase64Encoded, text.Body)
	}
}

func TestWriteResponse(t *testing.T) {
	w := httptest.NewRecorder()
	err := harness.WriteResponse(w, events.APIGatewayV2HTTPResponse{
		StatusCode:        201,
		Headers:           map[string]string{"X-One": "1"},
		MultiValueHeaders: map[string][]string{"X-Many": {"a", "b"}},
		Cookies:           []string{"s=1; Path=/"},
		Body:              base64.StdEncoding.EncodeToString([]byte{0, 1, 2}),
		IsBase64Encoded:   true,
	})
	if err != nil {
		t.Fatal(err)
	}
	if w.Code != 201 || w.Header().Get("X-One") != "1" || !slices.Equal(w.Header()["X-Many"], []string{"a", "b"}) ||
		w.Header().Get("Set-Cookie") != "s=1; Path=/" || !bytes.Equal(w.Body.Bytes(), []byte{0, 1, 2}) {
		t.Errorf("written: %d %v %q", w.Code, w.Header(), w.Body.Bytes())
	}
	if err := harness.WriteResponse(httptest.NewRecorder(), events.APIGatewayV2HTTPResponse{Body: "!", IsBase64Encoded: true}); err == nil {
		t.Error("bad base64 accepted")
	}
}

// TestEndToEnd serves the harness on 127.0.0.1:0 and calls punctual over
// real HTTP, covering the foundation issue's must-show list.
func TestEndToEnd(t *testing.T) {
	srv := httptest.NewServer(mustGateway(t))
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

func TestGatewayRejectsMissingEntry(t *testing.T) {
	if _, err := harness.NewGateway(map[string]harness.Entry{}, logging.Discard()); err == nil {
		t.Error("gateway without entries accepted")
	}
}

func TestGatewaySurvivesFailingEntry(t *testing.T) {
	entries := map[string]harness.Entry{}
	for _, fn := range routes.Functions() {
		entries[fn] = func(context.Context, events.APIGatewayV2HTTPRequest) (events.APIGatewayV2HTTPResponse, error) {
			panic("boom")
		}
	}
	gw, err := harness.NewGateway(entries, logging.Discard())
	if err != nil {
		t.Fatal(err)
	}
	w := httptest.NewRecorder()
	gw.ServeHTTP(w, httptest.NewRequest("POST", "/agents/a2awire-punctual/invoke", strings.NewReader("{}")))
	if w.Code != 500 || w.Body.String() != `{"message":"Internal Server Error"}` {
		t.Errorf("panicking function: %d %s", w.Code, w.Body)
	}
}

func TestAccessLog(t *testing.T) {
	var buf bytes.Buffer
	gw, err := harness.New(harness.Options{Log: logging.New(&buf, logging.JSON, slog.LevelInfo)})
	if err != nil {
		t.Fatal(err)
	}
	r := httptest.NewRequest("POST", "/agents/a2awire-punctual/invoke", strings.NewReader(`{"task":"ping"}`))
	r.Header.Set("Content-Type", "application/json")
	gw.ServeHTTP(httptest.NewRecorder(), r)
	gw.ServeHTTP(httptest.NewRecorder(), httptest.NewRequest("GET", "/nowhere", nil))

	dec := json.NewDecoder(&buf)
	for _, want := range []map[string]any{
		{"msg": "request", "method": "POST", "path": "/agents/a2awire-punctual/invoke", "status": 200.0, "function": "fixture-punctual"},
		{"msg": "request", "method": "GET", "path": "/nowhere", "status": 404.0, "function": "-"},
	} {
		var rec map[string]any
		if err := dec.Decode(&rec); err != nil {
			t.Fatalf("access log: %v", err)
		}
		for k, v := range want {
			if rec[k] != v {
				t.Errorf("access log %s = %v, want %v (%v)", k, rec[k], v, rec)
			}
		}
		if _, ok := rec["duration_ms"].(float64); !ok {
			t.Errorf("access log without duration_ms: %v", rec)
		}
		if id, _ := rec["request_id"].(string); len(id) != 32 {
			t.Errorf("access log without request_id: %v", rec)
		}
	}
}

// TestEachFunctionLinksOnlyItsOwnCode keeps DESIGN §2's rule: a function's
// binary (and cold start) carries nothing of the other functions, and only
// functions that touch the table link the DynamoDB client.
func TestEachFunctionLinksOnlyItsOwnCode(t *testing.T) {
	const module = "github.com/a2awire/a2awire/"
	for _, fn := range routes.Functions() {
		out, err := exec.Command("go", "list", "-deps", module+"functions/"+fn).CombinedOutput()
		if err != nil {
			t.Fatalf("go list %s: %v\n%s", fn, err, out)
		}
		deps := strings.Fields(string(out))
		for _, d := range deps {
			if strings.HasPrefix(d, module+"functions/") && !strings.HasPrefix(d, module+"functions/"+fn) {
				t.Errorf("%s links %s", fn, d)
			}
			if strings.HasPrefix(d, module+"local") || strings.HasPrefix(d, module+"cmd/") {
				t.Errorf("%s links %s", fn, d)
			}
		}
		usesDynamo := slices.Contains(deps, "github.com/aws/aws-sdk-go-v2/service/dynamodb")
		if wantsTable := routes.TableAccess(fn) != routes.NoTable; usesDynamo != wantsTable {
			t.Errorf("%s: links the DynamoDB client = %v, but its table access is %v", fn, usesDynamo, routes.TableAccess(fn))
		}
	}
}
