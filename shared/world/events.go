package world

import (
	"context"
	"crypto/ed25519"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"sync"
	"time"

	"github.com/oklog/ulid/v2"

	"github.com/a2awire/a2awire/shared/apierror"
	"github.com/a2awire/a2awire/shared/store"
	"github.com/a2awire/a2awire/shared/store/guard"
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
// world: a ConditionCheck that its membership exists. A write that is only
// allowed to a member (an action, a message's sender and recipient, a
// webhook) carries it, so that it and a racing Leave (which ends the
// membership in its own transaction) are ordered by the store: the leave
// either comes first and the write fails its condition, or comes after and
// removes what the write left (a webhook item, with the member item). A
// route's earlier check is no guarantee.
//
// The item checked is the membership's entry in the agent's index of
// worlds (AWN#<awnId> JOINED#<world>), the member item's twin in the
// agent's own partition: a join writes both in one transaction, a leave,
// kick or ban deletes both in one, and the deleter deletes both in one
// Write. Checked there, a busy world's checks land on its members'
// partitions, one each, not all on WORLD#<world> (docs/scale.md). A
// membership older than the index has no entry: RestoreIndexEntry writes
// it, and the write is tried again.
func MemberCheck(world, awnID string) store.Action {
	return store.Check(joinedIndexKey(world, awnID), store.ItemExists())
}

// RestoreIndexEntry reports whether awnID's membership of world predates
// the agent's index of worlds and its entry, which MemberCheck requires,
// has now been written: a caller whose write failed MemberCheck writes
// again when it has. The entry is written only beside a check that the
// member item is the one read (its joinedAt), so a racing leave leaves no
// entry behind. Not a member (or not one any more), or the entry already
// there → false. Cost: 1 GetItem; 1 TransactWriteItems of 2 actions when
// it writes.
func RestoreIndexEntry(ctx context.Context, st store.Store, world, awnID string) bool {
	if !validMember(world, awnID) {
		return false
	}
	it, err := st.Get(ctx, MemberKey(world, awnID))
	if err != nil {
		return false
	}
	joined, err := it.Int(attrJoinedAt)
	pub := it.Bytes(attrPublicKey)
	if err != nil || len(pub) != ed25519.PublicKeySize {
		return false
	}
	_, err = st.Write(ctx,
		store.Check(MemberKey(world, awnID), store.Eq(attrJoinedAt, store.N(joined))),
		joinedIndexPut(world, ed25519.PublicKey(pub), time.Unix(0, joined)).When(store.ItemAbsent()))
	return err == nil
}

// SubmitAction validates action against the manifest's actions (when it
// lists any; unknown → Invalid naming the allowed ones), params nil or a
// JSON object ≤ 64 KiB, and appends an agents-visible action.submitted
// {actionId, awnId, action, params}; it returns actionId (a ULID).
// Unknown world → NotFound; awnID not a member when the event is written →
// NotJoined. Cost: 1 GetItem (the manifest) and 1 Commit (a
// TransactWriteItems of the MemberCheck of awnID (in its own partition), the
// event and the world's event head).
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
	p, _, err := s.prepare(ctx, world, awnID, action, params)
	if err != nil {
		return "", err
	}
	return s.commitAction(ctx, world, awnID, action, p, via)
}

// prepare validates an action (its name, its params, the world's list of
// actions) and returns its params ({} for none) and the world's manifest.
func (s *Service) prepare(ctx context.Context, world, awnID, action string, params json.RawMessage) (json.RawMessage, Manifest, error) {
	if !actionNameShape.Match(action) {
		return nil, Manifest{}, invalid("action must be 1–64 characters of a-z, 0-9, '.', '_' and '-', starting with a letter or digit; got %s", apierror.Quote(action))
	}
	if !validMember(world, awnID) {
		return nil, Manifest{}, notJoined(world)
	}
	p, err := jsonObject("params", params, MaxParamsBytes)
	if err != nil {
		return nil, Manifest{}, err
	}
	if p == nil {
		p = json.RawMessage("{}")
	}
	m, err := s.GetWorld(ctx, world)
	if err != nil {
		return nil, Manifest{}, err
	}
	if len(m.Actions) > 0 {
		names := make([]string, len(m.Actions))
		ok := false
		for i, a := range m.Actions {
			names[i] = a.Name
			ok = ok || a.Name == action
		}
		if !ok {
			return nil, Manifest{}, invalid("action %s is not one of this world's actions: %s", apierror.Quote(action), strings.Join(names, ", "))
		}
	}
	return p, m, nil
}

// commitAction commits a prepared action's event beside its member's
// check.
func (s *Service) commitAction(ctx context.Context, world, awnID, action string, p json.RawMessage, via string) (string, error) {
	now := s.now().UTC()
	id := s.ids.New(now)
	ev, err := s.ids.NewEvent(world, ActionSubmitted, Agents, "", submittedData{ActionID: id, AWNID: awnID, Action: action, Params: p, Via: via}, now)
	if err != nil {
		return "", internal(err)
	}
	_, err = s.log.Commit(ctx, ev, MemberCheck(world, awnID))
	var cf *store.ConditionFailedError
	if errors.As(err, &cf) && cf.Action == 0 && RestoreIndexEntry(ctx, s.store, world, awnID) {
		_, err = s.log.Commit(ctx, ev, MemberCheck(world, awnID))
	}
	switch {
	case err == nil:
		return id, nil
	case errors.As(err, &cf) && cf.Action == 0:
		return "", notJoined(world)
	default:
		return "", apierror.FromStore("submit action", err)
	}
}

// Append writes one event (for other domains and the harness) through
// the log: 1 TransactWriteItems of the event and the head. An empty ID
// gets a fresh ULID and a zero CreatedAt the service's now. An explicit ID
// must be later than every event the world has (Conflict otherwise, as for
// an id already taken) and not from the future (beyond now + MaxClockSkew:
// Invalid), since the head would hold every later event back.
func (s *Service) Append(ctx context.Context, e Event) error {
	if e.CreatedAt.IsZero() {
		e.CreatedAt = s.now().UTC()
	}
	if e.ID != "" {
		id, err := ulid.ParseStrict(e.ID)
		if err != nil {
			return invalid("event id must be a ULID")
		}
		if ulid.Time(id.Time()).After(s.now().Add(MaxClockSkew)) {
			return invalid("event id %s is from the future", e.ID)
		}
		e.ID = id.String()
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
	e, err := s.log.commit(ctx, e, e.ID != "", nil)
	if errors.Is(err, store.ErrConditionFailed) {
		return apierror.New(apierror.Conflict, "event %s already exists or is not after the newest event of world %s", e.ID, e.World)
	}
	if err != nil {
		return apierror.FromStore("append event", err)
	}
	return nil
}

// pollArgs checks a poll's limit and cursor at now. A cursor is an id this
// world returned, so its time is at most the fastest writer's clock: one
// later than now + MaxClockSkew is from the future and refused before any
// store call (a cursor past the head is refused after reading it).
func pollArgs(limit int, after string, now time.Time) (int, string, error) {
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
		if ulid.Time(id.Time()).After(now.Add(MaxClockSkew)) {
			return 0, "", futureCursor(after)
		}
		after = id.String() // upper case, as ids are stored
	}
	return limit, after, nil
}

func futureCursor(after string) error {
	return invalid("after %s is later than the newest event of this world; pass an event id this world returned", apierror.Quote(after))
}

// Events returns up to limit (1..100, 0 = 50) events of world visible to
// awnID with ids after `after` ("" = from the oldest kept; otherwise an id
// this world returned, else Invalid), oldest first. A reader that passes
// the last id it got as the next `after` sees every event visible to it
// exactly once, in id order (see the package doc, "Event order").
//
// Cost: 1 GetItem (the head), then, when the head is past the cursor,
// 2 Queries, one of the world's shared partition and one of the member's
// private partition, each of at most limit items between the cursor and
// the head (in a world of K event shards, 2K side by side, one per shard
// of each, each of at most shardPage items).
func (s *Service) Events(ctx context.Context, world, awnID, after string, limit int) ([]Event, error) {
	limit, after, err := pollArgs(limit, after, s.now())
	if err != nil {
		return nil, err
	}
	m, err := s.readMember(ctx, world, awnID)
	if errors.Is(err, store.ErrNotFound) {
		return nil, notJoined(world)
	}
	if err != nil {
		return nil, apierror.FromStore("read member", err)
	}
	p, err := s.events(ctx, world, m, after, limit)
	return p.Events, err
}

// PublicEvents is the world's public feed, readable without joining: up
// to limit public events after `after`, oldest first, in the order and
// with the cursor rules of Events. Unknown world → NotFound. Cost: 1
// GetItem (the manifest), 1 GetItem (the head), then 1 Query of the shared
// partition.
func (s *Service) PublicEvents(ctx context.Context, world, after string, limit int) (EventPage, error) {
	limit, after, err := pollArgs(limit, after, s.now())
	if err != nil {
		return EventPage{}, err
	}
	if _, err := s.GetWorld(ctx, world); err != nil {
		return EventPage{}, err
	}
	return s.events(ctx, world, Member{World: world}, after, limit)
}

// seesEvent reports whether reader may see e: a member sees public events
// of any age, agents events from its join onward, and private events
// addressed to it; the public feed (no AWNID) sees public events only.
// "From its join onward" is measured on the event's createdAt against
// joinedAt less MaxClockSkew: an event committed after the join by a
// writer whose clock lags is still seen, at the price of seeing agents
// events of up to that skew before the join.
func seesEvent(reader Member, e Event) bool {
	switch e.Visibility {
	case Public:
		return true
	case Agents:
		return reader.AWNID != "" && !e.CreatedAt.Before(reader.JoinedAt.Add(-MaxClockSkew))
	}
	return reader.AWNID != "" && e.Recipient == reader.AWNID
}

// EventPage is one answer of a poll: the events, and the cursor to poll
// after next — the last event's id, or further when events the reader may
// not see were passed over (never past an event it may see).
type EventPage struct {
	Events []Event
	Cursor string
}

func (s *Service) events(ctx context.Context, world string, reader Member, after string, limit int) (EventPage, error) {
	awnID := reader.AWNID
	if !worldIDShape.Match(world) || (awnID != "" && !ValidAWNID(awnID)) {
		return EventPage{}, notJoined(world)
	}
	head, err := s.log.Head(ctx, world)
	if err != nil {
		return EventPage{}, apierror.FromStore("read events", err)
	}
	p, _, err := s.eventsAt(ctx, world, awnID, after, limit, head, func() (Member, error) { return reader, nil })
	return p, err
}

// eventsAt is events with the head already read: the reader comes from
// member, which runs beside the Queries (a poll records itself there, so
// that a poll is two round trips: the head, then the record and the
// pages). It returns the page and the reader.
func (s *Service) eventsAt(ctx context.Context, world, awnID, after string, limit int, h Head, member func() (Member, error)) (EventPage, Member, error) {
	none := EventPage{Events: []Event{}, Cursor: after}
	head := h.Last
	if after > head {
		return EventPage{}, Member{}, futureCursor(after)
	}
	var reader Member
	var rerr error
	var rwg sync.WaitGroup
	rwg.Go(func() { reader, rerr = member() })
	now := s.now()
	lo := CursorFloor(now.Add(-EventTTL))
	if after != "" {
		if next := successor(ulid.MustParseStrict(after)); next > lo {
			lo = next
		}
	}
	if after == head || lo > head {
		rwg.Wait()
		if rerr != nil {
			return EventPage{}, Member{}, rerr
		}
		return none, reader, nil
	}
	// Every event with an id up to head has committed (commits are in id
	// order), so every partition is complete up to it: the shards the
	// head names of the shared events and of the reader's private ones.
	// A page cut short (limit, or the 1 MB cut) is complete only up to
	// its last id: the answer stops at the lowest such id, so an event of
	// another partition past it is read by the next poll, not passed.
	// The Queries run at once: a poll costs two round trips (the head,
	// then the pages), not three.
	shards := max(h.Shards, 1)
	pks := make([]string, 0, 2*shards)
	for n := range shards {
		pks = append(pks, EventShardPK(world, n))
		if awnID != "" { // the public feed has no private partition
			pks = append(pks, ShardPK(PrivateEventsPK(world, awnID), n))
		}
	}
	pages := make([]store.Page, len(pks))
	errs := make([]error, len(pks))
	// Each shard of either kind holds its share of its kind's events
	// (ids hash evenly), so each reads a shard's page.
	n := shardPage(limit, shards)
	var wg sync.WaitGroup
	for i, pk := range pks {
		wg.Go(func() {
			pages[i], errs[i] = s.store.Query(ctx, store.Query{PK: pk, SK: store.SKBetween(lo, head), Limit: n})
		})
	}
	wg.Wait()
	rwg.Wait()
	if rerr != nil {
		return EventPage{}, Member{}, rerr
	}
	bound := head
	evs := make([][]Event, len(pks))
	for i, page := range pages {
		if errs[i] != nil {
			return EventPage{}, Member{}, apierror.FromStore("read events", errs[i])
		}
		if n := len(page.Items); page.Cursor != "" && n > 0 {
			bound = min(bound, page.Items[n-1].Key().SK)
		}
		for _, it := range page.Items {
			e, err := DecodeEvent(it)
			if err != nil {
				return EventPage{}, Member{}, internal(err)
			}
			if now.Sub(e.CreatedAt) > EventTTL || !seesEvent(reader, e) {
				continue
			}
			evs[i] = append(evs[i], e)
		}
	}
	out := merge(evs, bound, limit)
	if len(out) == limit {
		return EventPage{Events: out, Cursor: out[limit-1].ID}, reader, nil
	}
	// Fewer than limit: everything up to bound was read and passed over
	// or returned, so the next poll may start there.
	return EventPage{Events: out, Cursor: bound}, reader, nil
}

// shardPage is how many events a poll of limit reads from each of shards
// partitions (of the shared events, and of the reader's private ones):
// limit when there is one; else twice an even share, at least 2. A
// shard's page cut short bounds the answer at its last id like any cut
// page (so every event is still read once, in order), and a poll of a
// busy world of 16 shards reads at most 16 × 14 events of each kind for
// 100, not 16 × 100.
func shardPage(limit, shards int) int {
	if shards <= 1 {
		return limit
	}
	return max(2, 2*((limit+shards-1)/shards))
}

// merge returns the limit smallest events of parts (each sorted by id, no
// id in two) with ids up to bound. A part is a page of one partition, at
// most 32 of them (16 shards of the shared events and 16 of the reader's
// private ones), so each step scans the parts' heads rather than keeping
// a heap.
func merge(parts [][]Event, bound string, limit int) []Event {
	total := 0
	for _, p := range parts {
		total += len(p)
	}
	out := make([]Event, 0, min(limit, total))
	for len(out) < limit {
		lo := -1
		for i, p := range parts {
			if len(p) > 0 && (lo < 0 || p[0].ID < parts[lo][0].ID) {
				lo = i
			}
		}
		if lo < 0 || parts[lo][0].ID > bound {
			break
		}
		out = append(out, parts[lo][0])
		parts[lo] = parts[lo][1:]
	}
	return out
}

// headAndMember reads world's event head, awnID's member item and its
// webhook item side by side: a poll's first round trip (NotJoined for a
// non-member). The member and webhook as read tell the poll's record
// whether it changes presence (markPolledRead), so that a poll that does
// is two round trips too — one after a silence not yet announced as well,
// whether or not a webhook kept the member online. The webhook's read
// costs every warm poll 1 read unit (docs/cost.md gives the choice).
func (s *Service) headAndMember(ctx context.Context, world, awnID string) (Head, polled, error) {
	var head Head
	var herr, werr error
	var hook store.Item
	var wg sync.WaitGroup
	wg.Go(func() { head, herr = s.log.Head(ctx, world) })
	wg.Go(func() {
		hook, werr = s.store.Get(ctx, WebhookKey(world, awnID))
		if errors.Is(werr, store.ErrNotFound) {
			hook, werr = nil, nil
		}
	})
	m, merr := s.readMember(ctx, world, awnID)
	wg.Wait()
	if herr != nil {
		return Head{}, polled{}, apierror.FromStore("read events", herr)
	}
	if errors.Is(merr, store.ErrNotFound) {
		return Head{}, polled{}, notJoined(world)
	}
	if merr != nil {
		return Head{}, polled{}, apierror.FromStore("read member", merr)
	}
	if werr != nil {
		return Head{}, polled{}, apierror.FromStore("read webhook", werr)
	}
	return head, polled{member: m, hook: hook, hookRead: true}, nil
}

// polled is what a poll's first round trip read of its member: the
// member item and, when hookRead, its webhook item (nil: none).
type polled struct {
	member   Member
	hook     store.Item
	hookRead bool
}

// WaitEvents is Events as a long poll: it records the poll (MarkPolled),
// then reads; while nothing is found it reads again every PollInterval
// until an event arrives, wait (≤ MaxWait, Invalid above) has passed, or
// ctx's deadline is within 1 s (so a Lambda returns before its timeout).
// It returns as soon as an event is found, so within about PollInterval
// of its commit. Waiting runs on the service's wait clock (WithWaitClock).
// Cost: 1 GetItem (the member, beside the first check) and 1 UpdateItem
// (or the presence.changed transaction when the poll brings the member
// online), then per check 1 GetItem (the head) and, only when the head has
// moved past the cursor, 2 Queries (2 per event shard in a world of
// several: the shared and the private shards; at most 1 + wait/PollInterval
// checks).
func (s *Service) WaitEvents(ctx context.Context, world, awnID, after string, limit int, wait time.Duration) ([]Event, error) {
	p, err := s.Poll(ctx, world, awnID, after, limit, wait)
	return p.Events, err
}

// Poll is WaitEvents answering the cursor to poll after next as well
// (EventPage), which moves past events the member may not see (agents
// events from before its join), so a reader is never stuck behind them.
func (s *Service) Poll(ctx context.Context, world, awnID, after string, limit int, wait time.Duration) (EventPage, error) {
	return s.PollAs(ctx, world, awnID, "", after, limit, wait)
}

// PollAs is Poll signed by keyID, the member's key. When the request's key
// lookup read keyID's member key item (an instance that had not seen the
// key) and read the event head ahead beside it (EventsReads), the guard is
// still pending when the pages are read: the poll's record, a steady poll's
// update, is then a write the guard rides in (markPolledKept), beside the
// pages, which do not wait for the guard (nothing of them is answered
// unless the record, and so the guard, held); when the member key item
// shows the member announced offline (a first poll, or one after an
// announced silence), the record is the announcement online instead
// (markPolledOffline). Two round trips either way, as on a warm instance.
// A poll the key item gets wrong (a silence not yet announced, a racing
// announcement) fails its condition and takes Poll's path. Without a
// member key read, the head and the member item are read side by side
// (headAndMember), and the record is the steady update or the
// announcement the member as read calls for: two round trips either way.
func (s *Service) PollAs(ctx context.Context, world, awnID, keyID, after string, limit int, wait time.Duration) (EventPage, error) {
	if wait < 0 || wait > MaxWait {
		return EventPage{}, invalid("wait must be between 0 and %d seconds, not %v", int(MaxWait/time.Second), wait)
	}
	limit, after, err := pollArgs(limit, after, s.now())
	if err != nil {
		return EventPage{}, err
	}
	end := s.wait.Now().Add(wait)
	if dl, ok := ctx.Deadline(); ok {
		if byDeadline := s.wait.Now().Add(time.Until(dl) - deadlineMargin); byDeadline.Before(end) {
			end = byDeadline
		}
	}
	if !validMember(world, awnID) {
		return EventPage{}, notJoined(world)
	}
	// Two round trips: the head, then the poll's record beside the
	// pages (the record gives the reader its visibility, applied once
	// the pages are in).
	var head Head
	var record func() (Member, error)
	pages := ctx
	if kept, ok := s.keptMember(ctx, world, awnID, keyID); ok && guard.Active(ctx) {
		if head, err = s.log.Head(ctx, world); err != nil {
			err = apierror.FromStore("read events", err)
		}
		record = func() (Member, error) { return s.markPolledKept(ctx, kept) }
		if keptPresence(ctx, world, keyID) == PresenceOffline {
			record = func() (Member, error) { return s.markPolledOffline(ctx, kept) }
		}
		pages = guard.Without(ctx)
	} else {
		var before polled
		head, before, err = s.headAndMember(ctx, world, awnID)
		record = func() (Member, error) { return s.markPolledRead(ctx, before) }
	}
	if err != nil {
		return EventPage{}, err
	}
	p, m, err := s.eventsAt(pages, world, awnID, after, limit, head, record)
	for {
		if err != nil || len(p.Events) > 0 {
			return p, err
		}
		after = p.Cursor
		left := end.Sub(s.wait.Now())
		if left <= 0 {
			return p, nil
		}
		select {
		case <-ctx.Done():
			return EventPage{}, apierror.FromStore("wait for events", fmt.Errorf("world %s: %w", world, ctx.Err()))
		case <-s.wait.After(min(left, PollInterval)):
		}
		p, err = s.events(ctx, world, m, after, limit)
	}
}
