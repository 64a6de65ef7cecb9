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
	"github.com/a2awire/a2awire/shared/lambdahttp"
	"github.com/a2awire/a2awire/shared/store/guard"
	"github.com/a2awire/a2awire/shared/world"
)

// Leaver ends the membership of the key that signed
// (world.Service.LeaveAs).
type Leaver interface {
	LeaveAs(ctx context.Context, world, awnID, keyID string) error
}

// MemberLister lists a page of a world's members, by awnId, with their
// presence (world.Service.MembersPage).
type MemberLister interface {
	MembersPage(ctx context.Context, world string, o world.PageOptions) (world.MemberPage, error)
}

// Sender stores, or in a world that batches its messages queues, a direct
// message for a member (inbox.Inbox.Submit).
type Sender interface {
	Submit(ctx context.Context, world, from, to string, content json.RawMessage, contentType string) (Sent, error)
}

// Reader reads, and unless peeking consumes, a member's inbox
// (inbox.Inbox.Read).
type Reader interface {
	Read(ctx context.Context, world, awnID string, o ReadOptions) ([]Message, error)
}

// Pinger pings a member of the world by the presence rule, through the
// live probe when one is given (world.Service.Ping); a target that is no
// member is NotFound.
type Pinger interface {
	Ping(ctx context.Context, world, target string, probe world.Probe) (bool, time.Duration, bool, error)
}

// Prober probes a member live through its webhook: a signed ping event,
// reachable on a 2xx within 2 s, with the round trip measured
// (webhook.Dispatcher.Probe). A member without an enabled webhook is not
// reachable this way (false, no error).
type Prober interface {
	Probe(ctx context.Context, world, target string) (bool, time.Duration, error)
}

// ActionSubmitter records a member's action, or queues it in a world that
// batches its actions, and returns its id (world.Service.Act).
type ActionSubmitter interface {
	Act(ctx context.Context, world, awnID, action string, params json.RawMessage) (world.Submitted, error)
}

// EventWaiter long-polls the events visible to a member after a cursor
// (world.Service.PollAs, signed by keyID), and reads a world's public feed without
// membership (world.Service.PublicEvents).
type EventWaiter interface {
	PollAs(ctx context.Context, world, awnID, keyID, after string, limit int, wait time.Duration) (world.EventPage, error)
	PublicEvents(ctx context.Context, world, after string, limit int) (world.EventPage, error)
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
		id, _ := access.IdentityFrom(r.Context())
		if err := leaver.LeaveAs(r.Context(), world, awnID, id.KeyID); err != nil {
			return fmt.Errorf("worldhttp: leave: %w", err)
		}
		return reply(w, http.StatusOK, map[string]bool{"left": true})
	}, nil, readAhead(func(r *http.Request) []guard.Read { return world.LeaveReads(access.Param(r, "world")) }))
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

// NewAgents serves GET /v0/worlds/{world}/agents?limit=&cursor= (rate
// limit "agents"): {agents: [{awnId, subjectId, slot, joinedAt, presence,
// metadata}], count, cursor}, by awnId; cursor is null on the last page. A
// page ends before the member that would take the answer past what Lambda
// can return (agentsBudget).
func NewAgents(o Options, lister MemberLister) (http.Handler, error) {
	if lister == nil {
		return nil, errors.New("worldhttp: no world service")
	}
	if err := errors.Join(needMembers(o), needLimiter(o)); err != nil {
		return nil, err
	}
	return serve(o, nil, limited(o, OpAgents, func(w http.ResponseWriter, r *http.Request, world, _ string) error {
		q := newQuery(r.URL.RawQuery)
		limit := q.intIn("limit", 1, MaxLimit, DefaultLimit)
		cursor, _ := q.get("cursor")
		if q.err != nil {
			return q.err
		}
		page, err := agentsPage(r.Context(), lister, w.Header(), world, limit, cursor, 0)
		if err != nil {
			return err
		}
		return reply(w, http.StatusOK, page)
	}), nil)
}

// agentsOut is a page of the agents list as clients see it.
type agentsOut struct {
	Agents []agentOut `json:"agents"`
	Count  int        `json:"count"`
	Cursor *string    `json:"cursor"`
}

func agentJSON(m world.MemberRow) agentOut {
	return agentOut{AWNID: m.AWNID, SubjectID: subject(m.SubjectID), Slot: m.Slot, JoinedAt: timestamp(m.JoinedAt), Presence: m.Presence, Metadata: object(m.Metadata)}
}

// agentsPage reads a page of world's agents within the budget of an answer
// whose headers are sent and whose body holds reserve bytes besides the
// page (the join's own fields).
func agentsPage(ctx context.Context, lister MemberLister, sent http.Header, worldID string, limit int, cursor string, reserve int) (agentsOut, error) {
	size, budget := agentsBudget(sent)
	page, err := lister.MembersPage(ctx, worldID, world.PageOptions{Limit: limit, Cursor: cursor, Size: size, MaxBytes: budget - reserve})
	if err != nil {
		return agentsOut{}, fmt.Errorf("worldhttp: list agents: %w", err)
	}
	out := agentsOut{Agents: make([]agentOut, 0, len(page.Members)), Cursor: nullable(page.Cursor)}
	for _, m := range page.Members {
		out.Agents = append(out.Agents, agentJSON(m))
	}
	out.Count = len(out.Agents)
	return out, nil
}

// agentsBudget measures a member as the agents list carries it through
// Lambda — its JSON escaped inside the proxy response's body string, and a
// comma — and returns the bytes the members may take: lambdahttp.MaxResponse
// less the envelope, the headers (those set so far and reply's), and the
// body around the members (count and cursor at their widest).
func agentsBudget(sent http.Header) (func(world.MemberRow) int, int) {
	h := sent.Clone()
	h.Set("Content-Type", "application/json")
	h.Set("Cache-Control", "no-store")
	widest := "aw:sha256:" + strings.Repeat("f", 64)
	around, _ := json.Marshal(struct {
		OK   bool      `json:"ok"`
		Data agentsOut `json:"data"`
	}{true, agentsOut{Agents: []agentOut{}, Count: MaxLimit, Cursor: &widest}})
	fixed := lambdahttp.EnvelopeSize(http.StatusOK, h) + lambdahttp.BodySize(append(around, '\n'))
	size := func(m world.MemberRow) int {
		b, err := json.Marshal(agentJSON(m))
		if err != nil {
			return lambdahttp.MaxResponse
		}
		return lambdahttp.EscapedLen(b) + len(",")
	}
	return size, lambdahttp.MaxResponse - fixed
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
// {to, content (any JSON), contentType?} → 201 the stored message, or 202
// the message and queued: true in a world that batches its messages (it
// reaches the inbox within about a second, world-commit). The values are
// the Sender's to validate (inbox.Inbox.Submit).
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
		m, err := sender.Submit(r.Context(), world, awnID, in.To, in.Content, in.ContentType)
		if err != nil {
			return fmt.Errorf("worldhttp: send: %w", err)
		}
		if m.Queued {
			return reply(w, http.StatusAccepted, messageQueued{messageJSON(m.Message), true})
		}
		return reply(w, http.StatusCreated, messageJSON(m.Message))
	}), nil)
}

// messageQueued answers a message queued in a world that batches them.
type messageQueued struct {
	messageOut
	Queued bool `json:"queued"`
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
// 404 NOT_FOUND; one whose registration is offline is unreachable without a
// probe. A target whose webhook answers prober's live probe is reachable
// with latencyMs that round trip (the answer counts toward its presence);
// otherwise it is reachable when it polled events within the last 30 s or
// holds an event stream open, with latencyMs null. A nil prober (a
// deployment without webhooks) leaves only the poll-based rule.
func NewPing(o Options, pinger Pinger, prober Prober) (http.Handler, error) {
	if pinger == nil {
		return nil, errors.New("worldhttp: no world service")
	}
	if err := errors.Join(needMembers(o), needLimiter(o)); err != nil {
		return nil, err
	}
	var probe world.Probe
	if prober != nil {
		probe = prober.Probe
	}
	return serve(o, nil, limited(o, OpPing, func(w http.ResponseWriter, r *http.Request, worldID, _ string) error {
		var in struct {
			Target string `json:"target"`
		}
		if err := access.Decode(r, &in); err != nil {
			return err
		}
		if in.Target == "" {
			return apierror.New(apierror.Invalid, "target is required (an awnId)")
		}
		ok, latency, live, err := pinger.Ping(r.Context(), worldID, in.Target, probe)
		if err != nil {
			return fmt.Errorf("worldhttp: ping: %w", err)
		}
		if live {
			return reply(w, http.StatusOK, map[string]any{"target": in.Target, "reachable": true, "latencyMs": latency.Milliseconds()})
		}
		return reply(w, http.StatusOK, map[string]any{"target": in.Target, "reachable": ok, "latencyMs": nil})
	}), nil, readAhead(func(r *http.Request) []guard.Read {
		// A hint only: the handler decodes the body strictly.
		var in struct {
			Target string `json:"target"`
		}
		_ = json.Unmarshal(access.Body(r), &in)
		return world.PingReads(access.Param(r, "world"), in.Target)
	}))
}

// NewAct serves POST /v0/worlds/{world}/actions (rate limit "actions"):
// {action, params?} → 201 {actionId}, or 202 {actionId, queued: true} in a
// world that batches its actions (the event commits within about a
// second, world-commit).
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
		sub, err := submitter.Act(r.Context(), world, awnID, in.Action, in.Params)
		if err != nil {
			return fmt.Errorf("worldhttp: submit action: %w", err)
		}
		if sub.Queued {
			return reply(w, http.StatusAccepted, actionQueued{ActionID: sub.ActionID, Queued: true})
		}
		return reply(w, http.StatusCreated, map[string]string{"actionId": sub.ActionID})
	}), nil, readAhead(func(r *http.Request) []guard.Read { return world.ActionReads(access.Param(r, "world")) }))
}

// actionQueued answers an action queued in a world that batches them.
type actionQueued struct {
	ActionID string `json:"actionId"`
	Queued   bool   `json:"queued"`
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

// NewEvents serves GET /v0/worlds/{world}/events?after=&wait=&limit=
// (member): {events, count, cursor}, oldest first; wait (seconds, ≤ 20)
// long-polls; cursor is where the next poll starts (past the last event,
// and past events the caller may not see). With visibility=public it is
// the world's public feed, which needs no signature: public events only,
// no long poll. A page ends before the event that would take the answer
// past what Lambda can return; its cursor then continues from there.
func NewEvents(o Options, waiter EventWaiter) (http.Handler, error) {
	if waiter == nil {
		return nil, errors.New("worldhttp: no world service")
	}
	if err := needMembers(o); err != nil {
		return nil, err
	}
	public := func(r *http.Request) bool {
		v, ok := newQuery(r.URL.RawQuery).get("visibility")
		return ok && v == string(world.Public)
	}
	return serve(o, nil, func(w http.ResponseWriter, r *http.Request) error {
		q := newQuery(r.URL.RawQuery)
		after, wait, limit := q.ulid("after"), q.intIn("wait", 0, MaxWait, 0), q.intIn("limit", 1, MaxLimit, DefaultLimit)
		vis, hasVis := q.get("visibility")
		if q.err != nil {
			return q.err
		}
		if hasVis && vis != string(world.Public) {
			return apierror.New(apierror.Invalid, "query parameter visibility must be public (members see every event visible to them without it)")
		}
		worldID := access.Param(r, "world")
		var page world.EventPage
		var err error
		if id, ok := access.IdentityFrom(r.Context()); ok && !hasVis {
			page, err = waiter.PollAs(r.Context(), worldID, id.AWNID, id.KeyID, after, limit, time.Duration(wait)*time.Second)
		} else {
			if wait != 0 {
				return apierror.New(apierror.Invalid, "the public feed does not long-poll; leave wait out")
			}
			page, err = waiter.PublicEvents(r.Context(), worldID, after, limit)
		}
		if err != nil {
			return fmt.Errorf("worldhttp: events: %w", err)
		}
		size, budget := eventsBudget(w.Header())
		out := make([]eventOut, 0, len(page.Events))
		used := 0
		for _, e := range page.Events {
			ev := eventOut{EventID: e.ID, Type: e.Type, WorldID: e.World, Data: e.Data, Visibility: string(e.Visibility), CreatedAt: timestamp(e.CreatedAt)}
			n := size(ev)
			if used+n > budget && len(out) > 0 {
				page.Cursor = out[len(out)-1].EventID // the rest comes next
				break
			}
			used += n
			out = append(out, ev)
		}
		return reply(w, http.StatusOK, map[string]any{"events": out, "count": len(out), "cursor": page.Cursor})
	}, nil, func(rt *access.Route) { rt.Anonymous = public },
		readAhead(func(r *http.Request) []guard.Read { return world.EventsReads(access.Param(r, "world")) }))
}

// eventsBudget is agentsBudget for the events answer: 100 events of up to
// 64 KiB of params each could pass 6 MB once escaped.
func eventsBudget(sent http.Header) (func(eventOut) int, int) {
	h := sent.Clone()
	h.Set("Content-Type", "application/json")
	h.Set("Cache-Control", "no-store")
	around, _ := json.Marshal(struct {
		OK   bool           `json:"ok"`
		Data map[string]any `json:"data"`
	}{true, map[string]any{"events": []eventOut{}, "count": MaxLimit, "cursor": strings.Repeat("Z", 26)}})
	fixed := lambdahttp.EnvelopeSize(http.StatusOK, h) + lambdahttp.BodySize(append(around, '\n'))
	return func(e eventOut) int {
		b, err := json.Marshal(e)
		if err != nil {
			return lambdahttp.MaxResponse
		}
		return lambdahttp.EscapedLen(b) + len(",")
	}, lambdahttp.MaxResponse - fixed
}
