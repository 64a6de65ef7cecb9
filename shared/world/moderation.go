package world

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"
	"unicode/utf8"

	"github.com/a2awire/a2awire/shared/apierror"
	"github.com/a2awire/a2awire/shared/ident"
	"github.com/a2awire/a2awire/shared/store"
)

// Moderation: an owner kicks a member (its membership ends as a leave's
// does, announced as agent.kicked) and bans a key (it cannot join; a
// member is kicked in the ban's own write).
//
// # Items
//
//	item  pk              sk            type
//	ban   WORLD#<world>   BAN#<awnId>   ban      (awnId, reason, bannedAt)
//
// # A ban racing a join
//
// A join's transaction holds a ConditionCheck that the ban item is absent
// (banCheck); a ban's transaction puts the ban item and either deletes the
// membership it read (conditioned on its joinedAt) or, when it read none,
// checks that the member item is still absent. DynamoDB orders the two
// transactions, so of a racing join and ban one commits first and the
// other sees it: a join after the ban fails its check (403 BANNED), a ban
// after the join fails its condition on the member item and, reading
// again, finds the member and kicks it. No interleaving leaves a banned
// key a member, and no earlier read is trusted.

// TypeBan is the type attribute of ban items.
const TypeBan = "ban"

const (
	banPrefix    = "BAN#"
	bansEnd      = "BAN$" // past every BAN#… key, before any other
	attrReason   = "reason"
	attrBannedAt = "bannedAt"

	// MaxReasonLen bounds a ban's reason (characters).
	MaxReasonLen = 512
	// moderationAttempts bounds a ban's rounds against racing joins and
	// leaves of its target; each lost round means the membership changed.
	moderationAttempts = 8
)

// AgentKicked is the public event of a membership an owner ended.
const AgentKicked = "agent.kicked"

// BanKey is the key of the ban of awnID in world.
func BanKey(world, awnID string) store.Key {
	return store.Key{PK: WorldPK(world), SK: banPrefix + awnID}
}

// BanPrefix is the sort-key prefix of a world's ban items.
const BanPrefix = banPrefix

// banCheck is the action that holds a join to awnID not being banned.
func banCheck(world, awnID string) store.Action {
	return store.Check(BanKey(world, awnID), store.ItemAbsent())
}

// Ban is one banned key of a world.
type Ban struct {
	World    string
	AWNID    string
	Reason   string
	BannedAt time.Time
}

func banned(world string) error {
	return &apierror.Error{Kind: apierror.Forbidden, Code: "banned",
		Message: "this key is banned from world " + apierror.Quote(world)}
}

func decodeBan(world string, it store.Item) (Ban, error) {
	b := Ban{World: world, AWNID: it.Str(attrAWNID), Reason: it.Str(attrReason)}
	if it.Str(AttrType) != TypeBan || b.AWNID == "" {
		return Ban{}, fmt.Errorf("world: item %s is not a ban", it.Key())
	}
	at, err := it.Int(attrBannedAt)
	if err != nil {
		return Ban{}, fmt.Errorf("world: ban %s: %w", it.Key(), err)
	}
	b.BannedAt = time.Unix(0, at).UTC()
	return b, nil
}

// kickedData is the payload of agent.kicked.
type kickedData struct {
	AWNID  string `json:"awnId"`
	Banned bool   `json:"banned,omitempty"`
}

// Kick ends target's membership as Leave does (member, member key,
// webhook and the agent's index item deleted, the inbox cleared, the count
// decremented) and emits a public agent.kicked. Not a member → NotFound.
// The caller is the owner (the route's auth decides). It returns the
// membership that ended. Cost: Leave's (the member read beside the
// manifest and the inbox, then one transaction), with agent.kicked for
// agent.left.
func (s *Service) Kick(ctx context.Context, world, target string) (Member, error) {
	var (
		cur  Member
		err  error
		snap removal
		wg   sync.WaitGroup
	)
	// The member beside what its removal reads: one round trip.
	wg.Go(func() { cur, err = s.readMember(ctx, world, target) })
	wg.Go(func() { snap = s.readForRemoval(ctx, world, target) })
	wg.Wait()
	if errors.Is(err, store.ErrNotFound) {
		return Member{}, memberNotFound(world, target)
	}
	if err != nil {
		return Member{}, apierror.FromStore("read member", err)
	}
	ev, err := s.ids.NewEvent(world, AgentKicked, Public, "", kickedData{AWNID: target}, s.now().UTC())
	if err != nil {
		return Member{}, internal(err)
	}
	err = s.removeWith(ctx, cur, snap, ev)
	if errors.Is(err, store.ErrConditionFailed) {
		return Member{}, memberNotFound(world, target) // a racing leave or kick came first
	}
	if err != nil {
		return Member{}, err
	}
	return cur, nil
}

// Ban bans target from world (created=true; false when it was banned
// already, the ban unchanged). A member is kicked in the same write: the
// ban item and the end of the membership commit together with agent.kicked
// (data.banned true). reason is optional, at most MaxReasonLen characters.
// Unknown world → NotFound; a malformed awnId → Invalid.
//
// Cost: 2 round trips one after the other. First, side by side: the
// manifest, the ban, the member (GetItem each) and the member's inbox
// (Query). Then, for a non-member, 1 TransactWriteItems (put the ban,
// check the member item absent); for a member Kick's transaction with the
// ban's Put in it. A join or leave of target racing it costs a round more
// (the member read again, then the write).
func (s *Service) Ban(ctx context.Context, world, target, reason string) (Ban, bool, error) {
	if err := checkReason(reason); err != nil {
		return Ban{}, false, err
	}
	if !ValidAWNID(target) {
		return Ban{}, false, invalid("awnId must be aw:sha256: and 64 lowercase hex digits; got %s", apierror.Quote(target))
	}
	if !worldIDShape.Match(world) {
		return Ban{}, false, worldNotFound(world)
	}
	// The world, the ban, the member and what its removal reads, side by
	// side: one round trip.
	var (
		man    store.Item
		manErr error
		ban    Ban
		banErr error
		cur    Member
		curErr error
		snap   removal
		wg     sync.WaitGroup
	)
	wg.Go(func() { man, manErr = s.store.Get(ctx, ManifestKey(world)) })
	wg.Go(func() { ban, banErr = s.readBan(ctx, world, target) })
	wg.Go(func() { cur, curErr = s.readMember(ctx, world, target) })
	wg.Go(func() {
		snap.inbox, snap.inboxErr = s.store.Query(ctx, inboxRead(world, target))
	})
	wg.Wait()
	switch {
	case errors.Is(manErr, store.ErrNotFound):
		return Ban{}, false, worldNotFound(world)
	case manErr != nil:
		return Ban{}, false, apierror.FromStore("read world", manErr)
	}
	if _, err := decodeManifest(man); err != nil {
		return Ban{}, false, internal(err)
	}
	if banErr == nil {
		return ban, false, nil
	} else if !errors.Is(banErr, store.ErrNotFound) {
		return Ban{}, false, apierror.FromStore("read ban", banErr)
	}
	snap.manifest = man
	now := s.now().UTC()
	b := Ban{World: world, AWNID: target, Reason: reason, BannedAt: now}
	it := store.Item{
		AttrType:     store.S(TypeBan),
		attrAWNID:    store.S(target),
		attrBannedAt: store.N(now.UnixNano()),
	}
	if reason != "" {
		it[attrReason] = store.S(reason)
	}
	put := store.Put(BanKey(world, target), it).When(store.ItemAbsent())
	for round := range moderationAttempts {
		err := curErr
		if round > 0 {
			cur, err = s.readMember(ctx, world, target)
		}
		switch {
		case errors.Is(err, store.ErrNotFound):
			_, err = s.store.Write(ctx, put, store.Check(MemberKey(world, target), store.ItemAbsent()))
			var cf *store.ConditionFailedError
			switch {
			case err == nil:
				return b, true, nil
			case errors.As(err, &cf) && cf.Action == 0:
				return s.existingBan(ctx, world, target) // a racing ban came first
			case errors.As(err, &cf):
				continue // it joined meanwhile: kick it with the ban
			}
			return Ban{}, false, apierror.FromStore("ban", err)
		case err != nil:
			return Ban{}, false, apierror.FromStore("read member", err)
		}
		ev, err := s.ids.NewEvent(world, AgentKicked, Public, "", kickedData{AWNID: target, Banned: true}, now)
		if err != nil {
			return Ban{}, false, internal(err)
		}
		if round == 0 {
			err = s.removeWith(ctx, cur, snap, ev, put)
		} else {
			err = s.remove(ctx, cur, ev, put)
		}
		var cf *store.ConditionFailedError
		switch {
		case err == nil:
			return b, true, nil
		case errors.As(err, &cf) && cf.Action == removeActions:
			return s.existingBan(ctx, world, target)
		case errors.Is(err, store.ErrConditionFailed):
			continue // it left (or rejoined) meanwhile: read again
		}
		return Ban{}, false, err
	}
	return Ban{}, false, &apierror.Error{Kind: apierror.Unavailable, RetryAfter: apierror.StoreRetryAfter,
		Message: "the member is joining and leaving concurrently; retry"}
}

func (s *Service) existingBan(ctx context.Context, world, target string) (Ban, bool, error) {
	b, err := s.readBan(ctx, world, target)
	if err != nil {
		return Ban{}, false, apierror.FromStore("read ban", err)
	}
	return b, false, nil
}

func checkReason(reason string) error {
	if !utf8.ValidString(reason) {
		return invalid("reason must be valid UTF-8")
	}
	if n := utf8.RuneCountInString(reason); n > MaxReasonLen {
		return invalid("reason must be at most %d characters, not %d", MaxReasonLen, n)
	}
	if c, bad := ident.UnsafeRune(reason); bad {
		return invalid("%s", ident.UnsafeRuneError("reason", c))
	}
	return nil
}

// readBan returns the ban of target, or an error wrapping store.ErrNotFound.
func (s *Service) readBan(ctx context.Context, world, target string) (Ban, error) {
	if !validMember(world, target) {
		return Ban{}, fmt.Errorf("world: %w", store.ErrNotFound)
	}
	it, err := s.store.Get(ctx, BanKey(world, target))
	if err != nil {
		return Ban{}, err
	}
	b, err := decodeBan(world, it)
	if err != nil {
		return Ban{}, internal(err)
	}
	return b, nil
}

// Unban lifts target's ban and returns it (1 DeleteItem returning nothing,
// conditioned on the ban existing, after 1 GetItem of it); not banned →
// NotFound.
func (s *Service) Unban(ctx context.Context, world, target string) (Ban, error) {
	notBanned := apierror.New(apierror.NotFound, "%s is not banned from world %s", apierror.Quote(target), apierror.Quote(world))
	b, err := s.readBan(ctx, world, target)
	if errors.Is(err, store.ErrNotFound) {
		return Ban{}, notBanned
	}
	if err != nil {
		return Ban{}, apierror.FromStore("read ban", err)
	}
	_, err = s.store.Write(ctx, store.Delete(BanKey(world, target)).When(store.ItemExists()))
	if errors.Is(err, store.ErrConditionFailed) {
		return Ban{}, notBanned
	}
	if err != nil {
		return Ban{}, apierror.FromStore("unban", err)
	}
	return b, nil
}

// Banned reports whether target is banned from world (1 GetItem).
func (s *Service) Banned(ctx context.Context, world, target string) (bool, error) {
	_, err := s.readBan(ctx, world, target)
	switch {
	case err == nil:
		return true, nil
	case errors.Is(err, store.ErrNotFound):
		return false, nil
	}
	return false, apierror.FromStore("read ban", err)
}

// BanPage is one page of a world's bans, by awnId.
type BanPage struct {
	Bans []Ban
	// Cursor continues the listing ("" on the last page): the last awnId
	// listed.
	Cursor string
}

// Bans lists world's bans after cursor (an awnId a previous page ended
// on, "" for the first), at most limit (1..MaxListLimit, 0 =
// DefaultListLimit). Unknown world → NotFound. Cost: 1 GetItem (the
// manifest) and 1 Query of at most limit+1 ban items.
func (s *Service) Bans(ctx context.Context, world string, limit int, cursor string) (BanPage, error) {
	limit, lo, err := listArgs(limit, cursor, banPrefix)
	if err != nil {
		return BanPage{}, err
	}
	// The world and its bans side by side: one round trip.
	var page store.Page
	var wg sync.WaitGroup
	wg.Go(func() {
		page, err = s.store.Query(ctx, store.Query{PK: WorldPK(world), SK: store.SKBetween(lo, bansEnd), Limit: limit + 1})
	})
	_, werr := s.GetWorld(ctx, world)
	wg.Wait()
	if werr != nil {
		return BanPage{}, werr
	}
	if err != nil {
		return BanPage{}, apierror.FromStore("list bans", err)
	}
	out := BanPage{Bans: []Ban{}}
	for i, it := range page.Items {
		if i == limit {
			out.Cursor = out.Bans[limit-1].AWNID
			break
		}
		b, err := decodeBan(world, it)
		if err != nil {
			return BanPage{}, internal(err)
		}
		out.Bans = append(out.Bans, b)
	}
	return out, nil
}

// Sizes of list pages (agents, bans, the agent's worlds).
const (
	DefaultListLimit = 50
	MaxListLimit     = 100
)

// listArgs checks a page's limit and awnId cursor and returns the lowest
// sort key of the page (prefix + the successor of the cursor).
func listArgs(limit int, cursor, prefix string) (int, string, error) {
	switch {
	case limit == 0:
		limit = DefaultListLimit
	case limit < 0 || limit > MaxListLimit:
		return 0, "", invalid("limit must be between 1 and %d, not %d", MaxListLimit, limit)
	}
	if cursor == "" {
		return limit, prefix, nil
	}
	if !ValidAWNID(cursor) {
		return 0, "", invalid("cursor must be the cursor a previous page returned; got %s", apierror.Quote(cursor))
	}
	// "\x00" sorts right after the cursor and before every longer key.
	return limit, prefix + cursor + "\x00", nil
}
