package main

import (
	"context"
	"encoding/json"
	"fmt"
	"strconv"
	"strings"
	"text/tabwriter"
	"time"

	awnc "github.com/a2awire/a2awire/shared/awn"
	"github.com/a2awire/a2awire/shared/protocol"
	"github.com/spf13/cobra"
)

// maxWorldPage is the largest page of messages and events the server hands
// back in one answer.
const maxWorldPage = 100

// manifest is the part of a world's manifest human output shows; --json
// prints what the server sent.
type manifest struct {
	Name        string `json:"name"`
	Description string `json:"description"`
	Category    string `json:"category"`
	Actions     []struct {
		Name        string `json:"name"`
		Description string `json:"description"`
	} `json:"actions"`
	// Members is the member count; memberCount is read too, for a
	// server that names it so.
	Members       *int64 `json:"members"`
	MemberCount   *int64 `json:"memberCount"`
	OwnerKeyID    string `json:"ownerKeyId"`
	CreatedAt     string `json:"createdAt"`
	UpdatedAt     string `json:"updatedAt"`
	EventShards   int    `json:"eventShards"`
	BatchActions  bool   `json:"batchActions"`
	BatchMessages bool   `json:"batchMessages"`
}

func (a *app) worldCommand() *cobra.Command {
	cmd := &cobra.Command{
		Use:   "world",
		Short: "Create, update and show worlds",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			cmd.SetOut(a.stderr)
			_ = cmd.Help()
			return usageErrorf("world needs a subcommand: create, show, close, reopen or delete")
		},
	}
	cmd.AddCommand(a.worldOwnerCommands()...)
	cmd.AddCommand(a.worldCreateCommand(), &cobra.Command{
		Use:     "show <world>",
		Short:   "Show a world's manifest and member count (public)",
		Example: "  awn world show lobby",
		Args:    cobra.ExactArgs(1),
		RunE:    wrap(func(cmd *cobra.Command, args []string) error { return a.worldShow(cmd.Context(), args[0]) }),
	})
	return cmd
}

type worldFlags struct {
	name, description, category string
	actions                     []string
	eventShards                 int
	batchActions                bool
	batchMessages               bool
}

func (a *app) worldCreateCommand() *cobra.Command {
	var f worldFlags
	cmd := &cobra.Command{
		Use:   "create <world> [--name N] [--description D] [--category C] [--action name[=description]...]",
		Short: "Create a world, or update one this key owns (signed)",
		Long: `create puts the world's manifest, signed with this agent's key (run 'awn init'
first): the key that creates a world owns it, and only it may update it later.
Each --action adds one action members may submit with 'awn act'; a world
without actions accepts any.`,
		Example: `  awn world create arena --name "The Arena" --category game --action move="move one square" --action resign`,
		Args:    cobra.ExactArgs(1),
		RunE:    wrap(func(cmd *cobra.Command, args []string) error { return a.worldCreate(cmd.Context(), args[0], f) }),
	}
	fl := cmd.Flags()
	fl.StringVar(&f.name, "name", "", "the world's display name")
	fl.StringVar(&f.description, "description", "", "one line about the world")
	fl.StringVar(&f.category, "category", "", "the world's category")
	fl.StringArrayVar(&f.actions, "action", nil, "an action members may submit, name or name=description (repeatable)")
	fl.IntVar(&f.eventShards, "event-shards", 0, "write the world's events across this many partitions, 1-16 (only grows; for more than ~500 events/s)")
	fl.BoolVar(&f.batchActions, "batch-actions", false, "queue the world's actions and commit them many to a transaction (for more than a few hundred actions/s; 'awn act' then answers queued)")
	fl.BoolVar(&f.batchMessages, "batch-messages", false, "queue the world's direct messages the same way (for an inbox past a few hundred messages/s, with --event-shards; 'awn send' then answers queued)")
	return cmd
}

func (a *app) worldCreate(ctx context.Context, world string, f worldFlags) error {
	if err := checkWorld(world); err != nil {
		return err
	}
	type action struct {
		Name        string `json:"name"`
		Description string `json:"description,omitempty"`
	}
	actions := []action{}
	seen := map[string]bool{}
	for _, s := range f.actions {
		name, desc, _ := strings.Cut(s, "=")
		name = strings.TrimSpace(name)
		if name == "" {
			return usageErrorf("--action %s has no name; write name or name=description", protocol.Quote(s))
		}
		if seen[name] {
			return usageErrorf("--action %s is given twice", protocol.Quote(name))
		}
		seen[name] = true
		actions = append(actions, action{Name: name, Description: desc})
	}
	c, _, err := a.signed()
	if err != nil {
		return err
	}
	specs := make([]awnc.ActionSpec, 0, len(actions))
	for _, act := range actions {
		specs = append(specs, awnc.ActionSpec{Name: act.Name, Description: act.Description})
	}
	made, err := c.CreateWorld(ctx, world, awnc.WorldSpec{Name: f.name, Description: f.description, Category: f.category, Actions: specs, EventShards: f.eventShards, BatchActions: f.batchActions, BatchMessages: f.batchMessages})
	if err != nil {
		return a.check(err)
	}
	data := made.Reply.Raw
	if a.json {
		return a.writeJSON(data)
	}
	var m manifest
	if err := decodeData("PUT "+worldPath(world), data, &m); err != nil {
		return err
	}
	verb := "updated"
	if made.Reply.Created() {
		verb = "created"
	}
	fmt.Fprintf(a.stdout, "%s world %s\n\n", verb, world)
	return a.printManifest(world, m)
}

func (a *app) worldShow(ctx context.Context, world string) error {
	if err := checkWorld(world); err != nil {
		return err
	}
	c, err := a.client()
	if err != nil {
		return err
	}
	got, err := c.World(ctx, world)
	if err != nil {
		return a.check(err)
	}
	data := got.Reply.Raw
	if a.json {
		return a.writeJSON(data)
	}
	var m manifest
	if err := decodeData("GET "+worldPath(world), data, &m); err != nil {
		return err
	}
	return a.printManifest(world, m)
}

// printManifest prints m as aligned key-value lines, one per action.
func (a *app) printManifest(world string, m manifest) error {
	esc := func(s string) string { return escapeControls(s, false) }
	tw := tabwriter.NewWriter(a.stdout, 0, 4, 2, ' ', 0)
	fmt.Fprintf(tw, "world:\t%s\n", esc(world))
	for _, row := range [][2]string{{"name", m.Name}, {"description", m.Description}, {"category", m.Category},
		{"owner_key_id", m.OwnerKeyID}, {"created_at", m.CreatedAt}, {"updated_at", m.UpdatedAt}} {
		if row[1] != "" {
			fmt.Fprintf(tw, "%s:\t%s\n", row[0], esc(row[1]))
		}
	}
	if n := m.Members; n != nil || m.MemberCount != nil {
		if n == nil {
			n = m.MemberCount
		}
		fmt.Fprintf(tw, "members:\t%d\n", *n)
	}
	if m.EventShards > 1 {
		fmt.Fprintf(tw, "event_shards:\t%d\n", m.EventShards)
	}
	if m.BatchActions {
		fmt.Fprintf(tw, "batch_actions:\ttrue\n")
	}
	if m.BatchMessages {
		fmt.Fprintf(tw, "batch_messages:\ttrue\n")
	}
	if len(m.Actions) == 0 {
		fmt.Fprintf(tw, "actions:\tany\n")
	}
	for i, act := range m.Actions {
		label := ""
		if i == 0 {
			label = "actions:"
		}
		line := esc(act.Name)
		if act.Description != "" {
			line += " — " + esc(act.Description)
		}
		fmt.Fprintf(tw, "%s\t%s\n", label, line)
	}
	return tw.Flush()
}

func (a *app) joinCommand() *cobra.Command {
	var metadata string
	cmd := &cobra.Command{
		Use:   "join <world> [--metadata JSON]",
		Short: "Join a world as this agent (signed with its key)",
		Long: `join makes this agent a member of the world: it gets a slot, sees the world's
events and may message other members. Joining again while joined returns the
same membership. --metadata is a JSON object other members see in 'awn agents'.`,
		Example: `  awn join lobby --metadata '{"role": "scout"}'`,
		Args:    cobra.ExactArgs(1),
		RunE: wrap(func(cmd *cobra.Command, args []string) error {
			return a.join(cmd.Context(), args[0], metadata, cmd.Flags().Changed("metadata"))
		}),
	}
	cmd.Flags().StringVar(&metadata, "metadata", "", "a JSON object about this agent, shown to other members")
	return cmd
}

func (a *app) join(ctx context.Context, world, metadata string, withMetadata bool) error {
	if err := checkWorld(world); err != nil {
		return err
	}
	var meta json.RawMessage
	if withMetadata {
		m, err := jsonObject("metadata", metadata)
		if err != nil {
			return err
		}
		meta = m
	}
	c, _, err := a.signed()
	if err != nil {
		return err
	}
	joined, err := c.Join(ctx, world, meta)
	if err != nil {
		return a.check(err)
	}
	data := joined.Reply.Raw
	if a.json {
		return a.writeJSON(data)
	}
	var m struct {
		AWNID    string `json:"awnId"`
		Slot     int64  `json:"slot"`
		JoinedAt string `json:"joinedAt"`
	}
	if err := decodeData("POST "+worldPath(world, "join"), data, &m); err != nil {
		return err
	}
	verb := "already a member of"
	if joined.Reply.Created() {
		verb = "joined"
	}
	_, err = fmt.Fprintf(a.stdout, "%s %s as %s (slot %d, since %s)\n", verb, world, escapeControls(m.AWNID, false), m.Slot, escapeControls(m.JoinedAt, false))
	return err
}

func (a *app) leaveCommand() *cobra.Command {
	return &cobra.Command{
		Use:     "leave <world>",
		Short:   "Leave a world: ends the membership, clears its inbox and webhook",
		Example: "  awn leave lobby",
		Args:    cobra.ExactArgs(1),
		RunE: wrap(func(cmd *cobra.Command, args []string) error {
			world := args[0]
			if err := checkWorld(world); err != nil {
				return err
			}
			c, _, err := a.signed()
			if err != nil {
				return err
			}
			left, err := c.Leave(cmd.Context(), world)
			if err != nil {
				return a.check(err)
			}
			data := left.Raw
			if err := a.forgetHandler(world, c.BaseURL()); err != nil {
				return fmt.Errorf("left %s, but the local state was not written: %w", world, err)
			}
			if a.json {
				return a.writeJSON(data)
			}
			_, err = fmt.Fprintf(a.stdout, "left %s\n", world)
			return err
		}),
	}
}

func (a *app) agentsCommand() *cobra.Command {
	return &cobra.Command{
		Use:     "agents <world>",
		Short:   "List a world's members (you must be one)",
		Example: "  awn agents lobby",
		Args:    cobra.ExactArgs(1),
		RunE:    wrap(func(cmd *cobra.Command, args []string) error { return a.agents(cmd.Context(), args[0]) }),
	}
}

func (a *app) agents(ctx context.Context, world string) error {
	if err := checkWorld(world); err != nil {
		return err
	}
	c, _, err := a.signed()
	if err != nil {
		return err
	}
	// Every page of the list (100 members each), in the server's order.
	var doc struct {
		Agents []struct {
			AWNID     string          `json:"awnId"`
			SubjectID *string         `json:"subjectId"`
			Slot      int64           `json:"slot"`
			JoinedAt  string          `json:"joinedAt"`
			Presence  json.RawMessage `json:"presence"`
			Metadata  json.RawMessage `json:"metadata"`
		} `json:"agents"`
	}
	var all []json.RawMessage
	cursor := ""
	for {
		got, err := c.Agents(ctx, world, 100, cursor)
		if err != nil {
			return a.check(err)
		}
		var page struct {
			Agents []json.RawMessage `json:"agents"`
			Cursor *string           `json:"cursor"`
		}
		if err := decodeData("GET "+worldPath(world, "agents"), got.Reply.Raw, &page); err != nil {
			return err
		}
		all = append(all, page.Agents...)
		if page.Cursor == nil || *page.Cursor == "" {
			break
		}
		cursor = *page.Cursor
	}
	if all == nil {
		all = []json.RawMessage{}
	}
	if a.json {
		return a.writeJSON(map[string]any{"agents": all, "count": len(all)})
	}
	joined, _ := json.Marshal(map[string]any{"agents": all})
	if err := decodeData("GET "+worldPath(world, "agents"), joined, &doc); err != nil {
		return err
	}
	if len(doc.Agents) == 0 {
		_, err := fmt.Fprintf(a.stdout, "no agents in %s\n", world)
		return err
	}
	esc := func(s string) string { return escapeControls(s, false) }
	tw := tabwriter.NewWriter(a.stdout, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "SLOT\tAGENT ID\tNAME\tPRESENCE\tJOINED\tMETADATA")
	for _, ag := range doc.Agents {
		name := "-"
		if ag.SubjectID != nil && *ag.SubjectID != "" {
			name = esc(*ag.SubjectID)
		}
		meta := "-"
		if s := compactJSON(ag.Metadata, false); s != "" && s != "null" {
			meta = s
		}
		presence := compactJSON(ag.Presence, true)
		if presence == "" || presence == "null" {
			presence = "-"
		}
		fmt.Fprintf(tw, "%d\t%s\t%s\t%s\t%s\t%s\n", ag.Slot, esc(ag.AWNID), name, presence, esc(ag.JoinedAt), meta)
	}
	return tw.Flush()
}

func (a *app) sendCommand() *cobra.Command {
	return &cobra.Command{
		Use:   "send <world> <agent-id|slot|@name> <message>",
		Short: "Send a direct message to a member of a world",
		Long: `send puts a message in the recipient's inbox in the world. A message that is
valid JSON is sent as that JSON; any other text is sent as a JSON string with
contentType text/plain.`,
		Example: `  awn send lobby aw:sha256:3f2a… hello
  awn send lobby aw:sha256:3f2a… '{"move": "e4"}'`,
		Args: cobra.ExactArgs(3),
		RunE: wrap(func(cmd *cobra.Command, args []string) error { return a.send(cmd.Context(), args[0], args[1], args[2]) }),
	}
}

func (a *app) send(ctx context.Context, world, to, message string) error {
	if err := checkWorld(world); err != nil {
		return err
	}
	if err := checkAgentID(to); err != nil {
		return err
	}
	c, _, err := a.signed()
	if err != nil {
		return err
	}
	if to, err = a.member(ctx, c, world, to); err != nil {
		return err
	}
	var sent awnc.Message
	if json.Valid([]byte(message)) {
		sent, err = c.Send(ctx, world, to, json.RawMessage(message), "")
	} else {
		sent, err = c.SendText(ctx, world, to, message)
	}
	if err != nil {
		return a.check(err)
	}
	data := sent.Reply.Raw
	if a.json {
		return a.writeJSON(data)
	}
	var m struct {
		MessageID string `json:"messageId"`
		SentAt    string `json:"sentAt"`
		Queued    bool   `json:"queued"`
	}
	if err := decodeData("POST "+worldPath(world, "messages"), data, &m); err != nil {
		return err
	}
	verb := "sent"
	if m.Queued { // a world that batches its messages: in the inbox within about a second
		verb = "queued"
	}
	_, err = fmt.Fprintf(a.stdout, "%s %s to %s at %s\n", verb, escapeControls(m.MessageID, false), to, escapeControls(m.SentAt, false))
	return err
}

type messagesFlags struct {
	peek     bool
	since    string
	limit    int
	limitSet bool
}

func (a *app) messagesCommand() *cobra.Command {
	var f messagesFlags
	cmd := &cobra.Command{
		Use:   "messages <world> [--peek] [--since T] [--limit N]",
		Short: "Read (and consume) this agent's messages in a world",
		Long: `messages prints the messages in this agent's inbox, oldest first, one per line.
Reading consumes them — each message is handed out once — unless --peek.
--since (RFC 3339) keeps only later ones; --limit is 1 to 100 (server default 50).`,
		Example: "  awn messages lobby --peek",
		Args:    cobra.ExactArgs(1),
		RunE: wrap(func(cmd *cobra.Command, args []string) error {
			f.limitSet = cmd.Flags().Changed("limit")
			return a.messages(cmd.Context(), args[0], f)
		}),
	}
	fl := cmd.Flags()
	fl.BoolVar(&f.peek, "peek", false, "leave the messages in the inbox")
	fl.StringVar(&f.since, "since", "", "only messages sent after this RFC 3339 time")
	fl.IntVar(&f.limit, "limit", 0, "at most this many messages, 1 to 100 (default: the server's, 50)")
	return cmd
}

func (a *app) messages(ctx context.Context, world string, f messagesFlags) error {
	if err := checkWorld(world); err != nil {
		return err
	}
	q := awnc.MessageQuery{Peek: f.peek}
	if f.since != "" {
		if _, err := time.Parse(time.RFC3339Nano, f.since); err != nil {
			return usageErrorf("--since %s is not an RFC 3339 time such as 2026-01-02T15:04:05Z", protocol.Quote(f.since))
		}
		q.Since = f.since
	}
	if f.limitSet {
		if f.limit < 1 || f.limit > maxWorldPage {
			return usageErrorf("--limit must be 1 to %d, got %d", maxWorldPage, f.limit)
		}
		q.Limit = f.limit
	}
	c, _, err := a.signed()
	if err != nil {
		return err
	}
	inbox, err := c.Messages(ctx, world, q)
	if err != nil {
		return a.check(err)
	}
	data := inbox.Reply.Raw
	if a.json {
		return a.writeJSON(data)
	}
	var doc struct {
		Messages []struct {
			MessageID   string          `json:"messageId"`
			From        string          `json:"from"`
			Content     json.RawMessage `json:"content"`
			ContentType string          `json:"contentType"`
			SentAt      string          `json:"sentAt"`
		} `json:"messages"`
	}
	if err := decodeData("GET "+worldPath(world, "messages"), data, &doc); err != nil {
		return err
	}
	if len(doc.Messages) == 0 {
		_, err := fmt.Fprintf(a.stdout, "no messages in %s\n", world)
		return err
	}
	for _, m := range doc.Messages {
		// Text is shown as text; JSON content compact, with its type.
		text := strings.HasPrefix(m.ContentType, "text/")
		line := fmt.Sprintf("%s  from %s: %s", escapeControls(m.SentAt, false), escapeControls(m.From, false), compactJSON(m.Content, text))
		if !text && m.ContentType != "" && m.ContentType != "application/json" {
			line += "  (" + escapeControls(m.ContentType, false) + ")"
		}
		fmt.Fprintln(a.stdout, line)
	}
	return nil
}

func (a *app) pingCommand() *cobra.Command {
	return &cobra.Command{
		Use:   "ping <world> <agent-id|slot|@name>",
		Short: "Ask whether a member of a world is reachable now",
		Long: `ping reports whether the member answers a live probe through its webhook
(with the round trip) or has polled the world's events in the last 30 seconds.`,
		Example: "  awn ping lobby aw:sha256:3f2a…",
		Args:    cobra.ExactArgs(2),
		RunE: wrap(func(cmd *cobra.Command, args []string) error {
			world, target := args[0], args[1]
			if err := checkWorld(world); err != nil {
				return err
			}
			if err := checkAgentID(target); err != nil {
				return err
			}
			c, _, err := a.signed()
			if err != nil {
				return err
			}
			if target, err = a.member(cmd.Context(), c, world, target); err != nil {
				return err
			}
			pong, err := c.Ping(cmd.Context(), world, target)
			if err != nil {
				return a.check(err)
			}
			data := pong.Reply.Raw
			if a.json {
				return a.writeJSON(data)
			}
			var p struct {
				Target    string   `json:"target"`
				Reachable bool     `json:"reachable"`
				LatencyMs *float64 `json:"latencyMs"`
			}
			if err := decodeData("POST "+worldPath(world, "ping"), data, &p); err != nil {
				return err
			}
			switch {
			case !p.Reachable:
				_, err = fmt.Fprintf(a.stdout, "%s is not reachable\n", target)
			case p.LatencyMs != nil:
				_, err = fmt.Fprintf(a.stdout, "%s is reachable through its webhook (%s ms)\n", target, strconv.FormatFloat(*p.LatencyMs, 'f', -1, 64))
			default:
				_, err = fmt.Fprintf(a.stdout, "%s is reachable (polled events recently)\n", target)
			}
			return err
		}),
	}
}

func (a *app) actCommand() *cobra.Command {
	var params string
	cmd := &cobra.Command{
		Use:   "act <world> <action> [--params JSON]",
		Short: "Submit an action to a world",
		Long: `act submits one of the world's actions (see 'awn world show') with --params, a
JSON object (default {}). Members see it as an action.submitted event. In a
world that batches its actions the action is queued and the event follows
within about a second.`,
		Example: `  awn act arena move --params '{"to": "e4"}'`,
		Args:    cobra.ExactArgs(2),
		RunE: wrap(func(cmd *cobra.Command, args []string) error {
			world, action := args[0], args[1]
			if err := checkWorld(world); err != nil {
				return err
			}
			if strings.TrimSpace(action) == "" {
				return usageErrorf("the action must be named, got an empty one")
			}
			p := json.RawMessage(`{}`)
			if cmd.Flags().Changed("params") {
				var err error
				if p, err = jsonObject("params", params); err != nil {
					return err
				}
			}
			c, _, err := a.signed()
			if err != nil {
				return err
			}
			_, acted, err := c.Act(cmd.Context(), world, action, p)
			if err != nil {
				return a.check(err)
			}
			data := acted.Raw
			if a.json {
				return a.writeJSON(data)
			}
			var r struct {
				ActionID string `json:"actionId"`
				Queued   bool   `json:"queued"`
			}
			if err := decodeData("POST "+worldPath(world, "actions"), data, &r); err != nil {
				return err
			}
			verb := "submitted"
			if r.Queued {
				verb = "queued"
			}
			_, err = fmt.Fprintf(a.stdout, "%s %s in %s: %s\n", verb, escapeControls(action, false), world, escapeControls(r.ActionID, false))
			return err
		}),
	}
	cmd.Flags().StringVar(&params, "params", "", "the action's parameters, a JSON object (default {})")
	return cmd
}
