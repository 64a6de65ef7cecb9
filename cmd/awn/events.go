package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	awnc "github.com/a2awire/a2awire/shared/awn"
	"github.com/spf13/cobra"
)

// event is one world event as human output shows it; --json prints the
// server's JSON as sent (its Raw).
type event = awnc.Event

type eventsFlags struct {
	after    string
	limit    int
	limitSet bool
	follow   bool
	// streamURL is where the event stream is served, when not at the
	// registry's URL (in AWS: the stream function's URL).
	streamURL string
	noStream  bool
}

func (a *app) eventsCommand() *cobra.Command {
	var f eventsFlags
	cmd := &cobra.Command{
		Use:   "events <world> [--after ID] [--limit N] [--follow]",
		Short: "Print the world's events this agent may see, oldest first",
		Long: `events prints the world's events visible to this agent (public ones, those
for members, and its own private ones) after --after, one per line:
the event id (a cursor for --after), when, the type and its data.

--follow reads the world's event stream (GET …/events/stream, Server-Sent
Events; --stream-url when it is served elsewhere than --url, as in AWS,
where the stack's StreamUrl output names it), reopening it after the last
event printed whenever it ends, and prints events as they arrive until
Ctrl-C. When no stream answers (or with --no-stream) it long-polls instead
(each poll waits up to 20 s on the server) from the same cursor; when the
server is busy or rate limits it, awn waits as long as it is asked
(Retry-After). With --json, --follow prints one JSON object per line.`,
		Example: `  awn events lobby
  awn events lobby --follow --json`,
		Args: cobra.ExactArgs(1),
		RunE: wrap(func(cmd *cobra.Command, args []string) error {
			f.limitSet = cmd.Flags().Changed("limit")
			return a.events(cmd.Context(), args[0], f)
		}),
	}
	fl := cmd.Flags()
	fl.StringVar(&f.after, "after", "", "only events after this event id")
	fl.IntVar(&f.limit, "limit", 0, "at most this many events per answer, 1 to 100 (default: the server's)")
	fl.BoolVar(&f.follow, "follow", false, "keep waiting for new events until Ctrl-C")
	fl.StringVar(&f.streamURL, "stream-url", "", "with --follow: the base URL of the event stream (default: --url)")
	fl.BoolVar(&f.noStream, "no-stream", false, "with --follow: long-poll, never the event stream")
	return cmd
}

func (a *app) events(ctx context.Context, world string, f eventsFlags) error {
	if err := checkWorld(world); err != nil {
		return err
	}
	if f.limitSet && (f.limit < 1 || f.limit > maxWorldPage) {
		return usageErrorf("--limit must be 1 to %d, got %d", maxWorldPage, f.limit)
	}
	c, _, err := a.signed()
	if err != nil {
		return err
	}
	if f.follow {
		return a.follow(ctx, c, world, f)
	}
	page, err := c.EventsPage(ctx, world, awnc.EventsQuery{After: f.after, Limit: f.limit})
	if err != nil {
		return a.check(err)
	}
	if a.json {
		return a.writeJSON(page.Reply.Raw)
	}
	if len(page.Events) == 0 {
		_, err := fmt.Fprintf(a.stdout, "no events in %s\n", world)
		return err
	}
	for _, e := range page.Events {
		if err := a.printEvent(e); err != nil {
			return err
		}
	}
	return nil
}

// printEvent prints one event, a line of text or of JSON.
func (a *app) printEvent(e awnc.Event) error {
	if a.json {
		_, err := fmt.Fprintf(a.stdout, "%s\n", compactRaw(e.Raw))
		return err
	}
	line := fmt.Sprintf("%s  %s  %s  %s", escapeControls(e.EventID, false), escapeControls(e.CreatedAt, false),
		escapeControls(e.Type, false), compactJSON(e.Data, false))
	if e.Visibility == "private" {
		line += "  (private)"
	}
	_, err := fmt.Fprintln(a.stdout, line)
	return err
}

// compactRaw is raw on one line, byte for byte otherwise (no HTML
// escaping): a --json line per event or delivery.
func compactRaw(raw []byte) string {
	var b bytes.Buffer
	if err := json.Compact(&b, raw); err != nil {
		return string(bytes.ReplaceAll(raw, []byte("\n"), []byte(" ")))
	}
	return b.String()
}

// follow prints the world's events as package awn follows them (the
// event stream, else long polls) until ctx ends (Ctrl-C), which is a clean
// exit; its waits are shown on stderr. A refusal ends it with exit 1.
func (a *app) follow(ctx context.Context, c *awnc.Client, world string, f eventsFlags) error {
	fmt.Fprintf(a.stderr, "waiting for events in %s… (Ctrl-C to stop)\n", world)
	opts := awnc.FollowOptions{After: f.after, Limit: f.limit, StreamURL: f.streamURL, NoStream: f.noStream,
		OnWait: func(w awnc.Wait) {
			switch w.Reason {
			case awnc.WaitFallback:
				fmt.Fprintf(a.stderr, "awn: %v; long-polling instead\n", w.Err)
			case awnc.WaitStreamBroken:
				fmt.Fprintf(a.stderr, "awn: the event stream broke (%v); reopening in %s\n", w.Err, w.Delay)
			default:
				var ref *awnc.Error
				msg := fmt.Sprint(w.Err)
				if errors.As(w.Err, &ref) {
					msg = refusalText(ref)
				}
				fmt.Fprintf(a.stderr, "awn: %s; polling again in %s\n", msg, w.Delay)
			}
		}}
	for e, err := range c.Events(ctx, world, opts) {
		if err != nil {
			return a.check(err)
		}
		if err := a.printEvent(e); err != nil {
			return err
		}
	}
	return nil
}

// sleepContext waits d, or until ctx ends (then it returns ctx's error).
func sleepContext(ctx context.Context, d time.Duration) error { return awnc.Sleep(ctx, d) }
