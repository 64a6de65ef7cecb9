package world

import (
	"context"
	"errors"
	"fmt"
	"hash/fnv"
	"strconv"
	"sync"
	"time"

	"github.com/a2awire/a2awire/shared/apierror"
	"github.com/a2awire/a2awire/shared/store"
)

// The presence sweep: the offline of a member that simply goes quiet.
//
// A member's presence lapses without any write when its last poll grows
// older than ReachableWithin (a long poller that stops, a stream that
// closes). Nothing observes that moment, so a scheduled function does:
// every member announced online has a due item saying when its presence
// may next lapse, and the sweep (function presence-sweep, every minute)
// reads the due items that have come due and, for each, either announces
// the lapse or moves the item to the next moment it may happen.
//
// # Items
//
//	item          pk              sk                  gsi1pk            gsi1sk
//	presence due  WORLD#<world>   PRESENCE#<awnId>    PRESDUE#<shard>   <due ms, 15 digits>#<world>#<awnId>
//
// The due item is written (Put) in the transaction that announces the
// member online, due ReachableWithin later, and deleted in the one that
// announces it offline, so it exists while the member is announced online
// (members announced online before the sweep existed get theirs at their
// next announcement). It lives in the world's partition, so the deleter
// of a deleted world removes it with the rest; one whose member left (or
// left and joined again without being announced online) is dropped by the
// sweep when it comes due. It is small (no metadata) and apart from the
// member item, so a poll's write of lastPollAt — the hot path — changes
// no index: a member item in gsi1 would have every poll write the index
// too (the table projects all attributes).
//
// # A run
//
// One gsi1 Query per shard (PresenceShards of them, spreading the
// schedule's writes) for gsi1sk ≤ now, page by page; then per due item,
// SweepFanout at a time:
//
//   - 1 GetItem of the member. Gone, or announced offline: the due item
//     is deleted (conditioned on the gsi1sk read). Its poll or stream
//     lease still running: the item moves to when it ends (1 UpdateItem
//     conditioned on the gsi1sk read).
//   - otherwise 1 GetItem of its webhook. Answering: the member stays
//     online and is looked at again HookRecheck later (a webhook stops
//     answering only through a delivery or probe, which settle presence
//     themselves; the recheck catches what they cannot see).
//   - otherwise presence.changed offline is committed, with data.since the
//     moment it lapsed, in one transaction with: the member's presence set
//     offline, conditioned on it being announced online and on every input
//     of the rule the sweep read being unchanged (lastPollAt, streamUntil,
//     the probes, registryOffline, joinedAt); a ConditionCheck that the
//     webhook's enabled, lastSuccessAt and lastErrorAt are unchanged (or
//     that it is still absent); and the due item's delete.
//
// # Races
//
// Exactly one presence.changed per lapse: every announcement is
// conditioned on the presence it replaces, so of the sweep, a poll after
// the silence (MarkPolled) and a second sweep racing on one lapse, one
// commits and the others' conditions fail. A member polling while the
// sweep runs is never left announced offline: if its poll's write lands
// first, lastPollAt differs from what the sweep read and the sweep's
// transaction fails (the item stays due; the next run moves it); if the
// sweep's lands first, the lapse was real (its poll was older than
// ReachableWithin when the sweep read it) and the poll, finding presence
// offline, announces online again. The gsi1 Query is eventually
// consistent; every decision is made on the strongly consistent reads and
// enforced by the conditions above, so a stale index entry only costs a
// failed condition.
//
// # Cost
//
// A run with nothing due: PresenceShards Queries. Per online member and
// minute (the schedule's period; its due item comes due once a run while
// it keeps polling): 1 GetItem of the member (1 read unit, 2 with 4 KiB of
// metadata) and 1 UpdateItem of the due item (1 write unit, plus 2 for
// the index entry it moves). Per lapse: 2 GetItems and one commit of the
// event (as every presence.changed). A member online by its webhook alone
// costs 2 GetItems and 1 UpdateItem per HookRecheck.

// Presence sweep settings.
const (
	// PresenceShards is how many gsi1 partitions the presence schedule
	// spreads over (one Query each per run).
	PresenceShards = 4
	// HookRecheck is how long a member online by its webhook alone waits
	// before the sweep looks at it again.
	HookRecheck = 5 * time.Minute
	// SweepFanout bounds the due items one run works on at once.
	SweepFanout = 16
	// sweepPage is the most due items one Query returns.
	sweepPage = 100

	// TypePresenceDue is the type attribute of presence due items.
	TypePresenceDue   = "presencedue"
	presenceDuePrefix = "PRESENCE#"
	presenceDuePK     = "PRESDUE#"
	attrDue           = "due"
)

// PresenceDueKey is the key of awnID's presence due item in world.
func PresenceDueKey(world, awnID string) store.Key {
	return store.Key{PK: WorldPK(world), SK: presenceDuePrefix + awnID}
}

// PresenceDuePK is the gsi1 partition of presence schedule shard n.
func PresenceDuePK(n int) string { return presenceDuePK + strconv.Itoa(n) }

func presenceShard(world, awnID string) int {
	h := fnv.New32a()
	_, _ = h.Write([]byte(world + "#" + awnID))
	return int(h.Sum32() % PresenceShards)
}

// presenceDueSK orders a shard's due items by due time (ms, fixed width).
func presenceDueSK(due time.Time, world, awnID string) string {
	return fmt.Sprintf("%015d#%s#%s", due.UnixMilli(), world, awnID)
}

// duePut is the action scheduling m's next look at due.
func duePut(m Member, due time.Time) store.Action {
	return store.Put(PresenceDueKey(m.World, m.AWNID), store.Item{
		AttrType:            store.S(TypePresenceDue),
		attrWorld:           store.S(m.World),
		attrAWNID:           store.S(m.AWNID),
		attrJoinedAt:        store.N(m.JoinedAt.UnixNano()),
		attrDue:             store.N(due.UnixMilli()),
		store.AttrGSI1PK:    store.S(PresenceDuePK(presenceShard(m.World, m.AWNID))),
		store.AttrGSI1SK:    store.S(presenceDueSK(due, m.World, m.AWNID)),
		store.AttrExpiresAt: store.ExpiresAt(due.Add(EventTTL)),
	})
}

// lapseAt is when m's poll or stream lease ends (zero: it has neither):
// the first instant the rule no longer counts it.
func lapseAt(m Member) time.Time {
	var t time.Time
	if !m.LastPollAt.IsZero() {
		t = m.LastPollAt.Add(ReachableWithin + time.Millisecond)
	}
	return later(t, m.StreamUntil)
}

// SweepReport is what one run of the sweep did.
type SweepReport struct {
	// Due is how many due items it read.
	Due int
	// Offline is how many lapses it announced (presence.changed).
	Offline int
	// Moved is how many members it found still online (their items
	// moved on); Dropped how many items it deleted (the member gone or
	// already offline); Raced how many it left because a write changed
	// the member meanwhile (they come due again next run).
	Moved, Dropped, Raced int
}

// SweepPresence announces the presence of every member whose presence
// lapsed by now without an announcement (see "The presence sweep" above):
// one gsi1 Query per shard and page, then per due item 1–2 GetItems and
// one write. It stops early, with what it did, when ctx ends or a call
// fails; what it left stays due for the next run.
func (s *Service) SweepPresence(ctx context.Context) (SweepReport, error) {
	var rep SweepReport
	now := s.now().UTC()
	bound := fmt.Sprintf("%015d$", now.UnixMilli())
	for n := range PresenceShards {
		q := store.Query{Index: store.IndexGSI1, PK: PresenceDuePK(n), SK: store.SKLT(bound), Limit: sweepPage}
		for {
			page, err := s.store.Query(ctx, q)
			if err != nil {
				return rep, apierror.FromStore("read the presence schedule", err)
			}
			if err := s.sweepPage(ctx, page.Items, now, &rep); err != nil {
				return rep, err
			}
			if page.Cursor == "" || len(page.Items) == 0 {
				break
			}
			q.Cursor = page.Cursor
		}
	}
	return rep, nil
}

type sweepOutcome int

const (
	sweptOffline sweepOutcome = iota
	sweptMoved
	sweptDropped
	sweptRaced
)

// sweepPage works on the due items of one page, SweepFanout at a time.
func (s *Service) sweepPage(ctx context.Context, items []store.Item, now time.Time, rep *SweepReport) error {
	var (
		mu    sync.Mutex
		first error
		wg    sync.WaitGroup
		slots = make(chan struct{}, SweepFanout)
	)
	for _, it := range items {
		slots <- struct{}{}
		wg.Go(func() {
			defer func() { <-slots }()
			out, err := s.sweepOne(ctx, it, now)
			mu.Lock()
			defer mu.Unlock()
			if err != nil {
				if first == nil {
					first = err
				}
				return
			}
			rep.Due++
			switch out {
			case sweptOffline:
				rep.Offline++
			case sweptMoved:
				rep.Moved++
			case sweptDropped:
				rep.Dropped++
			case sweptRaced:
				rep.Raced++
			}
		})
	}
	wg.Wait()
	return first
}

// sweepOne decides one due item.
func (s *Service) sweepOne(ctx context.Context, due store.Item, now time.Time) (sweepOutcome, error) {
	world, awnID := due.Str(attrWorld), due.Str(attrAWNID)
	dueKey := PresenceDueKey(world, awnID)
	// The item as read: a membership joined again since writes a new one,
	// which this run's decision about the old one must leave alone.
	held := unchanged(due, store.AttrGSI1SK, attrJoinedAt)
	if due.Key() != dueKey || !validMember(world, awnID) {
		return 0, internal(fmt.Errorf("world: item %s is not a presence due item", due.Key()))
	}
	drop := func() (sweepOutcome, error) {
		if _, err := s.store.Write(ctx, store.Delete(dueKey).When(held)); err != nil && !errors.Is(err, store.ErrConditionFailed) {
			return 0, apierror.FromStore("drop presence due item", err)
		}
		return sweptDropped, nil
	}
	move := func(at time.Time) (sweepOutcome, error) {
		_, err := s.store.Write(ctx, store.Update(dueKey).
			SetAttr(store.AttrGSI1SK, store.S(presenceDueSK(at, world, awnID))).
			SetAttr(attrDue, store.N(at.UnixMilli())).When(held))
		if errors.Is(err, store.ErrConditionFailed) {
			return sweptRaced, nil
		}
		if err != nil {
			return 0, apierror.FromStore("move presence due item", err)
		}
		return sweptMoved, nil
	}
	mit, err := s.store.Get(ctx, MemberKey(world, awnID))
	if errors.Is(err, store.ErrNotFound) {
		return drop()
	}
	if err != nil {
		return 0, apierror.FromStore("read member", err)
	}
	m, err := decodeMember(world, mit)
	if err != nil {
		return 0, internal(err)
	}
	if m.announced() != PresenceOnline {
		return drop()
	}
	if !m.RegistryOffline {
		if t := lapseAt(m); t.After(now) {
			return move(t)
		}
	}
	hit, err := s.store.Get(ctx, WebhookKey(world, awnID))
	if errors.Is(err, store.ErrNotFound) {
		hit, err = nil, nil
	}
	if err != nil {
		return 0, apierror.FromStore("read webhook", err)
	}
	h := decodeHook(hit)
	if PresenceOf(m, h, now) == PresenceOnline {
		return move(now.Add(HookRecheck))
	}
	// The lapse: every input of the rule as read, or nothing.
	memberAsRead := unchanged(mit, attrJoinedAt, attrLastPollAt, attrStreamUntil, attrProbeOKAt, attrProbeFailAt, attrRegistryOffline)
	hookAsRead := store.Check(WebhookKey(world, awnID), store.ItemAbsent())
	if hit != nil {
		hookAsRead = store.Check(WebhookKey(world, awnID), store.And(store.ItemExists(),
			unchanged(hit, hookAttrEnabled, hookAttrLastSuccessAt, hookAttrLastErrorAt)))
	}
	// since: when its poll (or stream lease) ended, as a poll after the
	// silence would say.
	var since time.Time
	if !m.RegistryOffline {
		if !m.LastPollAt.IsZero() {
			since = m.LastPollAt.Add(ReachableWithin)
		}
		since = later(since, m.StreamUntil)
	}
	ok, err := s.announceWith(ctx, m, PresenceOffline, since, memberAsRead, nil, hookAsRead)
	if err != nil {
		return 0, err
	}
	if !ok {
		return sweptRaced, nil
	}
	return sweptOffline, nil
}

// unchanged is the condition that the attrs of it still hold the values read
// (absent ones still absent).
func unchanged(it store.Item, attrs ...string) store.Cond {
	cs := make([]store.Cond, 0, len(attrs))
	for _, a := range attrs {
		if v, ok := it[a]; ok {
			cs = append(cs, store.Eq(a, v))
		} else {
			cs = append(cs, store.NotExists(a))
		}
	}
	return store.And(cs...)
}
