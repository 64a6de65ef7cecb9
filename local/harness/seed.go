package harness

import (
	"context"
	"crypto/ed25519"
	"errors"

	"github.com/a2awire/a2awire/shared/fixtures/seed"
	"github.com/a2awire/a2awire/shared/registry"
	"github.com/a2awire/a2awire/shared/store"
)

// SeedFixtures registers the five fixtures in st's registry with their
// endpoints below base (the harness's own http:// URL, which the local
// registry allows), owned by key's public half (Harness.NetworkKey): what
// `go run ./local` does once it listens, for tests that serve a harness
// themselves. It is idempotent for the same key.
func SeedFixtures(ctx context.Context, st store.Store, base string, key ed25519.PrivateKey) ([]seed.Outcome, error) {
	pub, ok := key.Public().(ed25519.PublicKey)
	if !ok || len(key) != ed25519.PrivateKeySize {
		return nil, errors.New("seed fixtures: the network key is not an Ed25519 private key")
	}
	return seed.Seed(ctx, seed.OverStore(st, registry.AllowInsecureEndpoints())(pub), base, pub)
}
