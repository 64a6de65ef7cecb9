package world

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/oklog/ulid/v2"

	"github.com/a2awire/a2awire/shared/apierror"
	"github.com/a2awire/a2awire/shared/store"
)

// submittedData is the payload of action.submitted.
type submittedData struct {
	ActionID string          `json:"actionId"`
	AWNID    string          `json:"awnId"`
	Action   string          `json:"action"`
	Params   json.RawMessage `json:"params"`
	// Via is ViaWebhook for an action a webhook receiver answered with;
	// absent for one an agent submitted itself.
	Via string `json:"via,omitempty"`
}

// ViaWebhook is the "via" of an action.submitted whose action a webhook
// receiver answered a delivery with (ForwardAction).
const ViaWebhook = "webhook"

// Forwarded reports whether e is the action.submitted of an action a
// webhook receiver answered with. The dispatcher never forwards an answer
// to such an event: two receivers that answer every event with an action
// would otherwise feed each other for ever, so a chain of forwarded actions
// is one hop long.
func Forwarded(e Event) bool {
	if e.Type != ActionSubmitted {
		return false
	}
	var d struct {
		Via string `json:"via"`
	}
	return json.Unmarshal(e.Data, &d) == nil && d.Via == ViaWebhook
}

// MemberCheck is the action that holds a Write to awnID being a member of
// world: a ConditionCheck that its member item exists. A write that is
// only allowed to a member (an action, a message's sender, a webhook)
// carries it, so that it and a racing Leave (which deletes the member item
// in its own transaction) are ordered by the store: the leave either comes
// first and the write fails its condition, or comes after and removes what
// the write left (a webhook item, with the member item). A route's earlier
// check is no guarantee.
func MemberCheck(world, awnID string) store.Action {
	return store.Check(MemberKey(world, awnID), store.ItemExists())
}

// SubmitAction validates action against the manifest's actions (when it
// lists any; unknown → Invalid naming the allowed ones), params nil or a
// JSON object ≤ 64 KiB, and appends an agents-visible action.submitted
// {actionId, awnId, action, params}; it returns actionId (a ULID).
// Unknown world → NotFound; awnID not a member when the event is written →
// NotJoined. Cost: 1 GetItem (the manifest) and 1 TransactWriteItems (the
// ConditionCheck of awnID's member item, the event's Put).
func (s *Service) SubmitAction(ctx context.Context, world, awnID, action string, params json.RawMessage) (string, error) {
	return s.submit(ctx, world, awnID, action, params, "")
}

// ForwardAction is SubmitAction for an action a webhook receiver answered
// a delivery with: its action.submitted carries "via": "webhook"
// (Forwarded), so no answer to it is forwarded again. Same checks, same
// cost.
func (s *Service) ForwardAction(ctx context.Context, world, awnID, action string, params json.RawMessage) (string, error) {
	return s.submit(ctx, world, awnID, action, params, ViaWebhook)
}

func (s *Service) submit(ctx context.Context, world, awnID, action string, params json.RawMessage, via string) (string, error) {
	if !actionNameShape.Match(action) {
		return "", invalid("action must be 1–64 characters of a-z, 0-9, '.', '_' and '-', starting with a letter or digit; got %s", apierror.Quote(action))
	}
	if !validMember(world, awnID) {
		return "", notJoined(world)
	}
	p, err := jsonObject("params", params, MaxParamsBytes)
	if err != nil {
		return "", err
	}
	if p == nil {
		p = json.RawMessage("{}")
	}
	m, err := s.GetWorld(ctx, world)
	if err != nil {
		return "", err
	}
	if len(m.Actions) > 0 {
		names := make([]string, len(m.Actions))
		ok := false
		for i, a := range m.Actions {
			names[i] = a.Name
			ok = ok || a.Name == action
		}
		if !ok {
			return "", invalid("action %s is not one of this world's actions: %s", apierror.Quote(action), strings.Join(names, ", "))
		}
	}
	now := s.now().UTC()
	id := s.ids.New(now)
	ev, err := s.ids.NewEvent(world, ActionSubmitted, Agents, "", submittedData{ActionID: id, AWNID: awnID, Action: action, Params: p, Via: via}, now)
	if err != nil {
		return "", internal(err)
	}
	_, err = s.store.Write(ctx, EventPut(ev), MemberCheck(world, awnID))
	var cf *store.ConditionFailedError
	switch {
	case err == nil:
		return id, nil
	case errors.As(err, &cf) && cf.Action == 1:
		return "", notJoined(world)
	default:
		return "", apierror.FromStore("submit action", err)
	}
}

// Append writes one event (for other domains and the harness): 1 PutItem.
// An empty ID gets a fresh ULID and a zero CreatedAt the service's now.
func (s *Service) Append(ctx context.Context, e Event) error {
	if e.CreatedAt.IsZero() {
		e.CreatedAt = s.now().UTC()
	}
	if e.ID == "" {
		e.ID = s.ids.New(e.CreatedAt)
	}
	if _, err := ulid.ParseStrict(e.ID); err != nil {
		return invalid("event id must be a ULID")
	}
	if !worldIDShape.Match(e.World) || e.Type == "" {
		return invalid("an event needs a world and a type")
	}
	if len(e.Data) == 0 || !json.Valid(e.Data) || strings.TrimSpace(string(e.Data))[0] != '{' {
		return invalid("event data must be a JSON object")
	}
	switch e.Visibility {
	case Public, Agents:
		e.Recipient = ""
	case Private:
		if e.Recipient == "" {
			return invalid("a private event needs a recipient")
		}
	default:
		return invalid("event visibility must be public, agents or private, not %s", apierror.Quote(string(e.Visibility)))
	}
	if _, err := s.store.Write(ctx, EventPut(e)); err != nil {
		if errors.Is(err, store.ErrConditionFailed) {
			return apierror.New(apierror.Conflict, "event %s already exists", e.ID)
		}
		return apierror.FromStore("append event", err)
	}
	return nil
}

// eventRange is the sort-key condition of a poll after cursor at now:
// after the cursor, and never before the oldest event still kept, so
// expired events are not even read.
func eventRange(after string, now time.Time) store.SortCond {
	floor := CursorFloor(now.Add(-EventTTL))
	if after == "" || after < floor {
		return store.SKGE(floor)
	}
	return store.SKGT(after)
}

// Events returns up to limit (1..100, 0 = 50) events of world visible to
// awnID with ids after `after` ("" = from the oldest kept; otherwise a
// ULID, else Invalid), oldest first. Cost: 2 Queries, one of the world's
// shared partition and one of the member's private partition, each of at
// most limit items; the result is the limit smallest ids of the two pages
// (correct because both are sorted).
//
// Ids come from each writer's clock, so ids made by one process are in
// commit order, but an event written by another instance whose clock lags,
// or whose write took longer than a later one's, can commit with an id
// below a cursor a poller already passed; such a poller does not see it.
// The webhook dispatcher reads the change feed instead and is not affected.
func (s *Service) Events(ctx context.Context, world, awnID, after string, limit int) ([]Event, error) {
	limit, after, err := pollArgs(limit, after)
	if err != nil {
		return nil, err
	}
	return s.events(ctx, world, awnID, after, limit)
}

func pollArgs(limit int, after string) (int, string, error) {
	switch {
	case limit == 0:
		limit = DefaultEventLimit
	case limit < 0 || limit > MaxEventLimit:
		return 0, "", invalid("limit must be between 1 and %d, not %d", MaxEventLimit, limit)
	}
	if after != "" {
		id, err := ulid.ParseStrict(after)
		if err != nil {
			return 0, "", invalid("after must be an event id (a ULID) this world returned; got %s", apierror.Quote(after))
		}
		after = id.String() // upper case, as ids are stored
	}
	return limit, after, nil
}

func (s *Service) events(ctx context.Context, world, awnID, after string, limit int) ([]Event, error) {
	if !validMember(world, awnID) {
		return nil, notJoined(world)
	}
	now := s.now()
	sk := eventRange(after, now)
	var pages [2][]Event
	for i, pk := range []string{SharedEventsPK(world), PrivateEventsPK(world, awnID)} {
		page, err := s.store.Query(ctx, store.Query{PK: pk, SK: sk, Limit: limit})
		if err != nil {
			return nil, apierror.FromStore("read events", err)
		}
		for _, it := range page.Items {
			e, err := DecodeEvent(it)
			if err != nil {
				return nil, internal(err)
			}
			if now.Sub(e.CreatedAt) > EventTTL || !e.VisibleTo(awnID) {
				continue
			}
			pages[i] = append(pages[i], e)
		}
	}
	return merge(pages[0], pages[1], limit), nil
}

// merge returns the limit smallest events of a and b, both sorted by id.
func merge(a, b []Event, limit int) []Event {
	out := make([]Event, 0, min(limit, len(a)+len(b)))
	for len(out) < limit && (len(a) > 0 || len(b) > 0) {
		if len(b) == 0 || (len(a) > 0 && a[0].ID < b[0].ID) {
			out, a = append(out, a[0]), a[1:]
		} else {
			out, b = append(out, b[0]), b[1:]
		}
	}
	return out
}

// WaitEvents is Events as a long poll: it records the poll (MarkPolled),
// then queries; while nothing is found it queries again every PollInterval
// until an event arrives, wait (≤ MaxWait, Invalid above) has passed, or
// ctx's deadline is within 1 s (so a Lambda returns before its timeout).
// It returns as soon as an event is found, so within about PollInterval
// of its commit. Cost: 1 UpdateItem, then 2 Queries per check (at most
// 1 + wait/PollInterval checks).
func (s *Service) WaitEvents(ctx context.Context, world, awnID, after string, limit int, wait time.Duration) ([]Event, error) {
	if wait < 0 || wait > MaxWait {
		return nil, invalid("wait must be between 0 and %d seconds, not %v", int(MaxWait/time.Second), wait)
	}
	limit, after, err := pollArgs(limit, after)
	if err != nil {
		return nil, err
	}
	end := time.Now().Add(wait)
	if dl, ok := ctx.Deadline(); ok && dl.Add(-deadlineMargin).Before(end) {
		end = dl.Add(-deadlineMargin)
	}
	if err := s.MarkPolled(ctx, world, awnID); err != nil {
		return nil, err
	}
	timer := time.NewTimer(0)
	<-timer.C
	defer timer.Stop()
	for {
		evs, err := s.events(ctx, world, awnID, after, limit)
		if err != nil || len(evs) > 0 {
			return evs, err
		}
		left := time.Until(end)
		if left <= 0 {
			return evs, nil
		}
		timer.Reset(min(left, PollInterval))
		select {
		case <-ctx.Done():
			return nil, apierror.FromStore("wait for events", fmt.Errorf("world %s: %w", world, ctx.Err()))
		case <-timer.C:
		}
	}
}
