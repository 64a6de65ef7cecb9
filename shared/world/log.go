package world

import (
	"context"
	"errors"
	"fmt"
	"reflect"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/oklog/ulid/v2"

	"github.com/a2awire/a2awire/shared/store"
	"github.com/a2awire/a2awire/shared/store/guard"
)

// Items and limits of the event head (see the package doc, "Event order").
const (
	// TypeEventHead is the type attribute of a world's event head.
	TypeEventHead = "eventhead"
	headPrefix    = "EVENTHEAD#"
	headSK        = "HEAD"
	// attrLast is the head's highest committed event id.
	attrLast = "last"
	// attrShards is how many partitions the world's shared events are
	// written across (absent: 1). It only grows, so every event up to the
	// head is in one of the partitions it names.
	attrShards = "shards"
	// attrDeleted marks the head of a deleted world (DeleteWorld sets it
	// in the deletion's transaction; the deleter deletes the head after
	// every membership): every commit's update of the head is conditioned
	// on its absence, so no event commits to a deleted world, and a
	// guard's check that the world exists need not ride beside a commit.
	attrDeleted = "deleted"

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
//   - Group commit: the commits of this process wait in a queue per world
//     (striped), and whoever finds the queue idle writes what waits — up
//     to 64 events whose actions touch distinct items — in one Write with
//     one update of the head. Separately they would only conflict on the
//     head; together they cost one transaction. A batch that fails for
//     one caller's reason (its condition) is written again one by one.
//     A Lambda instance serves one request at a time, so in AWS a batch
//     is one event; the local harness and benches batch.
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
	queues  [16]queue
	// shards remembers the worlds this process saw sharded (Head.Shards
	// above 1). A world not in it is written as one shard; a commit that
	// guessed wrong fails the head's condition, learns the count from
	// the head it returns and commits again (one round trip, once per
	// instance and world).
	shards shardCounts
}

// shardCounts is a bounded map of world to its event shards (only those
// above 1): when full it starts over, which costs a world a relearning.
type shardCounts struct {
	mu sync.Mutex
	m  map[string]int
}

const maxShardCounts = 4096

func (c *shardCounts) get(world string) int {
	c.mu.Lock()
	defer c.mu.Unlock()
	if n, ok := c.m[world]; ok {
		return n
	}
	return 1
}

func (c *shardCounts) learn(world string, n int) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if n <= 1 {
		delete(c.m, world)
		return
	}
	if c.m == nil || len(c.m) >= maxShardCounts {
		c.m = map[string]int{}
	}
	c.m[world] = n
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
	return &Log{store: st, ids: ids, now: now, leadIDs: NewIDs()}
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
// and the head add 2 write units each in AWS: a transaction writes twice),
// shared by the commits batched with it; settling adds 1 UpdateItem and,
// when the head was past, 1 GetItem.
func (l *Log) Commit(ctx context.Context, ev Event, with ...store.Action) (Event, error) {
	return l.commit(ctx, ev, false, with)
}

// request is one commit waiting in its world's queue.
type request struct {
	ctx   context.Context
	ev    Event
	with  []store.Action
	fixed bool
	err   error
	done  chan struct{}
}

// queue holds the commits of the worlds of one stripe; busy while one of
// its callers drains it.
type queue struct {
	mu      sync.Mutex
	waiting []*request
	busy    bool
}

// Batches: at most this many events, and this many bytes of their data
// and the callers' items, per Write (store.MaxWriteBytes is 4 MiB).
const (
	maxBatch      = 64
	maxBatchBytes = 2 << 20
	batchTimeout  = 10 * time.Second
)

// commit is Commit; fixed keeps the caller's ev.ID, so a head at or past
// it fails with a *store.ConditionFailedError (Append's Conflict).
//
// The caller queues its request; the first caller to find its queue idle
// drains it, a batch at a time, while later callers wait for their answer.
func (l *Log) commit(ctx context.Context, ev Event, fixed bool, with []store.Action) (Event, error) {
	with, finish, err := takeGuard(ctx, ev.World, with)
	if err != nil {
		return Event{}, err
	}
	// The log's own calls (the batch's Write, an unknown outcome's
	// settling) carry the guard already: they must not wait for it.
	ev, err = l.enqueue(guard.Without(ctx), ev, fixed, with)
	return ev, finish(err)
}

// takeGuard joins the request's guard (nonce, rate limit, membership:
// package guard) to a commit's actions, so that whatever Write the commit
// lands in carries it; finish turns that Write's outcome into the answer
// (the guard's error when one of its parts failed). When there is nothing
// to carry, the guard was written first (or there is none), and a guard
// that refused the request refuses the commit, which must then write
// nothing: that is err. The guard is shown the head's update too (its
// key and that it has a condition): a part that it holds (the world's
// existence, guard.Part.HeldBy) is not carried.
func takeGuard(ctx context.Context, world string, with []store.Action) ([]store.Action, func(error) error, error) {
	gacts, finish := guard.Take(ctx, append(with[:len(with):len(with)], headUpdate(world, "", "", 1)))
	off := len(with)
	if len(gacts) == 0 {
		if err := finish(nil, off); err != nil {
			return nil, nil, err
		}
		return with, func(err error) error { return err }, nil
	}
	with = append(append([]store.Action(nil), with...), gacts...)
	return with, func(err error) error { return finish(err, off) }, nil
}

// CommitAll is Commit for events that commit together or not at all (a
// poll's offline and online announcements of one silence): one Write of
// the caller's actions, one update of the head and every event's Put, the
// events' ids increasing in the order given. Its Write is its own, not
// batched with other callers' commits (which only saves transactions
// where several requests share an instance). Its cost is Commit's, plus 2
// write units per event past the first.
func (l *Log) CommitAll(ctx context.Context, evs []Event, with ...store.Action) ([]Event, error) {
	if len(evs) == 0 {
		return nil, fmt.Errorf("world: no events to commit: %w", store.ErrInvalid)
	}
	for _, ev := range evs[1:] {
		if ev.World != evs[0].World {
			return nil, fmt.Errorf("world: events of worlds %s and %s in one commit: %w", evs[0].World, ev.World, store.ErrInvalid)
		}
	}
	with, finish, err := takeGuard(ctx, evs[0].World, with)
	if err != nil {
		return nil, err
	}
	batch := make([]*request, len(evs))
	for i, ev := range evs {
		batch[i] = &request{ev: ev}
	}
	batch[0].with = with
	if err := finish(l.write(guard.Without(ctx), batch)); err != nil {
		return nil, err
	}
	out := make([]Event, len(batch))
	for i, r := range batch {
		out[i] = r.ev
	}
	return out, nil
}

// enqueue is commit once the guard has joined with.
func (l *Log) enqueue(ctx context.Context, ev Event, fixed bool, with []store.Action) (Event, error) {
	r := &request{ctx: ctx, ev: ev, with: with, fixed: fixed, done: make(chan struct{})}
	q := &l.queues[fnv32(ev.World)%uint32(len(l.queues))]
	q.mu.Lock()
	q.waiting = append(q.waiting, r)
	drain := !q.busy
	q.busy = true
	q.mu.Unlock()
	if drain {
		l.drain(q, r)
	}
	// A caller gives up its place in the queue a margin before its
	// deadline, so a Lambda answers 503 (nothing written, retry) instead of
	// timing out with its write still to come; once its request is in a
	// batch, the batch's outcome is its answer.
	var giveUp <-chan time.Time
	if dl, ok := ctx.Deadline(); ok {
		t := time.NewTimer(time.Until(dl) - deadlineMargin)
		defer t.Stop()
		giveUp = t.C
	}
	select {
	case <-r.done:
	case <-giveUp:
		if q.withdraw(r) {
			return ev, fmt.Errorf("world %s: the event waited for the log until its caller's deadline and was not written: %w", ev.World, store.ErrUnavailable)
		}
		<-r.done
	}
	return r.ev, r.err
}

// withdraw takes r out of the queue; false when a drainer took it already.
func (q *queue) withdraw(r *request) bool {
	q.mu.Lock()
	defer q.mu.Unlock()
	for i, w := range q.waiting {
		if w == r {
			q.waiting = append(q.waiting[:i], q.waiting[i+1:]...)
			return true
		}
	}
	return false
}

// drain commits the queue's requests until it is empty, or, once own (the
// draining caller's request) is answered, hands what is left to a
// goroutine: a caller is not kept draining for others under steady load.
func (l *Log) drain(q *queue, own *request) {
	for {
		q.mu.Lock()
		if len(q.waiting) == 0 {
			q.busy = false
			q.mu.Unlock()
			return
		}
		if own != nil && answered(own) {
			q.mu.Unlock()
			go l.drain(q, nil)
			return
		}
		var batch []*request
		batch, q.waiting = takeBatch(q.waiting)
		q.mu.Unlock()
		l.run(batch)
	}
}

func answered(r *request) bool {
	select {
	case <-r.done:
		return true
	default:
		return false
	}
}

// takeBatch returns the first request and every later one of the same
// world that fits with it in one Write: none fixed, no item touched twice
// (a Write may touch an item once), within MaxActions and maxBatchBytes.
func takeBatch(reqs []*request) (batch, rest []*request) {
	first := reqs[0]
	batch = []*request{first}
	if first.fixed {
		return batch, reqs[1:]
	}
	keys := map[store.Key]bool{}
	checks := map[store.Key]bool{} // keys held by shared checks only
	actions, bytes := 1, 0
	fits := func(r *request) bool {
		if r.fixed || r.ev.World != first.ev.World || len(batch) >= maxBatch {
			return false
		}
		size, n := len(r.ev.Data), 1 // the event's Put
		if r.ev.Attach != nil {
			size, n = size+store.ItemSize(r.ev.Attach.Item), n+1
		}
		for _, a := range r.with {
			if keys[a.Key] {
				if !(shared(a) && checks[a.Key]) {
					return false
				}
				continue // the check already in the batch serves it (write)
			}
			n++
			size += store.ItemSize(a.Item) + store.ItemSize(a.Set)
		}
		if actions+n > store.MaxActions || (bytes+size > maxBatchBytes && len(batch) > 0) {
			return false
		}
		for _, a := range r.with {
			keys[a.Key] = true
			if shared(a) {
				checks[a.Key] = true
			} else {
				delete(checks, a.Key)
			}
		}
		actions, bytes = actions+n, bytes+size
		return true
	}
	batch = batch[:0]
	for _, r := range reqs {
		if fits(r) {
			batch = append(batch, r)
		} else {
			rest = append(rest, r)
		}
	}
	return batch, rest
}

// shared reports whether a is a check that the item exists, which any
// number of a batch's callers may ask of one item.
func shared(a store.Action) bool {
	return a.Kind == store.CheckAction && reflect.DeepEqual(a.If, store.ItemExists())
}

// run commits a batch and answers its callers. A batch of several that
// fails for a reason of one caller's (a condition, a limit) is committed
// again one by one, so that each caller gets its own answer.
func (l *Log) run(batch []*request) {
	if len(batch) == 1 {
		r := batch[0]
		r.err = l.write(r.ctx, batch)
		close(r.done)
		return
	}
	// The batch is not one caller's: one caller's context ending must not
	// fail the others. It must end before the earliest caller's deadline
	// (less the margin), though, or that caller's answer comes too late.
	end := time.Now().Add(batchTimeout)
	for _, r := range batch {
		if dl, ok := r.ctx.Deadline(); ok && dl.Add(-deadlineMargin).Before(end) {
			end = dl.Add(-deadlineMargin)
		}
	}
	ctx, cancel := context.WithDeadline(context.WithoutCancel(batch[0].ctx), end)
	err := l.write(ctx, batch)
	cancel()
	if err != nil && !errors.Is(err, store.ErrUnavailable) && !errors.Is(err, store.ErrOutcomeUnknown) {
		for _, r := range batch {
			r.err = l.write(r.ctx, []*request{r})
			close(r.done)
		}
		return
	}
	for _, r := range batch {
		r.err = err
		close(r.done)
	}
}

// write commits batch in one store.Write: the callers' actions, the head's
// update, the events' Puts and their attachments'. A failed condition of a caller's action is
// returned with its index in that caller's actions (as Commit promises for
// a batch of one).
func (l *Log) write(ctx context.Context, batch []*request) error {
	fixed := batch[0].fixed
	if !fixed {
		l.allocateAfter(batch, "")
	}
	acts := gather(batch)
	n := len(acts)
	attached := 0
	for _, r := range batch {
		if r.ev.Attach != nil {
			attached++
		}
	}
	acts = append(acts, make([]store.Action, 1+len(batch)+attached)...)
	for attempt := 1; ; attempt++ {
		first, last := batch[0].ev, batch[len(batch)-1].ev
		shards := l.shards.get(first.World)
		acts[n] = headUpdate(first.World, first.ID, last.ID, shards)
		k := n + 1 + len(batch) // the attachments follow the events
		for i, r := range batch {
			acts[n+1+i] = EventPutIn(r.ev, shards)
			if r.ev.Attach != nil {
				acts[k] = store.Put(AttachmentKey(r.ev, shards), r.ev.Attach.Item)
				k++
			}
		}
		_, err := l.store.Write(ctx, acts...)
		var cf *store.ConditionFailedError
		switch {
		case err == nil:
			return nil
		case errors.As(err, &cf) && cf.Action == n && cf.Item.BoolAttr(attrDeleted):
			// The world was deleted: NotFound, as the request's guard
			// would have answered (nothing was written, so neither is
			// the guard: guard.Take).
			return worldNotFound(first.World)
		case errors.As(err, &cf) && cf.Action == n && headShards(cf.Item) != shards:
			// The world's events are written across another count of
			// partitions than this process knew (more since its owner
			// raised it; fewer for a world deleted and created again):
			// the head says how many. Commit again with that count,
			// and ids past the head as it is.
			l.shards.learn(first.World, headShards(cf.Item))
			if !fixed {
				l.allocateAfter(batch, cf.Item.Str(attrLast))
			}
		case errors.As(err, &cf) && cf.Action >= n:
			// The head is at or past the first id (reported first when
			// an event's id is taken too, which only a later commit can do).
			if fixed {
				return err
			}
			l.allocateAfter(batch, cf.Item.Str(attrLast))
		case errors.Is(err, store.ErrOutcomeUnknown):
			done, serr := l.settle(ctx, first, last, shards)
			if serr != nil {
				return fmt.Errorf("world %s: events %s…%s: %w; settling it: %w", first.World, first.ID, last.ID, err, serr)
			}
			if done {
				return nil
			}
			if fixed || ctx.Err() != nil {
				return fmt.Errorf("world %s: events %s…%s were not written (%w): %w", first.World, first.ID, last.ID, err, store.ErrUnavailable)
			}
			l.allocateAfter(batch, last.ID)
		default:
			return err
		}
		if attempt >= commitAttempts {
			return fmt.Errorf("world %s: %d commits each found a later event first: %w", first.World, attempt, store.ErrUnavailable)
		}
	}
}

// gather returns the batch's callers' actions, in order, a shared check
// once: several requests check that one item exists (the world, for their
// guards; a member acting twice in a batch), and a Write names an item
// once. A batch failing is retried one by one (run), or its failing
// caller is left out (CommitEach), so indexes stay each caller's.
func gather(batch []*request) []store.Action {
	var acts []store.Action
	checked := map[store.Key]bool{}
	for _, r := range batch {
		for _, a := range r.with {
			if shared(a) {
				if checked[a.Key] {
					continue
				}
				checked[a.Key] = true
			}
			acts = append(acts, a)
		}
	}
	return acts
}

// CommitEach commits events of one world, each with actions of its own
// (with[i] beside evs[i]), in as few Writes as fit (at most 100 actions
// each: every event's Put and actions, a check that an item exists shared
// by the events asking it, and one update of the head), and answers each
// event: nil when it committed. An event whose own action's condition
// fails is answered a *store.ConditionFailedError whose Action indexes
// its own actions, and the rest of its Write commits without it (and
// without every other event whose actions name that item). Any other
// failure of a Write is the answer of each of its events. It takes no
// request guard and does not wait in the group commit's queue: its caller
// batches already (the committer of queued actions). Each committed
// event's ID in evs is set to the id it committed under.
//
// Cost: 1 TransactWriteItems per Write, as Commit's, plus one more for
// each event left out.
func (l *Log) CommitEach(ctx context.Context, evs []Event, with [][]store.Action) []error {
	errs := make([]error, len(evs))
	reqs := make([]*request, len(evs))
	at := make(map[*request]int, len(evs))
	for i, ev := range evs {
		if ev.World != evs[0].World {
			errs[i] = fmt.Errorf("world: events of worlds %s and %s in one commit: %w", evs[0].World, ev.World, store.ErrInvalid)
			continue
		}
		var w []store.Action
		if i < len(with) {
			w = with[i]
		}
		reqs[i] = &request{ctx: ctx, ev: ev, with: w}
		at[reqs[i]] = i
	}
	reqs = slices.DeleteFunc(reqs, func(r *request) bool { return r == nil })
	for len(reqs) > 0 {
		batch, rest := takeBatch(reqs)
		acts := gather(batch)
		err := l.write(ctx, batch)
		var cf *store.ConditionFailedError
		if errors.As(err, &cf) && cf.Action < len(acts) {
			key, keep := acts[cf.Action].Key, batch[:0:0]
			for _, r := range batch {
				if j := slices.IndexFunc(r.with, func(a store.Action) bool { return a.Key == key }); j >= 0 {
					errs[at[r]] = &store.ConditionFailedError{Action: j, Item: cf.Item}
				} else {
					keep = append(keep, r)
				}
			}
			if len(keep) < len(batch) { // always: the action is one of theirs
				reqs = append(keep, rest...)
				continue
			}
		}
		for _, r := range batch {
			errs[at[r]] = err
			evs[at[r]] = r.ev
		}
		reqs = rest
	}
	return errs
}

// allocateAfter gives the batch's events increasing ids past head ("" for
// none known).
func (l *Log) allocateAfter(batch []*request, head string) {
	prev := head
	for i, r := range batch {
		var id string
		if i == 0 && head != "" {
			id = l.next(head)
		} else {
			id = l.allocate()
		}
		if id <= prev {
			id = successor(ulid.MustParseStrict(prev))
		}
		r.ev.ID, prev = id, id
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

// headUpdate moves world's head to last if the head is below first (or
// absent), its events are written across shards partitions and the world
// is not deleted: the events first…last then commit after every event
// before them, into the partitions every reader of the head reads, and
// only while the world exists. A failure returns the head.
func headUpdate(world, first, last string, shards int) store.Action {
	same := store.Eq(attrShards, store.N(int64(shards)))
	if shards <= 1 {
		same = store.Or(store.NotExists(attrShards), same)
	}
	return headMove(world, first, last).When(store.And(headBelow(first), same, store.NotExists(attrDeleted)))
}

// headDeleted is the action that marks world's head deleted (DeleteWorld's,
// in the deletion's transaction): from then on no event commits to it.
func headDeleted(world string) store.Action {
	return store.Update(EventHeadKey(world)).SetAttr(AttrType, store.S(TypeEventHead)).SetAttr(attrDeleted, store.Bool(true))
}

// headMove is headUpdate's update of the head, its condition only that the
// head is below first (the fence that settles an unknown outcome).
func headMove(world, first, last string) store.Action {
	return store.Update(EventHeadKey(world)).
		SetAttr(AttrType, store.S(TypeEventHead)).
		SetAttr(attrLast, store.S(last)).
		When(headBelow(first)).
		OnFailReturn()
}

func headBelow(first string) store.Cond {
	return store.Or(store.NotExists(attrLast), store.Lt(attrLast, store.S(first)))
}

// headShards is the count of shards a head item names (1 when none).
func headShards(it store.Item) int {
	if n, err := it.Int(attrShards); err == nil && n > 1 {
		return int(n)
	}
	return 1
}

// RaiseShards is the action that writes world's shared events across
// shards partitions from its next commit on (in the Write of a manifest
// change): it creates the head if there is none, and never lowers it —
// its condition fails if the head names more. A reader of the head reads
// every partition it names; a writer that knew fewer fails the head's
// condition and learns the count.
func RaiseShards(world string, shards int) store.Action {
	return store.Update(EventHeadKey(world)).
		SetAttr(AttrType, store.S(TypeEventHead)).
		SetAttr(attrShards, store.N(int64(shards))).
		When(store.Or(store.NotExists(attrShards), store.Le(attrShards, store.N(int64(shards)))))
}

// settle decides an unknown outcome of the commit of the events
// first…last: true if it committed, false if it did not and never will.
func (l *Log) settle(ctx context.Context, first, last Event, shards int) (bool, error) {
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), settleTimeout)
	defer cancel()
	// The fence: the write in doubt carried this very update, so once it
	// applies (or fails: the head at or past first), that write cannot
	// commit any more.
	// It is not conditioned on the shards: the write in doubt was, and
	// shards only grow, so once they did that write cannot commit either.
	_, err := l.store.Write(ctx, headMove(first.World, first.ID, last.ID))
	switch {
	case err == nil:
		return false, nil // the head was below first: ours had not committed
	case !errors.Is(err, store.ErrConditionFailed):
		return false, err
	}
	// The head is at or past first: ours committed (all its events at
	// once), or a later one did.
	it, err := l.store.Get(ctx, EventKeyIn(first, shards))
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
	if got.Type != first.Type || string(got.Data) != string(first.Data) || !got.CreatedAt.Equal(first.CreatedAt) {
		return false, fmt.Errorf("world %s: event %s holds another event: %w", first.World, first.ID, store.ErrConditionFailed)
	}
	return true, nil
}

// next returns an id past head and learns the lead: a fresh id when the
// clock plus the lead is past the head's millisecond, else the head's
// successor.
func (l *Log) next(head string) string {
	h, err := ulid.ParseStrict(head)
	if err != nil {
		return l.allocate()
	}
	// No margin is added: the head's writer allocated it a round trip
	// ago, so the lead learned is at most that writer's true offset, and
	// two instances learning from each other do not ratchet up.
	if ahead := ulid.Time(h.Time()).Sub(l.now()); ahead > 0 {
		ahead = min(ahead, MaxClockSkew)
		for {
			cur := l.lead.Load()
			if int64(ahead) <= cur || l.lead.CompareAndSwap(cur, int64(ahead)) {
				break
			}
		}
	}
	if id := l.allocate(); id > head {
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

// Head is what a world's event head holds.
type Head struct {
	// Last is the highest event id committed ("" when none has been).
	Last string
	// Shards is how many partitions the world's shared events are written
	// across (EventShardPK 0 … Shards-1), at least 1.
	Shards int
}

// Head returns world's event head: 1 GetItem, strongly consistent, so every
// event with an id up to Last has committed and can be read, in the
// partitions Shards names.
func (l *Log) Head(ctx context.Context, world string) (Head, error) {
	it, err := l.store.Get(ctx, EventHeadKey(world))
	if errors.Is(err, store.ErrNotFound) {
		return Head{Shards: 1}, nil
	}
	if err != nil {
		return Head{}, err
	}
	h := Head{Last: it.Str(attrLast), Shards: headShards(it)}
	if _, err := ulid.ParseStrict(h.Last); h.Last != "" && err != nil {
		return Head{}, fmt.Errorf("world: event head of %q holds %q, not an id", world, h.Last)
	}
	l.shards.learn(world, h.Shards)
	return h, nil
}
