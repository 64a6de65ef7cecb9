package world

import (
	"context"
	"crypto/ed25519"
	"errors"
	"fmt"
	"strings"
	"sync"
	"time"

	"github.com/a2awire/a2awire/shared/apierror"
	"github.com/a2awire/a2awire/shared/auth"
	"github.com/a2awire/a2awire/shared/store"
	"github.com/a2awire/a2awire/shared/store/guard"
)

// The agent's own view (GET /v0/agents/{awnId}/worlds): the worlds an
// agent joined and owns, with its presence and webhook health in each.
//
// # Items
//
//	item          pk             sk               type
//	joined index  AWN#<awnId>    JOINED#<world>   agentworld  (world, publicKey, joinedAt)
//	owned index   AWN#<awnId>    OWNS#<world>     agentworld  (world, publicKey, createdAt)
//
// The joined item is written in the join's transaction and deleted in the
// transaction of the leave, kick or ban that ends the membership, so it
// exists exactly while the member item does. The owned item is written
// with the manifest when the world is created (worlds created before it
// existed have none). Both carry the agent's public key, so the view's
// signature verifies for an agent that never registered (AgentKey). A
// page of the view is 1 Query of the agent's
// partition, then per joined world 2 GetItems (member, webhook) and a
// third for the webhook's counters when it has one, and per
// owned world 1 GetItem (manifest), run concurrently; an index item whose
// world or membership is gone (a world being deleted) is left out.

// TypeAgentWorld is the type attribute of the agent's index items.
const TypeAgentWorld = "agentworld"

const (
	agentPrefix  = "AWN#"
	joinedPrefix = "JOINED#"
	ownsPrefix   = "OWNS#"
	// viewFanout bounds the concurrent reads of one page of the view.
	viewFanout = 16
)

// AgentPK is the partition of awnID's index of worlds.
func AgentPK(awnID string) string { return agentPrefix + awnID }

func joinedIndexKey(world, awnID string) store.Key {
	return store.Key{PK: AgentPK(awnID), SK: joinedPrefix + world}
}

func ownedIndexKey(world, awnID string) store.Key {
	return store.Key{PK: AgentPK(awnID), SK: ownsPrefix + world}
}

func joinedIndexPut(world string, pub ed25519.PublicKey, at time.Time) store.Action {
	return store.Put(joinedIndexKey(world, auth.AWNID(pub)), store.Item{
		AttrType:      store.S(TypeAgentWorld),
		attrWorld:     store.S(world),
		attrPublicKey: store.B(pub),
		attrJoinedAt:  store.N(at.UnixNano()),
	})
}

func ownedIndexPut(world string, pub ed25519.PublicKey, at time.Time) store.Action {
	return store.Put(ownedIndexKey(world, auth.AWNID(pub)), store.Item{
		AttrType:      store.S(TypeAgentWorld),
		attrWorld:     store.S(world),
		attrPublicKey: store.B(pub),
		attrCreatedAt: store.N(at.UnixNano()),
	})
}

// AgentKey returns the public key of awnID if it has joined or owns a world
// (its index items carry it) and its keyid is keyID: the key that signs a
// request for its own view. None → an error of kind NotFound. Cost: 1
// Query of at most 1 item; none inside a guarded request when this
// instance verified the key before.
func (s *Service) AgentKey(ctx context.Context, awnID, keyID string) (ed25519.PublicKey, error) {
	none := apierror.New(apierror.NotFound, "no world knows the key of %s", apierror.Quote(awnID))
	if !ValidAWNID(awnID) {
		return nil, none
	}
	if pub, ok := s.keys.Get(keyID); ok && auth.AWNID(pub) == awnID && guard.Active(ctx) {
		// Verified before in this instance: the key is its keyid's and
		// the awnId's, and the view's own reads (beside the request's
		// guard) show what it joined or owns — nothing, for an agent
		// that has since left everything.
		return pub, nil
	}
	page, err := s.store.Query(ctx, store.Query{PK: AgentPK(awnID), Limit: 1})
	if err != nil {
		return nil, apierror.FromStore("read the agent's key", err)
	}
	if len(page.Items) == 0 {
		return nil, none
	}
	pub := ed25519.PublicKey(page.Items[0].Bytes(attrPublicKey))
	if len(pub) != ed25519.PublicKeySize || auth.AWNID(pub) != awnID || auth.KeyID(pub) != keyID {
		return nil, none
	}
	s.keys.Put(pub)
	return pub, nil
}

// Roles of a world in the agent's view.
const (
	RoleMember = "member"
	RoleOwner  = "owner"
)

// AgentWorld is one row of the agent's view: a world it joined (with its
// membership, presence and webhook) or owns (with the manifest).
type AgentWorld struct {
	World string
	Role  string
	// Member, Presence and Hook: a joined world.
	Member   Member
	Presence string
	Hook     Hook
	// Manifest: an owned world.
	Manifest Manifest
}

// AgentWorldPage is one page of the agent's view.
type AgentWorldPage struct {
	Worlds []AgentWorld
	// Cursor continues the view ("" on the last page).
	Cursor string
}

// AgentWorlds lists the worlds awnID joined, then those it owns, each by
// world id: at most limit rows (1..MaxListLimit, 0 = DefaultListLimit)
// after cursor (what a previous page returned). An agent with none gets an
// empty page: joining nothing is no error. Cost: see the items above.
func (s *Service) AgentWorlds(ctx context.Context, awnID string, limit int, cursor string) (AgentWorldPage, error) {
	q, err := agentWorldsQuery(awnID, limit, cursor)
	if err != nil {
		return AgentWorldPage{}, err
	}
	limit = q.Limit - 1
	page, err := s.store.Query(ctx, q)
	if err != nil {
		return AgentWorldPage{}, apierror.FromStore("list the agent's worlds", err)
	}
	items := page.Items
	out := AgentWorldPage{Worlds: []AgentWorld{}}
	if len(items) > limit {
		items = items[:limit]
		out.Cursor = items[limit-1].Key().SK
	}
	rows := make([]AgentWorld, len(items))
	keep := make([]bool, len(items))
	errs := make([]error, len(items))
	sem := make(chan struct{}, viewFanout)
	var wg sync.WaitGroup
	for i, it := range items {
		sk := it.Key().SK
		wg.Go(func() {
			sem <- struct{}{}
			defer func() { <-sem }()
			rows[i], keep[i], errs[i] = s.viewRow(ctx, awnID, sk)
		})
	}
	wg.Wait()
	if err := errors.Join(errs...); err != nil {
		return AgentWorldPage{}, err
	}
	for i, r := range rows {
		if keep[i] {
			out.Worlds = append(out.Worlds, r)
		}
	}
	return out, nil
}

// viewRow reads one row of the view; false when its world or membership
// is gone.
func (s *Service) viewRow(ctx context.Context, awnID, sk string) (AgentWorld, bool, error) {
	if w, ok := strings.CutPrefix(sk, joinedPrefix); ok {
		// The member and its webhook side by side: one round trip.
		mh := s.readMemberHook(ctx, w, awnID)
		m, h, err := mh.m, mh.h, mh.err
		if errors.Is(err, store.ErrNotFound) {
			return AgentWorld{}, false, nil
		}
		if err != nil {
			return AgentWorld{}, false, apierror.FromStore("read member", err)
		}
		p := PresenceOf(m, h, s.now())
		if h.Set {
			if h, err = s.readHookStats(ctx, w, awnID, h); err != nil {
				return AgentWorld{}, false, apierror.FromStore("read webhook stats", err)
			}
		}
		return AgentWorld{World: w, Role: RoleMember, Member: m, Hook: h, Presence: p}, true, nil
	}
	if w, ok := strings.CutPrefix(sk, ownsPrefix); ok {
		m, err := s.GetWorld(ctx, w)
		if apierror.KindOf(err) == apierror.NotFound {
			return AgentWorld{}, false, nil
		}
		if err != nil {
			return AgentWorld{}, false, err
		}
		return AgentWorld{World: w, Role: RoleOwner, Manifest: m}, true, nil
	}
	return AgentWorld{}, false, internal(fmt.Errorf("world: index item %q of %s", sk, awnID))
}

// SetRegistryPresence carries a registration's presence to every world
// awnID joined (JoinedWorlds, then SetRegistryPresenceIn).
func (s *Service) SetRegistryPresence(ctx context.Context, awnID string, offline bool) error {
	worlds, err := s.JoinedWorlds(ctx, awnID)
	if err != nil {
		return err
	}
	return s.SetRegistryPresenceIn(ctx, awnID, worlds, offline, nil)
}

// JoinedWorlds lists the worlds awnID joined, from its index: 1 Query per
// 100. The registry runs it beside its own reads of a presence change, so
// that listing the worlds costs no round trip of its own.
func (s *Service) JoinedWorlds(ctx context.Context, awnID string) ([]string, error) {
	if !ValidAWNID(awnID) {
		return nil, nil // no such agent can have joined a world
	}
	var worlds []string
	q := store.Query{PK: AgentPK(awnID), SK: store.SKPrefix(joinedPrefix), Limit: MaxListLimit}
	for {
		page, err := s.store.Query(ctx, q)
		if err != nil {
			return nil, apierror.FromStore("list the agent's worlds", err)
		}
		for _, it := range page.Items {
			worlds = append(worlds, strings.TrimPrefix(it.Key().SK, joinedPrefix))
		}
		if page.Cursor == "" || len(page.Items) == 0 {
			return worlds, nil
		}
		q.Cursor = page.Cursor
	}
}

// registryFanOut bounds the worlds SetRegistryPresenceIn changes at once.
const registryFanOut = 16

// SetRegistryPresenceIn carries a registration's presence to worlds, the
// worlds awnID joined: offline sets registryOffline on each membership
// (which overrides every other sign of presence), online clears it, and
// where the presence the world announced changes, presence.changed is
// committed with the update. The worlds change side by side (up to
// registryFanOut at once), each in 2 round trips: its member and webhook
// read together (or taken from read, ReadPresenceIn's, which the registry
// runs beside its own write), then 1 commit where presence changed or 1
// UpdateItem where it did not; each write is conditioned on what it
// decided from, so a member changed since is read again. It returns the
// first error, after every world was tried; retrying finishes what an
// error cut short.
func (s *Service) SetRegistryPresenceIn(ctx context.Context, awnID string, worlds []string, offline bool, read *PresenceReads) error {
	return fanOut(worlds, func(_ int, w string) error {
		var first *memberHook
		if read != nil {
			mh, ok := read.byWorld[w]
			switch {
			case ok && errors.Is(mh.err, store.ErrNotFound):
				return nil // left since it was listed
			case ok && mh.err == nil:
				first = &mh
			}
		}
		return s.setRegistryPresence(ctx, w, awnID, offline, first)
	})
}

// fanOut runs f for every world (and its index), up to registryFanOut at
// once, and returns the first error in the worlds' order.
func fanOut(worlds []string, f func(int, string) error) error {
	errs := make([]error, len(worlds))
	sem := make(chan struct{}, registryFanOut)
	var wg sync.WaitGroup
	for i, w := range worlds {
		sem <- struct{}{}
		wg.Go(func() {
			defer func() { <-sem }()
			errs[i] = f(i, w)
		})
	}
	wg.Wait()
	for _, err := range errs {
		if err != nil {
			return err
		}
	}
	return nil
}

// PresenceReads are the member and webhook items of an agent in the
// worlds it joined, as ReadPresenceIn read them.
type PresenceReads struct {
	byWorld map[string]memberHook
}

// Cover reports whether p read every one of worlds (a member gone or
// not, but no read failed): a caller that guessed the worlds before
// listing them knows then it guessed right.
func (p *PresenceReads) Cover(worlds []string) bool {
	for _, w := range worlds {
		mh, ok := p.byWorld[w]
		if !ok || (mh.err != nil && !errors.Is(mh.err, store.ErrNotFound)) {
			return false
		}
	}
	return true
}

// memberHook is a member and its webhook as read together (a member gone
// is err ErrNotFound).
type memberHook struct {
	m   Member
	h   Hook
	err error
}

// ReadPresenceIn reads awnID's member and webhook items in each of worlds
// side by side (1 round trip), for SetRegistryPresenceIn: a read that
// failed is made again there.
func (s *Service) ReadPresenceIn(ctx context.Context, awnID string, worlds []string) *PresenceReads {
	reads := make([]memberHook, len(worlds))
	_ = fanOut(worlds, func(i int, w string) error {
		reads[i] = s.readMemberHook(ctx, w, awnID)
		return nil
	})
	pr := &PresenceReads{byWorld: make(map[string]memberHook, len(worlds))}
	for i, w := range worlds {
		pr.byWorld[w] = reads[i]
	}
	return pr
}

// readMemberHook reads awnID's member and webhook in world side by side.
func (s *Service) readMemberHook(ctx context.Context, world, awnID string) memberHook {
	var h Hook
	var herr error
	var wg sync.WaitGroup
	wg.Go(func() { h, herr = s.readHook(ctx, world, awnID) })
	m, err := s.readMember(ctx, world, awnID)
	wg.Wait()
	if err == nil && herr != nil {
		err = apierror.FromStore("read webhook", herr)
	}
	return memberHook{m: m, h: h, err: err}
}

func (s *Service) setRegistryPresence(ctx context.Context, world, awnID string, offline bool, first *memberHook) error {
	set := func(a store.Action) store.Action {
		if offline {
			return a.SetAttr(attrRegistryOffline, store.Bool(true))
		}
		return a.Del(attrRegistryOffline)
	}
	for range moderationAttempts {
		var mh memberHook
		if first != nil {
			mh, first = *first, nil
		} else {
			mh = s.readMemberHook(ctx, world, awnID)
		}
		m, h, err := mh.m, mh.h, mh.err
		if errors.Is(err, store.ErrNotFound) {
			return nil // left meanwhile
		}
		if err != nil {
			return apierror.FromStore("read member", err)
		}
		next := m
		next.RegistryOffline = offline
		p := PresenceOf(next, h, s.now())
		if p != m.announced() {
			ok, err := s.announce(ctx, m, p, time.Time{}, set)
			if err != nil || ok {
				return err
			}
			continue // presence announced meanwhile: read again
		}
		_, err = s.store.Write(ctx, set(store.Update(MemberKey(world, awnID))).When(store.Eq(attrJoinedAt, store.N(m.JoinedAt.UnixNano()))))
		if errors.Is(err, store.ErrConditionFailed) {
			continue
		}
		if err != nil {
			return apierror.FromStore("set registry presence", err)
		}
		return nil
	}
	return &apierror.Error{Kind: apierror.Unavailable, RetryAfter: apierror.StoreRetryAfter,
		Message: "the membership is changing concurrently; retry"}
}

// BareMembership is the items of a membership without a key or a slot —
// its member item and its entry in the agent's index of worlds, the two
// that member-only writes and deliveries check — as Puts, for benches and
// tests that need many members of a world without joining each. A real
// membership comes from a join.
func BareMembership(world, awnID string) []store.Action {
	return []store.Action{
		store.Put(MemberKey(world, awnID), store.Item{AttrType: store.S(TypeMember), attrAWNID: store.S(awnID)}),
		store.Put(joinedIndexKey(world, awnID), store.Item{AttrType: store.S(TypeAgentWorld), attrWorld: store.S(world)}),
	}
}
