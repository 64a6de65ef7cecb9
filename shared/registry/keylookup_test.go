package registry_test

import (
	"context"
	"errors"
	"sync/atomic"
	"testing"

	"github.com/a2awire/a2awire/shared/apierror"
	"github.com/a2awire/a2awire/shared/auth"
	"github.com/a2awire/a2awire/shared/registry"
	"github.com/a2awire/a2awire/shared/store"
	"github.com/a2awire/a2awire/shared/store/guard"
)

// keyGets counts the Gets of key items that reach the store.
type keyGets struct {
	store.Store
	n atomic.Int32
}

func (k *keyGets) Get(ctx context.Context, key store.Key) (store.Item, error) {
	if key.SK == "KEY" {
		k.n.Add(1)
	}
	return k.Store.Get(ctx, key)
}

// TestKeyLookup: the first lookup of a key reads its key item; later ones
// inside a guarded request read nothing before the request's own calls,
// and the key's registration is checked by the guard with the first of
// them: once the agent is unregistered, that check refuses the request
// with 401 "unknown key", as a lookup that found none would. Outside a
// guarded request the item is read every time; a key never registered is
// auth.ErrUnknownKey.
func TestKeyLookup(t *testing.T) {
	everyEngine(t, func(t *testing.T, st store.Store) {
		ctx := context.Background()
		counted := &keyGets{Store: st}
		g := guard.Wrap(counted)
		reg := registry.New(g, registry.WithClock((&clock{now: t0}).Now))
		a := agent("keyed", 1, "work")
		if _, _, err := reg.Register(ctx, a); err != nil {
			t.Fatal(err)
		}
		kl := reg.NewKeyLookup()
		id := auth.KeyID(key(1))
		request := func() (context.Context, error) {
			rctx, _ := guard.Begin(ctx)
			pub, err := kl.Lookup(rctx, id)
			if err == nil && !pub.Equal(key(1)) {
				t.Fatalf("looked up %x, want %x", pub, key(1))
			}
			return rctx, err
		}
		if _, err := request(); err != nil || counted.n.Load() != 1 {
			t.Fatalf("first lookup: %v, %d key reads; want the key and 1", err, counted.n.Load())
		}
		rctx, err := request()
		if err != nil || counted.n.Load() != 1 {
			t.Fatalf("second lookup: %v, %d key reads; want the key and still 1", err, counted.n.Load())
		}
		// The guard's check is the request's read of the key item.
		if err := guard.Settle(rctx); err != nil || counted.n.Load() != 2 {
			t.Fatalf("the guard of a registered key: %v, %d key reads; want none and 2", err, counted.n.Load())
		}
		if _, err := kl.Lookup(ctx, id); err != nil || counted.n.Load() != 3 {
			t.Fatalf("outside a request: %v, %d key reads; want the key and 3", err, counted.n.Load())
		}

		if _, err := reg.Unregister(ctx, "keyed", key(1)); err != nil {
			t.Fatal(err)
		}
		rctx, err = request()
		if err != nil {
			t.Fatalf("a remembered key is taken at its word: %v", err)
		}
		if _, err := g.Get(rctx, registry.ProfileKey("anything")); err == nil || apierror.KindOf(err) != apierror.Unauthorized {
			t.Fatalf("the request's first call after the key was unregistered: %v, want 401", err)
		}
		if _, err := kl.Lookup(ctx, auth.KeyID(key(9))); !errors.Is(err, auth.ErrUnknownKey) {
			t.Fatalf("a key never registered: %v, want auth.ErrUnknownKey", err)
		}
	})
}
