package main

import (
	"context"
	"encoding/json"
	"fmt"
	"net/url"
	"strings"
	"sync"
	"text/tabwriter"
	"time"

	awnc "github.com/a2awire/a2awire/shared/awn"
	"github.com/a2awire/a2awire/shared/protocol"
	"github.com/spf13/cobra"
)

// This file holds the webhook side of the CLI: `agent set-handler`, which
// registers (or removes) where a world delivers this agent's events, and
// `webhook serve`, a local receiver that verifies deliveries and prints them.

// networkKeyPath is where the network publishes the key of its v1a
// webhook signatures, as a Web Bot Auth key directory.
const networkKeyPath = awnc.NetworkKeyPath

// localHandler is the local record of the webhook set for one world.
type localHandler struct {
	// URL is the network the webhook was set with.
	URL     string    `json:"url"`
	Webhook string    `json:"webhook"`
	SetAt   time.Time `json:"set_at"`
}

type handlerFlags struct {
	webhook string
	remove  bool
}

func (a *app) setHandlerCommand() *cobra.Command {
	var f handlerFlags
	cmd := &cobra.Command{
		Use:   "set-handler <world> --webhook URL | --remove",
		Short: "Have a world deliver this agent's events to a webhook (or stop it)",
		Long: `set-handler registers the URL the world POSTs this agent's events to (signed,
as a member: join first) and prints the webhook's secret, which signs every
delivery. The secret is shown this once; keep it (for example for
'awn webhook serve --secret'). Setting a webhook again replaces the URL and the
secret. --remove deletes the webhook. Both are recorded in $AWN_HOME.`,
		Example: `  awn agent set-handler lobby --webhook https://agent.example.com/hooks/awn
  awn agent set-handler lobby --remove`,
		Args: cobra.ExactArgs(1),
		RunE: wrap(func(cmd *cobra.Command, args []string) error {
			switch fl := cmd.Flags(); {
			case fl.Changed("webhook") && f.remove:
				return usageErrorf("give --webhook URL or --remove, not both")
			case !fl.Changed("webhook") && !f.remove:
				return usageErrorf("give --webhook URL to set the handler or --remove to delete it")
			}
			return a.setHandler(cmd.Context(), args[0], f)
		}),
	}
	cmd.Flags().StringVar(&f.webhook, "webhook", "", "the http(s) URL the world delivers events to")
	cmd.Flags().BoolVar(&f.remove, "remove", false, "delete the world's webhook for this agent")
	return cmd
}

func (a *app) setHandler(ctx context.Context, world string, f handlerFlags) error {
	if err := checkWorld(world); err != nil {
		return err
	}
	if !f.remove {
		u, err := url.Parse(f.webhook)
		if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
			return usageErrorf("--webhook %s is not an absolute http(s) URL", protocol.Quote(f.webhook))
		}
	}
	c, _, err := a.signed()
	if err != nil {
		return err
	}
	if f.remove {
		gone, err := c.RemoveWebhook(ctx, world)
		if err != nil {
			return a.check(err)
		}
		data := gone.Raw
		if err := a.forgetHandler(world, c.BaseURL()); err != nil {
			return fmt.Errorf("the webhook for %s is removed, but the local state was not written: %w", world, err)
		}
		if a.json {
			return a.writeJSON(data)
		}
		_, err = fmt.Fprintf(a.stdout, "removed the webhook for %s\n", world)
		return err
	}
	set, err := c.SetWebhook(ctx, world, f.webhook)
	if err != nil {
		return a.check(err)
	}
	data := set.Reply.Raw
	if err := a.updateState(func(st *localState) {
		if st.Handlers == nil {
			st.Handlers = map[string]localHandler{}
		}
		st.Handlers[world] = localHandler{URL: c.BaseURL(), Webhook: set.URL, SetAt: time.Now().UTC()}
	}); err != nil {
		// The secret is printed anyway: it cannot be asked for again.
		fmt.Fprintf(a.stderr, "awn: the webhook is set, but the local state was not written: %v\n", err)
		fmt.Fprintf(a.stderr, "secret: %s\n", escapeControls(set.Secret, false))
		return failed(err)
	}
	if a.json {
		return a.writeJSON(data)
	}
	fmt.Fprintf(a.stdout, "webhook for %s: %s\n", world, escapeControls(set.URL, false))
	fmt.Fprintf(a.stdout, "secret: %s\n", escapeControls(set.Secret, false))
	_, err = fmt.Fprintln(a.stderr, "awn: keep the secret now: it is not shown again (setting the webhook again makes a new one)")
	return err
}

// forgetHandler drops the local record of world's webhook set with the
// network at base (leaving a world removes its webhook too).
func (a *app) forgetHandler(world, base string) error {
	st, err := a.loadState()
	if err != nil {
		return err
	}
	if h, ok := st.Handlers[world]; !ok || h.URL != base {
		return nil
	}
	return a.updateState(func(st *localState) {
		if h, ok := st.Handlers[world]; ok && h.URL == base {
			delete(st.Handlers, world)
		}
	})
}

type receiverFlags struct {
	addr, secret, keyURL string
	action, params       string
}

func (a *app) webhookCommand() *cobra.Command {
	cmd := &cobra.Command{
		Use:   "webhook",
		Short: "Tools for receiving world webhooks",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			cmd.SetOut(a.stderr)
			_ = cmd.Help()
			return usageErrorf("webhook needs a subcommand: serve, show or replay")
		},
	}
	var f receiverFlags
	serve := &cobra.Command{
		Use:   "serve [--addr 127.0.0.1:9100] [--secret whsec_…] [--network-key-url URL] [--action NAME --params JSON]",
		Short: "Receive webhook deliveries locally, verify and print them",
		Long: `serve listens on --addr and checks every delivery's signatures: v1 with
--secret (the one 'awn agent set-handler' printed) and v1a with the network's
key, fetched from --network-key-url (default <AWN_URL>` + networkKeyPath + `).
Each verified event is printed on one line (one JSON object with --json) and
answered 204; a refused one is answered 401 and the reason printed on stderr.
With --action (and --params), verified deliveries are answered
{"action", "params"}, which the world takes as this agent's action.`,
		Example: `  awn webhook serve --secret whsec_… --action move --params '{"to": "e4"}'`,
		Args:    cobra.NoArgs,
		RunE:    wrap(func(cmd *cobra.Command, _ []string) error { return a.serveWebhooks(cmd.Context(), cmd, f) }),
	}
	fl := serve.Flags()
	fl.StringVar(&f.addr, "addr", "127.0.0.1:9100", "address to listen on (not 9000, where the docs run the first provider)")
	fl.StringVar(&f.secret, "secret", "", "the webhook's whsec_ secret, to check v1 signatures")
	fl.StringVar(&f.keyURL, "network-key-url", "", "key directory of the network's v1a signing key (default <AWN_URL>"+networkKeyPath+")")
	fl.StringVar(&f.action, "action", "", "answer each verified delivery with this action")
	fl.StringVar(&f.params, "params", "", "the action's parameters, a JSON object (default {})")
	cmd.AddCommand(serve, a.webhookShowCommand(), a.webhookReplayCommand())
	return cmd
}

func (a *app) webhookShowCommand() *cobra.Command {
	return &cobra.Command{
		Use:   "show <world>",
		Short: "Show this agent's webhook in a world: its URL, whether it is enabled, its delivery stats",
		Long: `show prints the webhook set with 'awn agent set-handler' (signed, as a member):
where deliveries go, whether they are enabled (and why not), and how many were
delivered, failed and dead-lettered, with the last error. The secret is never
shown again. --json prints the server's answer.`,
		Example: "  awn webhook show lobby",
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
			v, err := c.Webhook(cmd.Context(), world)
			if err != nil {
				return a.check(err)
			}
			if a.json {
				return a.writeJSON(v.Reply.Raw)
			}
			esc := func(s string) string { return escapeControls(s, false) }
			tw := tabwriter.NewWriter(a.stdout, 0, 4, 2, ' ', 0)
			fmt.Fprintf(tw, "url:\t%s\n", esc(v.URL))
			enabled := "yes"
			if !v.Enabled {
				enabled = "no"
				if v.DisabledReason != "" {
					enabled += " (" + esc(v.DisabledReason) + ")"
				}
			}
			fmt.Fprintf(tw, "enabled:\t%s\n", enabled)
			fmt.Fprintf(tw, "created_at:\t%s\n", v.CreatedAt.Format(time.RFC3339))
			st := v.Stats
			fmt.Fprintf(tw, "delivered:\t%d\n", st.Delivered)
			fmt.Fprintf(tw, "failed:\t%d\n", st.Failed)
			fmt.Fprintf(tw, "dead-lettered:\t%d\n", st.DeadLettered)
			fmt.Fprintf(tw, "actions dropped:\t%d\n", st.ActionsDropped)
			if st.LastSuccessAt != nil {
				fmt.Fprintf(tw, "last success:\t%s\n", st.LastSuccessAt.Format(time.RFC3339))
			}
			if st.LastError != "" {
				at := ""
				if st.LastErrorAt != nil {
					at = " at " + st.LastErrorAt.Format(time.RFC3339)
				}
				fmt.Fprintf(tw, "last error:\t%s%s\n", esc(st.LastError), at)
			}
			if err := tw.Flush(); err != nil {
				return err
			}
			if st.DeadLettered > 0 {
				fmt.Fprintf(a.stderr, "awn: 'awn webhook replay %s' sends the dead letters again\n", world)
			}
			return nil
		}),
	}
}

func (a *app) webhookReplayCommand() *cobra.Command {
	var since string
	cmd := &cobra.Command{
		Use:   "replay <world> [--since T]",
		Short: "Send this agent's dead-lettered deliveries in a world again",
		Long: `replay queues again every delivery to this agent's webhook in the world that
was dead-lettered since --since (RFC 3339; default: the last 7 days, as long as
events are kept) and prints how many (signed, as a member).`,
		Example: "  awn webhook replay lobby --since 2026-12-04T00:00:00Z",
		Args:    cobra.ExactArgs(1),
		RunE: wrap(func(cmd *cobra.Command, args []string) error {
			world := args[0]
			if err := checkWorld(world); err != nil {
				return err
			}
			from := time.Now().Add(-7 * 24 * time.Hour)
			if since != "" {
				t, err := time.Parse(time.RFC3339Nano, since)
				if err != nil {
					return usageErrorf("--since %s is not an RFC 3339 time such as 2026-01-02T15:04:05Z", protocol.Quote(since))
				}
				from = t
			}
			c, _, err := a.signed()
			if err != nil {
				return err
			}
			n, err := c.ReplayWebhook(cmd.Context(), world, from)
			if err != nil {
				return a.check(err)
			}
			if a.json {
				return a.writeJSON(map[string]int{"replayed": n})
			}
			_, err = fmt.Fprintf(a.stdout, "replayed %d dead-lettered deliveries in %s\n", n, world)
			return err
		}),
	}
	cmd.Flags().StringVar(&since, "since", "", "only deliveries dead-lettered after this RFC 3339 time (default: 7 days ago)")
	return cmd
}

func (a *app) serveWebhooks(ctx context.Context, cmd *cobra.Command, f receiverFlags) error {
	rc := &receiver{a: a}
	rc.Secret = f.secret
	if f.secret != "" {
		if !awnc.ValidSecret(f.secret) {
			return usageErrorf("--secret is not a webhook secret: it is whsec_ followed by the base64 'awn agent set-handler' printed")
		}
	}
	if cmd.Flags().Changed("params") && f.action == "" {
		return usageErrorf("--params needs --action")
	}
	if f.action != "" {
		params := json.RawMessage(`{}`)
		if cmd.Flags().Changed("params") {
			var err error
			if params, err = jsonObject("params", f.params); err != nil {
				return err
			}
		}
		rc.answer = &awnc.Answer{Action: f.action, Params: params}
	}
	if f.keyURL != "" {
		if u, err := url.Parse(f.keyURL); err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
			return usageErrorf("--network-key-url %s is not an absolute http(s) URL", protocol.Quote(f.keyURL))
		}
	}
	// The key directory is asked of --network-key-url itself when given,
	// so that a wrong --url does not stop a receiver that needs none.
	var c *awnc.Client
	var err error
	if f.keyURL != "" {
		c, err = awnc.New(f.keyURL, awnc.WithRetries(0))
	} else {
		c, err = a.client()
	}
	if err != nil {
		return a.check(err)
	}
	keys, err := c.NetworkKeys(ctx, f.keyURL)
	switch {
	case err != nil && (f.secret == "" || f.keyURL != ""):
		// Nothing else to check deliveries with, or the key was asked for.
		return fmt.Errorf("the network's signing key: %w", err)
	case err != nil:
		fmt.Fprintf(a.stderr, "awn: v1a signatures are not checked (%v); checking v1 with --secret only\n", err)
	}
	rc.NetworkKeys = keys
	rc.Handle = rc.handle
	rc.OnRefused = rc.refused

	checks := []string{}
	if rc.Secret != "" {
		checks = append(checks, "v1 with the secret")
	}
	if len(rc.NetworkKeys) > 0 {
		checks = append(checks, "v1a with the network key")
	}
	return awnc.Serve(ctx, f.addr, &rc.Receiver, func(addr string) {
		fmt.Fprintf(a.stderr, "listening on http://%s, checking %s (Ctrl-C to stop)\n", addr, strings.Join(checks, " and "))
	})
}

// receiver is the handler of `webhook serve`: package awn's Receiver,
// verifying each delivery with every means it has (the secret, the
// network's keys), with a Handle that prints it.
type receiver struct {
	awnc.Receiver
	a *app
	// answer is the answer to a verified delivery; nil means 204.
	answer *awnc.Answer
	// mu keeps lines of concurrent deliveries whole.
	mu sync.Mutex
}

func (rc *receiver) handle(_ context.Context, d awnc.Delivery, body []byte) (*awnc.Answer, error) {
	rc.mu.Lock()
	defer rc.mu.Unlock()
	if rc.a.json {
		fmt.Fprintln(rc.a.stdout, compactRaw(body))
	} else {
		esc := func(s string) string { return escapeControls(s, false) }
		fmt.Fprintf(rc.a.stdout, "%s  %s  %s  %s  %s\n", esc(d.Timestamp), esc(d.WorldID), esc(d.EventID), esc(d.Event), compactJSON(d.Payload, false))
	}
	if rc.answer == nil {
		return nil, nil
	}
	ans := *rc.answer
	return &ans, nil
}

func (rc *receiver) refused(id string, status int, why string) {
	rc.mu.Lock()
	fmt.Fprintf(rc.a.stderr, "refused delivery %s: %s (answered %d)\n", escapeControls(clip(id, 80), false), why, status)
	rc.mu.Unlock()
}
