package main

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/a2awire/a2awire/local/cloud"
	"github.com/a2awire/a2awire/shared/capture"
	"github.com/a2awire/a2awire/shared/routes"
	"github.com/aws/aws-lambda-go/cfn"
	"github.com/aws/aws-lambda-go/events"
)

// helloName is the trivial Lambda's name in the cold-start rows;
// helloDynamoName is the trivial Lambda with a DynamoDB client, reported
// (not targeted) to show what the AWS SDK alone adds to INIT.
const (
	helloName       = "hello-world (baseline)"
	helloDynamoName = "hello-world + DynamoDB client (reported)"
)

// maxBootstrapBytes is the Makefile's MAX_BOOTSTRAP_BYTES.
const maxBootstrapBytes = 12_000_000

var initReport = regexp.MustCompile(`INIT REPORT\(durationMs: ([0-9.]+)\)`)

// pathParam is a route's path parameter, as routes.Route writes it.
var pathParam = regexp.MustCompile(`\{[^}/]+\}`)

// coldTarget is one binary to start under the emulator.
type coldTarget struct {
	name      string // function folder, or helloName
	pkg       string // ./functions/<name>
	env       []string
	fn        routes.Function
	bootstrap string
	cfnURL    string // where a custom resource answers CloudFormation
}

// coldSample is one cold start.
type coldSample struct {
	init, first time.Duration
}

// buildHost compiles pkg for this machine as `make build` compiles for
// Lambda (CGO off, lambda.norpc, trimmed, stripped), since the emulator runs
// it natively.
func buildHost(ctx context.Context, pkg, out string) error {
	cmd := exec.CommandContext(ctx, "go", "build", "-trimpath", "-ldflags=-s -w", "-tags", "lambda.norpc", "-o", out, pkg)
	cmd.Env = append(os.Environ(), "CGO_ENABLED=0", "GOOS="+runtime.GOOS, "GOARCH="+runtime.GOARCH)
	if msg, err := cmd.CombinedOutput(); err != nil {
		return fmt.Errorf("go build %s: %v\n%s", pkg, err, msg)
	}
	return nil
}

// coldStart starts t's bootstrap under the emulator once: INIT is the
// emulator's INIT REPORT (bootstrap start to its first /next), first is
// emulator process start to the first response of an invocation.
func coldStart(ctx context.Context, rie string, t coldTarget) (coldSample, error) {
	ports := make([]string, 2)
	for i := range ports {
		a, err := freeAddr()
		if err != nil {
			return coldSample{}, err
		}
		ports[i] = a
	}
	out := &capture.Buffer{}
	cmd := exec.Command(rie, "--runtime-interface-emulator-address", ports[0], "--runtime-api-address", ports[1], t.bootstrap)
	cmd.Dir = filepath.Dir(t.bootstrap)
	cmd.Env = []string{"PATH=" + os.Getenv("PATH"), "HOME=" + os.Getenv("HOME"), "LOG_LEVEL=info", "AWS_REGION=us-east-1",
		"AWS_LAMBDA_FUNCTION_NAME=" + t.fn.Name,
		fmt.Sprintf("AWS_LAMBDA_FUNCTION_MEMORY_SIZE=%d", max(t.fn.MemoryMB, 128)),
		fmt.Sprintf("AWS_LAMBDA_FUNCTION_TIMEOUT=%d", max(t.fn.TimeoutSeconds, 3))}
	for k, v := range t.fn.Env {
		cmd.Env = append(cmd.Env, k+"="+v)
	}
	cmd.Env = append(cmd.Env, t.env...)
	cmd.Stdout, cmd.Stderr = out, out
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	start := time.Now()
	if err := cmd.Start(); err != nil {
		return coldSample{}, fmt.Errorf("start emulator: %w", err)
	}
	defer func() {
		_ = syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL)
		_ = cmd.Wait()
	}()
	for {
		c, err := net.DialTimeout("tcp", ports[0], time.Second)
		if err == nil {
			c.Close()
			break
		}
		if time.Since(start) > 15*time.Second {
			return coldSample{}, fmt.Errorf("emulator not listening: %v\n%s", err, out.String())
		}
		time.Sleep(2 * time.Millisecond)
	}
	payload, err := firstPayload(t)
	if err != nil {
		return coldSample{}, err
	}
	ictx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	req, _ := http.NewRequestWithContext(ictx, http.MethodPost, "http://"+ports[0]+"/2015-03-31/functions/function/invocations", bytes.NewReader(payload))
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return coldSample{}, fmt.Errorf("invoke: %w\n%s", err, out.String())
	}
	raw, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	first := time.Since(start)
	// The emulator answers 200 with {"errorMessage": …} when the function
	// itself failed; an HTTP function's answer must not be a 5xx. Other
	// handlers may answer any JSON (registry-seed: a string).
	var answer struct {
		events.APIGatewayV2HTTPResponse
		ErrorMessage string `json:"errorMessage"`
	}
	if !json.Valid(raw) || bytes.HasPrefix(bytes.TrimSpace(raw), []byte("{")) && json.Unmarshal(raw, &answer) != nil ||
		resp.StatusCode != 200 || answer.StatusCode >= 500 || answer.ErrorMessage != "" {
		return coldSample{}, fmt.Errorf("invoke answered %d %s\n%s", resp.StatusCode, raw, out.String())
	}
	for {
		if m := initReport.FindStringSubmatch(out.String()); m != nil {
			f, _ := strconv.ParseFloat(m[1], 64)
			return coldSample{init: time.Duration(f * float64(time.Millisecond)), first: first}, nil
		}
		if time.Since(start) > 20*time.Second {
			return coldSample{}, fmt.Errorf("no INIT REPORT line\n%s", out.String())
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// firstPayload is the first invocation's payload: for a function with a
// non-HTTP trigger, the event that trigger sends (an empty stream batch, a
// scheduled event), else firstEvent.
func firstPayload(t coldTarget) ([]byte, error) {
	if t.name == "registry-seed" {
		// A CloudFormation custom resource: a Delete (a no-op for it)
		// answered to a local stand-in for the pre-signed response URL.
		return json.Marshal(cfn.Event{RequestType: cfn.RequestDelete, RequestID: "bench", ResponseURL: t.cfnURL,
			ResourceType: "Custom::FixtureRegistrations", LogicalResourceID: "FixtureRegistrations", PhysicalResourceID: "bench",
			StackID: "arn:aws:cloudformation:us-east-1:000000000000:stack/bench/1"})
	}
	for _, tr := range t.fn.Triggers {
		switch tr.Kind {
		case routes.StreamTrigger:
			return json.Marshal(events.DynamoDBEvent{Records: []events.DynamoDBEventRecord{}})
		case routes.ScheduleTrigger:
			return json.Marshal(events.EventBridgeEvent{Version: "0", ID: "bench", DetailType: "Scheduled Event", Source: "aws.events",
				AccountID: "000000000000", Time: time.Now().UTC(), Region: "us-east-1", Detail: json.RawMessage(`{}`)})
		}
	}
	return json.Marshal(firstEvent(t))
}

// firstEvent is a real request for the function: the fixture's own
// capability on its invoke route, so the first response includes what the
// first request costs (the ledger's first DynamoDB call).
func firstEvent(t coldTarget) events.APIGatewayV2HTTPRequest {
	bodies := map[string]string{
		"fixture-punctual":   pingBody,
		"fixture-clean":      `{"task":"word-count","input":{"text":"a b c"}}`,
		"fixture-messy":      `{"task":"messy-echo","input":{"n":7}}`,
		"fixture-translator": `{"task":"translation","input":{"text":"good morning","target_lang":"es"}}`,
		"fixture-ledger":     `{"task":"balance","input":{"account":"bench"}}`,
	}
	// Otherwise the function's first GET route without parameters (a read
	// a client would send first), else its first route.
	method, path, body := "GET", "/", ""
	rs := routes.ForFunction(t.name)
	if len(rs) > 0 {
		method, path = rs[0].Method, rs[0].Path
	}
	for _, r := range rs {
		if r.Method == "GET" && !strings.Contains(r.Path, "{") {
			method, path = r.Method, r.Path
			break
		}
	}
	if method == "ANY" || method == "" {
		method = "POST"
	}
	// A path parameter gets a real value ({world} → bench-cold), so the
	// function gets past routing: an unsigned request to a signed route
	// is then refused by the signature check (401), a public read looks
	// the item up (404, one DynamoDB call).
	path = pathParam.ReplaceAllString(path, "bench-cold")
	if b, ok := bodies[t.name]; ok {
		method, body = "POST", b
	}
	now := time.Now().UTC()
	if route, params, ok := routes.Match(method, path); ok {
		// The event the gateway would send for this request.
		r := httptest.NewRequest(method, "http://bench.local"+path, strings.NewReader(body))
		r.Header.Set("Content-Type", "application/json")
		return cloud.BuildEvent(r, route, params, []byte(body), now)
	}
	rk := method + " " + path
	return events.APIGatewayV2HTTPRequest{
		Version: "2.0", RouteKey: rk, RawPath: path, Body: body,
		Headers: map[string]string{"host": "bench.local", "content-type": "application/json", "content-length": strconv.Itoa(len(body))},
		RequestContext: events.APIGatewayV2HTTPRequestContext{
			RouteKey: rk, AccountID: "000000000000", Stage: "$default", RequestID: "bench", APIID: "bench",
			DomainName: "bench.local", Time: now.Format("02/Jan/2006:15:04:05 -0700"), TimeEpoch: now.UnixMilli(),
			HTTP: events.APIGatewayV2HTTPRequestContextHTTPDescription{Method: method, Path: path, Protocol: "HTTP/1.1", SourceIP: "127.0.0.1"},
		},
	}
}

// coldRows is row 3: every function and the trivial Lambda, built for the
// host, started n times each under the emulator (rounds interleaved), and
// every Lambda build's size.
func coldRows(ctx context.Context, root, rie, dir string, functions []string, tableEnv []string, n int) []Row {
	var rows []Row
	targets := []coldTarget{{name: helloName, pkg: "./cmd/a2awire-bench/hello", fn: routes.Function{Name: "hello"}},
		{name: helloDynamoName, pkg: "./cmd/a2awire-bench/hello-dynamodb", fn: routes.Function{Name: "hello-dynamodb"}, env: tableEnv}}
	// Stands in for CloudFormation's response URL (registry-seed).
	cfnSink := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { _, _ = io.Copy(io.Discard, r.Body) }))
	defer cfnSink.Close()
	for _, f := range functions {
		// Every function gets the table's variables, as the deploy gives
		// TABLE_NAME to those that use it; the others ignore them.
		t := coldTarget{name: f, pkg: "./functions/" + f, fn: routes.Config(f), env: tableEnv, cfnURL: cfnSink.URL + "/cfn"}
		targets = append(targets, t)
	}
	for i := range targets {
		t := &targets[i]
		t.bootstrap = filepath.Join(dir, filepath.Base(t.pkg), "bootstrap")
		if err := buildHost(ctx, t.pkg, t.bootstrap); err != nil {
			return []Row{failed(Row{ID: "3", Name: "cold start"}, err)}
		}
	}
	samples := map[string][]coldSample{}
	errs := map[string]error{}
	for range n {
		for _, t := range targets {
			if errs[t.name] != nil {
				continue
			}
			s, err := coldStart(ctx, rie, t)
			if err != nil {
				errs[t.name] = err
				continue
			}
			samples[t.name] = append(samples[t.name], s)
		}
	}
	median := func(name string, pick func(coldSample) time.Duration) time.Duration {
		var ds []time.Duration
		for _, s := range samples[name] {
			ds = append(ds, pick(s))
		}
		slices.Sort(ds)
		if len(ds) == 0 {
			return 0
		}
		return ds[len(ds)/2]
	}
	initOf := func(s coldSample) time.Duration { return s.init }
	firstOf := func(s coldSample) time.Duration { return s.first }
	base := median(helloName, initOf)
	method := fmt.Sprintf("host build (%s/%s, CGO off, -tags lambda.norpc, -s -w) under .tools/aws-lambda-rie; INIT = the emulator's INIT REPORT durationMs (bootstrap start → first /next), "+
		"first = emulator process start → first response to a real request; median of %d, targets interleaved", runtime.GOOS, runtime.GOARCH, n)
	for i, t := range targets {
		row := Row{ID: coldID(i), Name: "cold start: " + t.name, Method: method}
		switch {
		case i == 0:
			row.Target = "baseline"
		case t.name == helloDynamoName:
			row.Target = "reported: the floor of every function that builds a DynamoDB client"
		default:
			row.Target = fmt.Sprintf("INIT ≤ 1.5 × baseline (%.2f ms)", 1.5*ms(base))
		}
		if err := errs[t.name]; err != nil {
			rows = append(rows, failed(row, err))
			continue
		}
		in, first := median(t.name, initOf), median(t.name, firstOf)
		lo, hi := spread(samples[t.name], initOf)
		row.Values = map[string]float64{"init_ms": ms(in), "init_min_ms": ms(lo), "init_max_ms": ms(hi), "first_response_ms": ms(first)}
		row.Result = fmt.Sprintf("INIT %.2f ms (%.2f×; runs %.2f–%.2f ms), first response %.1f ms", ms(in), float64(in)/float64(base), ms(lo), ms(hi), ms(first))
		row.Status = Info
		if i > 0 && base > 0 {
			row.Values["init_ratio"] = float64(in) / float64(base)
			if t.name != helloDynamoName {
				row.Status = within(float64(in) <= 1.5*float64(base))
			}
		}
		rows = append(rows, row)
	}
	// Sizes of the Lambda builds make build produced (linux/arm64).
	var sizes []string
	biggest, ok := int64(0), true
	vals := map[string]float64{}
	for _, f := range functions {
		fi, err := os.Stat(filepath.Join(root, "build", f, "bootstrap"))
		if err != nil {
			rows = append(rows, failed(Row{ID: sizesID, Name: "binary sizes"}, fmt.Errorf("%w (make build first)", err)))
			return rows
		}
		sizes = append(sizes, fmt.Sprintf("%s %.1f", strings.TrimPrefix(f, "fixture-"), float64(fi.Size())/1e6))
		vals[f+"_bytes"] = float64(fi.Size())
		biggest = max(biggest, fi.Size())
		ok = ok && fi.Size() <= maxBootstrapBytes
	}
	rows = append(rows, Row{ID: sizesID, Name: "binary sizes (build/*/bootstrap, MB)", Result: strings.Join(sizes, ", "),
		Target: "each ≤ 12 MB", Status: within(ok), Values: vals,
		Method: "stat of make build's linux/arm64 outputs (CGO off, -trimpath, -s -w, lambda.norpc)"})
	return rows
}

// sizesID is the binary sizes row's id, after every cold-start row.
const sizesID = "3sz"

// coldID is the id of the i-th cold-start row: 3a (the baseline), 3b, …
// 3z, then 3a2 … 3z2, 3a3 …: one letter and a round, so no row takes the
// sizes row's 3sz.
func coldID(i int) string {
	if i < 26 {
		return fmt.Sprintf("3%c", 'a'+i)
	}
	return fmt.Sprintf("3%c%d", 'a'+i%26, i/26+1)
}

// spread is the smallest and largest of the samples' picked durations,
// shown next to the median since a shared machine makes single starts noisy.
func spread(samples []coldSample, pick func(coldSample) time.Duration) (lo, hi time.Duration) {
	for i, s := range samples {
		d := pick(s)
		if i == 0 || d < lo {
			lo = d
		}
		hi = max(hi, d)
	}
	return lo, hi
}
