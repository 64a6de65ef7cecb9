package world

import (
	"cmp"
	"context"
	"crypto/ed25519"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"sync"
	"time"

	"github.com/a2awire/a2awire/shared/apierror"
	"github.com/a2awire/a2awire/shared/auth"
	"github.com/a2awire/a2awire/shared/ident"
	"github.com/a2awire/a2awire/shared/store"
	"github.com/a2awire/a2awire/shared/store/guard"
)

// Presence values of the agents list.
const (
	PresenceOnline  = "online"
	PresenceOffline = "offline"
)

// Presence is a member's presence at now by the presence rule when it has
// no webhook (PresenceOf with none).
func Presence(m Member, now time.Time) string { return PresenceOf(m, Hook{}, now) }

func polledWithin(m Member, now time.Time) bool {
	return !m.LastPollAt.IsZero() && now.Sub(m.LastPollAt) <= ReachableWithin
}

func notJoined(world string) error {
	return apierror.New(apierror.NotJoined, "this key has not joined world %s; join it first", apierror.Quote(world))
}

func memberNotFound(world, awnID string) error {
	return apierror.New(apierror.NotFound, "%s is not a member of world %s", apierror.Quote(awnID), apierror.Quote(world))
}

func decodeMember(world string, it store.Item) (Member, error) {
	m := Member{
		World:     world,
		AWNID:     it.Str(attrAWNID),
		KeyID:     it.Str(attrKeyID),
		PublicKey: ed25519.PublicKey(it.Bytes(attrPublicKey)),
		SubjectID: it.Str(attrSubjectID),
	}
	if it.Str(AttrType) != TypeMember || m.AWNID == "" || len(m.PublicKey) != ed25519.PublicKeySize {
		return Member{}, fmt.Errorf("world: item %s is not a member", it.Key())
	}
	if md := it.Str(attrMetadata); md != "" {
		m.Metadata = json.RawMessage(md)
	}
	var err error
	if m.Slot, err = it.Int(attrSlot); err != nil {
		return Member{}, fmt.Errorf("world: member %s: %w", it.Key(), err)
	}
	joined, err := it.Int(attrJoinedAt)
	if err != nil {
		return Member{}, fmt.Errorf("world: member %s: %w", it.Key(), err)
	}
	m.JoinedAt = time.Unix(0, joined).UTC()
	for _, t := range []struct {
		attr string
		to   *time.Time
	}{{attrLastPollAt, &m.LastPollAt}, {attrStreamUntil, &m.StreamUntil}, {attrProbeOKAt, &m.ProbeOKAt}, {attrProbeFailAt, &m.ProbeFailAt}} {
		if _, ok := it[t.attr]; !ok {
			continue
		}
		ns, err := it.Int(t.attr)
		if err != nil {
			return Member{}, fmt.Errorf("world: member %s: %w", it.Key(), err)
		}
		*t.to = time.Unix(0, ns).UTC()
	}
	m.RegistryOffline = it.BoolAttr(attrRegistryOffline)
	m.Announced = it.Str(attrPresence)
	return m, nil
}

// awnIDHex: the 64 lowercase hex digits after auth.AWNIDPrefix.
var awnIDHex = ident.AWNIDHex

// validMember reports whether world and awnID are well-formed, so that a
// malformed one is answered as "not a member" without a store call (and
// never reaches the store as an oversized key).
func validMember(world, awnID string) bool {
	return worldIDShape.Match(world) && ValidAWNID(awnID)
}

// readMember returns awnID's membership, or an error wrapping
// store.ErrNotFound when there is none.
func (s *Service) readMember(ctx context.Context, world, awnID string) (Member, error) {
	if !validMember(world, awnID) {
		return Member{}, fmt.Errorf("world: %w", store.ErrNotFound) // no such id can have joined
	}
	it, err := s.store.Get(ctx, MemberKey(world, awnID))
	if err != nil {
		return Member{}, err
	}
	m, err := decodeMember(world, it)
	if err != nil {
		return Member{}, internal(err)
	}
	return m, nil
}

// SubjectPresence is a Subjects that also tells whether the registration
// is offline (registry.Registry.Subject), with the same one lookup: a new
// member whose registration is offline joins with the override set.
type SubjectPresence interface {
	Subject(ctx context.Context, key ed25519.PublicKey) (name string, offline bool, err error)
}

// subjectFor returns the registry name bound to pub, "" when none (or no
// registry is configured), and whether that registration is offline.
func (s *Service) subjectFor(ctx context.Context, pub ed25519.PublicKey) (string, bool, error) {
	if s.subjects == nil {
		return "", false, nil
	}
	var name string
	var offline bool
	var err error
	if sp, ok := s.subjects.(SubjectPresence); ok {
		name, offline, err = sp.Subject(ctx, pub)
	} else {
		name, err = s.subjects.NameForKey(ctx, pub)
	}
	if err != nil {
		var e *apierror.Error
		if errors.As(err, &e) {
			if e.Kind == apierror.NotFound {
				return "", false, nil
			}
			return "", false, e
		}
		return "", false, apierror.FromStore("look up subject", err)
	}
	return name, offline, nil
}

// joinedData is the payload of agent.joined.
type joinedData struct {
	AWNID     string  `json:"awnId"`
	Slot      int64   `json:"slot"`
	SubjectID *string `json:"subjectId"`
}

// Join makes pub a member (created=true) or returns the existing membership
// unchanged (false: same slot). Unknown world → NotFound; a closed world →
// Conflict WORLD_CLOSED; a world at its maxMembers → Conflict WORLD_FULL,
// both enforced by the condition on the manifest in the join's own
// transaction. metadata is nil or a JSON object ≤ 4 KiB (Invalid
// otherwise). It emits a public agent.joined event in the same Write as
// the membership.
//
// Cost: 2 round trips one after the other. First, side by side: the
// member item (GetItem), the registry's key item when Subjects is set
// (GetItem), the manifest (GetItem) and the key's inbox (Query: messages
// a racing send left behind a leave; in a world of K event shards, K
// Queries, one per shard of the inbox, once this instance knows K). A
// member already: done (200). Then 1
// TransactWriteItems through the log: member, member key, roster, the
// manifest's slot, member count and listing version set from what was
// read and conditioned on the manifest being unchanged since (which also
// holds the world open and below its cap), the ban check, the agent's
// index item, the listing items' new count, the inbox's strays deleted,
// the event and its head.
//
// The manifest condition is optimistic: a join that loses it to another
// change of the manifest (a racing join, a leave) takes the manifest the
// failed write returns and tries again with no read; after
// joinOptimisticRounds such losses it allocates its slot by an UpdateItem
// returning the counter, which cannot lose, and refreshes the listing
// after its commit (joinAllocating): under a burst of joins into one world
// a join costs up to 4 more round trips but always gets through. When a
// racing join of the same key wins the transaction, the loser returns the
// winner's membership. An outcome the store reports as unknown is settled
// by the log; if even that fails, the member item is re-read: ours →
// joined.
func (s *Service) Join(ctx context.Context, world string, pub ed25519.PublicKey, metadata json.RawMessage) (Member, bool, error) {
	if len(pub) != ed25519.PublicKeySize {
		return Member{}, false, invalid("publicKey must be %d bytes, not %d", ed25519.PublicKeySize, len(pub))
	}
	if err := auth.CheckPublicKey(pub); err != nil {
		return Member{}, false, invalid("publicKey must be a safe Ed25519 public key (not small-order, canonically encoded)")
	}
	md, err := jsonObject("metadata", metadata, MaxMetadataBytes)
	if err != nil {
		return Member{}, false, err
	}
	if !worldIDShape.Match(world) {
		return Member{}, false, worldNotFound(world)
	}
	awnID := auth.AWNID(pub)
	// Everything the join decides on, read side by side (one round trip;
	// the request's guard is written beside them).
	var (
		cur            Member
		curErr, subErr error
		subject        string
		offline        bool
		man            store.Item
		manErr         error
		strays         store.Page
		strayErr       error
		wg             sync.WaitGroup
	)
	wg.Go(func() { cur, curErr = s.readMember(ctx, world, awnID) })
	wg.Go(func() { subject, offline, subErr = s.subjectFor(ctx, pub) })
	wg.Go(func() { man, manErr = s.store.Get(ctx, ManifestKey(world)) })
	// The inbox's shards this instance knows of (the world's head names
	// them; the commit below learns them if they are more, and afterJoin
	// then clears the rest): no read of the head before them.
	strayShards := s.log.shards.get(world)
	wg.Go(func() { strays, strayErr = s.readStrays(ctx, world, awnID, strayShards) })
	wg.Wait()
	switch {
	case curErr == nil:
		return cur, false, nil
	case !errors.Is(curErr, store.ErrNotFound):
		return Member{}, false, apierror.FromStore("read member", curErr)
	}
	if subErr != nil {
		return Member{}, false, subErr
	}
	if errors.Is(manErr, store.ErrNotFound) {
		return Member{}, false, worldNotFound(world)
	}
	if manErr != nil {
		return Member{}, false, apierror.FromStore("read world", manErr)
	}
	if strayErr != nil {
		return Member{}, false, apierror.FromStore("read inbox", strayErr)
	}
	j := joining{world: world, pub: pub, subject: subject, offline: offline, md: md, strays: strays, strayShards: strayShards}
	for range joinOptimisticRounds {
		seen, err := decodeManifest(man)
		if err != nil {
			return Member{}, false, internal(err)
		}
		if err := refusal(seen); err != nil {
			return Member{}, false, err
		}
		slots, err := man.Int(attrSlots)
		if err != nil {
			return Member{}, false, internal(fmt.Errorf("world: manifest of %q: %w", world, err))
		}
		ver, _ := man.Int(attrListVer) // absent: 0
		after := seen
		after.Members++
		up := store.Update(ManifestKey(world)).
			SetAttr(attrSlots, store.N(slots+1)).
			SetAttr(attrMembers, store.N(after.Members)).
			SetAttr(attrListVer, store.N(ver+1)).
			When(store.And(joinable(seen.MaxMembers), manifestUnchanged(man))).OnFailReturn()
		m, isNew, err := s.joinCommit(ctx, j, slots+1, up, listingPuts(after, ver+1))
		var cf *store.ConditionFailedError
		if errors.As(err, &cf) && cf.Action == joinManifest && cf.Item != nil {
			man = cf.Item // changed since read: try again on what it is now
			continue
		}
		return m, isNew, err
	}
	return s.joinAllocating(ctx, j)
}

// joinStrays bounds the inbox messages a join deletes in its own
// transaction (of each shard it reads); more (never seen but after a
// flood racing a leave) are cleared after its commit.
const joinStrays = 25

// readStrays reads the first joinStrays messages of each of the first
// shards shards of awnID's inbox in world, side by side, as one page: its
// cursor is set when any shard's page was cut.
func (s *Service) readStrays(ctx context.Context, world, awnID string, shards int) (store.Page, error) {
	pages := make([]store.Page, shards)
	errs := make([]error, shards)
	var wg sync.WaitGroup
	for n := range shards {
		wg.Go(func() {
			pages[n], errs[n] = s.store.Query(ctx, store.Query{PK: ShardPK(InboxPK(world, awnID), n), Limit: joinStrays})
		})
	}
	wg.Wait()
	var all store.Page
	for n, p := range pages {
		if errs[n] != nil {
			return store.Page{}, errs[n]
		}
		all.Items = append(all.Items, p.Items...)
		if p.Cursor != "" {
			all.Cursor = p.Cursor
		}
	}
	return all, nil
}

// joinOptimisticRounds is how many times a join writes on the manifest it
// read (or the one its last failed write returned) before it allocates its
// slot by an UpdateItem that cannot lose a race.
const joinOptimisticRounds = 2

// joining is what a join read before its commit.
type joining struct {
	world           string
	pub             ed25519.PublicKey
	subject         string
	offline         bool
	md              json.RawMessage
	strays          store.Page
	strayShards     int  // the inbox's shards strays was read from
	needsRefreshing bool // the listing is refreshed after the commit
}

// joinManifest is the index of the manifest's update among the actions of
// a join's commit; joinBanCheck that of the ban check.
const (
	joinManifest = 2
	joinBanCheck = 4
)

// manifestUnchanged is the condition that the manifest is still the item
// it was when read: its version of the listing, its counters and its last
// update (which close, reopen and an owner's update move).
func manifestUnchanged(it store.Item) store.Cond {
	return unchanged(it, attrSlots, attrMembers, attrUpdatedAt, attrListVer)
}

// joinCommit commits the membership of j with slot, the manifest's update
// up (index joinManifest), then more (the listing's items) and the strays'
// deletes. A failed condition of up with the item returned is returned as
// the store's *store.ConditionFailedError for the caller to try again.
func (s *Service) joinCommit(ctx context.Context, j joining, slot int64, up store.Action, more []store.Action) (Member, bool, error) {
	world, pub := j.world, j.pub
	awnID, keyID := auth.AWNID(pub), auth.KeyID(pub)
	now := s.now().UTC()
	m := Member{World: world, AWNID: awnID, KeyID: keyID, PublicKey: append(ed25519.PublicKey(nil), pub...),
		Slot: slot, SubjectID: j.subject, Metadata: j.md, JoinedAt: now}
	data := joinedData{AWNID: awnID, Slot: slot}
	if j.subject != "" {
		data.SubjectID = &j.subject
	}
	ev, err := s.ids.NewEvent(world, AgentJoined, Public, "", data, now)
	if err != nil {
		return Member{}, false, internal(err)
	}
	it := store.Item{
		AttrType:      store.S(TypeMember),
		attrAWNID:     store.S(awnID),
		attrKeyID:     store.S(keyID),
		attrPublicKey: store.B(pub),
		attrSlot:      store.N(slot),
		attrJoinedAt:  store.N(now.UnixNano()),
	}
	if j.subject != "" {
		it[attrSubjectID] = store.S(j.subject)
	}
	if j.offline {
		it[attrRegistryOffline] = store.Bool(true)
		m.RegistryOffline = true
	}
	if j.md != nil {
		it[attrMetadata] = store.S(string(j.md))
	}
	acts := []store.Action{
		store.Put(MemberKey(world, awnID), it).When(store.ItemAbsent()),
		// The member key carries the membership's joinedAt, so that a
		// leave whose key lookup read it can condition its removal on
		// it without reading the member (LeaveAs), and the presence last
		// announced (offline: none yet), so that a poll whose lookup
		// read it knows whether it brings the member online (PollAs).
		store.Put(MemberKeyKey(world, keyID), memberKeyItem(awnID, keyID, pub, now, j.offline)).When(store.ItemAbsent()),
		// The world's rules hold in the join's own transaction: open, and
		// below its cap (the cap read with the slot; a changed cap fails
		// too, and is reported as the item now says).
		up,
		store.Put(RosterKey(world, awnID), store.Item{AttrType: store.S(TypeRoster), attrAWNID: store.S(awnID)}),
		banCheck(world, awnID),
		joinedIndexPut(world, pub, now),
	}
	acts = append(acts, more...)
	// Messages a send left in this key's inbox while it was leaving
	// before: no member may read them (a new member starts empty).
	strayDeletes := j.strays.Cursor == "" && len(acts)+len(j.strays.Items)+2 <= store.MaxActions
	if strayDeletes {
		for _, st := range j.strays.Items {
			acts = append(acts, store.Delete(st.Key()))
		}
	}
	_, err = s.log.Commit(ctx, ev, acts...)
	if err == nil {
		s.afterJoin(ctx, j, strayDeletes)
		return m, true, nil
	}
	if errors.Is(err, store.ErrOutcomeUnknown) {
		// The log could not settle it either: the member item tells.
		cur, rerr := s.readMember(context.WithoutCancel(ctx), world, awnID)
		if rerr == nil && cur.JoinedAt.Equal(now) && cur.Slot == slot {
			s.afterJoin(ctx, j, strayDeletes)
			return cur, true, nil
		}
		return Member{}, false, apierror.FromStore("join world (outcome unknown)", err)
	}
	var cf *store.ConditionFailedError
	if errors.As(err, &cf) && cf.Action == joinManifest {
		if cf.Item == nil {
			return Member{}, false, worldNotFound(world)
		}
		got, derr := decodeManifest(cf.Item)
		if derr != nil {
			return Member{}, false, internal(derr)
		}
		if rerr := refusal(got); rerr != nil {
			return Member{}, false, rerr
		}
		if up.ReturnOnFail && !j.needsRefreshing {
			return Member{}, false, err // optimistic: the caller tries again
		}
		return Member{}, false, &apierror.Error{Kind: apierror.Unavailable, RetryAfter: apierror.StoreRetryAfter,
			Message: "the world's member cap changed during the join; retry"}
	}
	if errors.As(err, &cf) && cf.Action == joinBanCheck {
		return Member{}, false, banned(world) // a racing ban came first
	}
	if !errors.Is(err, store.ErrConditionFailed) {
		return Member{}, false, apierror.FromStore("join world", err)
	}
	// A racing join of the same key won: return its membership.
	cur, err := s.readMember(ctx, world, awnID)
	if err != nil {
		return Member{}, false, apierror.FromStore("read member", err)
	}
	return cur, false, nil
}

// afterJoin finishes a committed join off its transaction: the listing's
// refresh when the commit did not carry it, and strays the transaction
// could not take — too many, or in shards the join did not read (the
// commit was made under the head's count, which the log now knows, and a
// stray was written before it).
func (s *Service) afterJoin(ctx context.Context, j joining, strayDeletes bool) {
	if j.needsRefreshing {
		s.refreshListing(ctx, j.world)
	}
	ctx, awnID := context.WithoutCancel(ctx), auth.AWNID(j.pub)
	switch {
	case !strayDeletes && len(j.strays.Items) > 0:
		_ = s.clearInbox(ctx, j.world, awnID, 0) // the TTL sweeper takes what fails
	case s.log.shards.get(j.world) > j.strayShards:
		_ = s.clearInbox(ctx, j.world, awnID, j.strayShards)
	}
}

// joinAllocating is a join's commit after its optimistic rounds lost:
// the slot from an UpdateItem adding 1 to the counter and returning the
// manifest (a closed or full world is refused here already), the commit
// adding 1 to the member count under the world's rules, then the
// listing's refresh (1 UpdateItem, 1 TransactWriteItems).
func (s *Service) joinAllocating(ctx context.Context, j joining) (Member, bool, error) {
	world := j.world
	res, err := s.store.Write(ctx, store.Update(ManifestKey(world)).
		AddNum(attrSlots, 1).When(store.ItemExists()).Returning())
	if errors.Is(err, store.ErrConditionFailed) {
		return Member{}, false, worldNotFound(world)
	}
	if err != nil {
		return Member{}, false, apierror.FromStore("allocate slot", err)
	}
	slot, err := res[0].Int(attrSlots)
	if err != nil {
		return Member{}, false, internal(fmt.Errorf("world: manifest of %q: %w", world, err))
	}
	seen, err := decodeManifest(res[0])
	if err != nil {
		return Member{}, false, internal(err)
	}
	if err := refusal(seen); err != nil {
		return Member{}, false, err
	}
	j.needsRefreshing = true
	up := store.Update(ManifestKey(world)).AddNum(attrMembers, 1).When(joinable(seen.MaxMembers)).OnFailReturn()
	return s.joinCommit(ctx, j, slot, up, nil)
}

// refusal is why a world as m shows it refuses a join, or nil.
func refusal(m Manifest) error {
	if m.Status == StatusClosed {
		return worldClosed(m.ID)
	}
	if m.MaxMembers > 0 && m.Members >= m.MaxMembers {
		return worldFull(m.ID, m.MaxMembers)
	}
	return nil
}

// joinable is the condition on the manifest of a join's transaction: the
// world exists, is not closed, and has the cap maxMembers the join read
// (none: none) with room under it.
func joinable(maxMembers int64) store.Cond {
	c := []store.Cond{store.ItemExists(), store.Ne(attrStatus, store.S(StatusClosed))}
	if maxMembers > 0 {
		c = append(c, store.Eq(attrMaxMember, store.N(maxMembers)), store.Lt(attrMembers, store.N(maxMembers)))
	} else {
		c = append(c, store.NotExists(attrMaxMember))
	}
	return store.And(c...)
}

// leftData is the payload of agent.left.
type leftData struct {
	AWNID string `json:"awnId"`
}

// Leave removes the membership and its member-key item, deletes the
// member's webhook item (WebhookKey), its item in the agent's index of
// worlds (the agent's view) and every message of its inbox (the InboxPK
// partition), and emits a public agent.left. Not a member → NotJoined; a
// world deleted meanwhile → NotFound.
//
// Cost: 2 round trips one after the other. First, side by side: the
// member (GetItem, for its keyid and joinedAt), the manifest (GetItem)
// and the inbox's first messages (Query). Then 1 TransactWriteItems
// through the log: delete member, member key, webhook and index item, the
// manifest's member count and listing version set from what was read
// (conditioned on it being unchanged since; see removeWith), the listing
// items' new count, the inbox's messages, the event and the event head.
// An inbox too large for that transaction is cleared after it, a page of
// up to 100 messages at a time (1 Query, 1 Write each). In a world of K
// event shards the inbox is K partitions (a message is in its event's
// shard): the transaction takes shard 0's, and the others are cleared
// after it (1 GetItem of the head, then K-1 Queries side by side, and a
// Write per shard holding messages). Only the leave
// that wins the conditional delete of the member item clears the inbox; a
// write whose outcome was unknown counts as won once the log has settled
// it as committed, and touches nothing while it stays unknown.
func (s *Service) Leave(ctx context.Context, world, awnID string) error {
	return s.LeaveAs(ctx, world, awnID, "")
}

// LeaveAs is Leave signed by keyID, the member's key. When the request's
// key lookup read keyID's member key item (guard.Kept: an instance that
// had not seen the key), that item gives the membership — its awnId and
// the joinedAt the join wrote on it — so the member is not read: the
// removal is conditioned on that joinedAt, as on the member's, and the
// manifest comes from the route's read ahead (LeaveReads). The inbox,
// whose partition needed the awnId, is read beside the transaction (1
// Query, under no guard: only what a won leave found is deleted) and its
// messages are deleted after it (1 Write), only when there are any. So a
// leave on such an instance is 2 round trips (the key with the manifest,
// then the transaction), 3 when its inbox holds messages (in a world of
// several event shards, the other shards are cleared as Leave's). A member key
// item from before joinedAt was written on it takes Leave's path.
func (s *Service) LeaveAs(ctx context.Context, world, awnID, keyID string) error {
	if cur, ok := s.keptMember(ctx, world, awnID, keyID); ok {
		return s.leaveKept(ctx, cur)
	}
	var (
		cur  Member
		err  error
		snap removal
		wg   sync.WaitGroup
	)
	wg.Go(func() { cur, err = s.readMember(ctx, world, awnID) })
	wg.Go(func() { snap = s.readForRemoval(ctx, world, awnID) })
	wg.Wait()
	if errors.Is(err, store.ErrNotFound) {
		return notJoined(world)
	}
	if err != nil {
		return apierror.FromStore("read member", err)
	}
	ev, err := s.ids.NewEvent(world, AgentLeft, Public, "", leftData{AWNID: awnID}, s.now().UTC())
	if err != nil {
		return internal(err)
	}
	err = s.removeWith(ctx, cur, snap, ev)
	if errors.Is(err, store.ErrConditionFailed) {
		return notJoined(world) // a racing leave came first
	}
	return err
}

// memberKeyItem is the member key item a join writes. Its presence is the
// member item's as announced (announceWith keeps it so), offline at the
// join; left unset when the registration is offline, since a poll then
// announces nothing and must take the member item's word (markPolled).
func memberKeyItem(awnID, keyID string, pub ed25519.PublicKey, joined time.Time, registryOffline bool) store.Item {
	it := store.Item{
		AttrType:      store.S(TypeMemberKey),
		attrAWNID:     store.S(awnID),
		attrKeyID:     store.S(keyID),
		attrPublicKey: store.B(pub),
		attrJoinedAt:  store.N(joined.UnixNano()),
	}
	if !registryOffline {
		it[attrPresence] = store.S(PresenceOffline)
	}
	return it
}

// keptPresence is the presence announced for the member whose key item
// this request's key lookup read (see memberKeyItem): "" when the lookup
// read none, or one written before the item carried it.
func keptPresence(ctx context.Context, world, keyID string) string {
	it, ok := guard.Kept(ctx, MemberKeyKey(world, keyID))
	if !ok || it.Str(AttrType) != TypeMemberKey {
		return ""
	}
	return it.Str(attrPresence)
}

// keptMember is the membership of awnID in world as the member key item of
// keyID that this request's key lookup read shows it (guard.Kept); false
// when the lookup read none, or one without joinedAt, or another member's.
func (s *Service) keptMember(ctx context.Context, world, awnID, keyID string) (Member, bool) {
	if keyID == "" || !validMember(world, awnID) {
		return Member{}, false
	}
	it, ok := guard.Kept(ctx, MemberKeyKey(world, keyID))
	if !ok || it.Str(AttrType) != TypeMemberKey || it.Str(attrAWNID) != awnID || it.Str(attrKeyID) != keyID {
		return Member{}, false
	}
	if _, has := it[attrJoinedAt]; !has {
		return Member{}, false
	}
	joined, err := it.Int(attrJoinedAt)
	if err != nil {
		return Member{}, false
	}
	return Member{World: world, AWNID: awnID, KeyID: keyID, PublicKey: ed25519.PublicKey(it.Bytes(attrPublicKey)),
		JoinedAt: time.Unix(0, joined).UTC()}, true
}

// leaveKept is LeaveAs on the membership cur its key lookup read.
func (s *Service) leaveKept(ctx context.Context, cur Member) error {
	world, awnID := cur.World, cur.AWNID
	var snap removal
	if it, err := s.store.Get(ctx, ManifestKey(world)); err == nil {
		snap.manifest = it // read ahead beside the key: no call
	}
	ev, err := s.ids.NewEvent(world, AgentLeft, Public, "", leftData{AWNID: awnID}, s.now().UTC())
	if err != nil {
		return internal(err)
	}
	// The inbox beside the transaction, not under the request's guard
	// (which the transaction carries): its messages are deleted only
	// once this leave has won.
	var inbox store.Page
	var inboxErr error
	var wg sync.WaitGroup
	wg.Go(func() { inbox, inboxErr = s.store.Query(guard.Without(ctx), inboxRead(world, awnID)) })
	snap.inboxAfter = true
	err = s.removeWith(ctx, cur, snap, ev)
	wg.Wait()
	if errors.Is(err, store.ErrConditionFailed) {
		return notJoined(world) // a racing leave, kick or rejoin came first
	}
	if err != nil {
		return err
	}
	ctx = context.WithoutCancel(ctx)
	if inboxErr != nil || inbox.Cursor != "" {
		return s.clearInbox(ctx, world, awnID, 0)
	}
	if len(inbox.Items) > 0 {
		dels := make([]store.Action, len(inbox.Items))
		for i, it := range inbox.Items {
			dels[i] = store.Delete(it.Key())
		}
		if _, err := s.store.Write(ctx, dels...); err != nil {
			return apierror.FromStore("clear inbox", err)
		}
	}
	return s.clearOtherShards(ctx, world, awnID)
}

// removeActions is how many actions of its own remove commits before the
// caller's extra ones (a ban's Put is the first extra one); removeManifest
// is the index of the count's update on the manifest among them.
const (
	removeManifest = 4
	removeActions  = 6
)

// removal is what the end of a membership reads before its commit: the
// manifest (for its count and listing) and the first page of the inbox
// (of its shard 0: inboxRead).
type removal struct {
	manifest store.Item // nil when it could not be read: the count is added to
	inbox    store.Page
	inboxErr error
	// inboxAfter: the inbox was not read; the caller clears it once the
	// removal has committed.
	inboxAfter bool
}

// removeInbox is the most inbox messages a removal deletes in its own
// transaction (the rest, a page at a time, after it).
const removeInbox = 80

// readForRemoval reads, side by side, what removeWith needs of world for
// awnID's removal. A manifest that is gone or unreadable is left nil: the
// commit then adds to the count under ItemExists, which answers NotFound
// for a deleted world, and refreshes the listing after.
func (s *Service) readForRemoval(ctx context.Context, world, awnID string) removal {
	var r removal
	var wg sync.WaitGroup
	wg.Go(func() {
		if it, err := s.store.Get(ctx, ManifestKey(world)); err == nil {
			r.manifest = it
		}
	})
	wg.Go(func() {
		if !validMember(world, awnID) {
			return
		}
		r.inbox, r.inboxErr = s.store.Query(ctx, inboxRead(world, awnID))
	})
	wg.Wait()
	return r
}

// remove ends membership cur as removeWith does, reading what it needs
// first (readForRemoval).
func (s *Service) remove(ctx context.Context, cur Member, ev Event, extra ...store.Action) error {
	return s.removeWith(ctx, cur, s.readForRemoval(ctx, cur.World, cur.AWNID), ev, extra...)
}

// removeWith ends membership cur, committing ev and extra in the same
// write (the deletes of member, member key, webhook and index item, the
// count's update and the webhook counters' delete first, then extra, then the listing's items and the
// inbox's messages read in snap). The member item's delete is conditioned
// on cur's joinedAt, so of racing removals (leave, kick, ban) one wins; a
// failed condition is returned as the store's *store.ConditionFailedError,
// its Action counting these actions, anything else as an *apierror.Error.
// A world deleted meanwhile → NotFound.
//
// The count is set from the manifest snap read, conditioned on the
// manifest being unchanged since, so the listing's items take the new
// count in the same transaction; a removal that loses that condition to
// another change tries once more on the manifest its failed write
// returned, then adds -1 to the count and refreshes the listing after its
// commit (2 more round trips, under a burst of changes to one world only).
func (s *Service) removeWith(ctx context.Context, cur Member, snap removal, ev Event, extra ...store.Action) error {
	world, awnID := cur.World, cur.AWNID
	man := snap.manifest
	for round := 0; ; round++ {
		optimistic := man != nil && round < joinOptimisticRounds
		var listing []store.Action
		// The member count, in the same write (the world must still
		// exist: a deleted world's deleter removes the membership).
		count := store.Update(ManifestKey(world)).AddNum(attrMembers, -1).When(store.ItemExists())
		if optimistic {
			m, err := decodeManifest(man)
			if err != nil {
				return internal(err)
			}
			ver, _ := man.Int(attrListVer) // absent: 0
			m.Members--
			count = store.Update(ManifestKey(world)).SetAttr(attrMembers, store.N(m.Members)).SetAttr(attrListVer, store.N(ver+1)).
				When(store.And(store.ItemExists(), manifestUnchanged(man))).OnFailReturn()
			listing = listingPuts(m, ver+1)
		}
		acts := append([]store.Action{
			store.Delete(MemberKey(world, awnID)).When(store.Eq(attrJoinedAt, store.N(cur.JoinedAt.UnixNano()))),
			store.Delete(MemberKeyKey(world, cur.KeyID)),
			store.Delete(WebhookKey(world, awnID)),
			store.Delete(joinedIndexKey(world, awnID)),
			count,
			// The webhook's counters (package webhook's item, on a key
			// of their own), which would outlive the webhook otherwise.
			store.Delete(WebhookStatsKey(world, awnID)),
		}, extra...)
		acts = append(acts, listing...)
		inboxDone := snap.inboxAfter || snap.inboxErr == nil && snap.inbox.Cursor == "" && len(acts)+len(snap.inbox.Items)+2 <= store.MaxActions
		if inboxDone {
			for _, it := range snap.inbox.Items {
				acts = append(acts, store.Delete(it.Key()))
			}
		}
		_, err := s.log.Commit(ctx, ev, acts...)
		var cf *store.ConditionFailedError
		if errors.As(err, &cf) && cf.Action == removeManifest {
			if cf.Item == nil {
				return worldNotFound(world)
			}
			if optimistic {
				man = cf.Item // changed since read: once more on what it is now
				continue
			}
			return worldNotFound(world)
		}
		if errors.Is(err, store.ErrConditionFailed) {
			return err
		}
		if err != nil {
			// Unsettled outcomes included: the inbox is not touched unless
			// this removal is known to have won.
			return apierror.FromStore("end membership", err)
		}
		// The membership is gone: finish the rest even if the caller goes.
		ctx = context.WithoutCancel(ctx)
		if !optimistic {
			s.refreshListing(ctx, world)
		}
		switch {
		case snap.inboxAfter:
			return nil // the caller clears the inbox
		case inboxDone:
			return s.clearOtherShards(ctx, world, awnID)
		}
		return s.clearInbox(ctx, world, awnID, 0)
	}
}

// clearOtherShards clears the inbox's shards past 0 after a removal that
// deleted what shard 0 held. The removal committed through the log under
// the head's count, which the log keeps (its commit was conditioned on
// it), and every message was written before it (a send is conditioned on
// the membership): with one shard nothing is read.
func (s *Service) clearOtherShards(ctx context.Context, world, awnID string) error {
	if s.log.shards.get(world) <= 1 {
		return nil
	}
	return s.clearInbox(ctx, world, awnID, 1)
}

// clearInbox deletes every message of awnID's inbox in world from shard
// from on, of as many as the event head names (a message is in the shard
// its event's id picks among them): 1 GetItem of the head, then per shard,
// side by side, a page of at most store.MaxActions at a time (1 Query, and
// 1 Write when it holds messages).
func (s *Service) clearInbox(ctx context.Context, world, awnID string, from int) error {
	h, err := s.log.Head(ctx, world)
	if err != nil {
		return apierror.FromStore("read inbox", err)
	}
	shards := max(h.Shards, 1)
	if from >= shards {
		return nil
	}
	errs := make([]error, shards)
	var wg sync.WaitGroup
	for n := from; n < shards; n++ {
		wg.Go(func() { errs[n] = s.clearShard(ctx, ShardPK(InboxPK(world, awnID), n)) })
	}
	wg.Wait()
	for _, err := range errs {
		if err != nil {
			return err
		}
	}
	return nil
}

// clearShard deletes every item of the inbox shard pk, a page at a time.
func (s *Service) clearShard(ctx context.Context, pk string) error {
	q := store.Query{PK: pk, Limit: store.MaxActions}
	for {
		page, err := s.store.Query(ctx, q)
		if err != nil {
			return apierror.FromStore("read inbox", err)
		}
		if len(page.Items) > 0 {
			dels := make([]store.Action, len(page.Items))
			for i, it := range page.Items {
				dels[i] = store.Delete(it.Key())
			}
			if _, err := s.store.Write(ctx, dels...); err != nil {
				return apierror.FromStore("clear inbox", err)
			}
		}
		if page.Cursor == "" || len(page.Items) == 0 {
			return nil
		}
		q.Cursor = page.Cursor
	}
}

// membersEnd bounds a Query of the manifest and the member items: the
// sort keys MANIFEST and MEMBER#… are adjacent ("MANIFEST" < "MEMBER#" <
// "MEMBER$" < "MKEY#"), so one range reads both and nothing else.
const membersEnd = "MEMBER$"

// Members lists every member of world, by slot. Unknown world → NotFound.
// Cost: 1 Query per 1 MB page (thousands of members) of the range holding
// the manifest and the member items, so the world's existence costs no
// extra call.
func (s *Service) Members(ctx context.Context, world string) ([]Member, error) {
	if !worldIDShape.Match(world) {
		return nil, worldNotFound(world)
	}
	q := store.Query{PK: WorldPK(world), SK: store.SKBetween(manifestSK, membersEnd)}
	found := false
	out := []Member{}
	for {
		page, err := s.store.Query(ctx, q)
		if err != nil {
			return nil, apierror.FromStore("list members", err)
		}
		for _, it := range page.Items {
			switch it.Str(AttrType) {
			case TypeWorld:
				found = true
			case TypeMember:
				m, err := decodeMember(world, it)
				if err != nil {
					return nil, internal(err)
				}
				out = append(out, m)
			}
		}
		if page.Cursor == "" {
			break
		}
		q.Cursor = page.Cursor
	}
	if !found {
		return nil, worldNotFound(world)
	}
	slices.SortFunc(out, func(a, b Member) int { return cmp.Compare(a.Slot, b.Slot) })
	return out, nil
}

// Member returns one membership (1 GetItem); NotFound when awnID is not a
// member (a left member is not one).
func (s *Service) Member(ctx context.Context, world, awnID string) (Member, error) {
	m, err := s.readMember(ctx, world, awnID)
	if errors.Is(err, store.ErrNotFound) {
		return Member{}, memberNotFound(world, awnID)
	}
	if err != nil {
		return Member{}, apierror.FromStore("read member", err)
	}
	return m, nil
}

// MemberKey is the key lookup of member routes: the public key and awnId
// of the member of world whose keyid is keyID (1 GetItem of MemberKeyKey,
// then 1 GetItem of the manifest). No such member → an *apierror.Error of
// kind NotJoined; a world deleted (its members not yet removed) →
// NotFound.
//
// Inside a guarded request (shared/store/guard) it costs less: a key this
// instance verified before is taken from its cache with no read, and the
// membership and the world's existence become checks of the request's
// guard, settled by its first store call (a ConditionCheck in its
// transaction, or a GetItem beside its read); an uncached key costs the
// member key's GetItem, the world's check joining the guard, and the
// route's reads ahead go beside that GetItem (ahead.go). The item read is
// kept for the request (guard.Kept): a leave and a poll take the
// membership from it (keptMember).
func (s *Service) MemberKey(ctx context.Context, world, keyID string) (ed25519.PublicKey, string, error) {
	if !auth.ValidKeyID(keyID) || !worldIDShape.Match(world) {
		return nil, "", notJoined(world)
	}
	guarded := guard.Active(ctx)
	if pub, ok := s.keys.Get(keyID); ok && guarded {
		// Verified before in this instance: the key is its keyid's, so
		// only the membership is left to prove, and the request's first
		// store call carries it (in its transaction, or beside its read).
		awnID := auth.AWNID(pub)
		s.guardMembership(ctx, world, keyID, awnID)
		return pub, awnID, nil
	}
	it, err := s.store.Get(ctx, MemberKeyKey(world, keyID))
	if errors.Is(err, store.ErrNotFound) {
		return nil, "", notJoined(world)
	}
	if err != nil {
		return nil, "", apierror.FromStore("read member key", err)
	}
	pub := it.Bytes(attrPublicKey)
	awnID := it.Str(attrAWNID)
	if it.Str(AttrType) != TypeMemberKey || len(pub) != ed25519.PublicKeySize || awnID == "" {
		return nil, "", internal(fmt.Errorf("world: item %s is not a member key", it.Key()))
	}
	if guarded {
		s.keys.Put(ed25519.PublicKey(pub))
		s.guardWorld(ctx, world)
		return ed25519.PublicKey(pub), awnID, nil
	}
	// A deleted world answers 404 at once, while its deleter has yet to
	// remove the member keys: the manifest goes first.
	if _, err := s.store.Get(ctx, ManifestKey(world)); errors.Is(err, store.ErrNotFound) {
		return nil, "", worldNotFound(world)
	} else if err != nil {
		return nil, "", apierror.FromStore("read world", err)
	}
	return ed25519.PublicKey(pub), awnID, nil
}

// guardMembership adds to the request's guard that keyID, awnID's key, is
// a member of world (its member key item exists: NotJoined otherwise) and
// that the world exists. The member item and the agent's index entry are
// the member key item's twins (a join writes all three, a removal deletes
// all three, in one transaction), so a write that checks or conditions
// either itself (MemberCheck: an action, a message's sender; a poll's
// record) holds the membership, and the guard's check is not carried
// there. (A membership older than the index has no entry: the write's
// check fails, the guard is written alone and holds, and the writer
// restores the entry and writes again: RestoreIndexEntry.)
func (s *Service) guardMembership(ctx context.Context, world, keyID, awnID string) {
	guard.Add(ctx, s.store, guard.Part{Action: store.Check(MemberKeyKey(world, keyID), store.ItemExists()),
		Refused: func(*store.ConditionFailedError) error { return notJoined(world) },
		Twins:   []store.Key{MemberKey(world, awnID), joinedIndexKey(world, awnID)}})
	s.guardWorld(ctx, world)
}

// guardWorld adds to the request's guard that world's manifest exists: a
// deleted world answers 404 at once, while its deleter has yet to remove
// the member keys. A commit of the world's events holds it without the
// check (HeldBy): its update of the event head is conditioned on the head
// not being marked deleted, which DeleteWorld marks in the transaction
// that deletes the manifest; the deleter deletes the head only after
// every membership, which every such commit under a member's guard
// checks. (A world never created has no members.) So a message's write
// does not check the manifest, a single item every send would write.
func (s *Service) guardWorld(ctx context.Context, world string) {
	guard.Add(ctx, s.store, guard.Part{Action: store.Check(ManifestKey(world), store.ItemExists()),
		Refused: func(*store.ConditionFailedError) error { return worldNotFound(world) },
		HeldBy:  []store.Key{EventHeadKey(world)}})
}

// MarkPolled records that awnID polled events now and announces the
// presence this changes: 1 UpdateItem of its member item, conditioned on
// the member being announced online and having polled within
// ReachableWithin — true of a steady poller, which pays nothing more. When
// it fails, the member was announced offline (a new member, or one whose
// registration is offline) or went stale: it is written again without that
// condition (returning the member as it was) and, if the poll changes what
// was announced, presence.changed is committed (offline first, with the
// time it went stale, if a silence was never announced: both in the
// transaction recording the poll, pollAfterSilence). Not a member →
// NotJoined.
func (s *Service) MarkPolled(ctx context.Context, world, awnID string) error {
	_, err := s.markPolled(ctx, world, awnID)
	return err
}

// markPolled is MarkPolled returning the member as it now is.
func (s *Service) markPolled(ctx context.Context, world, awnID string) (Member, error) {
	if !validMember(world, awnID) {
		return Member{}, notJoined(world)
	}
	now := s.now().UTC()
	steady := store.And(store.Eq(attrPresence, store.S(PresenceOnline)), store.NotExists(attrRegistryOffline),
		store.Ge(attrLastPollAt, store.N(now.Add(-ReachableWithin).UnixNano())))
	up := store.Update(MemberKey(world, awnID)).SetAttr(attrLastPollAt, store.N(now.UnixNano()))
	res, err := s.store.Write(ctx, up.When(steady).Returning().OnFailReturn())
	if err == nil {
		m, err := decodeMember(world, res[0])
		if err != nil {
			return Member{}, internal(err)
		}
		return m, nil
	}
	return s.pollChanged(ctx, world, now, up, err)
}

// markPolledKept is markPolled for the member kept as its member key item
// showed it (keptMember): the steady case's update returns nothing, so
// that it is a write the request's guard rides in (an update returning
// its item cannot be in a transaction, and would wait for the guard), and
// the member it returns is kept's, polled now — the membership (awnId,
// joinedAt) a poll's visibility needs. Anything but a steady poll takes
// markPolled's path from the member its failed update returned.
func (s *Service) markPolledKept(ctx context.Context, kept Member) (Member, error) {
	world, awnID := kept.World, kept.AWNID
	now := s.now().UTC()
	steady := store.And(store.Eq(attrPresence, store.S(PresenceOnline)), store.NotExists(attrRegistryOffline),
		store.Ge(attrLastPollAt, store.N(now.Add(-ReachableWithin).UnixNano())),
		store.Eq(attrJoinedAt, store.N(kept.JoinedAt.UnixNano())))
	up := store.Update(MemberKey(world, awnID)).SetAttr(attrLastPollAt, store.N(now.UnixNano()))
	_, err := s.store.Write(ctx, up.When(steady).OnFailReturn())
	if err == nil {
		m := kept
		m.LastPollAt, m.Announced = now, PresenceOnline
		return m, nil
	}
	return s.pollChanged(ctx, world, now, up, err)
}

// markPolledOffline is markPolledKept for a member its key item shows
// announced offline (keptPresence), with its registration online: the poll
// brings it online, so its record is the announcement, carrying the
// request's guard, with no steady update tried first — a cold first poll
// in two round trips. The announcement is conditioned on the member item
// being offline (and its registration online): when the key item was
// behind it (a racing announcement), the poll takes markPolled's path.
func (s *Service) markPolledOffline(ctx context.Context, kept Member) (Member, error) {
	now := s.now().UTC()
	before := kept
	before.Announced = PresenceOffline
	ok, err := s.announceWith(ctx, before, PresenceOnline, time.Time{}, store.NotExists(attrRegistryOffline), func(a store.Action) store.Action {
		return a.SetAttr(attrLastPollAt, store.N(now.UnixNano()))
	})
	if err != nil {
		return Member{}, err
	}
	if !ok {
		return s.markPolled(ctx, kept.World, kept.AWNID)
	}
	after := kept
	after.LastPollAt, after.Announced = now, PresenceOnline
	return after, nil
}

// markPolledRead is markPolled for the member as a read beside the poll's
// first read showed it (before, in PollAs and Follow): a steady member
// takes markPolledKept's update, which returns nothing; any other goes
// straight to the presence the poll changes (pollChangedFrom), with no
// failed update first. So a poll that brings its member online — a first
// poll, or one after a silence the presence sweep has announced — is two
// round trips, the head with the member and then the announcement beside
// the pages, not three. Every rule stays a condition of the write: the
// steady update's, or the announcement's on the presence before showed
// (a racing writer makes it fail, and the poll then records itself
// alone).
func (s *Service) markPolledRead(ctx context.Context, read polled) (Member, error) {
	now := s.now().UTC()
	before := read.member
	if steadyAt(before, now) {
		return s.markPolledKept(ctx, before)
	}
	up := store.Update(MemberKey(before.World, before.AWNID)).SetAttr(attrLastPollAt, store.N(now.UnixNano()))
	return s.pollChangedFrom(ctx, before.World, now, up, read)
}

// steadyAt reports whether a poll of m at now changes nothing but its
// poll time: what the steady update's condition holds.
func steadyAt(m Member, now time.Time) bool {
	return m.Announced == PresenceOnline && !m.RegistryOffline && !m.LastPollAt.Before(now.Add(-ReachableWithin))
}

// pollChanged is a poll whose steady update (up) failed with err: the
// member was announced offline (a new member, or one whose registration
// is offline) or went stale, or is gone (NotJoined).
func (s *Service) pollChanged(ctx context.Context, world string, now time.Time, up store.Action, err error) (Member, error) {
	var cf *store.ConditionFailedError
	switch {
	case !errors.As(err, &cf):
		return Member{}, apierror.FromStore("mark polled", err)
	case len(cf.Item) == 0:
		return Member{}, notJoined(world)
	}
	before, err := decodeMember(world, cf.Item)
	if err != nil {
		return Member{}, internal(err)
	}
	return s.pollChangedFrom(ctx, world, now, up, polled{member: before})
}

// pollChangedFrom is the presence a poll at now changes, from the member
// as it was (read): up is the poll's record, written alone when nothing
// is announced.
func (s *Service) pollChangedFrom(ctx context.Context, world string, now time.Time, up store.Action, read polled) (Member, error) {
	before := read.member
	// A poll after a silence the member item shows not announced.
	if before.Announced == PresenceOnline && !before.RegistryOffline {
		h, done, err := s.pollAfterSilence(ctx, read, now)
		if err != nil {
			return Member{}, err
		}
		if done {
			after := before
			after.LastPollAt = now
			return after, nil
		}
		if PresenceOf(before, h, now) == PresenceOffline {
			if _, err := s.announce(ctx, before, PresenceOffline, before.LastPollAt.Add(ReachableWithin), nil); err != nil {
				return Member{}, err
			}
			// Announced offline now, by this poll or by a racing
			// writer (the presence sweep): either way this poll
			// announces online next.
			before.Announced = PresenceOffline
		}
	}
	after := before
	after.LastPollAt = now
	if !before.RegistryOffline && before.announced() != PresenceOnline {
		ok, err := s.announce(ctx, before, PresenceOnline, time.Time{}, func(a store.Action) store.Action {
			return a.SetAttr(attrLastPollAt, store.N(now.UnixNano()))
		})
		if err != nil {
			return Member{}, err
		}
		if ok {
			after.Announced = PresenceOnline
			return after, nil
		}
	}
	_, err := s.store.Write(ctx, up.When(store.ItemExists()))
	if errors.Is(err, store.ErrConditionFailed) {
		return Member{}, notJoined(world)
	}
	if err != nil {
		return Member{}, apierror.FromStore("mark polled", err)
	}
	return after, nil
}

// Reachable reports whether target, a member of world, counts as
// reachable without a live probe: it polled events within the last
// ReachableWithin or holds an event stream open, and its registration is
// not offline (1 GetItem). Not a member → NotFound.
func (s *Service) Reachable(ctx context.Context, world, target string) (bool, error) {
	m, err := s.Member(ctx, world, target)
	if err != nil {
		return false, err
	}
	return reachable(m, s.now()), nil
}

func reachable(m Member, now time.Time) bool {
	return !m.RegistryOffline && (polledWithin(m, now) || now.Before(m.StreamUntil))
}
