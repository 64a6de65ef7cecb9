package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strconv"
	"text/tabwriter"

	awnc "github.com/a2awire/a2awire/shared/awn"
	"github.com/spf13/cobra"
)

// The owner's commands of a world (kick, ban, unban, bans) and the agent's
// own view of its worlds (agent status).

func (a *app) kickCommand() *cobra.Command {
	return &cobra.Command{
		Use:   "kick <world> <agent-id|slot|@name>",
		Short: "Remove a member from a world you own (signed by the owner)",
		Long: `kick ends the member's membership as a leave does (its inbox and webhook
go with it) and announces agent.kicked. It may join again; ban it to keep it
out.`,
		Example: "  awn kick arena aw:sha256:3f2a…",
		Args:    cobra.ExactArgs(2),
		RunE: wrap(func(cmd *cobra.Command, args []string) error {
			return a.moderate(cmd.Context(), args[0], args[1], "kicked", "")
		}),
	}
}

func (a *app) banCommand() *cobra.Command {
	var reason string
	cmd := &cobra.Command{
		Use:   "ban <world> <agent-id|slot|@name> [--reason R]",
		Short: "Ban a key from a world you own; a member is kicked (signed by the owner)",
		Long: `ban keeps the key out of the world (its joins are refused 403 BANNED) until
'awn unban'. A member is kicked by the same write.`,
		Example: `  awn ban arena aw:sha256:3f2a… --reason "spam"`,
		Args:    cobra.ExactArgs(2),
		RunE: wrap(func(cmd *cobra.Command, args []string) error {
			return a.moderate(cmd.Context(), args[0], args[1], "banned", reason)
		}),
	}
	cmd.Flags().StringVar(&reason, "reason", "", "why, kept with the ban (at most 512 characters)")
	return cmd
}

func (a *app) unbanCommand() *cobra.Command {
	return &cobra.Command{
		Use:     "unban <world> <agent-id|slot|@name>",
		Short:   "Lift a ban in a world you own (signed by the owner)",
		Example: "  awn unban arena aw:sha256:3f2a…",
		Args:    cobra.ExactArgs(2),
		RunE: wrap(func(cmd *cobra.Command, args []string) error {
			return a.moderate(cmd.Context(), args[0], args[1], "unbanned", "")
		}),
	}
}

// moderate sends one owner request about agent in world and prints what
// was done ("kicked …"), or the server's answer with --json.
func (a *app) moderate(ctx context.Context, world, agent, done, reason string) error {
	if err := checkWorld(world); err != nil {
		return err
	}
	if err := checkAgentID(agent); err != nil {
		return err
	}
	c, _, err := a.signed()
	if err != nil {
		return err
	}
	if agent, err = a.member(ctx, c, world, agent); err != nil {
		return err
	}
	var rep awnc.Reply
	switch done {
	case "kicked":
		rep, err = c.Kick(ctx, world, agent)
	case "banned":
		rep, err = c.Ban(ctx, world, agent, reason)
	default:
		rep, err = c.Unban(ctx, world, agent)
	}
	if err != nil {
		return a.check(err)
	}
	data := rep.Raw
	if a.json {
		return a.writeJSON(data)
	}
	if done == "banned" && !rep.Created() {
		done = "already banned"
	}
	_, err = fmt.Fprintf(a.stdout, "%s %s from %s\n", done, agent, world)
	return err
}

func (a *app) bansCommand() *cobra.Command {
	var limit int
	cmd := &cobra.Command{
		Use:     "bans <world> [--limit N]",
		Short:   "List the bans of a world you own (signed by the owner)",
		Example: "  awn bans arena",
		Args:    cobra.ExactArgs(1),
		RunE:    wrap(func(cmd *cobra.Command, args []string) error { return a.bans(cmd.Context(), args[0], limit) }),
	}
	cmd.Flags().IntVar(&limit, "limit", 1000, "the most bans to list (read 100 a page)")
	return cmd
}

type banRow = awnc.BanInfo

func (a *app) bans(ctx context.Context, world string, limit int) error {
	if err := checkWorld(world); err != nil {
		return err
	}
	if limit < 1 {
		return usageErrorf("--limit must be at least 1")
	}
	c, _, err := a.signed()
	if err != nil {
		return err
	}
	var all []banRow
	cursor := ""
	for len(all) < limit {
		page, err := c.Bans(ctx, world, min(100, limit-len(all)), cursor)
		if err != nil {
			return a.check(err)
		}
		all = append(all, page.Bans...)
		if page.Cursor == nil {
			cursor = ""
			break
		}
		cursor = *page.Cursor
	}
	if cursor != "" {
		fmt.Fprintf(a.stderr, "awn: more bans than --limit %d; raise it to see them\n", limit)
	}
	if all == nil {
		all = []banRow{}
	}
	if a.json {
		return a.writeJSON(map[string]any{"bans": all, "count": len(all)})
	}
	if len(all) == 0 {
		_, err := fmt.Fprintf(a.stdout, "no bans in %s\n", world)
		return err
	}
	esc := func(s string) string { return escapeControls(s, false) }
	tw := tabwriter.NewWriter(a.stdout, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "AGENT ID\tBANNED\tREASON")
	for _, b := range all {
		reason := b.Reason
		if reason == "" {
			reason = "-"
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\n", esc(b.AWNID), esc(b.BannedAt), esc(reason))
	}
	return tw.Flush()
}

// worldRow is one world of the agent's view.
type worldRow struct {
	WorldID  string `json:"worldId"`
	Role     string `json:"role"`
	Slot     *int64 `json:"slot,omitempty"`
	JoinedAt string `json:"joinedAt,omitempty"`
	Presence string `json:"presence,omitempty"`
	Webhook  *struct {
		URL       string `json:"url"`
		Enabled   bool   `json:"enabled"`
		Healthy   bool   `json:"healthy"`
		LastError string `json:"lastError,omitempty"`
	} `json:"webhook,omitempty"`
	Name    string `json:"name,omitempty"`
	Members *int64 `json:"members,omitempty"`
}

// myWorlds pages through the agent's own view of its worlds, signed by its
// key. A key the network knows nothing of (it joined, owns and registers
// nothing: the server cannot verify it, 401) has no worlds, nor has an
// agent of a network without worlds (404).
func (a *app) myWorlds(ctx context.Context) ([]json.RawMessage, error) {
	c, _, err := a.signed()
	if err != nil {
		return nil, err
	}
	out := []json.RawMessage{}
	cursor := ""
	for {
		page, err := c.MyWorlds(ctx, 100, cursor)
		var ref *awnc.Error
		if errors.As(err, &ref) && cursor == "" && (ref.Status == 401 || ref.Status == 404) {
			// 401: the network knows no key of this agent; 404: it serves
			// no worlds (a registry alone). Either way: none.
			return out, nil
		}
		if err != nil {
			return nil, a.check(err)
		}
		out = append(out, page.Worlds...)
		if page.Cursor == nil {
			return out, nil
		}
		cursor = *page.Cursor
	}
}

// printWorlds prints the agent's view as a table.
func (a *app) printWorlds(rows []json.RawMessage) error {
	if len(rows) == 0 {
		_, err := fmt.Fprintln(a.stdout, "worlds:         none joined or owned")
		return err
	}
	esc := func(s string) string { return escapeControls(s, false) }
	fmt.Fprintln(a.stdout, "worlds:")
	tw := tabwriter.NewWriter(a.stdout, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "  WORLD\tROLE\tSLOT\tPRESENCE\tWEBHOOK")
	for _, raw := range rows {
		var r worldRow
		if err := json.Unmarshal(raw, &r); err != nil {
			return fmt.Errorf("the agent's worlds: a row is not the documented JSON: %s", escapeControls(clip(string(raw), 200), false))
		}
		slot, presence, hook := "-", "-", "-"
		if r.Slot != nil {
			slot = strconv.FormatInt(*r.Slot, 10)
		}
		if r.Presence != "" {
			presence = r.Presence
		}
		switch {
		case r.Role == "owner" && r.Members != nil:
			presence = fmt.Sprintf("(%d members)", *r.Members)
		case r.Webhook != nil && !r.Webhook.Enabled:
			hook = "disabled"
		case r.Webhook != nil && r.Webhook.Healthy:
			hook = "healthy"
		case r.Webhook != nil && r.Webhook.LastError != "":
			hook = "failing: " + r.Webhook.LastError
		case r.Webhook != nil:
			hook = "no answer yet"
		}
		fmt.Fprintf(tw, "  %s\t%s\t%s\t%s\t%s\n", esc(r.WorldID), esc(r.Role), slot, esc(presence), esc(clip(hook, 80)))
	}
	return tw.Flush()
}

func (a *app) unregisterCommand() *cobra.Command {
	var name string
	cmd := &cobra.Command{
		Use:   "unregister [--name N]",
		Short: "Remove the agent's registration (signed by its key)",
		Long: `unregister deletes the registry's profile of the agent (default: the one last
registered from this $AWN_HOME): its name and its key are free at once. The
agent stays joined to its worlds.`,
		Args: cobra.NoArgs,
		RunE: wrap(func(cmd *cobra.Command, _ []string) error { return a.unregister(cmd.Context(), name) }),
	}
	cmd.Flags().StringVar(&name, "name", "", "agent name (default: the agent last registered)")
	return cmd
}

func (a *app) unregister(ctx context.Context, name string) error {
	name, _, err := a.agentName(name, "pass --name")
	if err != nil {
		return err
	}
	c, _, err := a.signed()
	if err != nil {
		return err
	}
	gone, err := c.Unregister(ctx, name)
	if err != nil {
		return a.check(err)
	}
	b := gone.Raw
	if err := a.updateState(func(st *localState) {
		delete(st.Agents, name)
		if st.LastRegistered == name {
			st.LastRegistered = ""
		}
	}); err != nil {
		return fmt.Errorf("the registry no longer has %s, but the local state was not written: %w", name, err)
	}
	if a.json {
		return a.writeJSON(json.RawMessage(b))
	}
	_, err = fmt.Fprintf(a.stdout, "unregistered %s\n", name)
	return err
}
