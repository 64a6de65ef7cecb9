package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
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

// settle is how long a cold start waits between the emulator listening and
// the first invocation (which starts the bootstrap). Without it the
// emulator's own start and the previous start's teardown share this
// machine's cores with the bootstrap: on 2 cores that doubled single INITs
// and put unchanged functions at 1.5–2× the baseline.
const settle = 50 * time.Millisecond

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

// errPortTaken is a start whose emulator could not listen on a port
// freeAddr picked: between freeAddr closing it and the emulator binding it,
// another socket (often an outgoing connection's ephemeral port) took it.
var errPortTaken = errors.New("emulator port taken before it could listen")

// coldStart is coldStartOnce, again on new ports when one was taken: a
// lost race for a port says nothing about the function.
func coldStart(ctx context.Context, rie string, t coldTarget) (coldSample, error) {
	return retryPortTaken(func() (coldSample, error) { return coldStartOnce(ctx, rie, t) })
}

// retryPortTaken calls start until it returns something other than
// errPortTaken, at most three times.
func retryPortTaken(start func() (coldSample, error)) (coldSample, error) {
	for range 3 {
		s, err := start()
		if !errors.Is(err, errPortTaken) {
			return s, err
		}
	}
	return coldSample{}, fmt.Errorf("%w three times", errPortTaken)
}

// portTaken reports whether the emulator's output says it could not
// listen because its address was in use.
func portTaken(out string) bool { return strings.Contains(out, "address already in use") }

// coldStartOnce starts t's bootstrap under the emulator once: INIT is the
// emulator's INIT REPORT (bootstrap start to its first /next), first is
// emulator process start to the first response of an invocation.
func coldStartOnce(ctx context.Context, rie string, t coldTarget) (coldSample, error) {
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
		if portTaken(out.String()) {
			return coldSample{}, errPortTaken
		}
		if time.Since(start) > 15*time.Second {
			return coldSample{}, fmt.Errorf("emulator not listening: %v\n%s", err, out.String())
		}
		time.Sleep(2 * time.Millisecond)
	}
	// The emulator starts the bootstrap on the first invocation; let its
	// own start-up settle first so INIT measures the bootstrap, not the
	// emulator's start competing with it for this machine's cores.
	time.Sleep(settle)
	payload, err := firstPayload(t)
	if err != nil {
		return coldSample{}, err
	}
	ictx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	req, _ := http.NewRequestWithContext(ictx, http.MethodPost, "http://"+ports[0]+"/2015-03-31/functions/function/invocations", bytes.NewReader(payload))
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		if portTaken(out.String()) {
			return coldSample{}, errPortTaken
		}
		return coldSample{}, fmt.Errorf("invoke: %w\n%s", err, out.String())
	}
	raw, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	first := time.Since(start) - settle
	// The emulator answers 200 with {"errorMessage": …} when the function
	// itself failed; an HTTP function's answer must not be a 5xx. Other
	// handlers may answer any JSON (registry-seed: a string). A streaming
	// function (behind a function URL, through lambdaurl) answers its
	// status as a JSON prelude, eight NUL bytes, then the body.
	var answer struct {
		events.APIGatewayV2HTTPResponse
		ErrorMessage string `json:"errorMessage"`
	}
	if t.fn.Streaming {
		if prelude, _, ok := bytes.Cut(raw, make([]byte, 8)); ok {
			raw = prelude
		}
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
		case routes.QueueTrigger:
			return json.Marshal(events.SQSEvent{Records: []events.SQSMessage{}})
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
	samples, ratios, errs := pairedStarts(targets, n, func(t coldTarget) (coldSample, error) { return coldStart(ctx, rie, t) })
	medianDur := func(name string, pick func(coldSample) time.Duration) time.Duration {
		var ds []float64
		for _, s := range samples[name] {
			ds = append(ds, float64(pick(s)))
		}
		return time.Duration(median(ds))
	}
	initOf := func(s coldSample) time.Duration { return s.init }
	firstOf := func(s coldSample) time.Duration { return s.first }
	base := medianDur(helloName, initOf)
	method := fmt.Sprintf("host build (%s/%s, CGO off, -tags lambda.norpc, -s -w) under .tools/aws-lambda-rie; INIT = the emulator's INIT REPORT durationMs (bootstrap start → first /next), "+
		"first = emulator process start → first response to a real request, less a %v pause before the first invocation that lets the emulator's own start settle; "+
		"median of %d after a warm-up round, targets interleaved, the baseline started right before every other target's start; ratio = median of each start's INIT over the baseline start before it", runtime.GOOS, runtime.GOARCH, settle, n)
	for i, t := range targets {
		row := Row{ID: coldID(i), Name: "cold start: " + t.name, Method: method}
		switch {
		case i == 0:
			row.Target = "baseline"
		case t.name == helloDynamoName:
			row.Target = "reported: the floor of every function that builds a DynamoDB client"
		default:
			row.Target = fmt.Sprintf("INIT ≤ 1.5 × baseline (%.2f ms at its median)", 1.5*ms(base))
		}
		if err := errs[t.name]; err != nil {
			rows = append(rows, failed(row, err))
			continue
		}
		in, first := medianDur(t.name, initOf), medianDur(t.name, firstOf)
		lo, hi := spread(samples[t.name], initOf)
		row.Values = map[string]float64{"init_ms": ms(in), "init_min_ms": ms(lo), "init_max_ms": ms(hi), "first_response_ms": ms(first)}
		row.Status = Info
		if i == 0 {
			row.Result = fmt.Sprintf("INIT %.2f ms (runs %.2f–%.2f ms), first response %.1f ms", ms(in), ms(lo), ms(hi), ms(first))
			rows = append(rows, row)
			continue
		}
		r := median(ratios[t.name])
		row.Values["init_ratio"] = r
		row.Result = fmt.Sprintf("INIT %.2f ms (%.2f×; runs %.2f–%.2f ms), first response %.1f ms", ms(in), r, ms(lo), ms(hi), ms(first))
		if t.name != helloDynamoName {
			row.Status = within(len(ratios[t.name]) > 0 && r <= 1.5)
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

// pairedStarts starts targets[0] (the baseline) right before every other
// target, n counted rounds after one warm-up round, and returns each
// target's counted samples, each other target's ratios of its INIT over the
// baseline start just before it, and the error that stopped a target's
// starts. A shared machine drifts during a run (DynamoDB Local's JIT, other
// tenants), and a pair started back to back sees the same machine; the
// warm-up round pays for the cold page cache.
func pairedStarts(targets []coldTarget, n int, start func(coldTarget) (coldSample, error)) (map[string][]coldSample, map[string][]float64, map[string]error) {
	samples := map[string][]coldSample{}
	ratios := map[string][]float64{}
	errs := map[string]error{}
	try := func(t coldTarget) (coldSample, bool) {
		if errs[t.name] != nil {
			return coldSample{}, false
		}
		s, err := start(t)
		if err != nil {
			errs[t.name] = err
			return coldSample{}, false
		}
		return s, true
	}
	base := targets[0].name
	for round := range n + 1 {
		for _, t := range targets[1:] {
			b, okb := try(targets[0])
			s, ok := try(t)
			if round == 0 {
				continue
			}
			if okb {
				samples[base] = append(samples[base], b)
			}
			if ok {
				samples[t.name] = append(samples[t.name], s)
			}
			if okb && ok && b.init > 0 {
				ratios[t.name] = append(ratios[t.name], float64(s.init)/float64(b.init))
			}
		}
	}
	return samples, ratios, errs
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
