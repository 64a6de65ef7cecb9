package main

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/spf13/cobra"

	awnc "github.com/a2awire/a2awire/shared/awn"
	"github.com/a2awire/a2awire/shared/protocol"
)

// The credits and escrow commands (docs/escrow.md): awn escrow …, awn
// balance, awn grant (the operator's) and awn hire, which runs a whole
// hire — discover, create, fund, verify, release — printing each step.

// escrowView is the part of an escrow the human output shows; --json
// prints what the server sent.
// escrowView is an escrow as human output shows it; --json prints what
// the server sent.
type escrowView = awnc.Escrow

func (a *app) escrowCommand() *cobra.Command {
	cmd := &cobra.Command{
		Use:   "escrow",
		Short: "Hire through escrow: create, fund, verify, release, refund, dispute, show, list",
		Long: `An escrow holds a buyer's credits for one hire of a provider's capability:
create it, fund it (the credits move into the escrow's hold), verify it (the
network invokes the provider with the escrow id as task id and checks the
answer), then release it (the provider is paid), or refund or dispute it.
Every command is signed with this agent's key; the buyer must be registered.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			cmd.SetOut(a.stderr)
			_ = cmd.Help()
			return usageErrorf("no escrow command given")
		},
	}
	var c createFlags
	create := &cobra.Command{
		Use:     "create <provider> --capability C --input JSON --amount N [--deadline RFC3339]",
		Short:   "Create an escrow for a provider's capability (state created)",
		Example: `  awn escrow create a2awire-clean --capability word-count --input '{"text":"a b c"}' --amount 10`,
		Args:    cobra.ExactArgs(1),
		RunE: wrap(func(cmd *cobra.Command, args []string) error {
			c.provider = args[0]
			e, raw, err := a.createEscrow(cmd.Context(), c)
			if err != nil {
				return err
			}
			return a.printEscrow(e, raw)
		}),
	}
	c.flags(create)
	cmd.AddCommand(create)
	for _, m := range []struct{ name, short string }{
		{"fund", "Move the escrow's amount from your balance into its hold (→ funded; 402 without the credits)"},
		{"verify", "Have the network invoke the provider and check its answer (→ delivered or failed)"},
		{"release", "Pay the provider a delivered escrow (→ released); the operator resolves a dispute this way"},
		{"refund", "Take the credits back from a created, funded or failed escrow (→ refunded)"},
		{"dispute", "Dispute a delivered escrow within the dispute window (→ disputed)"},
	} {
		cmd.AddCommand(&cobra.Command{
			Use:   m.name + " <escrow-id>",
			Short: m.short,
			Args:  cobra.ExactArgs(1),
			RunE: wrap(func(cmd *cobra.Command, args []string) error {
				e, raw, err := a.moveEscrow(cmd.Context(), args[0], m.name)
				if err != nil {
					return err
				}
				return a.printEscrow(e, raw)
			}),
		})
	}
	cmd.AddCommand(&cobra.Command{
		Use:   "show <escrow-id>",
		Short: "Show an escrow and every transition (buyer, provider or operator)",
		Args:  cobra.ExactArgs(1),
		RunE: wrap(func(cmd *cobra.Command, args []string) error {
			c, _, err := a.signed()
			if err != nil {
				return err
			}
			e, err := c.GetEscrow(cmd.Context(), args[0])
			if err != nil {
				return a.check(err)
			}
			return a.printEscrow(e, e.Reply.Raw)
		}),
	})
	var role, state string
	list := &cobra.Command{
		Use:   "list [--role buyer|provider] [--state S]",
		Short: "List your escrows, newest first",
		Args:  cobra.NoArgs,
		RunE: wrap(func(cmd *cobra.Command, _ []string) error {
			return a.listEscrows(cmd.Context(), role, state)
		}),
	}
	list.Flags().StringVar(&role, "role", "buyer", "buyer or provider")
	list.Flags().StringVar(&state, "state", "", "only escrows in this state")
	cmd.AddCommand(list)
	return cmd
}

type createFlags struct {
	provider, capability, input, deadline string
	amount                                int64
}

func (c *createFlags) flags(cmd *cobra.Command) {
	fl := cmd.Flags()
	fl.StringVar(&c.capability, "capability", "", "the capability hired (required)")
	fl.StringVar(&c.input, "input", "{}", "the task's input, a JSON object")
	fl.Int64Var(&c.amount, "amount", 0, "credits the hire pays (required, positive)")
	fl.StringVar(&c.deadline, "deadline", "", "RFC 3339 time by which it must be delivered (default: the server's, 24 h)")
}

func (a *app) createEscrow(ctx context.Context, c createFlags) (escrowView, []byte, error) {
	var e escrowView
	if !isAgentName(c.provider) {
		return e, nil, usageErrorf("%s is not an agent name", protocol.Quote(c.provider))
	}
	if strings.TrimSpace(c.capability) == "" {
		return e, nil, usageErrorf("--capability is required")
	}
	if c.amount <= 0 {
		return e, nil, usageErrorf("--amount must be a positive number of credits, got %d", c.amount)
	}
	input, err := jsonObject("input", c.input)
	if err != nil {
		return e, nil, err
	}
	if c.deadline != "" {
		if _, err := time.Parse(time.RFC3339, c.deadline); err != nil {
			return e, nil, usageErrorf("--deadline %s is not an RFC 3339 time such as 2026-12-31T12:00:00Z", protocol.Quote(c.deadline))
		}
	}
	cl, _, err := a.signed()
	if err != nil {
		return e, nil, err
	}
	e, err = cl.CreateEscrowDeadline(ctx, awnc.Hire{Provider: c.provider, Capability: c.capability, Input: input, Amount: c.amount}, c.deadline)
	if err != nil {
		return e, nil, a.check(err)
	}
	return e, e.Reply.Raw, nil
}

func (a *app) moveEscrow(ctx context.Context, id, action string) (escrowView, []byte, error) {
	c, _, err := a.signed()
	if err != nil {
		return escrowView{}, nil, err
	}
	e, err := c.MoveEscrow(ctx, id, action)
	if err != nil {
		return e, nil, a.check(err)
	}
	return e, e.Reply.Raw, nil
}

// printEscrow prints the escrow: the server's JSON with --json, else its
// fields and history.
func (a *app) printEscrow(e escrowView, raw []byte) error {
	if a.json {
		return a.writeJSON(json.RawMessage(raw))
	}
	esc := func(s string) string { return escapeControls(s, false) }
	field := func(name, format string, args ...any) {
		fmt.Fprintf(a.stdout, "%-10s %s\n", name+":", fmt.Sprintf(format, args...))
	}
	field("escrow", "%s", esc(e.ID))
	field("state", "%s", esc(e.State))
	field("provider", "%s (%s)", esc(e.Provider), esc(e.Capability))
	field("amount", "%d", e.Amount)
	field("deadline", "%s", esc(e.Deadline))
	if e.OutputSHA256 != "" {
		field("output", "%s", esc(compactJSON(e.Output, false)))
		field("sha256", "%s", esc(e.OutputSHA256))
	}
	if e.Reason != "" {
		field("reason", "%s (status %d)", esc(e.Reason), e.Status)
	}
	tw := tabwriter.NewWriter(a.stdout, 0, 4, 2, ' ', 0)
	for _, t := range e.Transitions {
		from := t.From
		if from == "" {
			from = "-"
		}
		fmt.Fprintf(tw, "  %s\t%s → %s\tby %s\n", esc(t.At), esc(from), esc(t.To), esc(t.By))
	}
	return tw.Flush()
}

func (a *app) listEscrows(ctx context.Context, role, state string) error {
	if role != "buyer" && role != "provider" {
		return usageErrorf("--role must be buyer or provider, not %s", protocol.Quote(role))
	}
	c, _, err := a.signed()
	if err != nil {
		return err
	}
	var all []json.RawMessage
	cursor := ""
	for range 1000 {
		page, err := c.Escrows(ctx, role, state, 100, cursor)
		if err != nil {
			return a.check(err)
		}
		all = append(all, page.Escrows...)
		if page.NextCursor == "" || page.NextCursor == cursor {
			break
		}
		cursor = page.NextCursor
	}
	if a.json {
		if all == nil {
			all = []json.RawMessage{}
		}
		return a.writeJSON(map[string]any{"escrows": all})
	}
	if len(all) == 0 {
		_, err := fmt.Fprintln(a.stdout, "no escrows")
		return err
	}
	esc := func(s string) string { return escapeControls(s, false) }
	tw := tabwriter.NewWriter(a.stdout, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "ID\tSTATE\tAMOUNT\tPROVIDER\tCAPABILITY")
	for _, raw := range all {
		var e escrowView
		if err := decodeData("GET /api/v1/escrows", raw, &e); err != nil {
			return err
		}
		fmt.Fprintf(tw, "%s\t%s\t%d\t%s\t%s\n", esc(e.ID), esc(e.State), e.Amount, esc(e.Provider), esc(e.Capability))
	}
	return tw.Flush()
}

func (a *app) balanceCommand() *cobra.Command {
	return &cobra.Command{
		Use:   "balance [awn-id]",
		Short: "Show your credits: balance, held in escrows, recent entries",
		Args:  cobra.MaximumNArgs(1),
		RunE: wrap(func(cmd *cobra.Command, args []string) error {
			c, _, err := a.signed()
			if err != nil {
				return err
			}
			id := ""
			if len(args) == 1 {
				id = args[0]
			}
			got, err := c.Account(cmd.Context(), id)
			if err != nil {
				return a.check(err)
			}
			b := got.Reply.Raw
			if a.json {
				return a.writeJSON(json.RawMessage(b))
			}
			var acct struct {
				Balance int64 `json:"balance"`
				Held    int64 `json:"held"`
				Entries []struct {
					Amount       int64  `json:"amount"`
					Counterparty string `json:"counterparty"`
					Memo         string `json:"memo"`
					At           string `json:"at"`
				} `json:"entries"`
			}
			if err := decodeData("GET /api/v1/accounts/{awnId}", b, &acct); err != nil {
				return err
			}
			esc := func(s string) string { return escapeControls(s, false) }
			fmt.Fprintf(a.stdout, "balance:  %d\nheld:     %d\n", acct.Balance, acct.Held)
			tw := tabwriter.NewWriter(a.stdout, 0, 4, 2, ' ', 0)
			for _, e := range acct.Entries {
				fmt.Fprintf(tw, "  %s\t%+d\t%s\t%s\n", esc(e.At), e.Amount, esc(e.Counterparty), esc(e.Memo))
			}
			return tw.Flush()
		}),
	}
}

func (a *app) grantCommand() *cobra.Command {
	var amount int64
	var memo string
	cmd := &cobra.Command{
		Use:     "grant <awn-id> --amount N [--memo M]",
		Short:   "Grant credits to an agent (the operator: signed with the network key)",
		Example: "  awn grant aw:sha256:3f2a… --amount 100 --memo welcome",
		Args:    cobra.ExactArgs(1),
		RunE: wrap(func(cmd *cobra.Command, args []string) error {
			if amount <= 0 {
				return usageErrorf("--amount must be a positive number of credits, got %d", amount)
			}
			c, _, err := a.signed()
			if err != nil {
				return err
			}
			granted, err := c.Grant(cmd.Context(), args[0], amount, memo)
			if err != nil {
				return a.check(err)
			}
			b := granted.Raw
			if a.json {
				return a.writeJSON(json.RawMessage(b))
			}
			var out struct {
				Balance int64 `json:"balance"`
			}
			if err := decodeData("grant", b, &out); err != nil {
				return err
			}
			_, err = fmt.Fprintf(a.stdout, "granted %d to %s (balance %d)\n", amount, escapeControls(args[0], false), out.Balance)
			return err
		}),
	}
	cmd.Flags().Int64Var(&amount, "amount", 0, "credits to grant (required, positive)")
	cmd.Flags().StringVar(&memo, "memo", "", "why, kept with the entries")
	return cmd
}

func (a *app) hireCommand() *cobra.Command {
	var c createFlags
	cmd := &cobra.Command{
		Use:   "hire <capability> --input JSON --amount N [--provider NAME]",
		Short: "Hire a provider through escrow: discover, create, fund, verify, release",
		Long: `hire runs a whole hire and prints each step on stderr: it discovers an
online provider of the capability (or takes --provider), creates an escrow for
--amount credits, funds it, has the network verify the delivery, and releases
the payment. The output goes to stdout (--json: the released escrow). A failed
verification stops before release, leaving the escrow failed: verify again or
refund it with 'awn escrow refund <id>'.`,
		Example: `  awn hire word-count --input '{"text":"one two three"}' --amount 10`,
		Args:    cobra.ExactArgs(1),
		RunE: wrap(func(cmd *cobra.Command, args []string) error {
			c.capability = args[0]
			return a.hire(cmd.Context(), c)
		}),
	}
	c.flags(cmd)
	cmd.Flags().StringVar(&c.provider, "provider", "", "hire this agent instead of the first one discovered")
	return cmd
}

func (a *app) hire(ctx context.Context, c createFlags) error {
	if strings.TrimSpace(c.capability) == "" {
		return usageErrorf("the capability must not be empty")
	}
	if c.amount <= 0 {
		return usageErrorf("--amount must be a positive number of credits, got %d", c.amount)
	}
	if _, err := jsonObject("input", c.input); err != nil {
		return err
	}
	step := func(format string, args ...any) { fmt.Fprintf(a.stderr, format+"\n", args...) }
	if c.provider == "" {
		cl, err := a.client()
		if err != nil {
			return err
		}
		page, err := cl.Discover(ctx, awnc.Discovery{Capability: c.capability, Limit: 1})
		if err != nil {
			return a.check(err)
		}
		if len(page.Agents) == 0 {
			fmt.Fprintf(a.stderr, "error: no online agent serves %s\n", protocol.Quote(c.capability))
			return failed(fmt.Errorf("no provider of %s", c.capability))
		}
		c.provider = page.Agents[0].Name
		step("discover: %s serves %s", escapeControls(c.provider, false), escapeControls(c.capability, false))
	}
	e, _, err := a.createEscrow(ctx, c)
	if err != nil {
		return err
	}
	step("create:   escrow %s for %d credits (%s)", e.ID, e.Amount, e.State)
	var raw []byte
	for _, action := range []string{"fund", "verify", "release"} {
		if e, raw, err = a.moveEscrow(ctx, e.ID, action); err != nil {
			return err
		}
		switch {
		case action == "verify" && e.State != "delivered":
			step("verify:   %s: %s", e.State, escapeControls(e.Reason, false))
			fmt.Fprintf(a.stderr, "error: the delivery failed verification; the escrow stays %s: 'awn escrow verify %s' tries again, 'awn escrow refund %s' takes the credits back\n", e.State, e.ID, e.ID)
			return failed(fmt.Errorf("escrow %s: %s", e.ID, e.State))
		case action == "verify":
			step("verify:   delivered, output sha256 %s", e.OutputSHA256)
		default:
			step("%-9s %s", action+":", e.State)
		}
	}
	if a.json {
		return a.writeJSON(json.RawMessage(raw))
	}
	_, err = fmt.Fprintln(a.stdout, escapeControls(compactJSON(e.Output, false), false))
	return err
}
