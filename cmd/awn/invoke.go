package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"maps"
	"slices"
	"strings"
	"text/tabwriter"
	"time"

	awnc "github.com/a2awire/a2awire/shared/awn"
	"github.com/a2awire/a2awire/shared/protocol"
	"github.com/spf13/cobra"
)

// maxResponse bounds the answer awn reads (8 MiB); a longer one is reported
// as cut, never shown in part.
const maxResponse = awnc.MaxResponse

type invokeFlags struct {
	task     string
	input    string
	taskID   string
	timeout  time.Duration
	attempts int
}

func (a *app) invokeCommand() *cobra.Command {
	var f invokeFlags
	cmd := &cobra.Command{
		Use:   "invoke <name|endpoint> --task T [--input JSON] [--task-id ID]",
		Short: "Send one task to a provider and print its output",
		Long: `invoke POSTs {"task", "input"} to a provider's endpoint and prints the output
and metadata, or with --json the provider's whole response.

Retries (5xx, 429, timeouts) reuse one task id, so a stateful provider acts once;
--task-id sets that id. An error answer prints "error: <code>: <message>" on
stderr and exits 1. A bare agent name (no scheme) is resolved to its endpoint
through the registry at AWN_URL (GET /api/v1/agents/{name}).`,
		Example: `  awn invoke a2awire-clean --task word-count --input '{"text":"hello world"}'
  awn invoke http://127.0.0.1:8080/agents/a2awire-clean/invoke --task word-count --input '{"text":"hello world"}'`,
		Args: cobra.ExactArgs(1),
		RunE: wrap(func(cmd *cobra.Command, args []string) error { return a.invoke(cmd.Context(), args[0], f) }),
	}
	fl := cmd.Flags()
	fl.StringVar(&f.task, "task", "", "capability to invoke (required)")
	fl.StringVar(&f.input, "input", "{}", "input as a JSON object")
	fl.StringVar(&f.taskID, "task-id", "", "X-A2AWire-Task-Id for every attempt (default: a random UUID)")
	fl.DurationVar(&f.timeout, "timeout", 30*time.Second, "bound on the whole invocation, retries included")
	fl.IntVar(&f.attempts, "attempts", 3, "attempts at most, on 5xx, 429, timeouts and connection errors")
	_ = cmd.MarkFlagRequired("task")
	return cmd
}

func (a *app) invoke(ctx context.Context, target string, f invokeFlags) error {
	if _, _, err := checkTarget(target); err != nil {
		return err
	}
	if strings.TrimSpace(f.task) == "" {
		return usageErrorf("--task must name a capability")
	}
	input, err := jsonObject("input", f.input)
	if err != nil {
		return err
	}
	if len(f.taskID) > protocol.MaxTaskIDLength {
		return usageErrorf("--task-id is longer than %d characters", protocol.MaxTaskIDLength)
	}
	if f.taskID != "" && !protocol.ValidTaskID(f.taskID) {
		return usageErrorf("--task-id %s must be printable ASCII (letters, digits, punctuation, spaces)", protocol.Quote(f.taskID))
	}
	if err := positive("timeout", f.timeout); err != nil {
		return err
	}
	if f.attempts < 1 {
		return usageErrorf("--attempts must be at least 1, got %d", f.attempts)
	}

	ctx, cancel := context.WithTimeout(ctx, f.timeout)
	defer cancel()
	// Resolved after every flag is checked, so a usage mistake asks no server.
	endpoint, err := a.endpoint(ctx, target)
	if err != nil {
		return err
	}
	// The client gives each attempt a share of the budget, so a hung
	// attempt is retried within --timeout.
	client := awnc.NewInvoker(f.attempts, f.timeout)
	var opts []protocol.InvokeOption
	if f.taskID != "" {
		opts = append(opts, protocol.WithTaskID(f.taskID))
	}
	res, err := client.Invoke(ctx, endpoint, protocol.Request{Task: f.task, Input: input}, opts...)
	// Every failure below exits 1 in text and --json mode alike; stdout
	// stays empty, so a script reading --json never parses half an answer.
	var remote *protocol.RemoteError
	switch {
	case errors.As(err, &remote):
		fmt.Fprintln(a.stderr, "error: "+describeRemote(res, remote))
		return failed(remote)
	case errors.Is(err, protocol.ErrResponseTooLarge):
		fmt.Fprintf(a.stderr, "error: the response was larger than %d MiB and was cut; it is not shown\n", maxResponse>>20)
		return failed(err)
	case errors.Is(err, protocol.ErrMalformedResponse):
		fmt.Fprintln(a.stderr, "error: "+describeMalformed(res))
		return failed(err)
	case err != nil:
		return err
	}
	// A 200 that breaks the protocol (say, an error inside output) is still
	// what the provider said: show it, and warn so it is not taken at face value.
	if verr := protocol.Verify(res.Status, res.Header, res.Body, protocol.Expect{Capability: f.task}); verr != nil {
		fmt.Fprintf(a.stderr, "awn: warning: the response does not conform: %s\n", strings.ReplaceAll(verr.Error(), "\n", "; "))
	}
	if a.json {
		var b bytes.Buffer
		if err := json.Indent(&b, res.Body, "", "  "); err != nil {
			return fmt.Errorf("re-indent response: %w", err)
		}
		b.WriteByte('\n')
		_, err := a.stdout.Write(b.Bytes())
		return err
	}
	return a.printResult(res)
}

// describeMalformed says why a 200 is not a response: an error shape
// inside it, or the start of whatever it was.
func describeMalformed(res *protocol.Result) string {
	var e protocol.ErrorBody
	if json.Unmarshal(res.Body, &e) == nil && e.Error != "" {
		return fmt.Sprintf("%s: %s (sent with status 200, which the protocol forbids)",
			escapeControls(string(e.Error), false), escapeControls(e.Message, false))
	}
	return "the provider answered 200 with a body that is not a response: " + escapeControls(clip(strings.TrimSpace(string(res.Body)), 200), false)
}

// describeRemote renders an error answer as "<code>: <message>", falling
// back to the status and the start of the body when the answer is not in the
// protocol's error shape (a gateway's 404, an HTML error page).
func describeRemote(res *protocol.Result, e *protocol.RemoteError) string {
	if e.Body.Error != "" {
		return fmt.Sprintf("%s: %s", escapeControls(string(e.Body.Error), false), escapeControls(e.Body.Message, false))
	}
	s := awnc.StatusLine(e.Status)
	if res != nil {
		if b := strings.TrimSpace(string(res.Body)); b != "" {
			s += ": " + escapeControls(clip(b, 200), false)
		}
	}
	return s
}

func clip(s string, n int) string {
	if r := []rune(s); len(r) > n {
		return string(r[:n]) + "…"
	}
	return s
}

// printResult shows the output as indented JSON, then the metadata and the
// invocation's task id as aligned key-value lines.
func (a *app) printResult(res *protocol.Result) error {
	var out bytes.Buffer
	if err := json.Indent(&out, res.Response.Output, "", "  "); err != nil {
		return fmt.Errorf("re-indent output: %w", err)
	}
	// JSON strings may hold DEL, C1 controls and bidi overrides raw.
	if _, err := io.WriteString(a.stdout, escapeControls(out.String(), true)+"\n\n"); err != nil {
		return err
	}
	m := res.Response.Metadata
	tw := tabwriter.NewWriter(a.stdout, 0, 4, 2, ' ', 0)
	esc := func(s string) string { return escapeControls(s, false) }
	fmt.Fprintf(tw, "agent:\t%s\n", esc(m.Agent))
	fmt.Fprintf(tw, "capability:\t%s\n", esc(m.Capability))
	fmt.Fprintf(tw, "duration_ms:\t%d\n", m.DurationMS)
	if m.TokensUsed != nil {
		fmt.Fprintf(tw, "tokens_used:\t%d\n", *m.TokensUsed)
	}
	if m.Model != "" {
		fmt.Fprintf(tw, "model:\t%s\n", esc(m.Model))
	}
	for _, k := range slices.Sorted(maps.Keys(m.Extra)) {
		v := m.Extra[k]
		if s, ok := v.(string); ok {
			fmt.Fprintf(tw, "%s:\t%s\n", esc(k), esc(s))
			continue
		}
		b, _ := json.Marshal(v)
		fmt.Fprintf(tw, "%s:\t%s\n", esc(k), esc(string(b)))
	}
	fmt.Fprintf(tw, "task_id:\t%s\n", esc(res.TaskID))
	if res.Attempts > 1 {
		fmt.Fprintf(tw, "attempts:\t%d\n", res.Attempts)
	}
	if res.Replayed {
		fmt.Fprintf(tw, "replayed:\ttrue\n")
	}
	return tw.Flush()
}
