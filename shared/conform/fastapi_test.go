package conform_test

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"net"
	"net/http"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/a2awire/a2awire/shared/capture"

	"github.com/a2awire/a2awire/shared/conform"
)

// debianPython is the interpreter Debian's python3-fastapi and
// python3-uvicorn are installed for; a python3 found earlier on PATH (pyenv,
// a virtualenv) does not see them.
const debianPython = "/usr/bin/python3"

// fastAPIStart bounds the provider's start: importing FastAPI and pydantic
// takes about 3 s on a busy 2-core machine.
const fastAPIStart = 20 * time.Second

// fastAPI is testdata/fastapi/provider.py served by uvicorn on a free
// loopback port for the test's lifetime: a provider written as the
// protocol's published text describes one, with FastAPI's own 405 and 422
// bodies and no X-A2AWire-Replayed header.
type fastAPI struct {
	base string // http://127.0.0.1:port
}

// startFastAPI fails the test when the packages are missing: make test's
// setup installs them, and a conformance claim nobody checked is worse than
// a red test.
func startFastAPI(t *testing.T) fastAPI {
	t.Helper()
	if out, err := exec.Command(debianPython, "-c", "import fastapi, uvicorn").CombinedOutput(); err != nil {
		t.Fatalf("%s cannot import fastapi and uvicorn (%v: %s): run make test, whose setup installs them, "+
			"or apt-get install python3-fastapi python3-uvicorn", debianPython, err, bytes.TrimSpace(out))
	}
	dir, err := filepath.Abs(filepath.Join("testdata", "fastapi"))
	if err != nil {
		t.Fatal(err)
	}
	// The free port is found by listening and closing; another process may
	// take it in between, which uvicorn reports by exiting: try again.
	var problems []string
	for range 3 {
		base, stop, err := runUvicorn(dir)
		if err == nil {
			t.Cleanup(stop)
			return fastAPI{base: base}
		}
		problems = append(problems, err.Error())
	}
	t.Fatalf("the FastAPI provider did not start:\n%s", strings.Join(problems, "\n"))
	return fastAPI{}
}

// runUvicorn starts uvicorn on a free port and waits until it answers.
func runUvicorn(dir string) (base string, stop func(), err error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return "", nil, err
	}
	port := ln.Addr().(*net.TCPAddr).Port
	_ = ln.Close()
	var out capture.Buffer
	cmd := exec.Command(debianPython, "-m", "uvicorn", "provider:app", "--app-dir", dir,
		"--host", "127.0.0.1", "--port", fmt.Sprint(port), "--log-level", "warning", "--no-access-log")
	// No __pycache__ left in the source tree.
	cmd.Env = append(os.Environ(), "PYTHONDONTWRITEBYTECODE=1")
	cmd.Stdout, cmd.Stderr = &out, &out
	if err := cmd.Start(); err != nil {
		return "", nil, err
	}
	exited := make(chan error, 1)
	go func() { exited <- cmd.Wait() }()
	stop = func() {
		_ = cmd.Process.Kill()
		<-exited
	}
	base = fmt.Sprintf("http://127.0.0.1:%d", port)
	start := time.Now()
	hc := &http.Client{Timeout: time.Second}
	for time.Since(start) < fastAPIStart {
		select {
		case err := <-exited:
			exited <- err
			stop()
			return "", nil, fmt.Errorf("uvicorn on port %d exited (%v): %s", port, err, out.String())
		default:
		}
		if resp, err := hc.Get(base + "/executions"); err == nil {
			_ = resp.Body.Close()
			if resp.StatusCode == http.StatusOK {
				return base, stop, nil
			}
		}
		time.Sleep(50 * time.Millisecond)
	}
	stop()
	return "", nil, fmt.Errorf("uvicorn on port %d did not answer within %s: %s", port, fastAPIStart, out.String())
}

// target is the checklist's target for one variant of the provider: its
// mode and deliberate bug travel in the endpoint's query, and the effect
// count is the variant's number of runs.
func (f fastAPI) target(stateful bool, brk string) conform.Target {
	q := url.Values{}
	if stateful {
		q.Set("mode", "stateful")
	}
	if brk != "" {
		q.Set("break", brk)
	}
	query := ""
	if len(q) > 0 {
		query = "?" + q.Encode()
	}
	tg := conform.Target{
		Endpoint: f.base + "/" + query,
		Agent:    "fastapi-provider",
		Task:     "word-count",
		Input:    json.RawMessage(`{"text":"hello world"}`),
		BadInput: json.RawMessage(`{"text":5}`),
		Stateful: stateful,
	}
	if stateful {
		tg.Effects = func(ctx context.Context, hc *http.Client) (int64, error) {
			req, err := http.NewRequestWithContext(ctx, http.MethodGet, f.base+"/executions"+query, nil)
			if err != nil {
				return 0, err
			}
			resp, err := hc.Do(req)
			if err != nil {
				return 0, err
			}
			defer resp.Body.Close()
			var c struct {
				Executions *int64 `json:"executions"`
			}
			if err := json.NewDecoder(resp.Body).Decode(&c); err != nil || c.Executions == nil {
				return 0, fmt.Errorf("executions: %d, %v", resp.StatusCode, err)
			}
			return *c.Executions, nil
		}
	}
	return tg
}

// logRun prints a run as `awn conform` prints it, so the test log shows the
// checklist against a real FastAPI provider.
func logRun(t *testing.T, checks map[string]conform.Check, stateful bool) {
	t.Helper()
	var b strings.Builder
	for _, n := range conform.Names(stateful) {
		c := checks[n]
		fmt.Fprintf(&b, "\n%-4s  %-19s  %s", strings.ToUpper(string(c.Status)), c.Name, c.Detail)
		for _, note := range c.Notes {
			fmt.Fprintf(&b, "\nNOTE  %-19s  %s", c.Name, note)
		}
	}
	t.Log(b.String())
}

// TestFastAPIProvider: the checklist against a FastAPI provider written as
// the protocol's published text describes one. Stateless and stateful, it
// passes every item; FastAPI's own 405 and 422 bodies, its 422 for input
// null, the replay without X-A2AWire-Replayed and the reused id answered
// with the stored result are notes on their items. Each deliberately broken
// variant fails exactly the items of the checklist line it breaks.
func TestFastAPIProvider(t *testing.T) {
	t.Parallel()
	f := startFastAPI(t)

	for _, stateful := range []bool{false, true} {
		t.Run(fmt.Sprintf("conformant/stateful=%v", stateful), func(t *testing.T) {
			t.Parallel()
			checks := run(t, f.target(stateful, ""))
			logRun(t, checks, stateful)
			if bad := having(checks, conform.Fail); len(bad) > 0 || len(having(checks, conform.Skip)) > 0 {
				t.Fatalf("want every item to pass:%s", report(checks))
			}
			want := []string{conform.InputDefaults, conform.InvalidRequest422, conform.MalformedBody422, conform.NonJSON415, conform.NonPost405}
			if stateful {
				want = append(want, conform.ReplayIdentical, conform.ReusedKey409)
				slices.Sort(want)
				if d := checks[conform.ReplayIdentical].Detail; !strings.Contains(d, "effect count") {
					t.Errorf("replay-identical detail %q: without the header, the effect count must tell the ids apart", d)
				}
			}
			if got := noted(checks); !slices.Equal(got, want) {
				t.Errorf("notes on %v, want on %v:%s", got, want, report(checks))
			}
		})
	}

	breaks := []struct {
		brk      string
		stateful bool
		want     []string
		// detail must appear in the detail of item on (default want[0]).
		on, detail string
	}{
		{brk: "unknown-task-500", want: []string{conform.UnknownCapability}, detail: "got 500 internal_error"},
		// Every 200 lacks the agent, so no-error-in-200 finds it too.
		{brk: "no-agent", want: []string{conform.NoErrorIn200, conform.SuccessShape}, on: conform.SuccessShape, detail: "metadata.agent is missing"},
		// The 200 is both the wrong answer to bad input and an error inside a success.
		{brk: "error-in-200", want: []string{conform.BadInput400, conform.NoErrorIn200}, detail: "want 400 invalid_input, got 200"},
		{brk: "bad-input-500", want: []string{conform.BadInput400}, detail: "got 500 internal_error"},
		{brk: "ignore-content-type", want: []string{conform.NonJSON415}, detail: "got 200"},
		{brk: "get-200", want: []string{conform.NonPost405}, detail: "want 405, got 200"},
		{brk: "input-required", want: []string{conform.InputDefaults}, detail: "input must default to {}"},
		{brk: "malformed-400", want: []string{conform.MalformedBody422}, detail: "want 422 for the body {], got 400 bad_json"},
		// A provider that runs every repeat again answers each differently
		// and acts once per request.
		{brk: "rerun", stateful: true, want: []string{conform.ActsOnce, conform.ReplayIdentical, conform.ReusedKey409},
			on: conform.ReplayIdentical, detail: "answered differently"},
		// An altered replay differs from the first answer wherever a repeat
		// is compared with it.
		{brk: "replay-not-identical", stateful: true, want: []string{conform.ActsOnce, conform.ReplayIdentical, conform.ReusedKey409},
			on: conform.ReplayIdentical, detail: "answered differently"},
	}
	for _, tc := range breaks {
		t.Run("break="+tc.brk, func(t *testing.T) {
			t.Parallel()
			checks := run(t, f.target(tc.stateful, tc.brk))
			logRun(t, checks, tc.stateful)
			if got := having(checks, conform.Fail); !slices.Equal(got, tc.want) {
				t.Fatalf("failed items %v, want %v:%s", got, tc.want, report(checks))
			}
			on := tc.on
			if on == "" {
				on = tc.want[0]
			}
			if d := checks[on].Detail; !strings.Contains(d, tc.detail) {
				t.Errorf("%s detail %q does not contain %q", on, d, tc.detail)
			}
		})
	}
}
