package world

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/a2awire/a2awire/shared/apierror"
	"github.com/a2awire/a2awire/shared/store"
)

// Purge: what a deleted world leaves, and how it goes.
//
// DeleteWorld removes the manifest and the listing items and writes the
// deletion marker (DeletionKey). Everything else is found from the world's
// own partitions, never by a scan of the table:
//
//   - the world partition WORLD#<world>: member, member key, webhook and
//     roster items, and anything else kept there (bans);
//   - per agent that ever joined (a member item, or a roster item: a join
//     writes ROSTER#<awnId> in its transaction and a leave keeps it), the
//     partitions PartitionsOf names: its inbox and private events (this
//     package; as many shards of each as the event head names), its
//     pending webhook retries and dead letters and its rate
//     windows (named by the builder, WithAgentPartitions);
//   - the shared events' partitions (as many shards as the event head
//     names) and the event head.
//
// Purge works in steps, each idempotent and each leaving the world in a
// state the next step can start from, so a crash anywhere resumes:
//
//  1. a page of member items (up to 20): one Write puts each member's
//     roster item and deletes its member, member key, webhook and
//     agent's-view index items (the last in the agent's partition), so
//     every write a member makes (conditioned on its member item) fails
//     from then on;
//  2. a page of roster items (up to 100): each agent's partitions are
//     emptied page by page, then the roster items deleted;
//  3. the rest of the world partition, the shared events, the event head,
//     a page of up to 100 items at a time (1 Query and 1 Write each);
//  4. the marker: the name is free.
//
// The head, which names the shards, is read before step 2 (1 GetItem) and
// deleted last, so a resumed purge reads it again.
//
// Cost: 1 GetItem of the marker and 1 of the head, then per page 1 Query
// and 1 Write of its deletes (TransactWriteItems: 2 write units per item
// in AWS), plus 1 Query per empty agent partition (an agent's inbox and
// private events are K each in a world of K event shards). The deleter's stream trigger calls
// Purge for the marker's record; a round that runs out of time bumps the
// marker's step, and that change is the record of the next round.

// purgePage is the most items one step reads and deletes (a Write holds
// at most store.MaxActions actions).
const purgePage = store.MaxActions

// membersPerStep: a member takes 5 actions of its step's Write.
const membersPerStep = store.MaxActions / 5

const rosterPrefix = "ROSTER#"

// RosterKey is the key of the item recording that awnID joined world: a
// join writes it, a leave keeps it, and the deleter empties the agent's
// partitions from it.
func RosterKey(world, awnID string) store.Key {
	return store.Key{PK: WorldPK(world), SK: rosterPrefix + awnID}
}

// TypeRoster is the type attribute of roster items.
const TypeRoster = "roster"

// PartitionsOf names the partitions of one agent's items in a world that
// other packages own (webhook retries and dead letters, rate windows).
type PartitionsOf func(world, awnID string) []string

// WithAgentPartitions adds the per-agent partitions of other packages the
// deleter empties (the world's own inbox and private events are always
// emptied).
func WithAgentPartitions(p PartitionsOf) Option { return func(s *Service) { s.agentParts = p } }

// errPurgeBudget ends a round whose budget ran out before the world was
// gone (not a failure: the next round continues).
var errPurgeBudget = errors.New("world: purge budget spent")

// PurgeOptions bound one round of Purge.
type PurgeOptions struct {
	// MaxWrites stops the round after that many Writes (0: no limit);
	// tests use it to stop a round halfway.
	MaxWrites int
	// Margin stops the round when the context's deadline is nearer than
	// it, so a Lambda answers before it is killed (0: 3 s).
	Margin time.Duration
}

// Purge runs one round of the deletion of world (see above): true once
// everything under the world, the marker last, is gone (or there was no
// marker), false when the round stopped on its budget with work left.
func (s *Service) Purge(ctx context.Context, world string, o PurgeOptions) (bool, error) {
	if !worldIDShape.Match(world) {
		return true, nil
	}
	if o.Margin == 0 {
		o.Margin = 3 * time.Second
	}
	p := &purge{s: s, world: world, o: o, ctx: ctx}
	if _, err := s.store.Get(ctx, DeletionKey(world)); errors.Is(err, store.ErrNotFound) {
		return true, nil
	} else if err != nil {
		return false, apierror.FromStore("read deletion marker", err)
	}
	if _, err := s.store.Get(ctx, ManifestKey(world)); err == nil {
		return false, internal(fmt.Errorf("world: %s has a deletion marker and a manifest", world))
	}
	err := p.run()
	if errors.Is(err, errPurgeBudget) {
		return false, nil
	}
	if err != nil {
		return false, apierror.FromStore("purge world", err)
	}
	return true, nil
}

// NextPurgeRound bumps the marker's step: the stream record of that change
// starts the next round. A marker already gone is not an error.
func (s *Service) NextPurgeRound(ctx context.Context, world string) error {
	_, err := s.store.Write(ctx, store.Update(DeletionKey(world)).AddNum(attrStep, 1).When(store.ItemExists()))
	if err != nil && !errors.Is(err, store.ErrConditionFailed) {
		return apierror.FromStore("next purge round", err)
	}
	return nil
}

type purge struct {
	s      *Service
	ctx    context.Context
	world  string
	o      PurgeOptions
	writes int
	// shards is how many shards the event head names.
	shards int
	// queued are deletes waiting to share a Write.
	queued []store.Action
}

func (p *purge) run() error {
	if err := p.members(); err != nil {
		return err
	}
	// The head names the shards of the shared events and of every
	// agent's inbox and private events; it goes last, so a purge resumed
	// after a failure reads it again. It names every shard written: the
	// count only grows, and the deletion's mark on it stops every commit.
	h, err := p.s.log.Head(p.ctx, p.world)
	if err != nil {
		return err
	}
	p.shards = max(h.Shards, 1)
	if err := p.roster(); err != nil {
		return err
	}
	pks := []string{WorldPK(p.world)}
	for n := range p.shards {
		pks = append(pks, EventShardPK(p.world, n))
	}
	for _, pk := range pks {
		if err := p.empty(pk); err != nil {
			return err
		}
	}
	// The marker goes last, in the same Write as the head at the latest.
	if err := p.add(store.Delete(EventHeadKey(p.world)), store.Delete(DeletionKey(p.world))); err != nil {
		return err
	}
	return p.flush()
}

// add queues acts to be written together, in order: the queue is written
// first when they would not fit in its Write. Writes apply in queue
// order, so an action is never applied before one queued ahead of it.
func (p *purge) add(acts ...store.Action) error {
	if len(p.queued)+len(acts) > store.MaxActions {
		if err := p.flush(); err != nil {
			return err
		}
	}
	p.queued = append(p.queued, acts...)
	return nil
}

// flush writes what is queued.
func (p *purge) flush() error {
	if len(p.queued) == 0 {
		return nil
	}
	err := p.write(p.queued...)
	p.queued = p.queued[:0]
	return err
}

// write is one Write of the round, within its budget.
func (p *purge) write(acts ...store.Action) error {
	if p.o.MaxWrites > 0 && p.writes >= p.o.MaxWrites {
		return errPurgeBudget
	}
	if dl, ok := p.ctx.Deadline(); ok && time.Until(dl) < p.o.Margin {
		return errPurgeBudget
	}
	p.writes++
	_, err := p.s.store.Write(p.ctx, acts...)
	return err
}

// members turns every member into a roster entry: one member's roster Put
// and its member, member-key, webhook and index Deletes are always in one
// Write.
func (p *purge) members() error {
	q := store.Query{PK: WorldPK(p.world), SK: store.SKPrefix(memberPrefix), Limit: membersPerStep}
	for {
		page, err := p.s.store.Query(p.ctx, q)
		if err != nil {
			return err
		}
		if len(page.Items) == 0 {
			return p.flush()
		}
		for _, it := range page.Items {
			awnID := it.Str(attrAWNID)
			if err := p.add(
				store.Put(RosterKey(p.world, awnID), store.Item{AttrType: store.S(TypeRoster), attrAWNID: store.S(awnID)}),
				store.Delete(it.Key()),
				store.Delete(MemberKeyKey(p.world, it.Str(attrKeyID))),
				store.Delete(WebhookKey(p.world, awnID)),
				// Its item in the agent's index of worlds, in the agent's
				// partition: with the member item, so none outlives it.
				store.Delete(joinedIndexKey(p.world, awnID))); err != nil {
				return err
			}
		}
		if err := p.flush(); err != nil {
			return err
		}
	}
}

// roster empties the partitions of every agent that joined, a page of
// roster items at a time; an agent's roster item is deleted after (or in
// the same Write as) the last of its items.
func (p *purge) roster() error {
	q := store.Query{PK: WorldPK(p.world), SK: store.SKPrefix(rosterPrefix), Limit: purgePage}
	for {
		page, err := p.s.store.Query(p.ctx, q)
		if err != nil {
			return err
		}
		if len(page.Items) == 0 {
			return p.flush()
		}
		for _, it := range page.Items {
			awnID := it.Str(attrAWNID)
			var parts []string
			for n := range p.shards {
				parts = append(parts, ShardPK(InboxPK(p.world, awnID), n), ShardPK(PrivateEventsPK(p.world, awnID), n))
			}
			if p.s.agentParts != nil {
				parts = append(parts, p.s.agentParts(p.world, awnID)...)
			}
			for _, pk := range parts {
				if err := p.empty(pk); err != nil {
					return err
				}
			}
			if err := p.add(store.Delete(it.Key())); err != nil {
				return err
			}
		}
		if err := p.flush(); err != nil {
			return err
		}
	}
}

// empty queues the deletes of every item of partition pk, reading a page
// at a time (the queue is written before the next page is read).
func (p *purge) empty(pk string) error {
	q := store.Query{PK: pk, Limit: purgePage}
	for {
		page, err := p.s.store.Query(p.ctx, q)
		if err != nil {
			return err
		}
		for _, it := range page.Items {
			if err := p.add(store.Delete(it.Key())); err != nil {
				return err
			}
		}
		if page.Cursor == "" || len(page.Items) == 0 {
			return nil
		}
		if err := p.flush(); err != nil {
			return err
		}
	}
}
