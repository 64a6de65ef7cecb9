package worldhttp

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"time"

	"github.com/a2awire/a2awire/shared/access"
	"github.com/a2awire/a2awire/shared/apierror"
	"github.com/a2awire/a2awire/shared/lambdahttp"
	"github.com/a2awire/a2awire/shared/world"
)

// Leaver ends a membership (world.Service.Leave).
type Leaver interface {
	Leave(ctx context.Context, world, awnID string) error
}

// MemberLister lists a world's members by slot (world.Service.Members).
type MemberLister interface {
	Members(ctx context.Context, world string) ([]world.Member, error)
}

// Sender stores a direct message for a member (inbox.Inbox.Send).
type Sender interface {
	Send(ctx context.Context, world, from, to string, content json.RawMessage, contentType string) (Message, error)
}

// Reader reads, and unless peeking consumes, a member's inbox
// (inbox.Inbox.Read).
type Reader interface {
	Read(ctx context.Context, world, awnID string, o ReadOptions) ([]Message, error)
}

// Pinger says whether a member of the world is reachable; a target that
// is no member is NotFound (world.Service.Reachable).
type Pinger interface {
	Reachable(ctx context.Context, world, target string) (bool, error)
}

// Prober probes a member live through its webhook: a signed ping event,
// reachable on a 2xx within 2 s, with the round trip measured
// (webhook.Dispatcher.Probe). A member without an enabled webhook is not
// reachable this way (false, no error).
type Prober interface {
	Probe(ctx context.Context, world, target string) (bool, time.Duration, error)
}

// ActionSubmitter records a member's action and returns its id
// (world.Service.SubmitAction).
type ActionSubmitter interface {
	SubmitAction(ctx context.Context, world, awnID, action string, params json.RawMessage) (string, error)
}

// EventWaiter long-polls the events visible to a member after a cursor
// (world.Service.WaitEvents).
type EventWaiter interface {
	WaitEvents(ctx context.Context, world, awnID, after string, limit int, wait time.Duration) ([]world.Event, error)
}

// needMembers is the start-up check of a member route.
func needMembers(o Options) error {
	if o.Members == nil {
		return fmt.Errorf("worldhttp: %s: no member key lookup", o.Function)
	}
	return nil
}

// NewLeave serves POST /v0/worlds/{world}/leave: {left: true}. The body is
// empty or {}.
func NewLeave(o Options, leaver Leaver) (http.Handler, error) {
	if leaver == nil {
		return nil, errors.New("worldhttp: no world service")
	}
	if err := needMembers(o); err != nil {
		return nil, err
	}
	return serve(o, nil, func(w http.ResponseWriter, r *http.Request) error {
		world, awnID, err := caller(r)
		if err != nil {
			return err
		}
		if err := emptyBody(r); err != nil {
			return err
		}
		if err := leaver.Leave(r.Context(), world, awnID); err != nil {
			return fmt.Errorf("worldhttp: leave: %w", err)
		}
		return reply(w, http.StatusOK, map[string]bool{"left": true})
	}, nil)
}

// agentOut is one member as the agents list shows it.
type agentOut struct {
	AWNID     string          `json:"awnId"`
	SubjectID *string         `json:"subjectId"`
	Slot      int64           `json:"slot"`
	JoinedAt  string          `json:"joinedAt"`
	Presence  string          `json:"presence"`
	Metadata  json.RawMessage `json:"metadata"`
}

// Presence is the rule deciding a member's presence at now ("online" or
// "offline"): world.Presence.
type Presence func(m world.Member, now time.Time) string

// NewAgents serves GET /v0/worlds/{world}/agents (rate limit "agents"):
// {agents: [{awnId, subjectId, slot, joinedAt, presence, metadata}], count}.
func NewAgents(o Options, lister MemberLister, presence Presence) (http.Handler, error) {
	if lister == nil || presence == nil {
		return nil, errors.New("worldhttp: no world service or presence rule")
	}
	if err := errors.Join(needMembers(o), needLimiter(o)); err != nil {
		return nil, err
	}
	return serve(o, nil, limited(o, OpAgents, func(w http.ResponseWriter, r *http.Request, world, _ string) error {
		members, err := lister.Members(r.Context(), world)
		if err != nil {
			return fmt.Errorf("worldhttp: list agents: %w", err)
		}
		now := o.now()
		out := make([]agentOut, 0, len(members))
		for _, m := range members {
			a := agentOut{AWNID: m.AWNID, Slot: m.Slot, JoinedAt: timestamp(m.JoinedAt), Presence: presence(m, now), Metadata: object(m.Metadata)}
			if m.SubjectID != "" {
				s := m.SubjectID
				a.SubjectID = &s
			}
			out = append(out, a)
		}
		return reply(w, http.StatusOK, map[string]any{"agents": out, "count": len(out)})
	}), nil)
}

// messageOut is a direct message as clients see it.
type messageOut struct {
	MessageID   string          `json:"messageId"`
	From        string          `json:"from"`
	To          string          `json:"to"`
	Content     json.RawMessage `json:"content"`
	ContentType string          `json:"contentType"`
	SentAt      string          `json:"sentAt"`
}

func messageJSON(m Message) messageOut {
	return messageOut{MessageID: m.ID, From: m.From, To: m.To, Content: m.Content, ContentType: m.ContentType, SentAt: timestamp(m.SentAt)}
}

// sendBody is the body of POST /v0/worlds/{world}/messages.
type sendBody struct {
	To          string          `json:"to"`
	Content     json.RawMessage `json:"content"`
	ContentType string          `json:"contentType"`
}

// NewSend serves POST /v0/worlds/{world}/messages (rate limit "send"):
// {to, content (any JSON), contentType?} → 201 the stored message. The
// values are the Sender's to validate (inbox.Inbox.Send).
func NewSend(o Options, sender Sender) (http.Handler, error) {
	if sender == nil {
		return nil, errors.New("worldhttp: no inbox")
	}
	if err := errors.Join(needMembers(o), needLimiter(o)); err != nil {
		return nil, err
	}
	return serve(o, nil, limited(o, OpSend, func(w http.ResponseWriter, r *http.Request, world, awnID string) error {
		var in sendBody
		if err := access.Decode(r, &in); err != nil {
			return err
		}
		// The inbox checks to, content and contentType: what they mean is
		// the domain's to say, once.
		m, err := sender.Send(r.Context(), world, awnID, in.To, in.Content, in.ContentType)
		if err != nil {
			return fmt.Errorf("worldhttp: send: %w", err)
		}
		return reply(w, http.StatusCreated, messageJSON(m))
	}), nil)
}

// NewMessages serves GET /v0/worlds/{world}/messages?peek=&since=&limit=
// (rate limit "read"): {messages, count}, oldest first, consumed unless
// peek=true.
func NewMessages(o Options, reader Reader) (http.Handler, error) {
	if reader == nil {
		return nil, errors.New("worldhttp: no inbox")
	}
	if err := errors.Join(needMembers(o), needLimiter(o)); err != nil {
		return nil, err
	}
	return serve(o, nil, limited(o, OpRead, func(w http.ResponseWriter, r *http.Request, world, awnID string) error {
		q := newQuery(r.URL.RawQuery)
		ro := ReadOptions{Peek: q.boolean("peek"), Since: q.time("since"), Limit: q.intIn("limit", 1, MaxLimit, DefaultLimit)}
		if q.err != nil {
			return q.err
		}
		ro.Size, ro.MaxBytes = messagesBudget(w.Header())
		msgs, err := reader.Read(r.Context(), world, awnID, ro)
		if err != nil {
			return fmt.Errorf("worldhttp: read messages: %w", err)
		}
		out := make([]messageOut, 0, len(msgs))
		for _, m := range msgs {
			out = append(out, messageJSON(m))
		}
		return reply(w, http.StatusOK, map[string]any{"messages": out, "count": len(out)})
	}), nil)
}

// messagesBudget measures a read's messages as the answer of NewMessages
// carries them through Lambda — each message's JSON escaped inside the
// proxy response's body string, and a comma — and returns the bytes they
// may take: lambdahttp.MaxResponse less the envelope, the headers set so
// far and those reply adds, and the body around the messages (its count
// at its widest). The read consumes only what fits, so a consuming read
// never deletes messages its answer could not carry.
func messagesBudget(sent http.Header) (func(Message) int, int) {
	h := sent.Clone()
	h.Set("Content-Type", "application/json")
	h.Set("Cache-Control", "no-store")
	around, _ := json.Marshal(struct {
		OK   bool           `json:"ok"`
		Data map[string]any `json:"data"`
	}{true, map[string]any{"messages": []messageOut{}, "count": MaxLimit}})
	fixed := lambdahttp.EnvelopeSize(http.StatusOK, h) + lambdahttp.BodySize(append(around, '\n'))
	size := func(m Message) int {
		b, err := json.Marshal(messageJSON(m))
		if err != nil {
			return lambdahttp.MaxResponse // cannot be answered: takes the whole budget
		}
		return lambdahttp.EscapedLen(b) + len(",")
	}
	return size, lambdahttp.MaxResponse - fixed
}

// NewPing serves POST /v0/worlds/{world}/ping (rate limit "ping"):
// {target} → {target, reachable, latencyMs}. A target that is no member is
// 404 NOT_FOUND. A target whose webhook answers prober's live probe is
// reachable with latencyMs that round trip; otherwise it is reachable when
// it polled events within the last 30 s, with latencyMs null. A nil prober
// (a deployment without webhooks) leaves only the poll-based rule.
func NewPing(o Options, pinger Pinger, prober Prober) (http.Handler, error) {
	if pinger == nil {
		return nil, errors.New("worldhttp: no world service")
	}
	if err := errors.Join(needMembers(o), needLimiter(o)); err != nil {
		return nil, err
	}
	return serve(o, nil, limited(o, OpPing, func(w http.ResponseWriter, r *http.Request, world, _ string) error {
		var in struct {
			Target string `json:"target"`
		}
		if err := access.Decode(r, &in); err != nil {
			return err
		}
		if in.Target == "" {
			return apierror.New(apierror.Invalid, "target is required (an awnId)")
		}
		// Membership first: a non-member is 404 before any probe goes out.
		polled, err := pinger.Reachable(r.Context(), world, in.Target)
		if err != nil {
			return fmt.Errorf("worldhttp: ping: %w", err)
		}
		if prober != nil {
			live, latency, err := prober.Probe(r.Context(), world, in.Target)
			if err != nil {
				return fmt.Errorf("worldhttp: ping probe: %w", err)
			}
			if live {
				return reply(w, http.StatusOK, map[string]any{"target": in.Target, "reachable": true, "latencyMs": latency.Milliseconds()})
			}
		}
		return reply(w, http.StatusOK, map[string]any{"target": in.Target, "reachable": polled, "latencyMs": nil})
	}), nil)
}

// NewAct serves POST /v0/worlds/{world}/actions (rate limit "actions"):
// {action, params?} → 201 {actionId}.
func NewAct(o Options, submitter ActionSubmitter) (http.Handler, error) {
	if submitter == nil {
		return nil, errors.New("worldhttp: no world service")
	}
	if err := errors.Join(needMembers(o), needLimiter(o)); err != nil {
		return nil, err
	}
	return serve(o, nil, limited(o, OpActions, func(w http.ResponseWriter, r *http.Request, world, awnID string) error {
		var in struct {
			Action string          `json:"action"`
			Params json.RawMessage `json:"params"`
		}
		if err := access.Decode(r, &in); err != nil {
			return err
		}
		if in.Action == "" {
			return apierror.New(apierror.Invalid, "action is required")
		}
		// The world checks params (a JSON object or null, its size, its
		// numbers): once, in the domain.
		id, err := submitter.SubmitAction(r.Context(), world, awnID, in.Action, in.Params)
		if err != nil {
			return fmt.Errorf("worldhttp: submit action: %w", err)
		}
		return reply(w, http.StatusCreated, map[string]string{"actionId": id})
	}), nil)
}

// eventOut is an event as clients see it.
type eventOut struct {
	EventID    string          `json:"eventId"`
	Type       string          `json:"type"`
	WorldID    string          `json:"worldId"`
	Data       json.RawMessage `json:"data"`
	Visibility string          `json:"visibility"`
	CreatedAt  string          `json:"createdAt"`
}

// NewEvents serves GET /v0/worlds/{world}/events?after=&wait=&limit=:
// {events, count, cursor}, oldest first; wait (seconds, ≤ 20) long-polls;
// cursor is the last event's id, or after when none came.
func NewEvents(o Options, waiter EventWaiter) (http.Handler, error) {
	if waiter == nil {
		return nil, errors.New("worldhttp: no world service")
	}
	if err := needMembers(o); err != nil {
		return nil, err
	}
	return serve(o, nil, func(w http.ResponseWriter, r *http.Request) error {
		world, awnID, err := caller(r)
		if err != nil {
			return err
		}
		q := newQuery(r.URL.RawQuery)
		after, wait, limit := q.ulid("after"), q.intIn("wait", 0, MaxWait, 0), q.intIn("limit", 1, MaxLimit, DefaultLimit)
		if q.err != nil {
			return q.err
		}
		events, err := waiter.WaitEvents(r.Context(), world, awnID, after, limit, time.Duration(wait)*time.Second)
		if err != nil {
			return fmt.Errorf("worldhttp: events: %w", err)
		}
		out := make([]eventOut, 0, len(events))
		cursor := after
		for _, e := range events {
			out = append(out, eventOut{EventID: e.ID, Type: e.Type, WorldID: e.World, Data: e.Data, Visibility: string(e.Visibility), CreatedAt: timestamp(e.CreatedAt)})
			cursor = e.ID
		}
		return reply(w, http.StatusOK, map[string]any{"events": out, "count": len(out), "cursor": cursor})
	}, nil)
}
