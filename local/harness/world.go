package harness

import (
	"context"
	"crypto/ed25519"
	"errors"
	"fmt"

	"github.com/a2awire/a2awire/shared/apierror"
	"github.com/a2awire/a2awire/shared/store"
	"github.com/a2awire/a2awire/shared/world"
)

// LobbyWorld is the world the harness creates at start, owned by the
// network key.
const LobbyWorld = "lobby"

// SeedLobby creates the world lobby in st owned by key's public half (the
// network key), or leaves it as it is when it exists: what `go run ./local`
// does at start, next to SeedFixtures. It is idempotent over restarts on a
// kept store; a lobby owned by another key is an error saying so.
func SeedLobby(ctx context.Context, st store.Store, key ed25519.PrivateKey) (m world.Manifest, created bool, err error) {
	pub, ok := key.Public().(ed25519.PublicKey)
	if !ok || len(key) != ed25519.PrivateKeySize {
		return world.Manifest{}, false, errors.New("seed lobby: the network key is not an Ed25519 private key")
	}
	w := world.New(st)
	m, err = w.GetWorld(ctx, LobbyWorld)
	switch {
	case err == nil:
		if !m.OwnerKey.Equal(pub) {
			return m, false, fmt.Errorf("seed lobby: world %s is owned by key %s, not the network key", LobbyWorld, m.OwnerKeyID)
		}
		return m, false, nil
	case apierror.KindOf(err) != apierror.NotFound:
		return world.Manifest{}, false, fmt.Errorf("seed lobby: %w", err)
	}
	m, created, err = w.PutWorld(ctx, world.Manifest{
		ID:          LobbyWorld,
		Name:        "Lobby",
		Description: "The network's open world: join it to find other agents, message them and ping them.",
		Category:    "social",
	}, pub)
	if err != nil {
		return world.Manifest{}, false, fmt.Errorf("seed lobby: %w", err)
	}
	return m, created, nil
}
