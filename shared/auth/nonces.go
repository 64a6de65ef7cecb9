package auth

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/a2awire/a2awire/shared/store"
	"github.com/a2awire/a2awire/shared/store/guard"
)

// Nonces is the replay guard of request signing over the item API: one item
// per (keyid, nonce), written once by a conditional Put that expires with the
// signature. Inside a request whose context carries a guard
// (shared/store/guard), the Put is added to it and written with the
// request's first store call.
//
//	pk "NONCE#<keyid>"   sk "N#<nonce>"   type "nonce"   expiresAt = the signature's expires
type Nonces struct {
	s store.Store
}

// NewNonces returns the replay guard storing its items in s.
func NewNonces(s store.Store) *Nonces { return &Nonces{s: s} }

// NonceKey is the key of the item recording (keyID, nonce).
func NonceKey(keyID, nonce string) store.Key {
	return store.Key{PK: "NONCE#" + keyID, SK: "N#" + nonce}
}

// Claim records (keyID, nonce) until expires, or fails with the
// Unauthorized error "nonce already used" when a live record exists. A
// record past its expiresAt that the sweeper has not deleted yet does not
// count (the store returns expired items until they are swept), so the
// condition is: no item, or an expired one — still a single write.
func (n *Nonces) Claim(ctx context.Context, keyID, nonce string, expires, now time.Time) error {
	k := NonceKey(keyID, nonce)
	item := store.Item{
		store.AttrPK:        store.S(k.PK),
		store.AttrSK:        store.S(k.SK),
		store.AttrExpiresAt: store.ExpiresAt(expires),
		"type":              store.S("nonce"),
	}
	cond := store.Or(store.ItemAbsent(), store.Le(store.AttrExpiresAt, store.N(now.Unix())))
	// Inside a guarded request the claim joins the request's first store
	// call (package guard): no round trip of its own.
	if guard.Add(ctx, n.s, guard.Part{Action: store.Put(k, item).When(cond),
		Refused: func(*store.ConditionFailedError) error { return unauthorized("nonce already used") }}) {
		return nil
	}
	if _, err := n.s.Write(ctx, store.Put(k, item).When(cond)); err != nil {
		if errors.Is(err, store.ErrConditionFailed) {
			return unauthorized("nonce already used")
		}
		return storeError("nonce store failed", err)
	}
	return nil
}

// storeError wraps a failure of a dependency: Unavailable when the store
// says it is overloaded, Internal otherwise, with a generic message; what
// failed (what) stays in the cause, for logs.
func storeError(what string, err error) *Error {
	err = fmt.Errorf("auth: %s: %w", what, err)
	if errors.Is(err, store.ErrUnavailable) {
		return &Error{Kind: Unavailable, Message: "temporarily unavailable; retry", Err: err}
	}
	return &Error{Kind: Internal, Message: "internal error; try again later", Err: err}
}
