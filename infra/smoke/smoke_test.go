//go:build unix

package smoke

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"runtime"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/a2awire/a2awire/infra/internal/repo"
	"github.com/aws/aws-lambda-go/events"
)

// Bounds on each step, so a hung build, emulator or function fails the test
// instead of the whole `go test` timeout.
const (
	buildTimeout  = 10 * time.Minute
	startTimeout  = 15 * time.Second
	invokeTimeout = 30 * time.Second
	reportTimeout = 10 * time.Second
	stopTimeout   = 5 * time.Second
)

// invocation is one API Gateway v2 request to a function and what its
// response must carry.
type invocation struct {
	method, path, body string
	status             int
	// check inspects the decoded response body.
	check func(t *testing.T, body map[string]any)
}

var cases = []struct {
	function string
	invokes  []invocation
}{
	{
		function: "fixture-punctual",
		invokes: []invocation{
			{
				method: "POST", path: "/agents/a2awire-punctual/invoke",
				body:   `{"task":"ping","input":{"echo":"hi"}}`,
				status: http.StatusOK,
				check: func(t *testing.T, body map[string]any) {
					out, _ := body["output"].(map[string]any)
					if out["pong"] != true || out["echo"] != "hi" {
						t.Errorf("output %v, want pong true and echo hi", body["output"])
					}
					checkMetadata(t, body, "a2awire-punctual", "ping")
				},
			},
			{
				// A warm invoke through the same runtime: the provider itself
				// answers a non-POST, which is why its route is ANY.
				method: "GET", path: "/agents/a2awire-punctual/invoke",
				status: http.StatusMethodNotAllowed,
				check:  checkError("method_not_allowed"),
			},
		},
	},
	{
		function: "fixture-clean",
		invokes: []invocation{
			{
				method: "POST", path: "/agents/a2awire-clean/invoke",
				body:   `{"task":"word-count","input":{"text":"a b\nc"}}`,
				status: http.StatusOK,
				check: func(t *testing.T, body map[string]any) {
					out, _ := body["output"].(map[string]any)
					if out["words"] != 3.0 || out["characters"] != 5.0 || out["lines"] != 2.0 {
						t.Errorf("output %v, want 3 words, 5 characters, 2 lines", body["output"])
					}
					checkMetadata(t, body, "a2awire-clean", "word-count")
				},
			},
			{
				method: "POST", path: "/agents/a2awire-clean/invoke",
				body:   `{"task":"word-count","input":{}}`,
				status: http.StatusBadRequest,
				check:  checkError("invalid_input"),
			},
		},
	},
}

// TestEmulator builds each function for the host and invokes it under the
// emulator. The binary is built like `make build` builds it for Lambda
// (CGO_ENABLED=0, -tags lambda.norpc, -trimpath) but for this machine's
// architecture, since the emulator runs it natively.
func TestEmulator(t *testing.T) {
	root, err := repo.Root(".")
	if err != nil {
		t.Fatal(err)
	}
	rie := filepath.Join(root, ".tools", "aws-lambda-rie")
	if _, err := os.Stat(rie); err != nil {
		t.Fatalf("Lambda runtime interface emulator not found (%v): run make tools", err)
	}
	for _, c := range cases {
		t.Run(c.function, func(t *testing.T) {
			bootstrap := build(t, root, c.function)
			em := start(t, rie, bootstrap, c.function)
			for i, inv := range c.invokes {
				em.invoke(t, inv)
				report := em.waitReport(t, i+1)
				cold := initDuration.FindStringSubmatch(report)
				switch {
				case i == 0 && cold == nil:
					t.Errorf("first invoke: no Init Duration in %q", report)
				case i == 0:
					// The REPORT line's Init Duration only times the emulator
					// handing the init to its core, which starts the runtime
					// asynchronously; its "INIT REPORT" log line times what
					// Lambda bills as init: bootstrap start to its first
					// /runtime/invocation/next.
					rt := runtimeInit.FindStringSubmatch(em.out.String())
					if rt == nil {
						t.Errorf("first invoke: no INIT REPORT line from the emulator")
						break
					}
					t.Logf("%s: init %s ms (bootstrap start to first /next; REPORT says Init Duration %s ms) on %s/%s",
						c.function, rt[1], cold[1], runtime.GOOS, runtime.GOARCH)
				case cold != nil:
					t.Errorf("invoke %d initialized the runtime again: %q", i+1, report)
				}
				if d := duration.FindStringSubmatch(report); d != nil {
					t.Logf("%s: invoke %d %s %s -> %d, Duration %s ms", c.function, i+1, inv.method, inv.path, inv.status, d[1])
				}
			}
		})
	}
}

var (
	initDuration = regexp.MustCompile(`Init Duration: ([0-9.]+) ms`)
	runtimeInit  = regexp.MustCompile(`INIT REPORT\(durationMs: ([0-9.]+)\)`)
	duration     = regexp.MustCompile(`\tDuration: ([0-9.]+) ms`)
)

// build compiles functions/<name> into a temporary bootstrap for the host.
func build(t *testing.T, root, name string) string {
	t.Helper()
	out := filepath.Join(t.TempDir(), "bootstrap")
	ctx, cancel := context.WithTimeout(context.Background(), buildTimeout)
	defer cancel()
	cmd := exec.CommandContext(ctx, "go", "build", "-trimpath", "-tags", "lambda.norpc", "-o", out, "./functions/"+name)
	cmd.Dir = root
	cmd.Env = append(os.Environ(), "CGO_ENABLED=0", "GOOS="+runtime.GOOS, "GOARCH="+runtime.GOARCH)
	start := time.Now()
	if msg, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("go build ./functions/%s: %v\n%s", name, err, msg)
	}
	t.Logf("%s: built for %s/%s in %v", name, runtime.GOOS, runtime.GOARCH, time.Since(start).Round(time.Millisecond))
	return out
}

// emulator is one running aws-lambda-rie with its function.
type emulator struct {
	url string
	out *syncBuffer
}

// start runs the emulator on two free loopback ports (its invoke endpoint
// and the runtime API it gives the bootstrap), so parallel runs and a
// developer's own emulator on the default :8080/:9001 do not collide, and
// stops it and the function when the test ends.
func start(t *testing.T, rie, bootstrap, name string) *emulator {
	t.Helper()
	ports := freePorts(t, 2)
	out := &syncBuffer{}
	cmd := exec.Command(rie,
		"--runtime-interface-emulator-address", "127.0.0.1:"+ports[0],
		"--runtime-api-address", "127.0.0.1:"+ports[1],
		bootstrap)
	cmd.Dir = filepath.Dir(bootstrap)
	// The function's environment is what Lambda would set, not the test's:
	// no AWS credentials or developer settings leak in. LOG_LEVEL is the
	// emulator's own (its --log-level), kept out of the command line.
	cmd.Env = []string{
		"PATH=" + os.Getenv("PATH"),
		"HOME=" + os.Getenv("HOME"),
		"LOG_LEVEL=info",
		"AWS_REGION=us-east-1",
		"AWS_LAMBDA_FUNCTION_NAME=" + name,
		"AWS_LAMBDA_FUNCTION_MEMORY_SIZE=128",
		"AWS_LAMBDA_FUNCTION_TIMEOUT=10",
	}
	cmd.Stdout, cmd.Stderr = out, out
	// Own process group: stopping the test stops the function process the
	// emulator started too, even if the emulator has to be killed.
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	cmd.WaitDelay = stopTimeout
	if err := cmd.Start(); err != nil {
		t.Fatalf("start %s: %v", rie, err)
	}
	exited := make(chan error, 1)
	go func() { exited <- cmd.Wait() }()
	t.Cleanup(func() {
		_ = syscall.Kill(-cmd.Process.Pid, syscall.SIGTERM)
		select {
		case <-exited:
		case <-time.After(stopTimeout):
			_ = syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL)
			<-exited
		}
		if t.Failed() {
			t.Logf("emulator output:\n%s", out.String())
		}
	})

	addr := "127.0.0.1:" + ports[0]
	deadline := time.Now().Add(startTimeout)
	for {
		conn, err := net.DialTimeout("tcp", addr, time.Second)
		if err == nil {
			conn.Close()
			break
		}
		select {
		case err := <-exited:
			exited <- err
			t.Fatalf("emulator exited before listening: %v\n%s", err, out.String())
		default:
		}
		if time.Now().After(deadline) {
			t.Fatalf("emulator not listening on %s after %v\n%s", addr, startTimeout, out.String())
		}
		time.Sleep(50 * time.Millisecond)
	}
	return &emulator{url: "http://" + addr + "/2015-03-31/functions/function/invocations", out: out}
}

// invoke posts the API Gateway v2 event for inv and checks the Lambda
// response the function's httpadapter returns.
func (e *emulator) invoke(t *testing.T, inv invocation) {
	t.Helper()
	event := apiEvent(inv)
	payload, err := json.Marshal(event)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), invokeTimeout)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, e.url, bytes.NewReader(payload))
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Content-Type", "application/json")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatalf("invoke %s %s: %v", inv.method, inv.path, err)
	}
	defer resp.Body.Close()
	raw, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("emulator answered %s: %s", resp.Status, raw)
	}
	var out events.APIGatewayV2HTTPResponse
	if err := json.Unmarshal(raw, &out); err != nil {
		t.Fatalf("not an API Gateway v2 response: %v: %s", err, raw)
	}
	if out.StatusCode != inv.status {
		t.Errorf("%s %s: status %d, want %d; body %s", inv.method, inv.path, out.StatusCode, inv.status, out.Body)
	}
	if ct := out.Headers["Content-Type"]; !strings.HasPrefix(ct, "application/json") {
		t.Errorf("%s %s: Content-Type %q", inv.method, inv.path, ct)
	}
	body := out.Body
	if out.IsBase64Encoded {
		t.Errorf("%s %s: JSON body came base64-encoded", inv.method, inv.path)
	}
	var decoded map[string]any
	if err := json.Unmarshal([]byte(body), &decoded); err != nil {
		t.Fatalf("%s %s: body is not a JSON object: %v: %s", inv.method, inv.path, err, body)
	}
	inv.check(t, decoded)
}

// apiEvent is the event API Gateway's HTTP API sends for inv on the route
// `ANY <path>` (payload format 2.0).
func apiEvent(inv invocation) events.APIGatewayV2HTTPRequest {
	now := time.Now().UTC()
	routeKey := "ANY " + inv.path
	headers := map[string]string{"host": "example.execute-api.us-east-1.amazonaws.com", "user-agent": "a2awire-smoke"}
	if inv.body != "" {
		headers["content-type"] = "application/json"
		headers["content-length"] = fmt.Sprint(len(inv.body))
	}
	return events.APIGatewayV2HTTPRequest{
		Version:  "2.0",
		RouteKey: routeKey,
		RawPath:  inv.path,
		Headers:  headers,
		RequestContext: events.APIGatewayV2HTTPRequestContext{
			RouteKey:     routeKey,
			AccountID:    "000000000000",
			Stage:        "$default",
			RequestID:    fmt.Sprintf("smoke-%d", now.UnixNano()),
			APIID:        "example",
			DomainName:   "example.execute-api.us-east-1.amazonaws.com",
			DomainPrefix: "example",
			Time:         now.Format("02/Jan/2006:15:04:05 -0700"),
			TimeEpoch:    now.UnixMilli(),
			HTTP: events.APIGatewayV2HTTPRequestContextHTTPDescription{
				Method:    inv.method,
				Path:      inv.path,
				Protocol:  "HTTP/1.1",
				SourceIP:  "127.0.0.1",
				UserAgent: "a2awire-smoke",
			},
		},
		Body: inv.body,
	}
}

// waitReport waits for the emulator's n-th REPORT line, which it prints
// after the response, and returns it.
func (e *emulator) waitReport(t *testing.T, n int) string {
	t.Helper()
	deadline := time.Now().Add(reportTimeout)
	for {
		var reports []string
		for _, line := range strings.Split(e.out.String(), "\n") {
			if strings.HasPrefix(line, "REPORT RequestId:") {
				reports = append(reports, line)
			}
		}
		if len(reports) >= n {
			return reports[n-1]
		}
		if time.Now().After(deadline) {
			t.Fatalf("no REPORT line for invoke %d after %v", n, reportTimeout)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

func checkMetadata(t *testing.T, body map[string]any, agent, capability string) {
	t.Helper()
	md, _ := body["metadata"].(map[string]any)
	if md["agent"] != agent || md["capability"] != capability {
		t.Errorf("metadata %v, want agent %s capability %s", body["metadata"], agent, capability)
	}
	if d, ok := md["duration_ms"].(float64); !ok || d < 0 || d != float64(int64(d)) {
		t.Errorf("metadata.duration_ms %v is not an integer >= 0", md["duration_ms"])
	}
}

func checkError(code string) func(*testing.T, map[string]any) {
	return func(t *testing.T, body map[string]any) {
		t.Helper()
		if body["error"] != code {
			t.Errorf("error %v, want %s", body["error"], code)
		}
		if msg, _ := body["message"].(string); msg == "" {
			t.Errorf("error without message: %v", body)
		}
	}
}

// freePorts reserves n distinct loopback ports by listening on port 0, then
// frees them for the emulator. Another process could take one in between;
// the emulator then fails to start and says so.
func freePorts(t *testing.T, n int) []string {
	t.Helper()
	var ports []string
	var listeners []net.Listener
	for range n {
		l, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			t.Fatal(err)
		}
		listeners = append(listeners, l)
		_, port, _ := net.SplitHostPort(l.Addr().String())
		ports = append(ports, port)
	}
	for _, l := range listeners {
		if err := l.Close(); err != nil && !errors.Is(err, net.ErrClosed) {
			t.Fatal(err)
		}
	}
	return ports
}

// syncBuffer collects the emulator's output, written from its pipes'
// goroutines while the test reads it.
type syncBuffer struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (b *syncBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.Write(p)
}

func (b *syncBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.String()
}
