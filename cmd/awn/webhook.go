package main

import (
	"context"
	"crypto/ed25519"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"strings"
	"sync"
	"time"

	"github.com/a2awire/a2awire/shared/apierror"
	"github.com/a2awire/a2awire/shared/auth"
	"github.com/a2awire/a2awire/shared/protocol"
	"github.com/a2awire/a2awire/shared/webhook/delivery"
	"github.com/a2awire/a2awire/shared/webhook/signature"
	"github.com/spf13/cobra"
)

// This file holds the webhook side of the CLI: `agent set-handler`, which
// registers (or removes) where a world delivers this agent's events, and
// `webhook serve`, a local receiver that verifies deliveries and prints them.

// networkKeyPath is where the network publishes the key of its v1a
// webhook signatures, as a Web Bot Auth key directory.
const networkKeyPath = "/.well-known/http-message-signatures-directory"

// maxDelivery bounds the body the receiver reads: deliveries are small JSON.
const maxDelivery = 1 << 20

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
	w, err := a.signedWorld()
	if err != nil {
		return err
	}
	path := worldPath(world, "webhook")
	if f.remove {
		_, data, err := w.do(ctx, http.MethodDelete, path, nil, nil)
		if err != nil {
			return err
		}
		if err := a.forgetHandler(world, w.base); err != nil {
			return fmt.Errorf("the webhook for %s is removed, but the local state was not written: %w", world, err)
		}
		if a.json {
			return a.writeJSON(data)
		}
		_, err = fmt.Fprintf(a.stdout, "removed the webhook for %s\n", world)
		return err
	}
	_, data, err := w.do(ctx, http.MethodPut, path, nil, map[string]string{"url": f.webhook})
	if err != nil {
		return err
	}
	var set struct {
		URL    string `json:"url"`
		Secret string `json:"secret"`
	}
	if err := decodeData("PUT "+path, data, &set); err != nil {
		return err
	}
	if err := a.updateState(func(st *localState) {
		if st.Handlers == nil {
			st.Handlers = map[string]localHandler{}
		}
		st.Handlers[world] = localHandler{URL: w.base, Webhook: set.URL, SetAt: time.Now().UTC()}
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
			return usageErrorf("webhook needs a subcommand: serve")
		},
	}
	var f receiverFlags
	serve := &cobra.Command{
		Use:   "serve [--addr 127.0.0.1:9000] [--secret whsec_…] [--network-key-url URL] [--action NAME --params JSON]",
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
	fl.StringVar(&f.addr, "addr", "127.0.0.1:9000", "address to listen on")
	fl.StringVar(&f.secret, "secret", "", "the webhook's whsec_ secret, to check v1 signatures")
	fl.StringVar(&f.keyURL, "network-key-url", "", "key directory of the network's v1a signing key (default <AWN_URL>"+networkKeyPath+")")
	fl.StringVar(&f.action, "action", "", "answer each verified delivery with this action")
	fl.StringVar(&f.params, "params", "", "the action's parameters, a JSON object (default {})")
	cmd.AddCommand(serve)
	return cmd
}

func (a *app) serveWebhooks(ctx context.Context, cmd *cobra.Command, f receiverFlags) error {
	rc := &receiver{a: a, secret: f.secret}
	if f.secret != "" {
		if _, err := signature.ParseSecret(f.secret); err != nil {
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
		b, err := json.Marshal(delivery.Action{Action: f.action, Params: params})
		if err != nil {
			return fmt.Errorf("encode the answer: %w", err)
		}
		rc.answer = b
	}
	keyURL := f.keyURL
	if keyURL == "" {
		base, err := a.base()
		if err != nil {
			return err
		}
		keyURL = base + networkKeyPath
	} else if u, err := url.Parse(keyURL); err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		return usageErrorf("--network-key-url %s is not an absolute http(s) URL", protocol.Quote(keyURL))
	}
	keys, err := fetchNetworkKeys(ctx, keyURL)
	switch {
	case err != nil && (f.secret == "" || f.keyURL != ""):
		// Nothing else to check deliveries with, or the key was asked for.
		return fmt.Errorf("the network's signing key: %w", err)
	case err != nil:
		fmt.Fprintf(a.stderr, "awn: v1a signatures are not checked (%v); checking v1 with --secret only\n", err)
	}
	rc.keys = keys

	ln, err := net.Listen("tcp", f.addr)
	if err != nil {
		return fmt.Errorf("listen on %s: %w", f.addr, err)
	}
	srv := &http.Server{Handler: rc, ReadHeaderTimeout: 10 * time.Second, ReadTimeout: 30 * time.Second, WriteTimeout: 30 * time.Second}
	checks := []string{}
	if rc.secret != "" {
		checks = append(checks, "v1 with the secret")
	}
	if len(rc.keys) > 0 {
		checks = append(checks, "v1a with the network key")
	}
	fmt.Fprintf(a.stderr, "listening on http://%s, checking %s (Ctrl-C to stop)\n", ln.Addr(), strings.Join(checks, " and "))
	served := make(chan error, 1)
	go func() { served <- srv.Serve(ln) }()
	select {
	case err := <-served:
		return fmt.Errorf("serve %s: %w", ln.Addr(), err)
	case <-ctx.Done():
	}
	shutdown, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	_ = srv.Shutdown(shutdown)
	return nil
}

// fetchNetworkKeys reads the network's key directory: {"keys": [JWK…]}.
func fetchNetworkKeys(ctx context.Context, keyURL string) ([]ed25519.PublicKey, error) {
	ctx, cancel := context.WithTimeout(ctx, worldTimeout)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, keyURL, nil)
	if err != nil {
		return nil, fmt.Errorf("GET %s: %w", keyURL, err)
	}
	req.Header.Set("Accept", auth.DirectoryMediaType+", application/json")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(io.LimitReader(resp.Body, 1<<20))
	if err != nil {
		return nil, fmt.Errorf("GET %s: %w", keyURL, err)
	}
	if resp.StatusCode != http.StatusOK {
		return nil, fmt.Errorf("GET %s: %d %s", keyURL, resp.StatusCode, http.StatusText(resp.StatusCode))
	}
	var dir auth.Directory
	if err := json.Unmarshal(b, &dir); err != nil {
		return nil, fmt.Errorf("GET %s: not a key directory {\"keys\": […]}", keyURL)
	}
	var keys []ed25519.PublicKey
	for _, j := range dir.Keys {
		if k, err := j.PublicKey(); err == nil {
			keys = append(keys, k)
		}
	}
	if len(keys) == 0 {
		return nil, fmt.Errorf("GET %s: the directory holds no Ed25519 key", keyURL)
	}
	return keys, nil
}

// receiver is the handler of `webhook serve`: it checks each delivery with
// every means it has (the secret, the network's keys) and prints it.
type receiver struct {
	a      *app
	secret string
	keys   []ed25519.PublicKey
	// answer is the body of a verified delivery's answer; nil means 204.
	answer []byte
	// mu keeps lines of concurrent deliveries whole.
	mu sync.Mutex
}

func (rc *receiver) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if r.Method != http.MethodPost {
		w.Header().Set("Allow", http.MethodPost)
		http.Error(w, "deliveries are POSTed", http.StatusMethodNotAllowed)
		return
	}
	body, err := io.ReadAll(http.MaxBytesReader(w, r.Body, maxDelivery))
	if err != nil {
		rc.refuse(w, r, http.StatusRequestEntityTooLarge, fmt.Sprintf("body larger than %d KiB or unreadable", maxDelivery>>10))
		return
	}
	if reason := rc.verify(r.Header, body); reason != "" {
		rc.refuse(w, r, http.StatusUnauthorized, reason)
		return
	}
	var d delivery.Body
	if err := json.Unmarshal(body, &d); err != nil || d.EventID == "" {
		rc.refuse(w, r, http.StatusBadRequest, "signed, but the body is not a delivery {worldId, eventId, event, payload, timestamp}")
		return
	}
	rc.mu.Lock()
	if rc.a.json {
		fmt.Fprintln(rc.a.stdout, compactRaw(body))
	} else {
		esc := func(s string) string { return escapeControls(s, false) }
		fmt.Fprintf(rc.a.stdout, "%s  %s  %s  %s  %s\n", esc(d.Timestamp), esc(d.WorldID), esc(d.EventID), esc(d.Event), compactJSON(d.Payload, false))
	}
	rc.mu.Unlock()
	if rc.answer == nil {
		w.WriteHeader(http.StatusNoContent)
		return
	}
	w.Header().Set("Content-Type", "application/json")
	_, _ = w.Write(rc.answer)
}

// verify returns why a delivery fails its checks, "" when it passes them
// all: v1 when there is a secret, v1a when there are network keys.
func (rc *receiver) verify(h http.Header, body []byte) string {
	if rc.secret != "" {
		if err := signature.VerifyV1(h, body, rc.secret, 0); err != nil {
			return "v1: " + reason(err)
		}
	}
	if len(rc.keys) > 0 {
		var last error
		for _, k := range rc.keys {
			if last = signature.VerifyV1a(h, body, k, 0); last == nil {
				return ""
			}
		}
		return "v1a: " + reason(last)
	}
	return ""
}

// reason is a verification failure in words.
func reason(err error) string {
	var ae *apierror.Error
	if errors.As(err, &ae) && ae.Message != "" {
		return ae.Message
	}
	return err.Error()
}

func (rc *receiver) refuse(w http.ResponseWriter, r *http.Request, status int, why string) {
	rc.mu.Lock()
	fmt.Fprintf(rc.a.stderr, "refused delivery %s: %s (answered %d)\n", escapeControls(clip(r.Header.Get(signature.HeaderID), 80), false), why, status)
	rc.mu.Unlock()
	http.Error(w, why, status)
}
