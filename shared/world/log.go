package world

import (
	"context"
	"errors"
	"fmt"
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
// message.received. Safe for concurrent use.
type Log struct {
	store store.Store
	ids   *IDs
	now   func() time.Time
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
	return &Log{store: st, ids: ids, now: now}
}

// Commit writes ev together with the caller's actions in one store.Write:
// the actions with, then the event's Put (conditioned on a new id), then
// the update of the world's head, conditioned on its last id being lower
// than the event's (or absent). It allocates ev.ID itself at the log's
// clock, as late as it can, and returns the event as committed.
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
	ev.ID = l.ids.New(l.now())
	return l.commit(ctx, ev, false, with)
}

// commit is Commit; fixed keeps the caller's ev.ID, so a head at or past
// it fails with a *store.ConditionFailedError (Append's Conflict).
func (l *Log) commit(ctx context.Context, ev Event, fixed bool, with []store.Action) (Event, error) {
	n := len(with)
	acts := make([]store.Action, n+2)
	copy(acts, with)
	for attempt := 1; ; attempt++ {
		acts[n], acts[n+1] = EventPut(ev), headUpdate(ev)
		_, err := l.store.Write(ctx, acts...)
		var cf *store.ConditionFailedError
		switch {
		case err == nil:
			return ev, nil
		case errors.As(err, &cf) && cf.Action == n+1:
			if fixed {
				return ev, err
			}
			ev.ID = l.next(cf.Item.Str(attrLast))
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
			ev.ID = l.next(ev.ID)
		default:
			return ev, err
		}
		if attempt >= commitAttempts {
			return ev, fmt.Errorf("world %s: %d commits of an event each found a later one first: %w", ev.World, attempt, store.ErrUnavailable)
		}
	}
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

// next returns an id past last (the head), at the log's clock when that is
// later.
func (l *Log) next(last string) string {
	h, err := ulid.ParseStrict(last)
	if err != nil {
		return l.ids.New(l.now()) // no head: cannot be in the way
	}
	t := l.now()
	if ht := ulid.Time(h.Time()); ht.After(t) {
		t = ht
	}
	if id := l.ids.New(t); id > last {
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
