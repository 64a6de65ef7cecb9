package main

import (
	"context"
	"fmt"
	"strings"
	"time"

	awnc "github.com/a2awire/a2awire/shared/awn"
	"github.com/a2awire/a2awire/shared/conform"
	"github.com/spf13/cobra"
)

type conformFlags struct {
	task     string
	input    string
	badInput string
	agent    string
	stateful bool
	fixtures bool
	timeout  time.Duration
}

func (a *app) conformCommand() *cobra.Command {
	var f conformFlags
	cmd := &cobra.Command{
		Use:   "conform (<endpoint> --task T [--input JSON] [--bad-input JSON] [--stateful] | --fixtures)",
		Short: "Check a provider against the A2AWire conformance checklist",
		Long: `conform sends the probes of the A2AWire checklist to an endpoint and prints
one line per item, starting with PASS, FAIL or SKIP, then a summary. It exits 1
when any item fails. A line starting with NOTE follows an item where the
provider does less than the network's own providers but all the published
checklist asks (a framework's own 422 body, no X-A2AWire-Replayed header): it
is not a failure.

--input is an input the task succeeds on (default {}); --bad-input one it must
refuse with 400 invalid_input (without it that item is SKIP); --stateful adds
the repeated-task-id items. --fixtures checks the five fixture providers at
AWN_URL with built-in inputs, the ledger as stateful.`,
		Example: `  awn conform http://127.0.0.1:8080/agents/a2awire-clean/invoke --task word-count \
      --input '{"text":"hello world"}' --bad-input '{"text":5}'
  awn conform --fixtures --json`,
		Args: cobra.MaximumNArgs(1),
		RunE: wrap(func(cmd *cobra.Command, args []string) error { return a.conform(cmd, args, f) }),
	}
	fl := cmd.Flags()
	fl.StringVar(&f.task, "task", "", "capability the endpoint advertises")
	fl.StringVar(&f.input, "input", "{}", "input object the task succeeds on")
	fl.StringVar(&f.badInput, "bad-input", "", "input object the task must refuse with 400 invalid_input")
	fl.StringVar(&f.agent, "agent", "", "registered name metadata.agent must equal (default: not compared)")
	fl.BoolVar(&f.stateful, "stateful", false, "the provider honours X-A2AWire-Task-Id: check repeated task ids")
	fl.BoolVar(&f.fixtures, "fixtures", false, "check the five fixture providers at AWN_URL (--url)")
	fl.DurationVar(&f.timeout, "timeout", 30*time.Second, "bound on each probe")
	return cmd
}

// endpointReport is the JSON document of one checked endpoint (--json).
type endpointReport struct {
	Endpoint string          `json:"endpoint"`
	Checks   []conform.Check `json:"checks"`
	Passed   int             `json:"passed"`
	Failed   int             `json:"failed"`
}

// fixturesReport is the one JSON document of `conform --fixtures`: each
// fixture's report, in the single-endpoint shape, and the totals.
type fixturesReport struct {
	Endpoints []endpointReport `json:"endpoints"`
	Passed    int              `json:"passed"`
	Failed    int              `json:"failed"`
}

func (a *app) conform(cmd *cobra.Command, args []string, f conformFlags) error {
	if err := positive("timeout", f.timeout); err != nil {
		return err
	}
	if f.fixtures {
		for _, name := range []string{"task", "input", "bad-input", "agent", "stateful"} {
			if cmd.Flags().Changed(name) {
				return usageErrorf("--fixtures brings its own inputs; --%s cannot be combined with it", name)
			}
		}
		if len(args) > 0 {
			return usageErrorf("--fixtures checks the fixtures at --url; it takes no endpoint argument")
		}
		base, err := a.base()
		if err != nil {
			return err
		}
		return a.conformFixtures(cmd.Context(), conform.Fixtures(base), f.timeout)
	}

	if len(args) == 0 {
		return usageErrorf("conform needs an endpoint (or --fixtures)")
	}
	if _, _, err := checkTarget(args[0]); err != nil {
		return err
	}
	if f.task == "" {
		return usageErrorf("--task is required: a capability the endpoint advertises")
	}
	var err error
	t := conform.Target{Agent: f.agent, Task: f.task, Stateful: f.stateful}
	if t.Input, err = jsonObject("input", f.input); err != nil {
		return err
	}
	if cmd.Flags().Changed("bad-input") {
		if t.BadInput, err = jsonObject("bad-input", f.badInput); err != nil {
			return err
		}
	}
	// Resolved after every flag is checked, so a usage mistake asks no server.
	endpoint, err := a.endpoint(cmd.Context(), args[0])
	if err != nil {
		return err
	}
	t.Endpoint = endpoint
	if err := reach(cmd.Context(), endpoint, f.timeout); err != nil {
		return a.unreachable(endpoint, err)
	}
	rep, err := a.conformOne(cmd.Context(), t, f.timeout)
	if err != nil {
		return err
	}
	if a.json {
		if err := a.writeJSON(rep); err != nil {
			return err
		}
	}
	if rep.Failed > 0 {
		return failed(fmt.Errorf("%d checklist items failed", rep.Failed))
	}
	return nil
}

// conformOne runs the checklist against one target. Without --json each
// verdict line is printed as soon as it is known, which is the progress of a
// slow run; with --json stdout is kept for the document and the verdicts go
// to stderr as progress.
func (a *app) conformOne(ctx context.Context, t conform.Target, timeout time.Duration) (endpointReport, error) {
	start := time.Now()
	fmt.Fprintf(a.stderr, "conform: checking %s (task %s)\n", t.Endpoint, t.Task)
	r := conform.Runner{
		HTTP: awnc.PlainHTTP(timeout),
		OnCheck: func(c conform.Check) {
			if a.json {
				fmt.Fprintf(a.stderr, "conform: %s %s\n", c.Status, c.Name)
				return
			}
			fmt.Fprintln(a.stdout, checkLine(c))
			for _, n := range c.Notes {
				fmt.Fprintln(a.stdout, noteLine(c.Name, n))
			}
		},
	}
	checks, err := r.Run(ctx, t)
	if err != nil {
		return endpointReport{}, usageErrorf("%v", err)
	}
	rep := endpointReport{Endpoint: t.Endpoint, Checks: checks}
	skipped, notes := 0, 0
	for _, c := range checks {
		notes += len(c.Notes)
		switch c.Status {
		case conform.Pass:
			rep.Passed++
		case conform.Fail:
			rep.Failed++
		default:
			skipped++
		}
	}
	if !a.json {
		summary := fmt.Sprintf("%d passed, %d failed, %d skipped", rep.Passed, rep.Failed, skipped)
		switch {
		case notes == 1:
			summary += ", 1 note"
		case notes > 1:
			summary += fmt.Sprintf(", %d notes", notes)
		}
		fmt.Fprintln(a.stdout, summary)
	}
	fmt.Fprintf(a.stderr, "conform: %s done in %s\n", t.Endpoint, time.Since(start).Round(time.Millisecond))
	return rep, nil
}

// checkLine is the human line of one verdict: PASS, FAIL or SKIP, the item
// name padded so details line up, and the detail.
func checkLine(c conform.Check) string {
	return fmt.Sprintf("%-4s  %-19s  %s", strings.ToUpper(string(c.Status)), c.Name, c.Detail)
}

// noteLine is the human line of one note on item name, aligned with the
// verdict lines.
func noteLine(name, note string) string {
	return fmt.Sprintf("%-4s  %-19s  %s", "NOTE", name, note)
}

// reach sends one GET to endpoint and returns the transport error, if any
// (awnc.Reach). It turns "nothing is running there" into one clear error
// instead of a FAIL line per item and fixture, each repeating the dial error.
func reach(ctx context.Context, endpoint string, timeout time.Duration) error {
	return awnc.Reach(ctx, endpoint, timeout)
}

// unreachable is the one error for an endpoint nothing answers at.
func (a *app) unreachable(where string, err error) error {
	fmt.Fprintf(a.stderr, "awn: cannot reach %s: %v\n", where, err)
	fmt.Fprintf(a.stderr, "awn: is the server running? Start the local one with 'make local' (or 'go run ./local'), or point --url (AWN_URL) at yours.\n")
	return failed(fmt.Errorf("cannot reach %s: %w", where, err))
}

func (a *app) conformFixtures(ctx context.Context, targets []conform.Target, timeout time.Duration) error {
	if len(targets) > 0 {
		if err := reach(ctx, targets[0].Endpoint, timeout); err != nil {
			return a.unreachable(a.baseURL, err)
		}
	}
	all := fixturesReport{Endpoints: []endpointReport{}}
	skipped := 0
	for i, t := range targets {
		if !a.json {
			if i > 0 {
				fmt.Fprintln(a.stdout)
			}
			kind := ""
			if t.Stateful {
				kind = ", stateful"
			}
			fmt.Fprintf(a.stdout, "== %s (task %s%s) %s\n", t.Agent, t.Task, kind, t.Endpoint)
		}
		rep, err := a.conformOne(ctx, t, timeout)
		if err != nil {
			return err
		}
		all.Endpoints = append(all.Endpoints, rep)
		all.Passed += rep.Passed
		all.Failed += rep.Failed
		skipped += len(rep.Checks) - rep.Passed - rep.Failed
	}
	if a.json {
		if err := a.writeJSON(all); err != nil {
			return err
		}
	} else {
		fmt.Fprintf(a.stdout, "\n%d fixtures: %d passed, %d failed, %d skipped\n", len(targets), all.Passed, all.Failed, skipped)
	}
	if all.Failed > 0 {
		return failed(fmt.Errorf("%d checklist items failed", all.Failed))
	}
	return nil
}
