package main

import (
	"bytes"
	"context"
	"crypto/ed25519"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/a2awire/a2awire/shared/auth"
	"github.com/a2awire/a2awire/shared/protocol"
	"github.com/spf13/cobra"
)

// registryTimeout bounds one request to the registry.
const registryTimeout = 30 * time.Second

// maxPage is the registry's largest page.
const maxPage = 100

// profile is an agent's registry profile. Human output reads it;
// --json prints what the server sent, so fields awn does not know survive.
type profile struct {
	Name         string   `json:"name"`
	Description  string   `json:"description"`
	Endpoint     string   `json:"endpoint"`
	Capabilities []string `json:"capabilities"`
	AWNID        string   `json:"awn_id"`
	KeyID        string   `json:"key_id"`
	Status       string   `json:"status"`
	RegisteredAt string   `json:"registered_at"`
	UpdatedAt    string   `json:"updated_at"`
}

// registryClient talks to the network's /api/v1 surface. signer is nil for
// public reads.
type registryClient struct {
	a      *app
	base   string
	client *http.Client
}

// registry returns a client for the public routes.
func (a *app) registry() (*registryClient, error) {
	base, err := a.base()
	if err != nil {
		return nil, err
	}
	return &registryClient{a: a, base: base, client: &http.Client{Timeout: registryTimeout}}, nil
}

// signedRegistry returns a client that signs every request with the agent's
// key (AWN-Ed25519, package auth), naming the key directory entry in
// Signature-Agent, and the key itself.
func (a *app) signedRegistry() (*registryClient, ed25519.PrivateKey, error) {
	priv, err := a.loadKey()
	if err != nil {
		return nil, nil, err
	}
	r, err := a.registry()
	if err != nil {
		return nil, nil, err
	}
	pub := priv.Public().(ed25519.PublicKey)
	s, err := auth.NewSigner(priv, auth.WithSignatureAgent(r.base+"/api/v1/keys/"+auth.KeyID(pub)))
	if err != nil {
		return nil, nil, fmt.Errorf("signer: %w", err)
	}
	r.client.Transport = &auth.Transport{Signer: s}
	return r, priv, nil
}

// do sends one request and returns the body of a 2xx answer. Any other
// answer is reported on stderr as "error: <code>: <message>" (the server's
// words) and ends the command with exit 1.
func (r *registryClient) do(ctx context.Context, method, path string, query url.Values, body any) (int, []byte, error) {
	u := r.base + path
	if len(query) > 0 {
		u += "?" + query.Encode()
	}
	var rd io.Reader
	if body != nil {
		b, err := json.Marshal(body)
		if err != nil {
			return 0, nil, fmt.Errorf("encode request: %w", err)
		}
		rd = bytes.NewReader(b)
	}
	req, err := http.NewRequestWithContext(ctx, method, u, rd)
	if err != nil {
		return 0, nil, fmt.Errorf("%s %s: %w", method, u, err)
	}
	req.Header.Set("Accept", "application/json")
	if body != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	resp, err := r.client.Do(req)
	if err != nil {
		return 0, nil, err // *url.Error already names the method and URL
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(io.LimitReader(resp.Body, maxResponse+1))
	if err != nil {
		return 0, nil, fmt.Errorf("%s %s: reading the answer: %w", method, u, err)
	}
	if len(b) > maxResponse {
		return 0, nil, fmt.Errorf("%s %s: the answer is larger than %d MiB", method, u, maxResponse>>20)
	}
	if resp.StatusCode/100 == 2 {
		return resp.StatusCode, b, nil
	}
	var e protocol.ErrorBody
	msg := fmt.Sprintf("%d %s", resp.StatusCode, http.StatusText(resp.StatusCode))
	if json.Unmarshal(b, &e) == nil && e.Error != "" {
		msg = fmt.Sprintf("%s: %s", escapeControls(string(e.Error), false), escapeControls(e.Message, false))
	} else if s := strings.TrimSpace(string(b)); s != "" {
		msg += ": " + escapeControls(clip(s, 200), false)
	}
	fmt.Fprintln(r.a.stderr, "error: "+msg)
	return resp.StatusCode, nil, failed(fmt.Errorf("%s %s: %s", method, u, msg))
}

// decode parses a registry answer into v, naming what was asked for when it
// is not the documented shape.
func decode(what string, b []byte, v any) error {
	if err := json.Unmarshal(b, v); err != nil {
		return fmt.Errorf("the registry's answer to %s is not the documented JSON: %s", what, escapeControls(clip(string(b), 200), false))
	}
	return nil
}

// agentPath is the registry path of one agent.
func agentPath(name string) string { return "/api/v1/agents/" + url.PathEscape(name) }

// getProfile fetches name's profile: the decoded form and the raw JSON.
func (r *registryClient) getProfile(ctx context.Context, name string) (profile, json.RawMessage, error) {
	var p profile
	_, b, err := r.do(ctx, http.MethodGet, agentPath(name), nil, nil)
	if err != nil {
		return p, nil, err
	}
	if err := decode("GET "+agentPath(name), b, &p); err != nil {
		return p, nil, err
	}
	return p, b, nil
}

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
	r, err := a.registry()
	if err != nil {
		return "", err
	}
	p, _, err := r.getProfile(ctx, name)
	if err != nil {
		return "", err
	}
	u, perr := url.Parse(p.Endpoint)
	if perr != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		return "", fmt.Errorf("the registry lists %q with the endpoint %s, which is not an absolute http(s) URL", name, protocol.Quote(p.Endpoint))
	}
	return p.Endpoint, nil
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
	r, priv, err := a.signedRegistry()
	if err != nil {
		return err
	}
	body := map[string]any{
		"name":         f.name,
		"endpoint":     f.endpoint,
		"capabilities": f.capabilities,
		"public_key":   base64.StdEncoding.EncodeToString(priv.Public().(ed25519.PublicKey)),
	}
	if f.description != "" {
		body["description"] = f.description
	}
	status, b, err := r.do(ctx, http.MethodPost, "/api/v1/agents", nil, body)
	if err != nil {
		return err
	}
	var doc struct {
		Agent json.RawMessage `json:"agent"`
	}
	var p profile
	if err := decode("POST /api/v1/agents", b, &doc); err != nil {
		return err
	}
	if err := decode("POST /api/v1/agents", doc.Agent, &p); err != nil {
		return err
	}
	if err := a.updateState(func(st *localState) {
		st.LastRegistered = f.name
		la := st.Agents[f.name]
		if la.URL != r.base {
			la = localAgent{URL: r.base}
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
	if status == http.StatusCreated {
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
	r, err := a.registry()
	if err != nil {
		return err
	}
	var (
		raws   []json.RawMessage
		cursor string
		seen   = map[string]bool{}
	)
	for {
		q := url.Values{}
		if f.capability != "" {
			q.Set("capability", f.capability)
		}
		if f.status != "" {
			q.Set("status", f.status)
		}
		page := maxPage
		if f.limit > 0 {
			page = min(page, f.limit-len(raws))
		}
		q.Set("limit", strconv.Itoa(page))
		if cursor != "" {
			q.Set("cursor", cursor)
		}
		_, b, err := r.do(ctx, http.MethodGet, "/api/v1/agents", q, nil)
		if err != nil {
			return err
		}
		var doc struct {
			Agents     []json.RawMessage `json:"agents"`
			NextCursor string            `json:"next_cursor"`
		}
		if err := decode("GET /api/v1/agents", b, &doc); err != nil {
			return err
		}
		raws = append(raws, doc.Agents...)
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
		if err := decode("GET /api/v1/agents", raw, &p); err != nil {
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
	priv, keyErr := a.loadKey()
	var p profile
	var raw json.RawMessage
	if name != "" {
		r, err := a.registry()
		if err != nil {
			return err
		}
		if p, raw, err = r.getProfile(ctx, name); err != nil {
			return err
		}
	} else if keyErr != nil {
		return usageErrorf("no agent registered from this AWN_HOME; name one, or run 'awn init' to see this key's worlds")
	}
	// The worlds are this key's: shown when the profile is its own (or
	// there is none).
	var worlds []json.RawMessage
	var awnID string
	if keyErr == nil {
		pub := priv.Public().(ed25519.PublicKey)
		if raw == nil || p.AWNID == auth.AWNID(pub) {
			awnID = auth.AWNID(pub)
			if worlds, err = a.myWorlds(ctx, pub); err != nil {
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
	r, _, err := a.signedRegistry()
	if err != nil {
		return err
	}
	if _, _, err := r.do(ctx, http.MethodPut, agentPath(name)+"/presence", nil, map[string]string{"status": status}); err != nil {
		return err
	}
	now := time.Now().UTC()
	var local localAgent
	if err := a.updateState(func(st *localState) {
		la := st.Agents[name]
		if la.URL != r.base {
			la = localAgent{URL: r.base}
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
