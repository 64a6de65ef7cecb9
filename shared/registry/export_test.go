package registry

import (
	"time"

	"github.com/a2awire/a2awire/shared/auth"
	"github.com/a2awire/a2awire/shared/store"
)

// SeedActions returns the unconditioned actions creating a as a first
// registration at now (online), so a test can bulk-load thousands of agents
// with a few large Writes.
func SeedActions(a Agent, now time.Time) []store.Action {
	a.KeyID, a.AWNID = auth.KeyID(a.PublicKey), auth.AWNID(a.PublicKey)
	a.Status, a.RegisteredAt, a.UpdatedAt = Online, now, now
	r := &Registry{}
	acts := r.rewrite(a, 1, nil, nil)
	return append(acts, store.Put(KeyKey(a.KeyID), store.Item{
		attrType: store.S(TypeKey), attrKeyID: store.S(a.KeyID), attrPublicKey: store.B(a.PublicKey), attrName: store.S(a.Name),
	}), store.Put(SkeletonKey(a.Name), store.Item{
		attrType: store.S(TypeSkeleton), attrName: store.S(a.Name), attrKeyID: store.S(a.KeyID),
	}))
}
