package worldhttp

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"strings"
	"time"

	"github.com/a2awire/a2awire/shared/access"
	"github.com/a2awire/a2awire/shared/apierror"
	"github.com/a2awire/a2awire/shared/function"
	"github.com/a2awire/a2awire/shared/routes"
	"github.com/a2awire/a2awire/shared/sse"
	"github.com/a2awire/a2awire/shared/world"
)

// Timings of an event stream.
const (
	// StreamPoll is how often an idle stream (its last read found no
	// event) reads the event head: one strongly consistent GetItem (1
	// read unit) each time, 4 a second, plus 2 Queries only when the head
	// has moved. It bounds how late the first event after a quiet spell
	// reaches a reader: within StreamPoll of its commit, plus a read.
	StreamPoll = world.PollInterval
	// StreamFlowPoll is the pause after a read that found events: the
	// next read comes this soon, so a reader following a busy world is
	// one read behind it rather than StreamPoll behind. Each such read is
	// paid for by the events the one before delivered (at most 1 GetItem
	// and 2 Queries per page of events, plus one empty read when the flow
	// stops), so it adds no cost to a quiet stream.
	StreamFlowPoll = 50 * time.Millisecond
	// StreamHeartbeat is the comment a stream writes every 15 s, so that
	// no intermediary takes a quiet stream for a dead one.
	StreamHeartbeat = 15 * time.Second
	// StreamRefresh is how often an open stream marks its member as
	// polled (1 UpdateItem): well within world.ReachableWithin, so a
	// member holding a stream stays online.
	StreamRefresh = 10 * time.Second
	// StreamRetry is the reconnection delay a stream names when it ends.
	StreamRetry = time.Second
	// StreamEndMargin is how long before its function's deadline a stream
	// ends, so the last bytes and the retry hint reach the client before
	// Lambda stops the invocation.
	StreamEndMargin = 3 * time.Second
)

// EventFollower opens a member's reading of a world's events after a
// cursor (world.Service.Follow).
type EventFollower interface {
	Follow(ctx context.Context, world, awnID, after string) (*world.Follower, error)
}

// StreamOptions tune NewEventStream; zero values take the defaults above.
type StreamOptions struct {
	// Clock is what a stream waits on (polls, heartbeats, refreshes, its
	// end); nil is the real clock. A context deadline is measured on the
	// real clock and converted once.
	Clock world.WaitClock
	// MaxDuration is the longest a stream stays open (the function's
	// timeout less StreamEndMargin); zero: until the context's deadline
	// less StreamEndMargin, or for ever without one.
	MaxDuration time.Duration
	Poll        time.Duration
	FlowPoll    time.Duration
	Heartbeat   time.Duration
	Refresh     time.Duration
}

type realClock struct{}

func (realClock) Now() time.Time                         { return time.Now() }
func (realClock) After(d time.Duration) <-chan time.Time { return time.After(d) }

// BuildEventStream builds world-events-stream, a streaming function
// (served by a function URL in AWS): its http.Handler checks the member's
// signature itself, as every world route's does, and streams until its
// timeout less StreamEndMargin.
func BuildEventStream(env function.Env) (http.Handler, error) {
	st, err := env.NeedStore(env.Name)
	if err != nil {
		return nil, err
	}
	// No rate limit: a stream is one request for minutes, and the
	// signature's nonce guard already refuses a replayed one.
	d := NewDeps(st, nil, "", env.Log, env.Now)
	d.Options.Function = env.Name
	longest := time.Duration(routes.Config(env.Name).TimeoutSeconds)*time.Second - StreamEndMargin
	return NewEventStream(d.Options, d.World, StreamOptions{MaxDuration: longest})
}

// NewEventStream serves GET /v0/worlds/{world}/events/stream (member):
// text/event-stream with one event per world event visible to the member
// (the visibility of GET …/events), `id:` its eventId, `event:` its type,
// `data:` the event's JSON as the long poll answers it; a comment every
// StreamHeartbeat; resumption after Last-Event-ID (or ?after=, the header
// winning), with nothing lost or repeated. Before the stream's end (its
// duration, or its context's deadline less StreamEndMargin) it writes a
// `retry:` hint and ends; a reader reconnects with the last id it got.
// Errors before the stream starts (a bad cursor, NOT_JOINED) are the
// world's JSON errors; a failed read after it started ends the stream with
// the retry hint, so the reader resumes where it was. A member that leaves
// or is removed sees its stream end without one.
func NewEventStream(o Options, follower EventFollower, so StreamOptions) (http.Handler, error) {
	if follower == nil {
		return nil, errors.New("worldhttp: no world service")
	}
	if err := needMembers(o); err != nil {
		return nil, err
	}
	if so.Clock == nil {
		so.Clock = realClock{}
	}
	so.Poll = cmp(so.Poll, StreamPoll)
	so.FlowPoll = cmp(so.FlowPoll, min(StreamFlowPoll, so.Poll))
	so.Heartbeat = cmp(so.Heartbeat, StreamHeartbeat)
	so.Refresh = cmp(so.Refresh, StreamRefresh)
	log := o.logger()
	return serve(o, nil, func(w http.ResponseWriter, r *http.Request) error {
		q := newQuery(r.URL.RawQuery)
		after := q.ulid("after")
		if q.err != nil {
			return q.err
		}
		if last := r.Header.Get("Last-Event-ID"); last != "" {
			// The reader's resumption point wins over the URL it
			// was first opened with (EventSource keeps its URL).
			after = strings.ToUpper(last)
		}
		id, ok := access.IdentityFrom(r.Context())
		if !ok {
			return errors.New("worldhttp: no identity on a member route")
		}
		f, err := follower.Follow(r.Context(), access.Param(r, "world"), id.AWNID, after)
		if err != nil {
			return fmt.Errorf("worldhttp: follow events: %w", err)
		}
		s := stream{so: so, f: f}
		if err := s.run(r.Context(), w); err != nil {
			log.ErrorContext(r.Context(), "event stream ended on an error", "function", o.Function, "err", err)
		}
		return nil
	}, nil)
}

func cmp(v, def time.Duration) time.Duration {
	if v <= 0 {
		return def
	}
	return v
}

// stream is one open event stream.
type stream struct {
	so StreamOptions
	f  *world.Follower
}

// run writes the stream until its end, the client's going, or an error
// (returned for the log; the client got the retry hint when it could).
func (s *stream) run(ctx context.Context, w http.ResponseWriter) error {
	c := s.so.Clock
	start := c.Now()
	end := time.Time{}
	if s.so.MaxDuration > 0 {
		end = start.Add(s.so.MaxDuration)
	}
	if dl, ok := ctx.Deadline(); ok {
		if byDeadline := start.Add(time.Until(dl) - StreamEndMargin); end.IsZero() || byDeadline.Before(end) {
			end = byDeadline
		}
	}
	out, err := sse.Start(w)
	if err != nil {
		return nil // the client is gone
	}
	nextBeat, nextRefresh := start.Add(s.so.Heartbeat), start.Add(s.so.Refresh)
	for {
		evs, err := s.f.Read(ctx)
		if err != nil {
			if ctx.Err() != nil {
				return nil
			}
			_ = out.Retry(StreamRetry)
			return fmt.Errorf("read events: %w", err)
		}
		for _, e := range evs {
			if err := out.Add(e.ID, e.Type, eventJSON(e)); err != nil {
				// An id or type the format cannot carry: the store
				// holds no such event (ULIDs, dotted names).
				return fmt.Errorf("event %q: %w", e.ID, err)
			}
		}
		// A page is one Write and one flush.
		if err := out.Send(); err != nil {
			return nil // the client is gone; it resumes from what it got
		}
		if len(evs) == world.MaxEventLimit {
			continue // a backlog: read on at once
		}
		now := c.Now()
		if !end.IsZero() && !now.Before(end) {
			_ = out.Retry(StreamRetry)
			_ = out.Comment("the stream ends here; reconnect with Last-Event-ID")
			return nil
		}
		if !now.Before(nextBeat) {
			if err := out.Comment("heartbeat"); err != nil {
				return nil
			}
			nextBeat = now.Add(s.so.Heartbeat)
		}
		if !now.Before(nextRefresh) {
			if err := s.f.Refresh(ctx); err != nil {
				if apierror.KindOf(err) == apierror.NotJoined || ctx.Err() != nil {
					_ = out.Comment("no longer a member of this world")
					return nil
				}
				_ = out.Retry(StreamRetry)
				return fmt.Errorf("refresh presence: %w", err)
			}
			nextRefresh = now.Add(s.so.Refresh)
		}
		// Events came: more are likely on their way (a burst, a
		// conversation), so the next read comes sooner. A read that
		// finds nothing goes back to the idle pace.
		wait := s.so.Poll
		if len(evs) > 0 {
			wait = s.so.FlowPoll
		}
		for _, t := range []time.Time{nextBeat, nextRefresh, end} {
			if !t.IsZero() {
				wait = min(wait, max(t.Sub(now), 0))
			}
		}
		select {
		case <-ctx.Done():
			return nil
		case <-c.After(wait):
		}
	}
}

// eventJSON is an event as GET …/events answers it.
func eventJSON(e world.Event) []byte {
	b, err := json.Marshal(eventOut{EventID: e.ID, Type: e.Type, WorldID: e.World, Data: e.Data, Visibility: string(e.Visibility), CreatedAt: timestamp(e.CreatedAt)})
	if err != nil {
		// Data is JSON the store kept; an event that cannot be written
		// still moves the reader on.
		return []byte(`{"eventId":"` + e.ID + `"}`)
	}
	return b
}
