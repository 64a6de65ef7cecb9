package world

import (
	"context"
	"errors"
	"fmt"

	"github.com/a2awire/a2awire/shared/apierror"
	"github.com/a2awire/a2awire/shared/store"
)

// Event types of a world's lifecycle (public).
const (
	WorldClosed   = "world.closed"
	WorldReopened = "world.reopened"
)

// Codes of the refusals of a join (the world surface upper-cases them).
const (
	CodeWorldClosed = "world_closed"
	CodeWorldFull   = "world_full"
)

// TypeDeletion is the type attribute of a world's deletion marker, the one
// item the deleter's stream trigger is filtered to.
const TypeDeletion = "worlddeletion"

const (
	deletionPrefix = "WORLDDEL#"
	deletionSK     = "MARKER"
	// attrStep counts the deleter's rounds: each round that ends before
	// the world is gone bumps it, and that change of the marker is the
	// stream record that starts the next round.
	attrStep = "step"
)

// DeletionKey is the key of world's deletion marker: present from the
// owner's delete until everything under the world is gone. Creating a
// world checks it is absent, so the name is reusable only then.
func DeletionKey(world string) store.Key {
	return store.Key{PK: deletionPrefix + world, SK: deletionSK}
}

func deleting(world string) error {
	return apierror.New(apierror.Conflict, "world %s is being deleted; its name is free once that finishes", apierror.Quote(world))
}

func worldClosed(world string) error {
	return &apierror.Error{Kind: apierror.Conflict, Code: CodeWorldClosed,
		Message: "world " + apierror.Quote(world) + " is closed: it accepts no joins until its owner reopens it"}
}

func worldFull(world string, max int64) error {
	return &apierror.Error{Kind: apierror.Conflict, Code: CodeWorldFull,
		Message: fmt.Sprintf("world %s is full: it has its maximum of %d members", apierror.Quote(world), max)}
}

// worldData is the payload of world.closed and world.reopened.
type worldData struct {
	WorldID string `json:"worldId"`
}

// Owns reports whether keyID owns world (1 GetItem); unknown world →
// NotFound.
func (s *Service) Owns(ctx context.Context, world, keyID string) (bool, error) {
	m, err := s.GetWorld(ctx, world)
	if err != nil {
		return false, err
	}
	return m.OwnerKeyID == keyID, nil
}

// Close refuses joins to world from now on (members may still read, act
// and leave) and emits a public world.closed; Reopen undoes it and emits
// world.reopened. Only the owner (ownerKeyID) may: another key → Forbidden.
// Closing a closed world (reopening an open one) returns it unchanged,
// with no event. The status is a condition of every join's transaction, so
// no join commits after the close that refused it.
//
// Cost: 1 GetItem, then 1 TransactWriteItems through the log (the
// manifest's status, conditioned on the owner and the listing version
// read, the listing items' status, the event and the event head); a
// refresh of the listing racing it makes it read and write again.
func (s *Service) Close(ctx context.Context, world, ownerKeyID string) (Manifest, error) {
	return s.setStatus(ctx, world, ownerKeyID, StatusClosed, WorldClosed)
}

// Reopen lets joins in again (see Close).
func (s *Service) Reopen(ctx context.Context, world, ownerKeyID string) (Manifest, error) {
	return s.setStatus(ctx, world, ownerKeyID, StatusOpen, WorldReopened)
}

func (s *Service) setStatus(ctx context.Context, world, ownerKeyID, status, evType string) (Manifest, error) {
	for range 3 {
		cur, err := s.readManifest(ctx, world)
		if err != nil {
			return Manifest{}, err
		}
		m, item := cur.m, cur.item
		if m.OwnerKeyID != ownerKeyID {
			return Manifest{}, apierror.New(apierror.Forbidden, "only the owner of world %s may close or reopen it", apierror.Quote(world))
		}
		if m.Status == status {
			return m, nil
		}
		ver, _ := item.Int(attrListVer)
		listed := store.Eq(attrListVer, store.N(ver))
		if _, ok := item[attrListVer]; !ok {
			listed = store.NotExists(attrListVer)
		}
		now := s.now().UTC()
		ev, err := s.ids.NewEvent(world, evType, Public, "", worldData{WorldID: world}, now)
		if err != nil {
			return Manifest{}, internal(err)
		}
		m.Status, m.UpdatedAt = status, now
		acts := append([]store.Action{store.Update(ManifestKey(world)).
			SetAttr(attrStatus, store.S(status)).SetAttr(attrUpdatedAt, store.N(now.UnixNano())).AddNum(attrListVer, 1).
			When(store.And(store.Eq(attrOwnerKeyID, store.S(ownerKeyID)), store.Ne(attrStatus, store.S(status)), listed))},
			listingPuts(m, ver+1)...)
		_, err = s.log.Commit(ctx, ev, acts...)
		if errors.Is(err, store.ErrConditionFailed) {
			continue // the status, the listing or the world changed: read again
		}
		if err != nil {
			return Manifest{}, apierror.FromStore("change world status", err)
		}
		return m, nil
	}
	return Manifest{}, &apierror.Error{Kind: apierror.Unavailable, RetryAfter: apierror.StoreRetryAfter,
		Message: "the world is being changed by concurrent requests; retry"}
}

// manifestRead is a manifest and the item it was decoded from.
type manifestRead struct {
	m    Manifest
	item store.Item
}

func (s *Service) readManifest(ctx context.Context, world string) (manifestRead, error) {
	if !worldIDShape.Match(world) {
		return manifestRead{}, worldNotFound(world)
	}
	it, err := s.store.Get(ctx, ManifestKey(world))
	if errors.Is(err, store.ErrNotFound) {
		return manifestRead{}, worldNotFound(world)
	}
	if err != nil {
		return manifestRead{}, apierror.FromStore("read world", err)
	}
	m, err := decodeManifest(it)
	if err != nil {
		return manifestRead{}, internal(err)
	}
	return manifestRead{m: m, item: it}, nil
}

// DeleteWorld deletes world for its owner (another key → Forbidden): in one
// TransactWriteItems it deletes the manifest (so every route of the world
// answers 404 from then on: the manifest is read or conditioned on by each)
// and the listing items (gone from discovery) and the owner's item in its
// index of worlds, and writes the deletion
// marker. Everything else under the world is removed in the background by
// Purge, which the marker's stream record starts; the name can be created
// again once Purge has removed the marker. Cost: 1 GetItem and 1
// TransactWriteItems.
func (s *Service) DeleteWorld(ctx context.Context, world, ownerKeyID string) error {
	cur, err := s.readManifest(ctx, world)
	if err != nil {
		return err
	}
	if cur.m.OwnerKeyID != ownerKeyID {
		return apierror.New(apierror.Forbidden, "only the owner of world %s may delete it", apierror.Quote(world))
	}
	now := s.now().UTC()
	acts := append([]store.Action{
		store.Delete(ManifestKey(world)).When(store.Eq(attrOwnerKeyID, store.S(ownerKeyID))),
		store.Put(DeletionKey(world), store.Item{
			AttrType:      store.S(TypeDeletion),
			attrID:        store.S(world),
			attrCreatedAt: store.N(now.UnixNano()),
			attrStep:      store.N(0),
		}).When(store.ItemAbsent()),
	}, listingDeletes(world)...)
	// The owner's item in its index of worlds (the agent's view) lives in
	// the owner's partition, which the purge does not visit. The event
	// head is marked: no event commits to the world from now on.
	acts = append(acts, store.Delete(ownedIndexKey(world, cur.m.OwnerAWNID)), headDeleted(world))
	_, err = s.store.Write(ctx, acts...)
	var cf *store.ConditionFailedError
	switch {
	case errors.As(err, &cf) && cf.Action == 0:
		return worldNotFound(world) // a racing delete came first
	case errors.As(err, &cf):
		return deleting(world)
	case err != nil:
		return apierror.FromStore("delete world", err)
	}
	return nil
}
