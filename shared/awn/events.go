package awn

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"iter"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"time"

	"github.com/a2awire/a2awire/shared/sse"
	"github.com/a2awire/a2awire/shared/world"
)

// PollWait is the server-side wait of each long poll, in seconds: the
// server's maximum.
const PollWait = 20

// MaxPage is the most events (and members, bans, messages) one answer holds.
const MaxPage = 100

// streamRetry is the wait before reopening a stream that ended without a
// retry hint.
const streamRetry = time.Second

// Event types, as Event.Type carries them.
const (
	AgentJoined     = world.AgentJoined
	AgentLeft       = world.AgentLeft
	MessageReceived = world.MessageReceived
	ActionSubmitted = world.ActionSubmitted
	PresenceChanged = world.PresenceChanged
)

// Event is one world event.
type Event struct {
	// EventID is a ULID: events sort by it, and it is the cursor to
	// continue after (FollowOptions.After).
	EventID string `json:"eventId"`
	Type    string `json:"type"`
	WorldID string `json:"worldId"`
	// Data is the event's payload, a JSON object whose fields depend on Type.
	Data json.RawMessage `json:"data"`
	// Visibility is "public", "agents" or "private" (for this agent alone).
	Visibility string `json:"visibility"`
	CreatedAt  string `json:"createdAt"`
	// Raw is the event as the server sent it.
	Raw json.RawMessage `json:"-"`
}

// MessageNotice is the data of a message.received event: a direct message
// (MessageID) from a member (From) arrived. Read it whole with Messages.
type MessageNotice struct {
	MessageID   string `json:"messageId"`
	From        string `json:"from"`
	ContentType string `json:"contentType"`
	// Preview is the start of the content.
	Preview string `json:"preview"`
}

// Message returns the notice of a message.received event; ok is false for
// other events.
func (e Event) Message() (n MessageNotice, ok bool) {
	if e.Type != MessageReceived || json.Unmarshal(e.Data, &n) != nil {
		return MessageNotice{}, false
	}
	return n, true
}

// ActionNotice is the data of an action.submitted event: member AWNID
// submitted Action (its id ActionID) with Params.
type ActionNotice struct {
	ActionID string          `json:"actionId"`
	AWNID    string          `json:"awnId"`
	Action   string          `json:"action"`
	Params   json.RawMessage `json:"params"`
	// Via is "webhook" for an action a webhook receiver answered with.
	Via string `json:"via,omitempty"`
}

// Action returns the notice of an action.submitted event; ok is false for
// other events.
func (e Event) Action() (n ActionNotice, ok bool) {
	if e.Type != ActionSubmitted || json.Unmarshal(e.Data, &n) != nil {
		return ActionNotice{}, false
	}
	return n, true
}

// ParseEvent reads one event's JSON.
func ParseEvent(raw []byte) (Event, error) {
	var e Event
	if err := json.Unmarshal(raw, &e); err != nil {
		return Event{}, fmt.Errorf("not a world event: %s", Clip(string(raw), 200))
	}
	e.Raw = json.RawMessage(raw)
	return e, nil
}

// EventPage is one answer of EventsPage.
type EventPage struct {
	Events []Event
	// Cursor is where the next page starts: past the last event, and past
	// events this agent may not see.
	Cursor string
	Reply  Reply
}

// EventsQuery selects one page of events.
type EventsQuery struct {
	// After is the cursor: only events after it ("" from the oldest kept).
	After string
	// Limit is the most events (1 to MaxPage; 0 the server's default).
	Limit int
	// Wait, in seconds (at most PollWait), long-polls: the server answers
	// as soon as there is an event, or empty after Wait.
	Wait int
}

func (q EventsQuery) values() url.Values {
	v := url.Values{}
	if q.After != "" {
		v.Set("after", q.After)
	}
	if q.Limit > 0 {
		v.Set("limit", strconv.Itoa(q.Limit))
	}
	if q.Wait > 0 {
		v.Set("wait", strconv.Itoa(q.Wait))
	}
	return v
}

// EventsPage reads one page of world's events visible to the identity
// (signed by a member), oldest first.
func (c *Client) EventsPage(ctx context.Context, worldID string, q EventsQuery) (EventPage, error) {
	r := request{method: http.MethodGet, path: WorldPath(worldID, "events"), query: q.values(), surface: WorldSurface}
	var rep Reply
	var err error
	if q.Wait > 0 {
		rep, err = c.once(ctx, r) // a long poll's retries are Events' business
	} else {
		rep, err = c.do(ctx, r)
	}
	if err != nil {
		return EventPage{Reply: rep}, err
	}
	return parsePage(r, rep)
}

func parsePage(r request, rep Reply) (EventPage, error) {
	var doc struct {
		Events []json.RawMessage `json:"events"`
		Cursor string            `json:"cursor"`
	}
	if err := decode(r, rep.Raw, &doc); err != nil {
		return EventPage{}, err
	}
	p := EventPage{Cursor: doc.Cursor, Reply: rep, Events: make([]Event, 0, len(doc.Events))}
	for _, raw := range doc.Events {
		e, err := ParseEvent(raw)
		if err != nil {
			return EventPage{}, &ShapeError{Method: r.method, Path: r.path, Surface: r.surface, Body: Clip(string(raw), 200)}
		}
		p.Events = append(p.Events, e)
	}
	if p.Cursor == "" && len(p.Events) > 0 {
		p.Cursor = p.Events[len(p.Events)-1].EventID
	}
	return p, nil
}

// WaitReason says why Events is waiting or changed course.
type WaitReason int

// Reasons of a Wait.
const (
	// WaitRetry: a poll was refused as busy or rate limited (429, 503), or
	// failed after earlier polls worked; it is sent again after Delay.
	WaitRetry WaitReason = iota
	// WaitStreamBroken: the event stream broke mid-event; it is reopened
	// after Delay from the last event seen.
	WaitStreamBroken
	// WaitFallback: no event stream would open (an older server, an API
	// Gateway that serves none); Events long-polls from here on.
	WaitFallback
)

// Wait is one notice of Events changing course; FollowOptions.OnWait gets
// each, for a log line.
type Wait struct {
	Reason WaitReason
	// Err is what happened: an *Error for a refusal.
	Err error
	// Delay is how long Events waits before trying again (0 for a fallback).
	Delay time.Duration
}

// FollowOptions tune Events.
type FollowOptions struct {
	// After is the cursor to start after ("" from the oldest event kept).
	After string
	// Limit bounds each long-poll answer (0: the server's default).
	Limit int
	// StreamURL is the base URL of the event stream when it is not served
	// at the client's URL (in AWS: the stack's StreamUrl output).
	StreamURL string
	// NoStream long-polls only.
	NoStream bool
	// OnWait, when set, is told of every wait and fallback.
	OnWait func(Wait)
}

// ErrNoStream is wrapped by a Wait's Err when Events falls back to long
// polling: no event stream would open.
var ErrNoStream = errors.New("no event stream")

// Events follows world's events from opts.After, oldest first, until ctx
// ends (the sequence then ends without an error) or the caller stops
// ranging. It reads the world's event stream (Server-Sent Events) and
// reopens it after the last event seen (Last-Event-ID) whenever it ends
// or breaks; when no stream opens, it long-polls the events route (each
// poll waits up to PollWait seconds on the server) from the same cursor.
// Either way every event is yielded once, in order: a drop loses none and
// repeats none. Busy and rate-limited answers are waited out for as long
// as the server asks (Retry-After), else with a doubling backoff. A
// refusal of another kind (not a member: NOT_JOINED), or a first poll that
// reaches no server, is yielded as the error and ends the sequence.
func (c *Client) Events(ctx context.Context, worldID string, opts FollowOptions) iter.Seq2[Event, error] {
	return func(yield func(Event, error) bool) {
		f := follower{c: c, world: worldID, opts: opts, cursor: opts.After, yield: yield}
		f.run(ctx)
	}
}

type follower struct {
	c      *Client
	world  string
	opts   FollowOptions
	cursor string
	yield  func(Event, error) bool
	// stopped: the caller stopped ranging.
	stopped bool
}

func (f *follower) notify(w Wait) {
	if f.opts.OnWait != nil {
		f.opts.OnWait(w)
	}
}

// emit yields e unless it is at or behind the cursor (a server replaying
// what was seen), and moves the cursor. It reports whether to go on.
func (f *follower) emit(e Event) bool {
	if e.EventID != "" && f.cursor != "" && e.EventID <= f.cursor {
		return true
	}
	if e.EventID != "" {
		f.cursor = e.EventID
	}
	if !f.yield(e, nil) {
		f.stopped = true
		return false
	}
	return true
}

func (f *follower) run(ctx context.Context) {
	if !f.opts.NoStream {
		base := f.opts.StreamURL
		if base == "" {
			base = f.c.base
		}
		err := f.stream(ctx, base)
		if f.stopped || ctx.Err() != nil {
			return
		}
		if !errors.Is(err, ErrNoStream) {
			f.yield(Event{}, err)
			return
		}
		f.notify(Wait{Reason: WaitFallback, Err: err})
	}
	f.poll(ctx)
}

// stream reads the event stream until ctx ends or the caller stops, and
// returns ErrNoStream (wrapped) when a stream would not open.
func (f *follower) stream(ctx context.Context, base string) error {
	u := strings.TrimSuffix(base, "/") + WorldPath(f.world, "events/stream")
	for {
		req, err := http.NewRequestWithContext(ctx, http.MethodGet, u, nil)
		if err != nil {
			return fmt.Errorf("%w: %v", ErrNoStream, err)
		}
		req.Header.Set("Accept", sse.ContentType)
		if f.cursor != "" {
			req.Header.Set("Last-Event-ID", f.cursor)
		}
		resp, err := f.c.stream.Do(req)
		if ctx.Err() != nil {
			if err == nil {
				resp.Body.Close()
			}
			return nil
		}
		if err != nil {
			return fmt.Errorf("%w: %v", ErrNoStream, err)
		}
		if resp.StatusCode != http.StatusOK || !strings.HasPrefix(resp.Header.Get("Content-Type"), sse.ContentType) {
			resp.Body.Close()
			return fmt.Errorf("%w: %s answered %d", ErrNoStream, u, resp.StatusCode)
		}
		r := sse.NewReader(resp.Body, MaxResponse)
		var readErr error
		for {
			ev, err := r.Next()
			if err != nil {
				if err != io.EOF {
					readErr = err
				}
				break
			}
			e, err := ParseEvent([]byte(ev.Data))
			if err != nil {
				resp.Body.Close()
				return err
			}
			if !f.emit(e) {
				resp.Body.Close()
				return nil
			}
		}
		resp.Body.Close()
		if ctx.Err() != nil {
			return nil
		}
		// An id-only block moved the cursor past events this agent may
		// not see: resume from there. Only after a clean end: the
		// reader's LastID takes an id as soon as its line is read, so
		// after a break it may name the event that was cut off, which
		// resuming from would lose.
		if readErr == nil && r.LastID > f.cursor {
			f.cursor = r.LastID
		}
		wait := r.Retry
		if wait <= 0 {
			wait = streamRetry
		}
		if readErr != nil {
			f.notify(Wait{Reason: WaitStreamBroken, Err: readErr, Delay: wait})
		}
		if f.c.sleep(ctx, wait) != nil {
			return nil
		}
	}
}

// poll long-polls from the cursor until ctx ends or the caller stops.
func (f *follower) poll(ctx context.Context) {
	backoff, polled := firstBackoff, false
	for {
		p, err := f.c.EventsPage(ctx, f.world, EventsQuery{After: f.cursor, Limit: f.opts.Limit, Wait: PollWait})
		if ctx.Err() != nil {
			return
		}
		if err != nil {
			var e *Error
			isRef := errors.As(err, &e)
			var d time.Duration
			switch {
			case isRef && e.Temporary():
				d = e.RetryAfter
				if d <= 0 {
					d = backoff
				}
			case isRef, isShape(err), !polled:
				// A refusal, or a first poll failing (a wrong URL, a
				// server not running): a mistake to report, not to wait out.
				f.yield(Event{}, err)
				return
			default:
				d = backoff
			}
			backoff = min(2*backoff, maxBackoff)
			f.notify(Wait{Reason: WaitRetry, Err: err, Delay: d})
			if f.c.sleep(ctx, d) != nil {
				return
			}
			continue
		}
		polled, backoff = true, firstBackoff
		for _, e := range p.Events {
			if !f.emit(e) {
				return
			}
		}
		if p.Cursor > f.cursor {
			f.cursor = p.Cursor
		}
	}
}
