//go:build unix

package smoke

import (
	"bytes"
	"context"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"maps"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"runtime"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/a2awire/a2awire/infra/internal/repo"
	"github.com/a2awire/a2awire/shared/capture"
	"github.com/a2awire/a2awire/shared/protocol"
	"github.com/a2awire/a2awire/shared/routes"
	"github.com/a2awire/a2awire/shared/store/dynamo"
	"github.com/a2awire/a2awire/shared/store/dynamo/dynamolocal"
	"github.com/aws/aws-lambda-go/events"
	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
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
	// header holds request headers as the event carries them (lower-case
	// names, values exactly as sent: API Gateway joins repeated lines with
	// commas).
	header map[string]string
	status int
	// replayed is whether the response must carry X-A2AWire-Replayed: true.
	replayed bool
	// sameAs is the 1-based number of an earlier invocation of the same
	// case whose response body this one must repeat byte for byte (a replay).
	sameAs int
	// check inspects the decoded response body.
	check func(t *testing.T, body map[string]any)
	// event, when set, is sent instead of an API Gateway request (for a
	// function no route serves), and checkRaw inspects the raw response.
	event    func(t *testing.T) any
	checkRaw func(t *testing.T, raw []byte)
}

// smokeCase is one function's main under the emulator: the environment its
// main reads on top of what Lambda sets, and the invocations, in order,
// through one warm runtime.
type smokeCase struct {
	function string
	// env adds the function's own environment; ledger's names DynamoDB Local.
	env     func(t *testing.T) []string
	invokes []invocation
}

// cases covers every functions/* folder; TestEmulator fails when a folder
// has no case, so a new function's main cannot go untested.
func cases() []smokeCase {
	return append(append(worldCases(), webhookCases()...), []smokeCase{
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
		{
			function: "fixture-messy",
			invokes: []invocation{
				{
					method: "POST", path: "/agents/a2awire-messy/invoke",
					body:   `{"task":"messy-echo","input":{"n":7}}`,
					status: http.StatusOK,
					check: func(t *testing.T, body map[string]any) {
						out, _ := body["output"].(map[string]any)
						echo, _ := out["echo"].(map[string]any)
						if echo["n"] != 7.0 {
							t.Errorf("output %v, want echo {n: 7}", body["output"])
						}
						checkMetadata(t, body, "a2awire-messy", "messy-echo")
					},
				},
				{
					method: "POST", path: "/agents/a2awire-messy/invoke",
					body:   `{"task":"messy-echo","input":{"simulate":"unavailable"}}`,
					status: http.StatusServiceUnavailable,
					check:  checkError("unavailable"),
				},
				{
					method: "POST", path: "/agents/a2awire-messy/invoke",
					body:   `{"task":"messy-echo","input":{"simulate":"upstream_error"}}`,
					status: http.StatusBadGateway,
					check:  checkError("upstream_error"),
				},
			},
		},
		{
			// No TRANSLATOR_LLM_URL: the main serves from its dictionary.
			function: "fixture-translator",
			invokes: []invocation{
				{
					method: "POST", path: "/agents/a2awire-translator/invoke",
					body:   `{"task":"translation","input":{"text":"good morning","target_lang":"es"}}`,
					status: http.StatusOK,
					check: func(t *testing.T, body map[string]any) {
						out, _ := body["output"].(map[string]any)
						if tr, _ := out["translation"].(string); tr == "" || out["target_lang"] != "es" {
							t.Errorf("output %v, want a Spanish translation", body["output"])
						}
						md, _ := body["metadata"].(map[string]any)
						if md["engine"] != "fallback" {
							t.Errorf("metadata.engine %v, want fallback (no LLM configured)", md["engine"])
						}
						checkMetadata(t, body, "a2awire-translator", "translation")
					},
				},
				{
					method: "POST", path: "/agents/a2awire-translator/invoke",
					body:   `{"task":"translation","input":{"text":"hello","source_lang":"en","target_lang":"xx"}}`,
					status: http.StatusBadRequest,
					check:  checkError("invalid_input"),
				},
			},
		},
		{
			// The stateful fixture against DynamoDB Local: a record-entry,
			// its replay, task ids that differ only after a comma or by a
			// space (three tasks: ids are taken exactly as sent), and the
			// balance that proves each appended once.
			function: "fixture-ledger",
			env:      ledgerEnv,
			invokes: []invocation{
				ledgerEntry("smoke-1", http.StatusOK, false, 0, 500, 1),
				ledgerEntry("smoke-1", http.StatusOK, true, 1, 500, 1),
				ledgerEntry("x,a", http.StatusOK, false, 0, 1000, 2),
				ledgerEntry("x,b", http.StatusOK, false, 0, 1500, 3),
				ledgerEntry("x, b", http.StatusOK, false, 0, 2000, 4),
				ledgerEntry("x,a", http.StatusOK, true, 3, 1000, 2),
				{
					method: "POST", path: "/agents/a2awire-ledger/invoke",
					body:   `{"task":"balance","input":{"account":"smoke"}}`,
					status: http.StatusOK,
					check: func(t *testing.T, body map[string]any) {
						out, _ := body["output"].(map[string]any)
						if out["balance_cents"] != 2000.0 || out["entries"] != 4.0 {
							t.Errorf("balance %v, want 2000 cents in 4 entries (each task appended once)", body["output"])
						}
						checkMetadata(t, body, "a2awire-ledger", "balance")
					},
				},
			},
		},
		registryCase(),
		registrySeedCase(),
	}...)
}

// registryCase runs the registry's main against DynamoDB Local: the
// network card, a profile lookup that reads the table, and discovery.
func registryCase() smokeCase {
	return smokeCase{
		function: "registry",
		env:      registryEnv,
		invokes: []invocation{
			{
				method: "GET", path: "/.well-known/agent-card.json",
				status: http.StatusOK,
				check: func(t *testing.T, body map[string]any) {
					if skills, _ := body["skills"].([]any); body["name"] != "a2awire" || len(skills) == 0 {
						t.Errorf("card %v, want a2awire with skills", body)
					}
				},
			},
			{
				method: "GET", path: "/api/v1/agents/nobody",
				status: http.StatusNotFound,
				check:  checkError("not_found"),
			},
			{
				method: "GET", path: "/api/v1/agents",
				status: http.StatusOK,
				check: func(t *testing.T, body map[string]any) {
					if agents, ok := body["agents"].([]any); !ok || len(agents) != 0 {
						t.Errorf("discovery %v, want no agents", body)
					}
				},
			},
		},
	}
}

// registryEnv points the registry's main at a fresh table in DynamoDB
// Local, with a network key.
func registryEnv(t *testing.T) []string {
	t.Helper()
	server, err := dynamolocal.Start()
	if err != nil {
		t.Fatalf("DynamoDB Local: %v", err)
	}
	t.Cleanup(server.Stop)
	const table = "a2awire-smoke-registry"
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	if err := dynamo.CreateTable(ctx, dynamo.LocalClient(server.Endpoint()), table); err != nil {
		t.Fatalf("create table: %v", err)
	}
	return []string{
		"TABLE_NAME=" + table,
		"NETWORK_PUBLIC_KEY=" + base64.StdEncoding.EncodeToString(make([]byte, 32)),
		"BASE_URL=https://smoke.a2awire.test",
		"AWS_ENDPOINT_URL_DYNAMODB=" + server.Endpoint(),
		"AWS_REGION=us-east-1",
		"AWS_ACCESS_KEY_ID=local",
		"AWS_SECRET_ACCESS_KEY=local",
	}
}

// ledgerEntry is a record-entry of 500 cents to account "smoke" under task
// id; a replay must repeat invocation sameAs's body with the Replayed header.
func ledgerEntry(id string, status int, replayed bool, sameAs int, balance, sequence float64) invocation {
	return invocation{
		method: "POST", path: "/agents/a2awire-ledger/invoke",
		body:     `{"task":"record-entry","input":{"account":"smoke","amount_cents":500}}`,
		header:   map[string]string{"x-a2awire-task-id": id},
		status:   status,
		replayed: replayed,
		sameAs:   sameAs,
		check: func(t *testing.T, body map[string]any) {
			out, _ := body["output"].(map[string]any)
			if out["account"] != "smoke" || out["balance_cents"] != balance || out["sequence"] != sequence {
				t.Errorf("task id %q: output %v, want account smoke, balance %v, sequence %v", id, body["output"], balance, sequence)
			}
			checkMetadata(t, body, "a2awire-ledger", "record-entry")
		},
	}
}

// ledgerEnv starts DynamoDB Local, creates the table with the real schema
// (dynamo.CreateTable) and returns the environment that points the
// ledger's main at it: TABLE_NAME as the deploy sets it, and the SDK's own
// endpoint, region and credential variables, which config.LoadDefaultConfig
// reads, so the main runs unchanged.
func ledgerEnv(t *testing.T) []string {
	t.Helper()
	server, err := dynamolocal.Start()
	if err != nil {
		t.Fatalf("DynamoDB Local: %v", err)
	}
	t.Cleanup(server.Stop)
	const table = "a2awire-smoke"
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	if err := dynamo.CreateTable(ctx, dynamo.LocalClient(server.Endpoint()), table); err != nil {
		t.Fatalf("create table: %v", err)
	}
	t.Cleanup(func() {
		// The entries are in DynamoDB Local, not somewhere else the main
		// might have fallen back to.
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		defer cancel()
		out, err := dynamo.LocalClient(server.Endpoint()).Scan(ctx, &dynamodb.ScanInput{TableName: aws.String(table), Select: "COUNT"})
		if err != nil {
			t.Errorf("scan %s: %v", table, err)
		} else if out.Count < 4 {
			t.Errorf("%s holds %d items after 4 appends", table, out.Count)
		}
	})
	return []string{
		"TABLE_NAME=" + table,
		"AWS_ENDPOINT_URL_DYNAMODB=" + server.Endpoint(),
		"AWS_REGION=us-east-1",
		"AWS_ACCESS_KEY_ID=local",
		"AWS_SECRET_ACCESS_KEY=local",
	}
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
	folders, err := repo.Functions(root)
	if err != nil {
		t.Fatal(err)
	}
	var covered []string
	for _, c := range cases() {
		covered = append(covered, c.function)
	}
	for _, name := range folders {
		if !slices.Contains(covered, name) {
			t.Errorf("functions/%s has no emulator case: every Lambda main runs under the emulator", name)
		}
	}
	for _, c := range cases() {
		t.Run(c.function, func(t *testing.T) {
			var env []string
			if c.env != nil {
				env = c.env(t)
			}
			bootstrap := build(t, root, c.function)
			em := start(t, rie, bootstrap, routes.Config(c.function), env)
			var bodies []string
			for i, inv := range c.invokes {
				body := em.invoke(t, inv)
				bodies = append(bodies, body)
				if inv.sameAs > 0 && body != bodies[inv.sameAs-1] {
					t.Errorf("invoke %d: body %s, want invoke %d's %s", i+1, body, inv.sameAs, bodies[inv.sameAs-1])
				}
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
	out *capture.Buffer
}

// start runs the emulator on two free loopback ports (its invoke endpoint
// and the runtime API it gives the bootstrap), so parallel runs and a
// developer's own emulator on the default :8080/:9001 do not collide, and
// stops it and the function when the test ends.
func start(t *testing.T, rie, bootstrap string, fn routes.Function, env []string) *emulator {
	t.Helper()
	ports := freePorts(t, 2)
	out := &capture.Buffer{}
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
		"AWS_LAMBDA_FUNCTION_NAME=" + fn.Name,
		fmt.Sprintf("AWS_LAMBDA_FUNCTION_MEMORY_SIZE=%d", fn.MemoryMB),
		fmt.Sprintf("AWS_LAMBDA_FUNCTION_TIMEOUT=%d", fn.TimeoutSeconds),
	}
	// The function's static env from the route table, then the case's own.
	for k, v := range fn.Env {
		cmd.Env = append(cmd.Env, k+"="+v)
	}
	cmd.Env = append(cmd.Env, env...)
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

// invoke posts the API Gateway v2 event for inv, checks the Lambda
// response the function's entry returns and returns its body.
func (e *emulator) invoke(t *testing.T, inv invocation) string {
	t.Helper()
	var event any = apiEvent(inv)
	if inv.event != nil {
		event = inv.event(t)
	}
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
	if inv.event != nil {
		inv.checkRaw(t, raw)
		return string(raw)
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
	if got := header(out, protocol.ReplayedHeader); (got == "true") != inv.replayed {
		t.Errorf("%s %s (task id %q): %s = %q, want replayed %v", inv.method, inv.path, inv.header["x-a2awire-task-id"],
			protocol.ReplayedHeader, got, inv.replayed)
	}
	inv.check(t, decoded)
	return body
}

// header is a response header's value, matched case-insensitively as HTTP
// does (the adapter writes Go's canonical names).
func header(resp events.APIGatewayV2HTTPResponse, name string) string {
	for k, v := range resp.Headers {
		if strings.EqualFold(k, name) {
			return v
		}
	}
	for k, v := range resp.MultiValueHeaders {
		if strings.EqualFold(k, name) && len(v) > 0 {
			return strings.Join(v, ",")
		}
	}
	return ""
}

// apiEvent is the event API Gateway's HTTP API sends for inv on the route
// of the table it matches (`ANY <path>` when none; payload format 2.0).
func apiEvent(inv invocation) events.APIGatewayV2HTTPRequest {
	now := time.Now().UTC()
	routeKey := "ANY " + inv.path
	if r, _, ok := routes.Match(inv.method, inv.path); ok {
		routeKey = r.Key()
	}
	headers := map[string]string{"host": "example.execute-api.us-east-1.amazonaws.com", "user-agent": "a2awire-smoke"}
	if inv.body != "" {
		headers["content-type"] = "application/json"
		headers["content-length"] = fmt.Sprint(len(inv.body))
	}
	maps.Copy(headers, inv.header)
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
