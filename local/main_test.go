package main

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/a2awire/a2awire/local/harness"
	"github.com/a2awire/a2awire/shared/capture"
	"github.com/a2awire/a2awire/shared/routes"
	"github.com/a2awire/a2awire/shared/store/bolt"
	"github.com/aws/aws-lambda-go/events"

	"github.com/a2awire/a2awire/shared/store/dynamo/dynamolocal"
)

// dynamoLocal is Amazon's DynamoDB Local, started once for this package.
var dynamoLocal *dynamolocal.Server

func TestMain(m *testing.M) {
	os.Exit(dynamolocal.Main(m, func(s *dynamolocal.Server) { dynamoLocal = s }))
}

// harnessRun is one `go run ./local` in-process, stopped by cancelling ctx.
type harnessRun struct {
	url    string
	banner string
	cancel context.CancelFunc
	done   chan error
}

func startHarness(t *testing.T, args ...string) *harnessRun {
	t.Helper()
	return startHarnessWith(t, extras{}, args...)
}

func startHarnessWith(t *testing.T, x extras, args ...string) *harnessRun {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	pr, pw := io.Pipe()
	// The harness's log is shown when the test fails, to say why.
	logs := &capture.Buffer{}
	t.Cleanup(func() {
		if t.Failed() {
			t.Logf("harness log (%v):\n%s", args, logs.String())
		}
	})
	h := &harnessRun{cancel: cancel, done: make(chan error, 1)}
	go func() {
		err := runWith(ctx, append([]string{"-addr", "127.0.0.1:0"}, args...), pw, logs, x)
		pw.CloseWithError(io.EOF)
		h.done <- err
	}()
	sc := bufio.NewScanner(pr)
	for sc.Scan() {
		h.banner += sc.Text() + "\n"
		if u, ok := strings.CutPrefix(sc.Text(), "a2awire local harness listening on "); ok {
			h.url = u
			break
		}
	}
	if h.url == "" {
		cancel()
		t.Fatalf("harness did not start: %v", <-h.done)
	}
	go func() { _, _ = io.Copy(io.Discard, pr) }()
	t.Cleanup(func() { h.stop(t) })
	return h
}

func (h *harnessRun) stop(t *testing.T) {
	t.Helper()
	if h.cancel == nil {
		return
	}
	h.cancel()
	h.cancel = nil
	select {
	case err := <-h.done:
		if err != nil {
			t.Errorf("harness exited with %v, want a clean shutdown", err)
		}
	case <-time.After(15 * time.Second):
		t.Error("harness did not shut down")
	}
}

func (h *harnessRun) invoke(t *testing.T, agent, body string) (int, map[string]any) {
	t.Helper()
	resp, err := http.Post(h.url+"/agents/"+agent+"/invoke", "application/json", strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var m map[string]any
	if err := json.NewDecoder(resp.Body).Decode(&m); err != nil {
		t.Fatal(err)
	}
	return resp.StatusCode, m
}

func (h *harnessRun) entries(t *testing.T, account string) float64 {
	t.Helper()
	status, m := h.invoke(t, "a2awire-ledger", `{"task":"balance","input":{"account":"`+account+`"}}`)
	out, _ := m["output"].(map[string]any)
	if status != 200 || out == nil {
		t.Fatalf("balance: %d %v", status, m)
	}
	return out["entries"].(float64)
}

func TestServesAndShutsDown(t *testing.T) {
	h := startHarness(t)
	status, m := h.invoke(t, "a2awire-punctual", `{"task":"ping","input":{"echo":"hi"}}`)
	if status != 200 || m["output"].(map[string]any)["echo"] != "hi" {
		t.Fatalf("ping: %d %v", status, m)
	}
	h.stop(t)
	if _, err := http.Get(h.url + "/agents/a2awire-punctual/invoke"); err == nil {
		t.Error("still serving after shutdown")
	}
}

// checkPersistence records an entry, restarts the harness on the same store
// and expects it back, then restarts with -reset and expects it gone.
func checkPersistence(t *testing.T, args ...string) {
	h := startHarness(t, args...)
	status, m := h.invoke(t, "a2awire-ledger", `{"task":"record-entry","input":{"account":"acct-1","amount_cents":250}}`)
	if status != 200 {
		t.Fatalf("record-entry: %d %v", status, m)
	}
	h.stop(t)

	h = startHarness(t, args...)
	if n := h.entries(t, "acct-1"); n != 1 {
		t.Errorf("after restart: %v entries, want 1", n)
	}
	h.stop(t)

	h = startHarness(t, append(args, "-reset")...)
	if n := h.entries(t, "acct-1"); n != 0 {
		t.Errorf("after -reset: %v entries, want 0", n)
	}
}

// card fetches the card at path with Host: evil.example and returns its
// body, failing if evil.example appears anywhere in it. The cards list no
// interface (nothing at the network's or a world's URL speaks an A2A
// binding); the URLs they do name (the provider, the skills' invoke and
// bridge links, the signature directories) are what the test checks.
func (h *harnessRun) card(t *testing.T, path string) string {
	t.Helper()
	req, err := http.NewRequest("GET", h.url+path, nil)
	if err != nil {
		t.Fatal(err)
	}
	req.Host = "evil.example"
	req.Header.Set("X-Forwarded-Proto", "https")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	raw, _ := io.ReadAll(resp.Body)
	var card struct {
		SupportedInterfaces []json.RawMessage `json:"supportedInterfaces"`
		Provider            struct {
			URL string `json:"url"`
		} `json:"provider"`
	}
	if err := json.Unmarshal(raw, &card); err != nil || resp.StatusCode != 200 {
		t.Fatalf("%s: %d %s", path, resp.StatusCode, raw)
	}
	if len(card.SupportedInterfaces) != 0 {
		t.Errorf("%s advertises interfaces nothing there answers: %s", path, raw)
	}
	if strings.Contains(string(raw), "evil.example") {
		t.Errorf("%s names the request's Host: %s", path, raw)
	}
	return string(raw)
}

// TestAgentCardsIgnoreHostHeader: issue 27's repro — with Host:
// evil.example, the network card and the lobby's card name the harness's
// listen address (or -base-url), never the Host the request carried.
func TestAgentCardsIgnoreHostHeader(t *testing.T) {
	h := startHarness(t)
	if c := h.card(t, "/.well-known/agent-card.json"); !strings.Contains(c, `"url":"`+h.url+`"`) ||
		!strings.Contains(c, h.url+"/a2a/a2awire-clean/.well-known/agent-card.json") {
		t.Errorf("network card does not name the listen address %s as provider and bridge: %s", h.url, c)
	}
	if c := h.card(t, "/v0/worlds/lobby/.well-known/agent-card.json"); !strings.Contains(c, h.url) {
		t.Errorf("lobby card does not name the listen address %s: %s", h.url, c)
	}
	h.stop(t)
	h = startHarness(t, "-base-url", "https://a2a.example/")
	if c := h.card(t, "/.well-known/agent-card.json"); !strings.Contains(c, `"url":"https://a2a.example"`) {
		t.Errorf("with -base-url: network card %s", c)
	}
}

func TestDataDirKeepsDataAcrossRestarts(t *testing.T) {
	checkPersistence(t, "-data", t.TempDir())
}

func TestDynamoDBEndpointKeepsDataAcrossRestarts(t *testing.T) {
	checkPersistence(t, "-dynamodb-endpoint", dynamoLocal.Endpoint(), "-table", "local-harness-test",
		"-network-key", filepath.Join(t.TempDir(), "network.key"))
}

func TestInvokePrintsLambdaResponse(t *testing.T) {
	// The folder name and the agent name both work.
	for _, fn := range []string{"fixture-punctual", "a2awire-punctual"} {
		var out bytes.Buffer
		err := run(context.Background(), []string{"-invoke", fn, "-event", "../events/fixture-punctual-ping.json"}, &out, io.Discard)
		if err != nil {
			t.Fatal(err)
		}
		var resp struct {
			StatusCode int    `json:"statusCode"`
			Body       string `json:"body"`
		}
		if err := json.Unmarshal(out.Bytes(), &resp); err != nil {
			t.Fatalf("output is not a Lambda response: %v\n%s", err, out.String())
		}
		if resp.StatusCode != 200 || !strings.Contains(resp.Body, `"pong":true`) {
			t.Errorf("%s: response = %+v", fn, resp)
		}
	}
}

func TestInvokeUnknownFunctionListsValidNames(t *testing.T) {
	err := run(context.Background(), []string{"-invoke", "a2awire-nope", "-event", "../events/fixture-punctual-ping.json"}, io.Discard, io.Discard)
	if err == nil || !errors.Is(err, errUsage) {
		t.Fatalf("err = %v, want a usage error", err)
	}
	for _, want := range []string{`"a2awire-nope"`, "a2awire-ledger (fixture-ledger)", "a2awire-punctual (fixture-punctual)", "a2awire-translator (fixture-translator)"} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("error %q does not mention %s", err, want)
		}
	}
}

// TestInvokeTriggerSamples runs the DynamoDB stream and EventBridge samples
// through -invoke into test functions with those triggers: each gets the
// file's event, decoded by its own lambda.Handler, and its answer is printed.
func TestInvokeTriggerSamples(t *testing.T) {
	var mu sync.Mutex
	var gotStream events.DynamoDBEvent
	var gotSched events.EventBridgeEvent
	x := extras{functions: []harness.Function{
		{Name: "test-stream", Handler: func(_ context.Context, e events.DynamoDBEvent) (events.DynamoDBEventResponse, error) {
			mu.Lock()
			defer mu.Unlock()
			gotStream = e
			return events.DynamoDBEventResponse{BatchItemFailures: []events.DynamoDBBatchItemFailure{{ItemIdentifier: e.Records[0].Change.SequenceNumber}}}, nil
		}, Config: routes.Function{Name: "test-stream", TimeoutSeconds: 5, Triggers: []routes.Trigger{{Kind: routes.StreamTrigger}}}},
		{Name: "test-schedule", Handler: func(_ context.Context, e events.EventBridgeEvent) error {
			mu.Lock()
			defer mu.Unlock()
			gotSched = e
			return nil
		}, Config: routes.Function{Name: "test-schedule", TimeoutSeconds: 5, Triggers: []routes.Trigger{{Kind: routes.ScheduleTrigger, Schedule: "rate(1 day)"}}}},
	}}
	var out bytes.Buffer
	if err := runWith(context.Background(), []string{"-invoke", "test-stream", "-event", "../events/dynamodb-stream-ledger-record-entry.json"}, &out, io.Discard, x); err != nil {
		t.Fatal(err)
	}
	var file events.DynamoDBEvent
	raw, _ := os.ReadFile("../events/dynamodb-stream-ledger-record-entry.json")
	if err := json.Unmarshal(raw, &file); err != nil {
		t.Fatal(err)
	}
	mu.Lock()
	if !reflect.DeepEqual(gotStream, file) || len(file.Records) == 0 {
		t.Errorf("the stream function got %d records, not the file's %d", len(gotStream.Records), len(file.Records))
	}
	mu.Unlock()
	if !strings.Contains(out.String(), `"batchItemFailures"`) || !strings.Contains(out.String(), file.Records[0].Change.SequenceNumber) {
		t.Errorf("printed %s", out.String())
	}

	out.Reset()
	if err := runWith(context.Background(), []string{"-invoke", "test-schedule", "-event", "../events/eventbridge-scheduled-event.json"}, &out, io.Discard, x); err != nil {
		t.Fatal(err)
	}
	mu.Lock()
	if gotSched.DetailType != "Scheduled Event" || gotSched.Source != "aws.events" {
		t.Errorf("the schedule function got %+v", gotSched)
	}
	mu.Unlock()
	if strings.TrimSpace(out.String()) != "null" {
		t.Errorf("printed %q, want null", out.String())
	}

	// An event a function is not wired for is refused, as AWS never sends it.
	err := runWith(context.Background(), []string{"-invoke", "fixture-ledger", "-event", "../events/dynamodb-stream-ledger-record-entry.json"}, io.Discard, io.Discard, x)
	if err == nil || !strings.Contains(err.Error(), "has no table-stream trigger") {
		t.Errorf("stream batch to the ledger: %v", err)
	}
	err = runWith(context.Background(), []string{"-invoke", "test-stream", "-event", "../events/fixture-punctual-ping.json"}, io.Discard, io.Discard, x)
	if err == nil || !strings.Contains(err.Error(), "serves no route") {
		t.Errorf("HTTP event to a stream function: %v", err)
	}
	bad := filepath.Join(t.TempDir(), "bad.json")
	_ = os.WriteFile(bad, []byte(`{"hello":"world"}`), 0o644)
	err = runWith(context.Background(), []string{"-invoke", "test-stream", "-event", bad}, io.Discard, io.Discard, x)
	if err == nil || !strings.Contains(err.Error(), "neither an API Gateway v2 request") {
		t.Errorf("unknown event shape: %v", err)
	}
}

func TestUsageErrors(t *testing.T) {
	for _, args := range [][]string{
		{"-no-such-flag"},
		{"-invoke", "fixture-punctual"},
		{"-data", "x", "-dynamodb-endpoint", "http://127.0.0.1:1"},
		{"stray"},
		{"-base-url", "evil.example"},
	} {
		err := run(context.Background(), append(args, "-addr", "127.0.0.1:0"), io.Discard, io.Discard)
		if err == nil || !strings.Contains(err.Error(), "usage") {
			t.Errorf("%v: err = %v, want a usage error", args, err)
		}
	}
}

// TestBusyAddressNamesADDR: when the address is taken, the error says how
// to pick another both ways the harness is started: make local ADDR=…
// and -addr.
func TestBusyAddressNamesADDR(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	err = run(context.Background(), []string{"-addr", ln.Addr().String()}, io.Discard, io.Discard)
	if err == nil || !strings.Contains(err.Error(), "make local ADDR=127.0.0.1:8081") || !strings.Contains(err.Error(), "-addr 127.0.0.1:8081") {
		t.Fatalf("a busy address: %v", err)
	}
}

// TestHelp: -h prints what the command is and how to use it, and succeeds.
func TestHelp(t *testing.T) {
	var stderr bytes.Buffer
	if err := run(context.Background(), []string{"-h"}, io.Discard, &stderr); err != nil {
		t.Fatalf("-h: %v", err)
	}
	out := stderr.String()
	if !strings.HasPrefix(out, description+"\n") || !strings.Contains(out, "-invoke FN -event FILE") || !strings.Contains(out, "-dynamodb-endpoint") {
		t.Errorf("-h printed:\n%s", out)
	}
	if strings.Contains(out, "help requested") {
		t.Errorf("-h mentions 'help requested':\n%s", out)
	}
}

// TestDataHeldByAnotherProcess: a second harness on the same -data says
// who holds the file instead of "timeout".
func TestDataHeldByAnotherProcess(t *testing.T) {
	dir := t.TempDir()
	st, err := bolt.Open(filepath.Join(dir, "a2awire.db"))
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	err = run(context.Background(), []string{"-addr", "127.0.0.1:0", "-data", dir}, io.Discard, io.Discard)
	if err == nil || !strings.Contains(err.Error(), "another process (is `make local` already running?) holds "+filepath.Join(dir, "a2awire.db")) {
		t.Errorf("err = %v", err)
	}
}

// TestResetSaysWhatItWiped covers the three stores.
func TestResetSaysWhatItWiped(t *testing.T) {
	dir := t.TempDir()
	for _, c := range []struct {
		args []string
		want string
	}{
		{[]string{"-reset", "-data", dir}, "reset: " + filepath.Join(dir, "a2awire.db") + " did not exist, nothing to wipe"},
		{[]string{"-reset", "-data", dir}, "reset: removed " + filepath.Join(dir, "a2awire.db") + " ("},
		{[]string{"-reset"}, "reset: nothing to wipe, the in-memory store starts empty"},
		{[]string{"-reset", "-dynamodb-endpoint", dynamoLocal.Endpoint(), "-table", "reset-test"}, "reset: deleted DynamoDB table reset-test at " + dynamoLocal.Endpoint()},
	} {
		h := startHarness(t, c.args...)
		h.stop(t)
		if !strings.Contains(h.banner, c.want) {
			t.Errorf("%v printed:\n%s\nwant %q", c.args, h.banner, c.want)
		}
	}
}

// streamProbe is a stream-triggered test function added to the harness: it
// hands each batch it gets to the test.
func streamProbe() (harness.Function, chan events.DynamoDBEvent) {
	got := make(chan events.DynamoDBEvent, 100)
	return harness.Function{
		Name: "test-stream",
		Handler: func(_ context.Context, e events.DynamoDBEvent) (events.DynamoDBEventResponse, error) {
			got <- e
			return events.DynamoDBEventResponse{}, nil
		},
		Config: routes.Function{Name: "test-stream", TimeoutSeconds: 10,
			Triggers: []routes.Trigger{{Kind: routes.StreamTrigger, ReportBatchItemFailures: true}}},
	}, got
}

// checkStreamDelivery: a ledger write made over HTTP reaches a
// stream-triggered function, as an events.DynamoDBEvent, within 1 s.
func checkStreamDelivery(t *testing.T, args ...string) {
	t.Helper()
	fn, got := streamProbe()
	h := startHarnessWith(t, extras{functions: []harness.Function{fn}}, args...)
	account := fmt.Sprintf("stream-%d", time.Now().UnixNano())
	if status, m := h.invoke(t, "a2awire-ledger", `{"task":"record-entry","input":{"account":"`+account+`","amount_cents":700}}`); status != 200 {
		t.Fatalf("record-entry: %d %v", status, m)
	}
	// The clock starts when the write is acknowledged.
	start := time.Now()
	deadline := time.After(time.Second)
	for {
		select {
		case e := <-got:
			for _, r := range e.Records {
				img := r.Change.NewImage
				if r.EventSource == "aws:dynamodb" && r.EventName == "INSERT" && strings.Contains(img["pk"].String(), account) && hasNumber(img, "700") {
					t.Logf("delivered %v after the write was acknowledged", time.Since(start))
					return
				}
			}
		case <-deadline:
			for {
				select {
				case e := <-got:
					for _, r := range e.Records {
						t.Logf("%s %v", r.EventName, r.Change.NewImage)
					}
					continue
				default:
				}
				break
			}
			t.Fatalf("no stream record of the ledger entry for %s within 1 s", account)
		}
	}
}

// hasNumber reports whether a stream image holds the number n (the entry's
// amount, whatever the ledger names its attribute).
func hasNumber(img map[string]events.DynamoDBAttributeValue, n string) bool {
	for _, v := range img {
		if v.DataType() == events.DataTypeNumber && v.Number() == n {
			return true
		}
	}
	return false
}

func TestStreamTriggerMemory(t *testing.T) { checkStreamDelivery(t) }

func TestStreamTriggerBolt(t *testing.T) { checkStreamDelivery(t, "-data", t.TempDir()) }

func TestStreamTriggerDynamoDBLocal(t *testing.T) {
	checkStreamDelivery(t, "-dynamodb-endpoint", dynamoLocal.Endpoint(), "-table", "stream-trigger-test")
}
