package world

import (
	"context"
	"errors"
	"fmt"
	"sync/atomic"
	"time"

	"github.com/oklog/ulid/v2"

	"github.com/a2awire/a2awire/shared/store"
)

// Items and limits of the event head (see the package doc, "Event order").
const (
	// TypeEventHead is the type attribute of a world's event head.
	TypeEventHead = "eventhead"
	headPrefix    = "EVENTHEAD#"
	headSK        = "HEAD"
	// attrLast is the head's highest committed event id.
	attrLast = "last"

	// MaxClockSkew is how far an event id's time may run ahead of this
	// instance's clock: writers' clocks differ by well under a second
	// (the soak runs them 2 s apart), and an id allocated past the head
	// is at most the fastest writer's clock. A cursor or an explicit
	// event id later than now + MaxClockSkew is refused as from the
	// future.
	MaxClockSkew = 5 * time.Second

	// commitAttempts bounds Commit's rounds: each lost round means a
	// later id committed first (or the write's outcome was settled as
	// not applied), and the next round's id is allocated past it.
	commitAttempts = 32
	// settleTimeout bounds the two calls that settle an unknown outcome,
	// made even when the caller's context has ended.
	settleTimeout = 5 * time.Second
)

// EventHeadKey is the key of world's event head: one item per world
// holding the highest event id committed (attribute last).
func EventHeadKey(world string) store.Key {
	return store.Key{PK: headPrefix + world, SK: headSK}
}

// Log commits events so that every world's events commit in id order, in
// its shared partition and every private one alike: a cursor reader that
// reads the head first and then both partitions up to it can never pass an
// event that commits later. It is the only writer of events; package world
// writes joins, leaves, actions and Append through it, package inbox its
// message.received. Safe for concurrent use; its state is an optimization
// of this process's commits, never needed for their order:
//
//   - One commit per world at a time (a striped lock): its commits would
//     only conflict on the head, each loser retrying.
//   - lead: how far the newest head it lost to was ahead of its clock
//     (at most MaxClockSkew). Its ids are allocated that far ahead, so a
//     lagging instance competes with the fastest clock instead of losing
//     every round to it.
type Log struct {
	store store.Store
	ids   *IDs
	now   func() time.Time
	// leadIDs makes the ids allocated ahead of the clock, so that ids has
	// only ever seen this clock (it keeps ids increasing only while their
	// millisecond does not jump back and forth).
	leadIDs *IDs
	lead    atomic.Int64 // nanoseconds
	stripes [16]chan struct{}
}

// NewLog returns the log of st; ids and now default to a fresh IDs and
// time.Now. Use the same IDs as the rest of the process, so its ids
// increase even within one millisecond.
func NewLog(st store.Store, ids *IDs, now func() time.Time) *Log {
	if st == nil {
		panic("world: nil store")
	}
	if ids == nil {
		ids = NewIDs()
	}
	if now == nil {
		now = time.Now
	}
	l := &Log{store: st, ids: ids, now: now, leadIDs: NewIDs()}
	for i := range l.stripes {
		l.stripes[i] = make(chan struct{}, 1)
	}
	return l
}

// Commit writes ev together with the caller's actions in one store.Write:
// the actions with, then the update of the world's head (conditioned on
// its last id being lower than the event's, or absent), then the event's
// Put (conditioned on a new id). It allocates ev.ID itself, as late as it
// can, and returns the event as committed.
//
// When the head is already at or past the id (a later id committed while
// this one was on its way, or this instance's clock lags), Commit
// allocates an id past the head and writes again, up to commitAttempts
// times (then the error wraps store.ErrUnavailable: nothing was written).
// A failed condition of the caller's actions is returned as it is, its
// Action index counting the caller's actions from 0.
//
// An outcome the store reports as unknown is settled before Commit
// returns: it moves the head to the id unless the head is at or past it
// (after that the write can no longer commit), then reads the event back.
// Found: committed. Not found: not applied, so Commit writes again with a
// new id. Only when settling fails too does the error wrap
// store.ErrOutcomeUnknown.
//
// Cost: 1 TransactWriteItems of len(with)+2 actions per round (the event
// and the head add 2 write units each in AWS: a transaction writes twice);
// settling adds 1 UpdateItem and, when the head was past, 1 GetItem.
func (l *Log) Commit(ctx context.Context, ev Event, with ...store.Action) (Event, error) {
	return l.commit(ctx, ev, false, with)
}

// commit is Commit; fixed keeps the caller's ev.ID, so a head at or past
// it fails with a *store.ConditionFailedError (Append's Conflict).
func (l *Log) commit(ctx context.Context, ev Event, fixed bool, with []store.Action) (Event, error) {
	stripe := l.stripes[fnv32(ev.World)%uint32(len(l.stripes))]
	select {
	case stripe <- struct{}{}:
	case <-ctx.Done():
		return ev, fmt.Errorf("world %s: waiting to commit: %w: %w", ev.World, ctx.Err(), store.ErrUnavailable)
	}
	defer func() { <-stripe }()
	if !fixed {
		ev.ID = l.allocate()
	}
	n := len(with)
	acts := make([]store.Action, n+2)
	copy(acts, with)
	for attempt := 1; ; attempt++ {
		acts[n], acts[n+1] = headUpdate(ev), EventPut(ev)
		_, err := l.store.Write(ctx, acts...)
		var cf *store.ConditionFailedError
		switch {
		case err == nil:
			return ev, nil
		case errors.As(err, &cf) && cf.Action >= n:
			// The head is at or past the id (reported first when the
			// event's id is taken too, which only a later commit can do).
			if fixed {
				return ev, err
			}
			ev.ID = l.next(cf.Item.Str(attrLast), ev.ID)
		case errors.Is(err, store.ErrOutcomeUnknown):
			done, serr := l.settle(ctx, ev)
			if serr != nil {
				return ev, fmt.Errorf("world %s: event %s: %w; settling it: %w", ev.World, ev.ID, err, serr)
			}
			if done {
				return ev, nil
			}
			if fixed || ctx.Err() != nil {
				return ev, fmt.Errorf("world %s: event %s was not written (%w): %w", ev.World, ev.ID, err, store.ErrUnavailable)
			}
			ev.ID = l.next(ev.ID, ev.ID)
		default:
			return ev, err
		}
		if attempt >= commitAttempts {
			return ev, fmt.Errorf("world %s: %d commits of an event each found a later one first: %w", ev.World, attempt, store.ErrUnavailable)
		}
	}
}

func fnv32(s string) uint32 {
	h := uint32(2166136261)
	for i := 0; i < len(s); i++ {
		h = (h ^ uint32(s[i])) * 16777619
	}
	return h
}

// allocate returns a fresh id at the clock plus the lead.
func (l *Log) allocate() string {
	now := l.now()
	if d := time.Duration(l.lead.Load()); d > 0 {
		return l.leadIDs.New(now.Add(d))
	}
	return l.ids.New(now)
}

// headUpdate moves world's head to ev.ID if it is past the head; a failure
// returns the head.
func headUpdate(ev Event) store.Action {
	id := store.S(ev.ID)
	return store.Update(EventHeadKey(ev.World)).
		SetAttr(AttrType, store.S(TypeEventHead)).
		SetAttr(attrLast, id).
		When(store.Or(store.NotExists(attrLast), store.Lt(attrLast, id))).
		OnFailReturn()
}

// settle decides an unknown outcome of ev's commit: true if it committed,
// false if it did not and never will (the head is at or past its id).
func (l *Log) settle(ctx context.Context, ev Event) (bool, error) {
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), settleTimeout)
	defer cancel()
	// The fence: once the head is at ev.ID, the write in doubt (whose
	// head condition is last < ev.ID) cannot commit any more.
	_, err := l.store.Write(ctx, headUpdate(ev))
	switch {
	case err == nil:
		return false, nil // the head was below the id: ours had not committed
	case !errors.Is(err, store.ErrConditionFailed):
		return false, err
	}
	// The head is at or past the id: ours committed, or a later one did.
	it, err := l.store.Get(ctx, EventKey(ev))
	if errors.Is(err, store.ErrNotFound) {
		return false, nil
	}
	if err != nil {
		return false, err
	}
	got, err := DecodeEvent(it)
	if err != nil {
		return false, err
	}
	if got.Type != ev.Type || string(got.Data) != string(ev.Data) || !got.CreatedAt.Equal(ev.CreatedAt) {
		return false, fmt.Errorf("world %s: event %s holds another event: %w", ev.World, ev.ID, store.ErrConditionFailed)
	}
	return true, nil
}

// next returns an id past last (the head; when unknown, tried, the id
// that just lost) and learns the lead: a fresh id when the clock plus the
// lead is past the head's millisecond, else the head's successor.
func (l *Log) next(last, tried string) string {
	h, err := ulid.ParseStrict(last)
	if err != nil {
		if h, err = ulid.ParseStrict(tried); err != nil {
			return l.allocate()
		}
	}
	now := l.now()
	// No margin is added: the head's writer allocated it a round trip
	// ago, so the lead learned is at most that writer's true offset, and
	// two instances learning from each other do not ratchet up.
	if ahead := ulid.Time(h.Time()).Sub(now); ahead > 0 {
		ahead = min(ahead, MaxClockSkew)
		for {
			cur := l.lead.Load()
			if int64(ahead) <= cur || l.lead.CompareAndSwap(cur, int64(ahead)) {
				break
			}
		}
	}
	if id := l.allocate(); id > h.String() {
		return id
	}
	return successor(h)
}

// successor returns the id right after id (as a 128-bit number), or id
// itself at the largest ULID.
func successor(id ulid.ULID) string {
	for i := len(id) - 1; i >= 0; i-- {
		id[i]++
		if id[i] != 0 {
			return id.String()
		}
	}
	return ulid.ULID{0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff}.String()
}

// Head returns the highest event id committed in world, "" when none has
// been: 1 GetItem, strongly consistent, so every event with an id up to
// it has committed and can be read.
func (l *Log) Head(ctx context.Context, world string) (string, error) {
	it, err := l.store.Get(ctx, EventHeadKey(world))
	if errors.Is(err, store.ErrNotFound) {
		return "", nil
	}
	if err != nil {
		return "", err
	}
	last := it.Str(attrLast)
	if _, err := ulid.ParseStrict(last); err != nil {
		return "", fmt.Errorf("world: event head of %q holds %q, not an id", world, last)
	}
	return last, nil
}
