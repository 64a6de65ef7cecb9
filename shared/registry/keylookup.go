package registry

import (
	"context"
	"crypto/ed25519"
	"fmt"

	"github.com/a2awire/a2awire/shared/apierror"
	"github.com/a2awire/a2awire/shared/auth"
	"github.com/a2awire/a2awire/shared/store"
	"github.com/a2awire/a2awire/shared/store/guard"
)

// KeyLookup finds the registered key that signed a request, remembering
// the keys this instance has verified: a keyid is its key's thumbprint,
// so a remembered key is self-certifying, and only that it is still
// registered is left to prove. Inside a guarded request (package guard)
// that goes into the request's guard — its key item exists — which the
// request's first write carries in its transaction or its first read runs
// beside, so a warm instance spends no round trip on the key (the rule
// that a request costs at most 2, the key when not verified here and then
// the work, is in docs/cost.md). A key unregistered since is refused
// there: 401 "unknown key", as a lookup that found none. Outside a
// guarded request, and for a key not seen yet, it reads the key item (1
// GetItem). Safe for concurrent use.
type KeyLookup struct {
	reg   *Registry
	known *auth.KeyCache
}

// NewKeyLookup returns the key lookup of r, remembering up to
// auth.DefaultKeyCacheSize keys.
func (r *Registry) NewKeyLookup() *KeyLookup {
	return &KeyLookup{reg: r, known: auth.NewKeyCache(0)}
}

// Lookup returns the registered key whose keyid is keyID, or an error
// wrapping auth.ErrUnknownKey when none is registered.
func (k *KeyLookup) Lookup(ctx context.Context, keyID string) (ed25519.PublicKey, error) {
	if pub, ok := k.known.Get(keyID); ok && guard.Active(ctx) {
		guard.Add(ctx, k.reg.store, guard.Part{Action: store.Check(KeyKey(keyID), store.ItemExists()),
			Refused: func(*store.ConditionFailedError) error { return apierror.New(apierror.Unauthorized, "unknown key") }})
		return pub, nil
	}
	pub, err := k.reg.LookupKey(ctx, keyID)
	if apierror.KindOf(err) == apierror.NotFound {
		return nil, fmt.Errorf("registry key lookup: %w", auth.ErrUnknownKey)
	}
	if err != nil {
		return nil, err
	}
	k.known.Put(pub)
	return pub, nil
}

// ProfileReads are Read's reads of name (its profile), named from an owner
// route's path so that the request reads them ahead, beside its key
// lookup's read (guard.Ahead, access.Route.ReadAhead): on an instance that
// has not seen the key, the lookup and the ownership check's read are one
// round trip. A malformed name names none.
func ProfileReads(name string) []guard.Read {
	if !nameShape.Match(name) {
		return nil
	}
	return []guard.Read{guard.GetRead(ProfileKey(name))}
}

// Remember adds a key this instance has verified otherwise (a
// registration signed by the key in its body), so that its owner's next
// request here need not read it.
func (k *KeyLookup) Remember(pub ed25519.PublicKey) { k.known.Put(pub) }
