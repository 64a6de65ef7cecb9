package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"strconv"
	"time"

	"github.com/spf13/cobra"
)

// Long-poll pacing of `events --follow`.
const (
	// pollWait is the server-side wait of each poll, its maximum.
	pollWait = 20
	// Without a Retry-After, a busy or failing server is asked again after
	// firstBackoff, doubling to maxBackoff.
	firstBackoff = time.Second
	maxBackoff   = 30 * time.Second
)

// event is one world event as human output shows it; --json prints the
// server's JSON as sent.
type event struct {
	EventID    string          `json:"eventId"`
	Type       string          `json:"type"`
	WorldID    string          `json:"worldId"`
	Data       json.RawMessage `json:"data"`
	Visibility string          `json:"visibility"`
	CreatedAt  string          `json:"createdAt"`
}

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

// eventPage is the data of GET …/events.
type eventPage struct {
	Events []json.RawMessage `json:"events"`
	// Cursor, when the server sends one, is where the next poll starts
	// (it may skip past events the caller cannot see); otherwise the last
	// event's id is.
	Cursor string `json:"cursor"`
}

func (a *app) events(ctx context.Context, world string, f eventsFlags) error {
	if err := checkWorld(world); err != nil {
		return err
	}
	if f.limitSet && (f.limit < 1 || f.limit > maxWorldPage) {
		return usageErrorf("--limit must be 1 to %d, got %d", maxWorldPage, f.limit)
	}
	w, err := a.signedWorld()
	if err != nil {
		return err
	}
	if f.follow {
		return a.follow(ctx, w, world, f)
	}
	_, data, err := w.do(ctx, http.MethodGet, worldPath(world, "events"), eventsQuery(f.after, f.limit, 0), nil)
	if err != nil {
		return err
	}
	if a.json {
		return a.writeJSON(data)
	}
	var page eventPage
	if err := decodeData("GET "+worldPath(world, "events"), data, &page); err != nil {
		return err
	}
	if len(page.Events) == 0 {
		_, err := fmt.Fprintf(a.stdout, "no events in %s\n", world)
		return err
	}
	for _, raw := range page.Events {
		if _, err := a.printEvent(world, raw); err != nil {
			return err
		}
	}
	return nil
}

func eventsQuery(after string, limit, wait int) url.Values {
	q := url.Values{}
	if after != "" {
		q.Set("after", after)
	}
	if limit > 0 {
		q.Set("limit", strconv.Itoa(limit))
	}
	if wait > 0 {
		q.Set("wait", strconv.Itoa(wait))
	}
	return q
}

// printEvent prints one event, a line of text or of JSON, and returns its id.
func (a *app) printEvent(world string, raw json.RawMessage) (string, error) {
	var e event
	if err := decodeData("GET "+worldPath(world, "events"), raw, &e); err != nil {
		return "", err
	}
	if a.json {
		_, err := fmt.Fprintf(a.stdout, "%s\n", compactRaw(raw))
		return e.EventID, err
	}
	line := fmt.Sprintf("%s  %s  %s  %s", escapeControls(e.EventID, false), escapeControls(e.CreatedAt, false),
		escapeControls(e.Type, false), compactJSON(e.Data, false))
	if e.Visibility == "private" {
		line += "  (private)"
	}
	_, err := fmt.Fprintln(a.stdout, line)
	return e.EventID, err
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

// follow long-polls the world's events until ctx ends (Ctrl-C), which is a
// clean exit. It keeps the cursor across polls, so nothing is printed
// twice or skipped, and waits out 429 and 503 answers as the server asks.
// A refusal of any other kind ends it with exit 1.
func (a *app) follow(ctx context.Context, w *worldClient, world string, f eventsFlags) error {
	fmt.Fprintf(a.stderr, "waiting for events in %s… (Ctrl-C to stop)\n", world)
	cursor, backoff, polled := f.after, firstBackoff, false
	if !f.noStream {
		base := f.streamURL
		if base == "" {
			base = w.base
		}
		var err error
		cursor, err = a.followStream(ctx, w, base, world, cursor)
		if err == nil || ctx.Err() != nil {
			return err
		}
		if !errors.Is(err, errNoStream) {
			return err
		}
		fmt.Fprintf(a.stderr, "awn: %v; long-polling instead\n", err)
	}
	path := worldPath(world, "events")
	for {
		_, data, err := w.call(ctx, http.MethodGet, path, eventsQuery(cursor, f.limit, pollWait), nil)
		if ctx.Err() != nil {
			return nil
		}
		if err != nil {
			var ref *refusal
			isRef := errors.As(err, &ref)
			switch {
			case isRef && ref.retryable():
				d := ref.RetryAfter
				if d <= 0 {
					d = backoff
				}
				backoff = min(2*backoff, maxBackoff)
				fmt.Fprintf(a.stderr, "awn: %s; polling again in %s\n", ref, d)
				if a.sleep(ctx, d) != nil {
					return nil
				}
				continue
			case isRef:
				return a.refused(ref)
			case !polled:
				// The first poll failing (a wrong --url, a server not
				// running) is a mistake to report, not to wait out.
				return err
			default:
				fmt.Fprintf(a.stderr, "awn: %v; polling again in %s\n", err, backoff)
				if a.sleep(ctx, backoff) != nil {
					return nil
				}
				backoff = min(2*backoff, maxBackoff)
				continue
			}
		}
		polled, backoff = true, firstBackoff
		var page eventPage
		if err := decodeData("GET "+path, data, &page); err != nil {
			return err
		}
		for _, raw := range page.Events {
			id, err := a.printEvent(world, raw)
			if err != nil {
				return err
			}
			if id != "" {
				cursor = id
			}
		}
		if page.Cursor != "" {
			cursor = page.Cursor
		}
	}
}

// sleepContext waits d, or until ctx ends (then it returns ctx's error).
func sleepContext(ctx context.Context, d time.Duration) error {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return ctx.Err()
	case <-t.C:
		return nil
	}
}
