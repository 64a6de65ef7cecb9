package worldhttp

import (
	"context"
	"errors"
	"fmt"
	"net/http"

	"github.com/a2awire/a2awire/shared/access"
	"github.com/a2awire/a2awire/shared/function"
	"github.com/a2awire/a2awire/shared/world"
)

// Lifecycle is what the owner routes of a world need: its manifest (the
// owner's key), the member-key lookup (a member is 403, a stranger 401),
// and the owner's changes.
type Lifecycle interface {
	WorldReader
	MemberKeys
	Close(ctx context.Context, world, ownerKeyID string) (world.Manifest, error)
	Reopen(ctx context.Context, world, ownerKeyID string) (world.Manifest, error)
	DeleteWorld(ctx context.Context, world, ownerKeyID string) error
}

// serveLifecycle serves an owner route of a world's lifecycle through
// serveOwner (the owner's key, or a member's: 403 FORBIDDEN; anyone else
// 401), handing f the world and the owner's keyid.
func serveLifecycle(o Options, worlds Lifecycle, f func(w http.ResponseWriter, r *http.Request, world, ownerKeyID string) error) (http.Handler, error) {
	if worlds == nil {
		return nil, errors.New("worldhttp: no world service")
	}
	if o.Members == nil {
		o.Members = worlds
	}
	return serveOwner(o, worlds, func(w http.ResponseWriter, r *http.Request) error {
		id, ok := access.IdentityFrom(r.Context())
		if !ok {
			return errors.New("worldhttp: no identity on an owner route")
		}
		return f(w, r, access.Param(r, "world"), id.KeyID)
	})
}

// NewClose serves POST /v0/worlds/{world}/close (owner): joins are refused
// (409 WORLD_CLOSED) until it is reopened; 200 with the manifest. The body
// is empty or {}.
func NewClose(o Options, worlds Lifecycle) (http.Handler, error) {
	return newStatus(o, worlds, worlds.Close)
}

// NewReopen serves POST /v0/worlds/{world}/reopen (owner): 200 with the
// manifest, open again.
func NewReopen(o Options, worlds Lifecycle) (http.Handler, error) {
	return newStatus(o, worlds, worlds.Reopen)
}

func newStatus(o Options, worlds Lifecycle, change func(ctx context.Context, world, ownerKeyID string) (world.Manifest, error)) (http.Handler, error) {
	base, err := baseOf(o)
	if err != nil {
		return nil, err
	}
	return serveLifecycle(o, worlds, func(w http.ResponseWriter, r *http.Request, id, owner string) error {
		if err := emptyBody(r); err != nil {
			return err
		}
		m, err := change(r.Context(), id, owner)
		if err != nil {
			return fmt.Errorf("worldhttp: change world status: %w", err)
		}
		return reply(w, http.StatusOK, manifestJSON(m, base))
	})
}

// NewDelete serves DELETE /v0/worlds/{world} (owner): 202 {worldId,
// status: "deleting"}; every route of the world answers 404 from then on
// and everything under it is removed in the background (world.Purge), after
// which the name may be created again.
func NewDelete(o Options, worlds Lifecycle) (http.Handler, error) {
	return serveLifecycle(o, worlds, func(w http.ResponseWriter, r *http.Request, id, owner string) error {
		if err := emptyBody(r); err != nil {
			return err
		}
		if err := worlds.DeleteWorld(r.Context(), id, owner); err != nil {
			return fmt.Errorf("worldhttp: delete world: %w", err)
		}
		return reply(w, http.StatusAccepted, map[string]string{"worldId": id, "status": "deleting"})
	})
}

// BuildClose builds world-close.
func BuildClose(env function.Env) (any, error) {
	return build(env, func(d Deps) (http.Handler, error) { return NewClose(d.Options, d.World) })
}

// BuildReopen builds world-reopen.
func BuildReopen(env function.Env) (any, error) {
	return build(env, func(d Deps) (http.Handler, error) { return NewReopen(d.Options, d.World) })
}

// BuildDelete builds world-delete.
func BuildDelete(env function.Env) (any, error) {
	return build(env, func(d Deps) (http.Handler, error) { return NewDelete(d.Options, d.World) })
}
