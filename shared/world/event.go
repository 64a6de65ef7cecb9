package world

import (
	"crypto/rand"
	"encoding/json"
	"fmt"
	"sync"
	"time"

	"github.com/oklog/ulid/v2"

	"github.com/a2awire/a2awire/shared/store"
)

// Visibility says who may see an event.
type Visibility string

// Visibilities. Members see public and agents events; a private event is
// seen by its recipient only.
const (
	Public  Visibility = "public"
	Agents  Visibility = "agents"
	Private Visibility = "private"
)

// Event types; webhooks also get PingProbe.
const (
	AgentJoined     = "agent.joined"
	AgentLeft       = "agent.left"
	MessageReceived = "message.received"
	ActionSubmitted = "action.submitted"
	PresenceChanged = "presence.changed"
	PingProbe       = "ping"
)

// EventTTL is how long events are kept; polls and webhooks never see older
// ones (expiresAt lets the sweeper, DynamoDB's TTL in AWS, delete them).
const EventTTL = 7 * 24 * time.Hour

// Event is one entry of a world's event log.
type Event struct {
	// ID is a ULID: sortable by time, unique, and the cursor of a poll.
	ID    string
	Type  string
	World string
	// Data is the event's JSON payload (an object).
	Data       json.RawMessage
	Visibility Visibility
	// Recipient is the awnId a private event is for; "" otherwise.
	Recipient string
	CreatedAt time.Time
	// Attach is an item the log writes with the event, in the same Write
	// (a direct message beside its message.received); nil for none.
	Attach *Attachment `json:"-"`
}

// Attachment is an item committed beside a private event, in a partition
// of the event's recipient: PK is its shard 0 (InboxPK), and the log puts
// the item in the shard (ShardPK) the event's id picks among the count its
// Write was made under, as it places the event itself, so the item is
// always in a shard a reader of the world's head queries. Its sort key is
// the caller's, and new: the Put has no condition.
type Attachment struct {
	PK, SK string
	Item   store.Item
}

// AttachmentKey is where the log writes e's attachment in a world of
// shards partitions.
func AttachmentKey(e Event, shards int) store.Key {
	return store.Key{PK: ShardPK(e.Attach.PK, eventShard(e.ID, shards)), SK: e.Attach.SK}
}

// Attributes of event items.
const (
	attrEventID    = "eventId"
	attrEventType  = "eventType"
	attrWorld      = "world"
	attrData       = "data"
	attrVisibility = "visibility"
	attrRecipient  = "recipient"
	attrCreatedAt  = "createdAt"
)

// EventKey is where e is stored in a world whose shared events are in one
// partition (EventKeyIn with 1 shard).
func EventKey(e Event) store.Key { return EventKeyIn(e, 1) }

// EventKeyIn is where e is stored in a world whose events are written
// across shards partitions: the shard its id hashes to, among the shared
// events' (EventShardPK) or, for a private event, among its recipient's
// (ShardPK of PrivateEventsPK), so that one recipient's flood of messages
// spreads as the world's events do. Shard 0 is the unsharded partition in
// both, so nothing written before a world was sharded moves.
func EventKeyIn(e Event, shards int) store.Key {
	if e.Visibility == Private {
		return store.Key{PK: ShardPK(PrivateEventsPK(e.World, e.Recipient), eventShard(e.ID, shards)), SK: e.ID}
	}
	return store.Key{PK: EventShardPK(e.World, eventShard(e.ID, shards)), SK: e.ID}
}

// eventShard is the shard of the event id among shards: ids are ULIDs,
// whose last 80 bits are random, so hashing them spreads a world's events
// evenly, and any reader can tell a shard from the id alone.
func eventShard(id string, shards int) int {
	if shards <= 1 {
		return 0
	}
	return int(fnv32(id) % uint32(shards))
}

// EventPut is the action writing e in a world of one shard (EventPutIn).
func EventPut(e Event) store.Action { return EventPutIn(e, 1) }

// EventPutIn is the action writing e, conditioned on its id being new, in
// a world whose shared events are written across shards partitions. The
// log writes every event (Log.Commit); tests and benches put events of
// their own with it.
func EventPutIn(e Event, shards int) store.Action {
	it := store.Item{
		AttrType:            store.S(TypeEvent),
		attrEventID:         store.S(e.ID),
		attrEventType:       store.S(e.Type),
		attrWorld:           store.S(e.World),
		attrData:            store.S(string(e.Data)),
		attrVisibility:      store.S(string(e.Visibility)),
		attrCreatedAt:       store.N(e.CreatedAt.UnixNano()),
		store.AttrExpiresAt: store.ExpiresAt(e.CreatedAt.Add(EventTTL)),
	}
	if e.Recipient != "" {
		it[attrRecipient] = store.S(e.Recipient)
	}
	return store.Put(EventKeyIn(e, shards), it).When(store.ItemAbsent())
}

// IsEvent reports whether it is an event item (e.g. a change record's
// NewImage, converted with store.FromStreamImage).
func IsEvent(it store.Item) bool { return it.Str(AttrType) == TypeEvent }

// DecodeEvent reads an event item.
func DecodeEvent(it store.Item) (Event, error) {
	if !IsEvent(it) {
		return Event{}, fmt.Errorf("world: item %s is not an event", it.Key())
	}
	ns, err := it.Int(attrCreatedAt)
	if err != nil {
		return Event{}, fmt.Errorf("world: event %s: %w", it.Key(), err)
	}
	e := Event{
		ID:         it.Str(attrEventID),
		Type:       it.Str(attrEventType),
		World:      it.Str(attrWorld),
		Data:       json.RawMessage(it.Str(attrData)),
		Visibility: Visibility(it.Str(attrVisibility)),
		Recipient:  it.Str(attrRecipient),
		CreatedAt:  time.Unix(0, ns).UTC(),
	}
	if e.ID == "" || e.Type == "" || e.World == "" || !json.Valid(e.Data) {
		return Event{}, fmt.Errorf("world: item %s is not a well-formed event", it.Key())
	}
	switch e.Visibility {
	case Public, Agents:
	case Private:
		if e.Recipient == "" {
			return Event{}, fmt.Errorf("world: private event %s has no recipient", it.Key())
		}
	default:
		return Event{}, fmt.Errorf("world: event %s has visibility %q", it.Key(), e.Visibility)
	}
	return e, nil
}

// VisibleTo reports whether a member awnID may see e.
func (e Event) VisibleTo(awnID string) bool {
	return e.Visibility != Private || e.Recipient == awnID
}

// IDs makes ULIDs that increase strictly within one process even when the
// clock stands still, so the events one instance writes are in order. Safe
// for concurrent use; the zero value is not usable, call NewIDs.
type IDs struct {
	mu      sync.Mutex
	entropy *ulid.MonotonicEntropy
}

// NewIDs returns a ULID source.
func NewIDs() *IDs { return &IDs{entropy: ulid.Monotonic(rand.Reader, 0)} }

// New returns a ULID for time t.
func (g *IDs) New(t time.Time) string {
	g.mu.Lock()
	defer g.mu.Unlock()
	id, err := ulid.New(ulid.Timestamp(t), g.entropy)
	if err != nil {
		// The monotonic entropy ran out within one millisecond (2^80
		// increments) or the time is past 10889 AD: take a fresh random.
		id = ulid.MustNew(ulid.Timestamp(t), rand.Reader)
	}
	return id.String()
}

// NewEvent builds an event of world at now with a fresh id; data is
// marshalled to JSON and must be an object.
func (g *IDs) NewEvent(world, typ string, vis Visibility, recipient string, data any, now time.Time) (Event, error) {
	raw, err := json.Marshal(data)
	if err != nil {
		return Event{}, fmt.Errorf("world: event %s data: %w", typ, err)
	}
	if len(raw) == 0 || raw[0] != '{' {
		return Event{}, fmt.Errorf("world: event %s data is not a JSON object", typ)
	}
	if vis == Private && recipient == "" {
		return Event{}, fmt.Errorf("world: private event %s needs a recipient", typ)
	}
	if vis != Private {
		recipient = ""
	}
	return Event{ID: g.New(now), Type: typ, World: world, Data: raw, Visibility: vis, Recipient: recipient, CreatedAt: now.UTC()}, nil
}

// CursorFloor is the smallest event id at or after t: the "after" bound
// of a poll that starts at a time rather than at an event.
func CursorFloor(t time.Time) string {
	var id ulid.ULID
	_ = id.SetTime(ulid.Timestamp(t))
	return id.String()
}
