package main

import (
	"context"
	"encoding/json"
	"fmt"
	"net/url"
	"strings"
	"text/tabwriter"
	"time"

	awnc "github.com/a2awire/a2awire/shared/awn"
	"github.com/a2awire/a2awire/shared/protocol"
	"github.com/spf13/cobra"
)

// maxPage is the registry's largest page.
const maxPage = 100

// profile is an agent's registry profile. Human output reads it; --json
// prints what the server sent (its Raw), so fields awn does not know survive.
type profile = awnc.Profile

// checkTarget reports whether the <name|endpoint> argument is well formed
// without asking any server: a name is returned as name, a URL as endpoint.
func checkTarget(arg string) (endpoint, name string, err error) {
	if strings.Contains(arg, "://") {
		u, err := url.Parse(arg)
		if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
			return "", "", usageErrorf("%q is not an absolute http(s) endpoint URL", arg)
		}
		return arg, "", nil
	}
	if isAgentName(arg) {
		return "", arg, nil
	}
	return "", "", usageErrorf("%q is neither an endpoint URL nor an agent name", arg)
}

// endpoint turns the <name|endpoint> argument into an invocation URL: a URL
// is used as given, a bare name is looked up in the registry (GET
// /api/v1/agents/{name}) for its endpoint.
func (a *app) endpoint(ctx context.Context, arg string) (string, error) {
	endpoint, name, err := checkTarget(arg)
	if err != nil || name == "" {
		return endpoint, err
	}
	c, err := a.client()
	if err != nil {
		return "", err
	}
	endpoint, err = c.Endpoint(ctx, name)
	return endpoint, a.check(err)
}

type registerFlags struct {
	name, endpoint, description string
	capabilities                []string
}

func (a *app) registerCommand() *cobra.Command {
	var f registerFlags
	cmd := &cobra.Command{
		Use:   "register --name N --endpoint URL --capability C [--capability C...] [--description D]",
		Short: "Register (or update) this agent in the registry, signed with its key",
		Long: `register binds the agent name to this agent's key (run 'awn init' first) and
publishes its endpoint and capabilities; registering again with the same key
updates the profile. A name registered by another key is refused (name_taken).
The name is remembered in $AWN_HOME as the default of 'awn agent'.`,
		Example: `  awn register --name my-counter --endpoint https://example.com/invoke --capability word-count`,
		Args:    cobra.NoArgs,
		RunE:    wrap(func(cmd *cobra.Command, _ []string) error { return a.register(cmd.Context(), f) }),
	}
	fl := cmd.Flags()
	fl.StringVar(&f.name, "name", "", "agent name: lowercase letters, digits and '-', 2 to 63 characters (required)")
	fl.StringVar(&f.endpoint, "endpoint", "", "absolute http(s) URL the agent is invoked at (required)")
	fl.StringArrayVar(&f.capabilities, "capability", nil, "a capability the agent serves (repeatable, at least one)")
	fl.StringVar(&f.description, "description", "", "one line about the agent")
	_ = cmd.MarkFlagRequired("name")
	_ = cmd.MarkFlagRequired("endpoint")
	_ = cmd.MarkFlagRequired("capability")
	return cmd
}

func (a *app) register(ctx context.Context, f registerFlags) error {
	if !isAgentName(f.name) {
		return usageErrorf("--name %s is not an agent name: 2 to 63 lowercase letters, digits and '-', not starting with '-'", protocol.Quote(f.name))
	}
	u, err := url.Parse(f.endpoint)
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		return usageErrorf("--endpoint %s is not an absolute http(s) URL", protocol.Quote(f.endpoint))
	}
	for _, c := range f.capabilities {
		if strings.TrimSpace(c) == "" {
			return usageErrorf("--capability must name a capability, got an empty one")
		}
	}
	c, _, err := a.signed()
	if err != nil {
		return err
	}
	reg, err := c.Register(ctx, awnc.Registration{Name: f.name, Endpoint: f.endpoint, Capabilities: f.capabilities, Description: f.description})
	if err != nil {
		return a.check(err)
	}
	p, b := reg.Profile, reg.Raw
	if err := a.updateState(func(st *localState) {
		st.LastRegistered = f.name
		la := st.Agents[f.name]
		if la.URL != c.BaseURL() {
			la = localAgent{URL: c.BaseURL()}
		}
		la.Endpoint = f.endpoint
		la.RegisteredAt = time.Now().UTC()
		st.Agents[f.name] = la
	}); err != nil {
		return fmt.Errorf("registered, but could not remember it: %w", err)
	}
	if a.json {
		return a.writeJSON(json.RawMessage(b))
	}
	verb := "updated"
	if reg.Created {
		verb = "registered"
	}
	fmt.Fprintf(a.stdout, "%s %s\n\n", verb, escapeControls(p.Name, false))
	return a.printProfile(p)
}

// printProfile prints p as aligned key-value lines, then the extra rows.
func (a *app) printProfile(p profile, extra ...[2]string) error {
	esc := func(s string) string { return escapeControls(s, false) }
	tw := tabwriter.NewWriter(a.stdout, 0, 4, 2, ' ', 0)
	fmt.Fprintf(tw, "name:\t%s\n", esc(p.Name))
	if p.Description != "" {
		fmt.Fprintf(tw, "description:\t%s\n", esc(p.Description))
	}
	fmt.Fprintf(tw, "endpoint:\t%s\n", esc(p.Endpoint))
	fmt.Fprintf(tw, "capabilities:\t%s\n", esc(strings.Join(p.Capabilities, ", ")))
	fmt.Fprintf(tw, "status:\t%s\n", esc(p.Status))
	fmt.Fprintf(tw, "awn_id:\t%s\n", esc(p.AWNID))
	fmt.Fprintf(tw, "key_id:\t%s\n", esc(p.KeyID))
	fmt.Fprintf(tw, "registered_at:\t%s\n", esc(p.RegisteredAt))
	fmt.Fprintf(tw, "updated_at:\t%s\n", esc(p.UpdatedAt))
	for _, row := range extra {
		fmt.Fprintf(tw, "%s:\t%s\n", row[0], row[1])
	}
	return tw.Flush()
}

type discoverFlags struct {
	capability, status string
	limit              int
}

func (a *app) discoverCommand() *cobra.Command {
	var f discoverFlags
	cmd := &cobra.Command{
		Use:   "discover [--capability C] [--status online|offline|any] [--limit N]",
		Short: "List registered agents, by capability and presence",
		Long: `discover lists the registry's agents: those serving --capability, online ones
unless --status says offline or any. It follows every page unless --limit
bounds the number of agents. --json prints {"agents": [...], "next_cursor"}.`,
		Example: `  awn discover --capability word-count`,
		Args:    cobra.NoArgs,
		RunE: wrap(func(cmd *cobra.Command, _ []string) error {
			if cmd.Flags().Changed("capability") && strings.TrimSpace(f.capability) == "" {
				return usageErrorf("--capability must name a capability, got an empty one")
			}
			return a.discover(cmd.Context(), f)
		}),
	}
	fl := cmd.Flags()
	fl.StringVar(&f.capability, "capability", "", "only agents serving this capability")
	fl.StringVar(&f.status, "status", "", "online (the server's default), offline or any")
	fl.IntVar(&f.limit, "limit", 0, "at most this many agents (default: all)")
	return cmd
}

func (a *app) discover(ctx context.Context, f discoverFlags) error {
	switch f.status {
	case "", "online", "offline", "any":
	default:
		return usageErrorf("--status must be online, offline or any, not %s", protocol.Quote(f.status))
	}
	if f.limit < 0 {
		return usageErrorf("--limit must be positive (or 0 for all), got %d", f.limit)
	}
	c, err := a.client()
	if err != nil {
		return err
	}
	var (
		raws   []json.RawMessage
		cursor string
		seen   = map[string]bool{}
	)
	for {
		page := maxPage
		if f.limit > 0 {
			page = min(page, f.limit-len(raws))
		}
		doc, err := c.Discover(ctx, awnc.Discovery{Capability: f.capability, Status: f.status, Limit: page, Cursor: cursor})
		if err != nil {
			return a.check(err)
		}
		for _, p := range doc.Agents {
			raws = append(raws, p.Raw)
		}
		cursor = doc.NextCursor
		if cursor == "" || (f.limit > 0 && len(raws) >= f.limit) {
			break
		}
		// A server handing back a cursor it gave before would loop forever.
		if seen[cursor] || len(doc.Agents) == 0 {
			return fmt.Errorf("the registry's paging does not advance (cursor %s repeated or an empty page with a cursor)", protocol.Quote(clip(cursor, 40)))
		}
		seen[cursor] = true
	}
	if f.limit > 0 && len(raws) > f.limit {
		raws = raws[:f.limit]
	}
	if a.json {
		out := struct {
			Agents     []json.RawMessage `json:"agents"`
			NextCursor *string           `json:"next_cursor"`
		}{Agents: raws}
		if raws == nil {
			out.Agents = []json.RawMessage{}
		}
		if cursor != "" {
			out.NextCursor = &cursor
		}
		return a.writeJSON(out)
	}
	if len(raws) == 0 {
		_, err := fmt.Fprintln(a.stdout, "no agents found")
		return err
	}
	esc := func(s string) string { return escapeControls(s, false) }
	tw := tabwriter.NewWriter(a.stdout, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "NAME\tSTATUS\tCAPABILITIES\tENDPOINT")
	for _, raw := range raws {
		var p profile
		if err := decodeData("GET /api/v1/agents", raw, &p); err != nil {
			return err
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\n", esc(p.Name), esc(p.Status), esc(strings.Join(p.Capabilities, ",")), esc(p.Endpoint))
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	if cursor != "" {
		fmt.Fprintf(a.stderr, "awn: more agents than --limit %d; raise it to see them\n", f.limit)
	}
	return nil
}

func (a *app) agentCommand() *cobra.Command {
	cmd := &cobra.Command{
		Use:   "agent",
		Short: "This agent's registry profile, presence and world webhook handlers",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			cmd.SetOut(a.stderr)
			_ = cmd.Help()
			return usageErrorf("agent needs a subcommand: status, online, offline or set-handler")
		},
	}
	cmd.AddCommand(&cobra.Command{
		Use:   "status [name]",
		Short: "Show the agent's registration, presence and every world it joined or owns",
		Long: `status prints the registry's profile of name (default: the agent last
registered from this $AWN_HOME) and the local state awn keeps for it, then,
when the profile is this key's (or there is none: an agent that never
registered), every world this key joined or owns, with its presence and
webhook health in each.
--json prints {"agent": <profile or null>, "local": <local state or null>,
"awnId": <this key's, or null>, "worlds": [<world>…]}.`,
		Args: cobra.MaximumNArgs(1),
		RunE: wrap(func(cmd *cobra.Command, args []string) error {
			name := ""
			if len(args) == 1 {
				name = args[0]
			}
			return a.agentStatus(cmd.Context(), name)
		}),
	}, a.presenceCommand("online"), a.presenceCommand("offline"), a.setHandlerCommand(), a.unregisterCommand())
	return cmd
}

// agentName is the name given, or the one last registered from $AWN_HOME.
func (a *app) agentName(given, how string) (string, localState, error) {
	st, err := a.loadState()
	if err != nil {
		return "", st, err
	}
	if given == "" {
		given = st.LastRegistered
		if given == "" {
			return "", st, usageErrorf("no agent registered from this AWN_HOME; %s", how)
		}
	}
	if !isAgentName(given) {
		return "", st, usageErrorf("%s is not an agent name: 2 to 63 lowercase letters, digits and '-'", protocol.Quote(given))
	}
	return given, st, nil
}

// agentStatus shows the agent's registration (name, or the one last
// registered from $AWN_HOME) and, for this key's own agent, every world it
// joined or owns with its presence and webhook health there. An agent that
// never registered shows its worlds alone.
func (a *app) agentStatus(ctx context.Context, name string) error {
	st, err := a.loadState()
	if err != nil {
		return err
	}
	if name == "" {
		name = st.LastRegistered
	}
	if name != "" && !isAgentName(name) {
		return usageErrorf("%s is not an agent name: 2 to 63 lowercase letters, digits and '-'", protocol.Quote(name))
	}
	me, keyErr := a.identity()
	var p profile
	var raw json.RawMessage
	if name != "" {
		c, err := a.client()
		if err != nil {
			return err
		}
		if p, err = c.Agent(ctx, name); err != nil {
			return a.check(err)
		}
		raw = p.Raw
	} else if keyErr != nil {
		return usageErrorf("no agent registered from this AWN_HOME; name one, or run 'awn init' to see this key's worlds")
	}
	// The worlds are this key's: shown when the profile is its own (or
	// there is none).
	var worlds []json.RawMessage
	var awnID string
	if keyErr == nil {
		if raw == nil || p.AWNID == me.AWNID() {
			awnID = me.AWNID()
			if worlds, err = a.myWorlds(ctx); err != nil {
				return err
			}
		}
	}
	local, ok := st.Agents[name]
	if a.json {
		out := struct {
			Agent  json.RawMessage   `json:"agent"`
			Local  *localAgent       `json:"local"`
			AWNID  *string           `json:"awnId"`
			Worlds []json.RawMessage `json:"worlds"`
		}{Agent: raw, Worlds: worlds}
		if raw == nil {
			out.Agent = json.RawMessage("null")
		}
		if ok && name != "" {
			out.Local = &local
		}
		if awnID != "" {
			out.AWNID = &awnID
		}
		return a.writeJSON(out)
	}
	if raw == nil {
		fmt.Fprintf(a.stdout, "registered:     no (awn register)\nawn_id:         %s\n", awnID)
		return a.printWorlds(worlds)
	}
	var row string
	switch {
	case !ok:
		row = "not registered from this AWN_HOME"
	case local.Status == "":
		row = fmt.Sprintf("registered with %s; presence never set by awn", local.URL)
	default:
		row = fmt.Sprintf("%s since %s (set with %s)", local.Status, local.StatusAt.Format(time.RFC3339), local.URL)
	}
	if err := a.printProfile(p, [2]string{"local", escapeControls(row, false)}); err != nil {
		return err
	}
	if awnID == "" {
		return nil
	}
	return a.printWorlds(worlds)
}

func (a *app) presenceCommand(status string) *cobra.Command {
	var name string
	cmd := &cobra.Command{
		Use:   status + " [--name N]",
		Short: "Mark the agent " + status + " in the registry (signed) and in local state",
		Long: status + ` sets the agent's presence in the registry with a request signed by its
key (the owner's), then records it in $AWN_HOME. --name defaults to the agent
last registered from this $AWN_HOME.` + map[string]string{
			"online":  "",
			"offline": "\nOffline agents are left out of discovery unless asked for.",
		}[status],
		Args: cobra.NoArgs,
		RunE: wrap(func(cmd *cobra.Command, _ []string) error { return a.setPresence(cmd.Context(), name, status) }),
	}
	cmd.Flags().StringVar(&name, "name", "", "agent name (default: the agent last registered)")
	return cmd
}

func (a *app) setPresence(ctx context.Context, name, status string) error {
	name, _, err := a.agentName(name, "pass --name")
	if err != nil {
		return err
	}
	c, _, err := a.signed()
	if err != nil {
		return err
	}
	if _, err := c.SetPresence(ctx, name, status); err != nil {
		return a.check(err)
	}
	now := time.Now().UTC()
	var local localAgent
	if err := a.updateState(func(st *localState) {
		la := st.Agents[name]
		if la.URL != c.BaseURL() {
			la = localAgent{URL: c.BaseURL()}
		}
		la.Status, la.StatusAt = status, now
		st.Agents[name] = la
		local = la
	}); err != nil {
		return fmt.Errorf("the registry has %s %s, but the local state was not written: %w", name, status, err)
	}
	if a.json {
		return a.writeJSON(struct {
			Name   string     `json:"name"`
			Status string     `json:"status"`
			Local  localAgent `json:"local"`
		}{name, status, local})
	}
	_, err = fmt.Fprintf(a.stdout, "%s is %s\n", name, status)
	return err
}
