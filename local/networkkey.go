package main

import (
	"context"
	"crypto/ed25519"
	"crypto/rand"
	"crypto/x509"
	"encoding/pem"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"

	"github.com/a2awire/a2awire/local/harness"
	"github.com/a2awire/a2awire/shared/auth"
	"github.com/a2awire/a2awire/shared/store"
)

// networkKeyFile is the network key's file name in -data DIR.
const networkKeyFile = "network.key"

// loadNetworkKey returns the network's signing key from path (PKCS#8 PEM,
// the form of awn's key file), creating the file with a new key (mode 0600,
// written whole or not at all) when it does not exist. The fixtures are
// registered under this key at every start, so it must outlive restarts as
// long as the data does: a new key would find the names taken. An empty
// path means a key for this run only (the in-memory store forgets the
// registrations anyway). created says a new key was written.
func loadNetworkKey(path string) (_ ed25519.PrivateKey, created bool, _ error) {
	if path == "" {
		_, priv, err := ed25519.GenerateKey(rand.Reader)
		return priv, true, err
	}
	b, err := os.ReadFile(path)
	if errors.Is(err, fs.ErrNotExist) {
		return createNetworkKey(path)
	}
	if err != nil {
		return nil, false, fmt.Errorf("network key: %w", err)
	}
	blk, _ := pem.Decode(b)
	if blk == nil || blk.Type != "PRIVATE KEY" {
		return nil, false, fmt.Errorf("network key: %s is not a PEM \"PRIVATE KEY\" (remove it to make a new key, and -reset the data its fixtures were registered with)", path)
	}
	k, err := x509.ParsePKCS8PrivateKey(blk.Bytes)
	if err != nil {
		return nil, false, fmt.Errorf("network key %s: %w", path, err)
	}
	priv, ok := k.(ed25519.PrivateKey)
	if !ok {
		return nil, false, fmt.Errorf("network key: %s holds a %T, not an Ed25519 key", path, k)
	}
	return priv, false, nil
}

func createNetworkKey(path string) (ed25519.PrivateKey, bool, error) {
	_, priv, err := ed25519.GenerateKey(rand.Reader)
	if err != nil {
		return nil, false, fmt.Errorf("network key: %w", err)
	}
	der, err := x509.MarshalPKCS8PrivateKey(priv)
	if err != nil {
		return nil, false, fmt.Errorf("network key: %w", err)
	}
	if err := os.MkdirAll(filepath.Dir(path), 0o700); err != nil {
		return nil, false, fmt.Errorf("network key: %w", err)
	}
	// A complete temporary file linked into place: a crash never leaves half
	// a key, and of two harnesses starting at once the second to link reads
	// the first one's key instead of replacing it.
	tmp, err := os.CreateTemp(filepath.Dir(path), ".network.key-*")
	if err != nil {
		return nil, false, fmt.Errorf("network key: %w", err)
	}
	defer os.Remove(tmp.Name())
	if err := tmp.Chmod(0o600); err != nil {
		tmp.Close()
		return nil, false, fmt.Errorf("network key: %w", err)
	}
	if _, err := tmp.Write(pem.EncodeToMemory(&pem.Block{Type: "PRIVATE KEY", Bytes: der})); err != nil {
		tmp.Close()
		return nil, false, fmt.Errorf("network key: %w", err)
	}
	if err := tmp.Sync(); err != nil {
		tmp.Close()
		return nil, false, fmt.Errorf("network key: %w", err)
	}
	if err := tmp.Close(); err != nil {
		return nil, false, fmt.Errorf("network key: %w", err)
	}
	if err := os.Link(tmp.Name(), path); err != nil {
		if errors.Is(err, fs.ErrExist) {
			// Another harness wrote it first: use theirs.
			return loadNetworkKey(path)
		}
		return nil, false, fmt.Errorf("network key: %w", err)
	}
	return priv, true, nil
}

// networkKeyPath is where the network key lives: -network-key, else
// network.key in -data DIR, else (DynamoDB, whose data outlives the
// harness) the user's config directory; "" (a key per run) in memory.
func networkKeyPath(cfg config) (string, error) {
	switch {
	case cfg.networkKey != "":
		return cfg.networkKey, nil
	case cfg.data != "":
		return filepath.Join(cfg.data, networkKeyFile), nil
	case cfg.dynamoEndpoint != "":
		dir, err := os.UserConfigDir()
		if err != nil {
			return "", fmt.Errorf("network key: %w (set -network-key FILE)", err)
		}
		return filepath.Join(dir, "a2awire", networkKeyFile), nil
	}
	return "", nil
}

// seedFixtures registers the five fixtures with their endpoints below base,
// owned by the network key, and says what it did in one
// line for the banner. On a name held by another key it fails with what to
// do.
func seedFixtures(ctx context.Context, st store.Store, base string, key ed25519.PrivateKey, keyPath string) (string, error) {
	pub := key.Public().(ed25519.PublicKey)
	done, err := harness.SeedFixtures(ctx, st, base, key)
	if err != nil {
		where := "a key made for this run"
		if keyPath != "" {
			where = keyPath
		}
		return "", fmt.Errorf("registering the fixtures under the network key (%s): %w (or start with -reset to wipe the data)", where, err)
	}
	created := 0
	for _, o := range done {
		if o.Created {
			created++
		}
	}
	return fmt.Sprintf("registry: %d fixtures registered at %s/agents/<name>/invoke (%d new, %d updated), owned by the network key %s",
		len(done), base, created, len(done)-created, auth.KeyID(pub)), nil
}

// seedLobby creates the world lobby owned by the network key (or keeps the
// one a kept store holds) and says so in one line for the banner.
func seedLobby(ctx context.Context, st store.Store, base string, key ed25519.PrivateKey) (string, error) {
	m, created, err := harness.SeedLobby(ctx, st, key)
	if err != nil {
		return "", fmt.Errorf("creating the world %s: %w (or start with -reset to wipe the data)", harness.LobbyWorld, err)
	}
	what := "kept"
	if created {
		what = "created"
	}
	return fmt.Sprintf("worlds: %s at %s/v0/worlds/%s (%s), owned by the network key %s", m.ID, base, m.ID, what, m.OwnerKeyID), nil
}
