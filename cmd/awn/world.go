package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/url"
	"strings"

	awnc "github.com/a2awire/a2awire/shared/awn"
	"github.com/a2awire/a2awire/shared/protocol"
)

// The CLI speaks to the network only through package awn: it validates the
// command line, calls the package and prints. This file is the seam: the
// clients it builds and how their errors read on a terminal.

// client returns a public client of --url. It never retries on its own: a
// person at a terminal sees a refusal at once and may run the command again.
func (a *app) client() (*awnc.Client, error) {
	base, err := a.base()
	if err != nil {
		return nil, err
	}
	return awnc.New(base, awnc.WithRetries(0), awnc.WithSleep(a.sleep))
}

// signed returns a client that signs every request with the agent's key,
// and the identity.
func (a *app) signed() (*awnc.Client, awnc.Identity, error) {
	id, err := a.identity()
	if err != nil {
		return nil, id, err
	}
	base, err := a.base()
	if err != nil {
		return nil, id, err
	}
	c, err := awnc.New(base, awnc.WithIdentity(id), awnc.WithRetries(0), awnc.WithSleep(a.sleep))
	return c, id, err
}

// check turns an error of package awn into the CLI's: a refusal is printed
// as "error: CODE: message" (exit 1), an answer of the wrong shape named,
// a usage mistake exits 2.
func (a *app) check(err error) error {
	var ref *awnc.Error
	var shape *awnc.ShapeError
	var usage *awnc.UsageError
	switch {
	case err == nil:
		return nil
	case errors.As(err, &ref):
		return a.refused(ref)
	case errors.As(err, &shape):
		s := *shape
		s.Body = escapeControls(s.Body, false)
		return errors.New(s.Error())
	case errors.As(err, &usage):
		return usageErrorf("%s", usage.Msg)
	case awnc.IsUnreachable(err):
		where := a.baseURL
		var ue *url.Error
		if errors.As(err, &ue) {
			where, err = ue.URL, ue.Err // the URL asked for, and the dial error alone
		}
		return a.unreachable(where, err)
	}
	return err
}

// refusalText is ref as a terminal shows it: "CODE: message", made safe.
func refusalText(ref *awnc.Error) string {
	if ref.Code == "" {
		return escapeControls(ref.Message, false)
	}
	return escapeControls(ref.Code, false) + ": " + escapeControls(ref.Message, false)
}

// refused reports ref on stderr and returns the exit-1 error.
func (a *app) refused(ref *awnc.Error) error {
	msg := "error: " + refusalText(ref)
	if ref.RetryAfter > 0 && ref.Surface == awnc.WorldSurface {
		msg += fmt.Sprintf(" (retry after %s)", ref.RetryAfter)
	}
	fmt.Fprintln(a.stderr, msg)
	if strings.EqualFold(ref.Code, "key_taken") {
		// One key, one agent: the rule newcomers meet here.
		fmt.Fprintln(a.stderr, "awn: this key already registered another agent name (one key registers one agent); "+
			"for another agent use another identity: awn --as NAME init, then awn --as NAME register …")
	}
	return failed(fmt.Errorf("%s %s: %w", ref.Method, ref.Path, ref))
}

// retryAfter reads a Retry-After header (awnc.RetryAfter).
var retryAfter = awnc.RetryAfter

// decodeData parses an answer's JSON into v, naming the request when it is
// not the documented shape.
func decodeData(what string, data json.RawMessage, v any) error {
	if err := json.Unmarshal(data, v); err != nil {
		return fmt.Errorf("the answer to %s is not the documented JSON: %s", what, escapeControls(clip(string(data), 200), false))
	}
	return nil
}

// worldPath is the path of the world id (and of a route under it), for
// messages.
func worldPath(id string, sub ...string) string { return awnc.WorldPath(id, sub...) }

// checkWorld validates a world name as the server does, so a typo is a
// usage error, not a round trip.
func checkWorld(id string) error {
	if !awnc.ValidWorld(id) {
		return usageErrorf("%s is not a world name: 1 to 63 lowercase letters, digits and '-', not starting with '-'", protocol.Quote(id))
	}
	return nil
}

// checkAgentID validates how a member is named on the command line, so a
// typo is a usage error before any request: an awnId as the server checks
// it ("aw:sha256:" and 64 lowercase hex digits, as `awn whoami` and `awn
// agents` print it), a slot number, or @ and the registry name `awn
// agents` shows.
func checkAgentID(ref string) error {
	if awnc.ValidAgentID(ref) || isSlot(ref) || (strings.HasPrefix(ref, "@") && isAgentName(ref[1:])) {
		return nil
	}
	return usageErrorf("%s is not an agent id: %s followed by 64 lowercase hex digits, a member's slot (3) or @ and its name (@scout) (see 'awn agents <world>')", protocol.Quote(ref), awnc.AWNIDPrefix)
}

// isSlot reports whether s is a slot number.
func isSlot(s string) bool {
	if s == "" || len(s) > 18 {
		return false
	}
	for _, c := range s {
		if c < '0' || c > '9' {
			return false
		}
	}
	return true
}

// member turns a checked agent reference into the awnId: a slot or @name
// is looked up in the world's agents list (which needs this key to be a
// member).
func (a *app) member(ctx context.Context, c *awnc.Client, world, ref string) (string, error) {
	if awnc.ValidAgentID(ref) {
		return ref, nil
	}
	id, err := c.ResolveMember(ctx, world, ref)
	if errors.Is(err, awnc.ErrNoSuchMember) {
		fmt.Fprintf(a.stderr, "error: %v (see 'awn agents %s')\n", err, world)
		return "", failed(err)
	}
	return id, a.check(err)
}

// compactJSON renders raw on one line for human output, made safe for a
// terminal; a JSON string is shown as its text when bare is true.
func compactJSON(raw json.RawMessage, bare bool) string {
	if len(raw) == 0 {
		return ""
	}
	if bare {
		var s string
		if json.Unmarshal(raw, &s) == nil {
			return escapeControls(s, false)
		}
	}
	var b bytes.Buffer
	if err := json.Compact(&b, raw); err != nil {
		return escapeControls(string(raw), false)
	}
	return escapeControls(b.String(), false)
}
