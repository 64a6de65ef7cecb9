package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/url"
	"runtime/debug"
	"strings"
	"time"
	"unicode"
	"unicode/utf8"

	"github.com/a2awire/a2awire/shared/protocol"
	"github.com/spf13/cobra"
)

// Exit codes, as docs/cli.md lists them.
const (
	exitOK = 0
	// exitFailed: the server refused or failed, or a conformance item failed.
	exitFailed = 1
	// exitUsage: the command line itself is wrong.
	exitUsage = 2
)

// defaultURL is where `go run ./local` listens.
const defaultURL = "http://127.0.0.1:8080"

// exitError ends a command with a chosen exit code. printed says the
// message already reached stderr in the command's own words (as
// "error: <code>: <message>" does), so run must not print it again.
type exitError struct {
	code    int
	err     error
	printed bool
}

func (e *exitError) Error() string { return e.err.Error() }
func (e *exitError) Unwrap() error { return e.err }

// usageErrorf is a mistake on the command line: exit 2 with a hint.
func usageErrorf(format string, args ...any) error {
	return &exitError{code: exitUsage, err: fmt.Errorf(format, args...)}
}

// failed is a refusal or failure already reported on stderr: exit 1 quietly.
func failed(err error) error { return &exitError{code: exitFailed, err: err, printed: true} }

// app holds what every command shares: where output goes, the environment,
// and the global flags. One app lives for one run, so tests can run the CLI
// in parallel in one process.
type app struct {
	stdout, stderr io.Writer
	getenv         func(string) string

	// sleep waits between polls of events --follow; tests replace it to
	// see the waits without waiting.
	sleep func(ctx context.Context, d time.Duration) error

	json    bool
	baseURL string
	// as names the profile (--as) whose key and state are used instead
	// of $AWN_HOME's own.
	as string
}

// run executes the awn command line in args and returns the exit code.
func run(ctx context.Context, args []string, getenv func(string) string, stdout, stderr io.Writer) int {
	return (&app{stdout: stdout, stderr: stderr, getenv: getenv, sleep: sleepContext}).run(ctx, args)
}

// run executes the command line in args on a.
func (a *app) run(ctx context.Context, args []string) int {
	root := a.rootCommand()
	root.SetArgs(args)
	cmd, err := root.ExecuteContextC(ctx)
	if err == nil {
		return exitOK
	}
	var ee *exitError
	if !errors.As(err, &ee) {
		// Everything that reaches here unmarked comes from cobra itself:
		// unknown commands and flags, missing required flags, wrong
		// argument counts. All are usage mistakes.
		ee = &exitError{code: exitUsage, err: err}
	}
	if !ee.printed {
		fmt.Fprintf(a.stderr, "awn: %v\n", ee.err)
	}
	if ee.code == exitUsage {
		fmt.Fprintf(a.stderr, "Run '%s --help' for usage.\n", cmd.CommandPath())
	}
	return ee.code
}

func (a *app) rootCommand() *cobra.Command {
	root := &cobra.Command{
		Use:   "awn",
		Short: "The agent-side client of the A2AWire network",
		Long: `awn invokes A2AWire providers and checks them against the protocol's
conformance checklist. It holds an agent's identity (an Ed25519 key in
AWN_HOME, default ~/.config/awn) to register it, discover others and set its
presence, and takes part in worlds: join them, message and ping members,
submit actions, follow events, and receive them by webhook.

It talks to AWN_URL (default ` + defaultURL + `, or --url). --json prints one
JSON document on stdout; errors and progress go to stderr. Exit codes: 0 success,
1 the server refused or failed (or a conformance item failed), 2 bad usage.

One key registers one agent (a second name is refused with key_taken): run
several agents as named identities, each its own key and state under
$AWN_HOME/profiles/NAME, with --as NAME (awn --as scout init, awn --as scout
register …).`,
		Version:       version(),
		SilenceErrors: true,
		SilenceUsage:  true,
		// Without a command, awn was used wrongly: say so rather than exit 0.
		Args: cobra.ArbitraryArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			if len(args) > 0 {
				return usageErrorf("unknown command %q", args[0])
			}
			cmd.SetOut(a.stderr)
			_ = cmd.Help()
			return usageErrorf("no command given")
		},
	}
	root.SetOut(a.stdout)
	root.SetErr(a.stderr)
	root.SetFlagErrorFunc(func(_ *cobra.Command, err error) error {
		return &exitError{code: exitUsage, err: err}
	})
	base := a.getenv("AWN_URL")
	if base == "" {
		base = defaultURL
	}
	pf := root.PersistentFlags()
	pf.BoolVar(&a.json, "json", false, "print one JSON document on stdout")
	pf.StringVar(&a.baseURL, "url", base, "base URL of the network (env AWN_URL)")
	pf.StringVar(&a.as, "as", "", "act as the named identity: its key and state in $AWN_HOME/profiles/NAME")
	root.SetVersionTemplate("awn {{.Version}}\n")
	// Commands are listed by what they are for, not in one flat list.
	for _, g := range []struct {
		id, title string
		cmds      []*cobra.Command
	}{
		{"identity", "Identity and registry:", []*cobra.Command{a.initCommand(), a.whoamiCommand(), a.registerCommand(),
			a.discoverCommand(), a.agentCommand(), a.doctorCommand()}},
		{"providers", "Providers:", []*cobra.Command{a.invokeCommand(), a.conformCommand()}},
		{"worlds", "Worlds:", []*cobra.Command{a.worldCommand(), a.worldsCommand(), a.joinCommand(), a.leaveCommand(),
			a.agentsCommand(), a.sendCommand(), a.messagesCommand(), a.pingCommand(), a.actCommand(), a.eventsCommand(),
			a.webhookCommand()}},
		{"owners", "World owners:", []*cobra.Command{a.kickCommand(), a.banCommand(), a.unbanCommand(), a.bansCommand()}},
		{"credits", "Credits and escrow:", []*cobra.Command{a.escrowCommand(), a.balanceCommand(), a.grantCommand(), a.hireCommand()}},
	} {
		root.AddGroup(&cobra.Group{ID: g.id, Title: g.title})
		for _, c := range g.cmds {
			c.GroupID = g.id
			root.AddCommand(c)
		}
	}
	return root
}

// wrap adapts a command body: errors it returns unmarked are runtime
// failures (exit 1), so that only cobra's own errors count as usage.
func wrap(fn func(cmd *cobra.Command, args []string) error) func(*cobra.Command, []string) error {
	return func(cmd *cobra.Command, args []string) error {
		err := fn(cmd, args)
		var ee *exitError
		if err == nil || errors.As(err, &ee) {
			return err
		}
		return &exitError{code: exitFailed, err: err}
	}
}

// base returns the validated --url.
func (a *app) base() (string, error) {
	u, err := url.Parse(a.baseURL)
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		return "", usageErrorf("--url (AWN_URL) %q is not an absolute http(s) URL", a.baseURL)
	}
	return strings.TrimRight(a.baseURL, "/"), nil
}

// isAgentName reports whether s has the registry's name syntax,
// ^[a-z0-9][a-z0-9-]{1,62}$.
func isAgentName(s string) bool {
	if len(s) < 2 || len(s) > 63 || s[0] == '-' {
		return false
	}
	for _, c := range s {
		if (c < 'a' || c > 'z') && (c < '0' || c > '9') && c != '-' {
			return false
		}
	}
	return true
}

// jsonObject parses a flag value that must be a JSON object, strictly as a
// provider reads it (protocol.CheckJSON), and says what is wrong in words,
// naming the flag — never a Go decoder's message.
func jsonObject(flag, value string) (json.RawMessage, error) {
	if err := protocol.CheckJSON([]byte(value)); err != nil {
		return nil, usageErrorf("--%s %s is not valid JSON: %v", flag, protocol.Quote(value), err)
	}
	var m map[string]json.RawMessage
	if err := json.Unmarshal([]byte(value), &m); err != nil || m == nil {
		return nil, usageErrorf("--%s %s must be a JSON object such as '{\"key\": \"value\"}', not %s", flag, protocol.Quote(value), jsonKindOf(value))
	}
	return json.RawMessage(value), nil
}

// jsonKindOf names the kind of a valid JSON text for a message.
func jsonKindOf(value string) string {
	switch t := strings.TrimSpace(value); {
	case strings.HasPrefix(t, "["):
		return "an array"
	case strings.HasPrefix(t, `"`):
		return "a string"
	case t == "null":
		return "null"
	case t == "true" || t == "false":
		return "a boolean"
	}
	return "a number"
}

func positive(flag string, d time.Duration) error {
	if d <= 0 {
		return usageErrorf("--%s must be positive, got %s", flag, d)
	}
	return nil
}

// writeJSON prints v as the one indented JSON document of a --json run.
func (a *app) writeJSON(v any) error {
	enc := json.NewEncoder(a.stdout)
	enc.SetIndent("", "  ")
	enc.SetEscapeHTML(false)
	return enc.Encode(v)
}

// escapeControls makes provider-supplied text safe for a terminal: control
// characters (C0, DEL, C1 — escape sequences, CR that rewrites a line),
// bidirectional overrides and invalid UTF-8 are shown as Go escapes
// (\x1b, \u202e). With keepNewlines, '\n' passes, for text awn itself laid
// out on several lines. --json output is not passed through it: there the
// provider's JSON is printed as sent.
func escapeControls(s string, keepNewlines bool) string {
	var b strings.Builder
	for i := 0; i < len(s); {
		r, n := utf8.DecodeRuneInString(s[i:])
		switch {
		case r == utf8.RuneError && n == 1:
			fmt.Fprintf(&b, `\x%02x`, s[i])
		case r == '\n' && keepNewlines:
			b.WriteByte('\n')
		case unicode.IsControl(r) && r < 0x100:
			fmt.Fprintf(&b, `\x%02x`, r)
		case unicode.Is(unicode.Bidi_Control, r) || r == '\u2028' || r == '\u2029':
			fmt.Fprintf(&b, `\u%04x`, r)
		default:
			b.WriteString(s[i : i+n])
		}
		i += n
	}
	return b.String()
}

// version is awn's version as the Go toolchain stamped it: the module
// version (or "(devel)" for a build from a checkout) and, when built from
// git, the commit and whether the tree was modified.
func version() string {
	bi, ok := debug.ReadBuildInfo()
	if !ok {
		return "(unknown)"
	}
	v := bi.Main.Version
	var rev, modified string
	for _, s := range bi.Settings {
		switch s.Key {
		case "vcs.revision":
			rev = s.Value
		case "vcs.modified":
			if s.Value == "true" {
				modified = "+modified"
			}
		}
	}
	if rev != "" {
		v += " " + clip(rev, 12) + modified
	}
	return v + " " + bi.GoVersion
}
