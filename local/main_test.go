package main

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"io"
	"net/http"
	"os"
	"strings"
	"testing"
	"time"

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
	cancel context.CancelFunc
	done   chan error
}

func startHarness(t *testing.T, args ...string) *harnessRun {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	pr, pw := io.Pipe()
	h := &harnessRun{cancel: cancel, done: make(chan error, 1)}
	go func() {
		err := run(ctx, append([]string{"-addr", "127.0.0.1:0"}, args...), pw, io.Discard)
		pw.CloseWithError(io.EOF)
		h.done <- err
	}()
	sc := bufio.NewScanner(pr)
	for sc.Scan() {
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

func TestDataDirKeepsDataAcrossRestarts(t *testing.T) {
	checkPersistence(t, "-data", t.TempDir())
}

func TestDynamoDBEndpointKeepsDataAcrossRestarts(t *testing.T) {
	checkPersistence(t, "-dynamodb-endpoint", dynamoLocal.Endpoint(), "-table", "local-harness-test")
}

func TestInvokePrintsLambdaResponse(t *testing.T) {
	var out bytes.Buffer
	err := run(context.Background(), []string{"-invoke", "fixture-punctual", "-event", "../events/fixture-punctual-ping.json"}, &out, io.Discard)
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
		t.Errorf("response = %+v", resp)
	}
}

func TestUsageErrors(t *testing.T) {
	for _, args := range [][]string{
		{"-no-such-flag"},
		{"-invoke", "fixture-punctual"},
		{"-data", "x", "-dynamodb-endpoint", "http://127.0.0.1:1"},
	} {
		err := run(context.Background(), append(args, "-addr", "127.0.0.1:0"), io.Discard, io.Discard)
		if err == nil || !strings.Contains(err.Error(), "usage") {
			t.Errorf("%v: err = %v, want a usage error", args, err)
		}
	}
}
