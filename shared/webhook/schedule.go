package webhook

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"hash/fnv"
	"strconv"
	"time"

	"github.com/a2awire/a2awire/shared/apierror"
	"github.com/a2awire/a2awire/shared/store"
	"github.com/a2awire/a2awire/shared/world"
)

// Waits are the retry schedule (Standard Webhooks'): the wait after the
// first failed attempt, after the second, …; a delivery whose last retry
// fails is dead-lettered. Each wait gets Jitter and is at least the
// receiver's Retry-After.
var Waits = []time.Duration{
	5 * time.Second, 5 * time.Minute, 30 * time.Minute, 2 * time.Hour, 5 * time.Hour,
	10 * time.Hour, 14 * time.Hour, 20 * time.Hour, 24 * time.Hour,
}

// MaxAttempts is the first attempt and one per wait.
var MaxAttempts = len(Waits) + 1

// Jitter is the largest fraction a wait is lengthened or shortened by, so
// the retries of one outage do not all come due at once.
const Jitter = 0.1

// Shards is how many gsi1 partitions the retry schedule spreads over: the
// scheduled function reads each with one Query per run.
const Shards = 4

// Lease is how long a claimed retry stays away from other workers: longer
// than an attempt (5 s) and the writes around it.
const Lease = 2 * time.Minute

const (
	retryPrefix = "WHRETRY#"
	deadPrefix  = "WHDEAD#"
	duePrefix   = "WHDUE#"

	attrEventID    = "eventId"
	attrEventType  = "eventType"
	attrData       = "data"
	attrEventAt    = "eventAt"
	attrAttempts   = "attempts"
	attrDue        = "due"
	attrDeadAt     = "deadAt"
	attrVisibility = "visibility"
	attrRecipient  = "recipient"
)

// RetryPK is the partition of awnID's pending retries in world.
func RetryPK(worldID, awnID string) string { return retryPrefix + worldID + "#" + awnID }

// DeadLetterPK is the partition of awnID's dead letters in world.
func DeadLetterPK(worldID, awnID string) string { return deadPrefix + worldID + "#" + awnID }

// DuePK is the gsi1 partition of retry shard n.
func DuePK(n int) string { return duePrefix + strconv.Itoa(n) }

// dueSK orders a shard's retries by due time (ms, fixed width so string
// order is time order).
func dueSK(due time.Time, worldID, awnID, eventID string) string {
	return fmt.Sprintf("%015d#%s#%s#%s", due.UnixMilli(), worldID, awnID, eventID)
}

// dueBound is the gsi1sk upper bound of the retries due at t.
func dueBound(t time.Time) string { return fmt.Sprintf("%015d$", t.UnixMilli()) }

func shard(worldID, awnID, eventID string) int {
	h := fnv.New32a()
	_, _ = h.Write([]byte(worldID + "#" + awnID + "#" + eventID))
	return int(h.Sum32() % Shards)
}

// Pending is one scheduled delivery: an event for one recipient, and the
// attempts made so far.
type Pending struct {
	Event     world.Event
	Recipient string
	Attempts  int
	Due       time.Time
	// Hook is the Generation of the webhook it is for: a retry finding
	// another generation (the webhook removed and set again) is dropped.
	Hook string
	// dueSK is the gsi1sk it was read with, the claim's condition.
	dueSK string
}

// NextWait is the wait before attempt attempts+1 after attempts failed
// ones, with jitter j in [-1, 1] and at least retryAfter; false when the
// schedule is exhausted (dead-letter it).
func NextWait(attempts int, j float64, retryAfter time.Duration) (time.Duration, bool) {
	if attempts < 1 || attempts > len(Waits) {
		return 0, false
	}
	w := Waits[attempts-1]
	w += time.Duration(float64(w) * Jitter * max(-1, min(1, j)))
	return max(w, retryAfter), true
}

func eventAttrs(it store.Item, e world.Event) {
	it[attrEventID] = store.S(e.ID)
	it[attrEventType] = store.S(e.Type)
	it[attrWorld] = store.S(e.World)
	it[attrData] = store.S(string(e.Data))
	it[attrVisibility] = store.S(string(e.Visibility))
	it[attrEventAt] = store.N(e.CreatedAt.UnixNano())
	if e.Recipient != "" {
		it[attrRecipient] = store.S(e.Recipient)
	}
}

func decodeEventAttrs(it store.Item) (world.Event, error) {
	e := world.Event{
		ID:         it.Str(attrEventID),
		Type:       it.Str(attrEventType),
		World:      it.Str(attrWorld),
		Data:       json.RawMessage(it.Str(attrData)),
		Visibility: world.Visibility(it.Str(attrVisibility)),
		Recipient:  it.Str(attrRecipient),
		CreatedAt:  unixNano(it, attrEventAt),
	}
	if e.ID == "" || e.World == "" || e.Type == "" || !json.Valid(e.Data) {
		return world.Event{}, fmt.Errorf("webhook: item %s holds no well-formed event", it.Key())
	}
	return e, nil
}

// retryPut is the action (re)writing p's retry item, due at p.Due.
func retryPut(p Pending) store.Action {
	it := store.Item{
		world.AttrType:      store.S(TypeRetry),
		attrAWNID:           store.S(p.Recipient),
		attrAttempts:        store.N(int64(p.Attempts)),
		attrDue:             store.N(p.Due.UnixMilli()),
		attrGeneration:      store.S(p.Hook),
		store.AttrGSI1PK:    store.S(DuePK(shard(p.Event.World, p.Recipient, p.Event.ID))),
		store.AttrGSI1SK:    store.S(dueSK(p.Due, p.Event.World, p.Recipient, p.Event.ID)),
		store.AttrExpiresAt: store.ExpiresAt(p.Due.Add(DeadLetterTTL)),
	}
	eventAttrs(it, p.Event)
	return store.Put(store.Key{PK: RetryPK(p.Event.World, p.Recipient), SK: p.Event.ID}, it)
}

func retryKey(p Pending) store.Key {
	return store.Key{PK: RetryPK(p.Event.World, p.Recipient), SK: p.Event.ID}
}

// deadPut is the action keeping p as a dead letter.
func deadPut(p Pending, lastErr string, now time.Time) store.Action {
	it := store.Item{
		world.AttrType:      store.S(TypeDeadLetter),
		attrAWNID:           store.S(p.Recipient),
		attrAttempts:        store.N(int64(p.Attempts)),
		attrDeadAt:          store.N(now.UnixNano()),
		attrLastError:       store.S(clip(lastErr)),
		store.AttrExpiresAt: store.ExpiresAt(now.Add(DeadLetterTTL)),
	}
	eventAttrs(it, p.Event)
	return store.Put(store.Key{PK: DeadLetterPK(p.Event.World, p.Recipient), SK: p.Event.ID}, it)
}

func decodePending(it store.Item) (Pending, error) {
	e, err := decodeEventAttrs(it)
	if err != nil {
		return Pending{}, err
	}
	n, _ := it.Int(attrAttempts)
	due, _ := it.Int(attrDue)
	return Pending{Event: e, Recipient: it.Str(attrAWNID), Attempts: int(n), Due: time.UnixMilli(due).UTC(), Hook: it.Str(attrGeneration),
		dueSK: it.Str(store.AttrGSI1SK)}, nil
}

// schedule writes p's retry item (one PutItem). A retry already there for
// the same event and recipient is replaced: a redelivered stream record
// schedules it once.
func (s *Store) schedule(ctx context.Context, p Pending) error {
	if _, err := s.st.Write(ctx, retryPut(p)); err != nil {
		return apierror.FromStore("webhook: schedule retry", err)
	}
	return nil
}

// Due returns up to limit retries due at now: one gsi1 Query per shard.
func (s *Store) Due(ctx context.Context, now time.Time, limit int) ([]Pending, error) {
	var out []Pending
	for n := range Shards {
		p, err := s.st.Query(ctx, store.Query{Index: store.IndexGSI1, PK: DuePK(n), SK: store.SKLT(dueBound(now)), Limit: limit})
		if err != nil {
			return nil, apierror.FromStore("webhook: due retries", err)
		}
		for _, it := range p.Items {
			pd, err := decodePending(it)
			if err != nil {
				return nil, apierror.Wrap(apierror.Internal, err, "internal error; try again later")
			}
			out = append(out, pd)
		}
	}
	return out, nil
}

// claim takes p for this worker: its due time moves Lease ahead, on the
// condition that nobody moved it since it was read. False when another
// worker claimed it first or it is gone.
func (s *Store) claim(ctx context.Context, p *Pending, now time.Time) (bool, error) {
	until := now.Add(Lease)
	sk := dueSK(until, p.Event.World, p.Recipient, p.Event.ID)
	_, err := s.st.Write(ctx, store.Update(retryKey(*p)).
		SetAttr(store.AttrGSI1SK, store.S(sk)).
		SetAttr(attrDue, store.N(until.UnixMilli())).
		When(store.Eq(store.AttrGSI1SK, store.S(p.dueSK))))
	if errors.Is(err, store.ErrConditionFailed) {
		return false, nil
	}
	if err != nil {
		return false, apierror.FromStore("webhook: claim retry", err)
	}
	p.dueSK = sk
	return true, nil
}

// settle ends a claimed retry: deleted when done, or rewritten as the next
// retry, or moved to the dead letters — one Write, conditioned on the
// claim still being this worker's.
func (s *Store) settle(ctx context.Context, p Pending, next *Pending, dead bool, lastErr string) error {
	held := store.Eq(store.AttrGSI1SK, store.S(p.dueSK))
	var acts []store.Action
	switch {
	case next != nil:
		acts = []store.Action{retryPut(*next).When(held)}
	case dead:
		acts = []store.Action{store.Delete(retryKey(p)).When(held), deadPut(p, lastErr, s.now())}
	default:
		acts = []store.Action{store.Delete(retryKey(p)).When(held)}
	}
	_, err := s.st.Write(ctx, acts...)
	if errors.Is(err, store.ErrConditionFailed) {
		// The lease ran out and another worker holds it now: its outcome
		// stands.
		return nil
	}
	if err != nil {
		return apierror.FromStore("webhook: settle retry", err)
	}
	return nil
}

// deadLetter keeps a first attempt that will not be retried (its webhook
// disabled) as a dead letter.
func (s *Store) deadLetter(ctx context.Context, p Pending, lastErr string) error {
	if _, err := s.st.Write(ctx, deadPut(p, lastErr, s.now())); err != nil {
		return apierror.FromStore("webhook: dead letter", err)
	}
	return nil
}

// DeadLetter is a delivery that exhausted its retries.
type DeadLetter struct {
	Event     world.Event
	Recipient string
	Attempts  int
	DeadAt    time.Time
	LastError string
}

// DeadLetters returns awnID's dead letters in world of events at or after
// since, oldest first (one Query per page).
func (s *Store) DeadLetters(ctx context.Context, worldID, awnID string, since time.Time) ([]DeadLetter, error) {
	var out []DeadLetter
	q := store.Query{PK: DeadLetterPK(worldID, awnID), SK: store.SKGE(world.CursorFloor(since))}
	for {
		p, err := s.st.Query(ctx, q)
		if err != nil {
			return nil, apierror.FromStore("webhook: dead letters", err)
		}
		for _, it := range p.Items {
			e, err := decodeEventAttrs(it)
			if err != nil {
				return nil, apierror.Wrap(apierror.Internal, err, "internal error; try again later")
			}
			n, _ := it.Int(attrAttempts)
			out = append(out, DeadLetter{Event: e, Recipient: it.Str(attrAWNID), Attempts: int(n), DeadAt: unixNano(it, attrDeadAt), LastError: it.Str(attrLastError)})
		}
		if p.Cursor == "" {
			return out, nil
		}
		q.Cursor = p.Cursor
	}
}

// Replay re-schedules awnID's dead letters in world of events at or after
// since, due now with a fresh schedule, and returns how many: each dead
// letter becomes a retry item in the same Write that deletes it (50 per
// Write), so a crash in between loses none and sends none twice.
func (s *Store) Replay(ctx context.Context, worldID, awnID string, since time.Time) (int, error) {
	h, err := s.get(ctx, worldID, awnID)
	if err != nil {
		return 0, err
	}
	dls, err := s.DeadLetters(ctx, worldID, awnID, since)
	if err != nil {
		return 0, err
	}
	now := s.now()
	n := 0
	for len(dls) > 0 {
		batch := dls[:min(len(dls), store.MaxActions/2)]
		dls = dls[len(batch):]
		var acts []store.Action
		for _, d := range batch {
			acts = append(acts,
				store.Delete(store.Key{PK: DeadLetterPK(worldID, awnID), SK: d.Event.ID}).When(store.ItemExists()),
				retryPut(Pending{Event: d.Event, Recipient: awnID, Due: now, Hook: h.Generation}))
		}
		if _, err := s.st.Write(ctx, acts...); err != nil {
			if errors.Is(err, store.ErrConditionFailed) {
				// A concurrent replay took some of them: re-read what is left.
				rest, rerr := s.Replay(ctx, worldID, awnID, since)
				return n + rest, rerr
			}
			return n, apierror.FromStore("webhook: replay", err)
		}
		n += len(batch)
	}
	return n, nil
}
