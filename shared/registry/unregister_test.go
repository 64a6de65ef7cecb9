package registry_test

import (
	"context"
	"testing"

	"github.com/a2awire/a2awire/shared/apierror"
	"github.com/a2awire/a2awire/shared/auth"
	"github.com/a2awire/a2awire/shared/registry"
	"github.com/a2awire/a2awire/shared/store"
)

// TestUnregister: only the owner unregisters; afterwards the name, its
// capability listing and the key are gone at once, so another key may take
// the name and the key may register again. Subject reads the name and the
// presence SetPresence keeps on the key item.
func TestUnregister(t *testing.T) {
	everyEngine(t, func(t *testing.T, st store.Store) {
		ctx := context.Background()
		r := registry.New(st)
		if _, _, err := r.Register(ctx, agent("leaver", 1, "chat", "count")); err != nil {
			t.Fatal(err)
		}
		if name, offline, err := r.Subject(ctx, key(1)); err != nil || name != "leaver" || offline {
			t.Fatalf("Subject: %q %v %v", name, offline, err)
		}
		if _, err := r.SetPresence(ctx, "leaver", key(1), registry.Offline); err != nil {
			t.Fatal(err)
		}
		if _, offline, err := r.Subject(ctx, key(1)); err != nil || !offline {
			t.Fatalf("Subject after offline: %v %v", offline, err)
		}
		_, err := r.Unregister(ctx, "leaver", key(2))
		wantKind(t, err, apierror.Forbidden, "")
		a, err := r.Unregister(ctx, "leaver", key(1))
		if err != nil || a.Name != "leaver" {
			t.Fatalf("Unregister: %+v, %v", a, err)
		}
		_, err = r.Get(ctx, "leaver")
		wantKind(t, err, apierror.NotFound, "")
		_, err = r.LookupKey(ctx, auth.KeyID(key(1)))
		wantKind(t, err, apierror.NotFound, "")
		_, _, err = r.Subject(ctx, key(1))
		wantKind(t, err, apierror.NotFound, "")
		page, err := r.Discover(ctx, registry.Filter{Capability: "chat", Status: "any"})
		if err != nil || len(page.Agents) != 0 {
			t.Fatalf("discovery after unregister: %+v, %v", page, err)
		}
		_, err = r.Unregister(ctx, "leaver", key(1))
		wantKind(t, err, apierror.NotFound, "")
		if _, created, err := r.Register(ctx, agent("leaver", 2, "chat")); err != nil || !created {
			t.Fatalf("another key taking the freed name: %v %v", created, err)
		}
		if _, created, err := r.Register(ctx, agent("comeback", 1, "chat")); err != nil || !created {
			t.Fatalf("the freed key registering again: %v %v", created, err)
		}
	})
}
