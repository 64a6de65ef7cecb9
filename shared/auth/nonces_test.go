package auth

import (
	"context"
	"errors"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/a2awire/a2awire/shared/store"
	"github.com/a2awire/a2awire/shared/store/storetest/stores"
)

func TestNoncesOnEveryEngine(t *testing.T) {
	ctx := context.Background()
	exp := t0.Add(300 * time.Second)
	for _, e := range stores.All(local) {
		t.Run(e.Name, func(t *testing.T) {
			s := e.Open(t)
			n := NewNonces(s)
			isReplay := func(err error) bool {
				var ae *Error
				return errors.As(err, &ae) && ae.Kind == Unauthorized && ae.Message == "nonce already used"
			}
			if err := n.Claim(ctx, "kid-a", "nonce-0000000000000001", exp, t0); err != nil {
				t.Fatal(err)
			}
			// The one item, expiring with the signature.
			it, err := s.Get(ctx, NonceKey("kid-a", "nonce-0000000000000001"))
			if err != nil {
				t.Fatal(err)
			}
			if it.Str("type") != "nonce" {
				t.Fatalf("type %q", it.Str("type"))
			}
			if got, _ := it.Int(store.AttrExpiresAt); got != exp.Unix() {
				t.Fatalf("expiresAt %d, want %d", got, exp.Unix())
			}
			if err := n.Claim(ctx, "kid-a", "nonce-0000000000000001", exp, t0.Add(299*time.Second)); !isReplay(err) {
				t.Fatalf("replay before expiry: %v", err)
			}
			if err := n.Claim(ctx, "kid-b", "nonce-0000000000000001", exp, t0); err != nil {
				t.Fatalf("same nonce, other keyid: %v", err)
			}
			if err := n.Claim(ctx, "kid-a", "nonce-0000000000000002", exp, t0); err != nil {
				t.Fatalf("other nonce: %v", err)
			}
			// Expired but not yet swept: the pair is free again.
			if err := n.Claim(ctx, "kid-a", "nonce-0000000000000001", exp.Add(300*time.Second), exp); err != nil {
				t.Fatalf("claim after expiry: %v", err)
			}
			if err := n.Claim(ctx, "kid-a", "nonce-0000000000000001", exp.Add(300*time.Second), exp); !isReplay(err) {
				t.Fatalf("replay of the renewed claim: %v", err)
			}
			// The longest nonce fits a sort key on every engine.
			if err := n.Claim(ctx, strings.Repeat("k", 43), strings.Repeat("~", MaxNonce), exp, t0); err != nil {
				t.Fatalf("longest nonce: %v", err)
			}

			var wins, replays atomic.Int32
			var wg sync.WaitGroup
			for range 8 {
				wg.Add(1)
				go func() {
					defer wg.Done()
					err := n.Claim(ctx, "kid-c", "nonce-concurrent-1", exp, t0)
					switch {
					case err == nil:
						wins.Add(1)
					case isReplay(err):
						replays.Add(1)
					default:
						t.Error(err)
					}
				}()
			}
			wg.Wait()
			if wins.Load() != 1 || replays.Load() != 7 {
				t.Fatalf("concurrent claims: %d wins, %d replays", wins.Load(), replays.Load())
			}
		})
	}
}
