package awn

import (
	"crypto/ed25519"
	"crypto/rand"
	"crypto/x509"
	"encoding/base64"
	"encoding/pem"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"

	"github.com/a2awire/a2awire/shared/auth"
	"github.com/a2awire/a2awire/shared/world"
)

// KeyFile is the file of an identity's private key in its directory:
// PKCS#8 PEM, the form openssl and every crypto library read, so an
// agent's identity can leave awn.
const KeyFile = "key.pem"

// profilesDir is the folder of named profiles under a home.
const profilesDir = "profiles"

// Identity is an agent: an Ed25519 key pair. Its awnId and keyid are
// derived from the public key.
type Identity struct {
	Key ed25519.PrivateKey
	// File is the key file it was loaded from or written to; "" for an
	// identity that only lives in memory.
	File string
}

// NewIdentity makes a fresh identity in memory (nothing is written).
func NewIdentity() (Identity, error) {
	_, priv, err := ed25519.GenerateKey(rand.Reader)
	if err != nil {
		return Identity{}, fmt.Errorf("awn: generate key: %w", err)
	}
	return Identity{Key: priv}, nil
}

// PublicKey is the identity's public key.
func (id Identity) PublicKey() ed25519.PublicKey { return id.Key.Public().(ed25519.PublicKey) }

// AWNID is the identity's agent id, "aw:sha256:<64 hex>", as worlds name it.
func (id Identity) AWNID() string { return auth.AWNID(id.PublicKey()) }

// KeyID is the identity's keyid (RFC 7638 thumbprint), as signatures name it.
func (id Identity) KeyID() string { return auth.KeyID(id.PublicKey()) }

// PublicKeyBase64 is the public key as the network's request bodies carry it.
func (id Identity) PublicKeyBase64() string { return base64.StdEncoding.EncodeToString(id.PublicKey()) }

// Home is the directory of an agent's identity: $AWN_HOME, or
// ~/.config/awn. getenv is os.Getenv or a test's map, so that a test never
// touches the real home directory.
func Home(getenv func(string) string) (string, error) {
	if h := getenv("AWN_HOME"); h != "" {
		return h, nil
	}
	if h := getenv("HOME"); h != "" {
		return filepath.Join(h, ".config", "awn"), nil
	}
	return "", &UsageError{Msg: "neither AWN_HOME nor HOME is set; set AWN_HOME to the directory for awn's key and state"}
}

// ProfileDir is the directory of the named profile under home
// (home/profiles/NAME): one person can keep several agents, each its own
// key and state, beside the default one in home itself. The name has a
// world name's shape (lowercase letters, digits, '-').
func ProfileDir(home, name string) (string, error) {
	if !world.ValidID(name) {
		return "", &UsageError{Msg: fmt.Sprintf("%q is not a profile name: 1 to 63 lowercase letters, digits and '-', not starting with '-'", name)}
	}
	return filepath.Join(home, profilesDir, name), nil
}

// Profiles lists the named profiles under home that hold a key.
func Profiles(home string) ([]string, error) {
	ents, err := os.ReadDir(filepath.Join(home, profilesDir))
	if errors.Is(err, fs.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("awn: list profiles: %w", err)
	}
	var names []string
	for _, e := range ents {
		if _, err := os.Stat(filepath.Join(home, profilesDir, e.Name(), KeyFile)); err == nil && e.IsDir() {
			names = append(names, e.Name())
		}
	}
	return names, nil
}

// ErrNoIdentityFile is wrapped by LoadIdentity's error when dir holds no key.
var ErrNoIdentityFile = errors.New("no key")

// LoadIdentity reads the identity in dir (dir/key.pem).
func LoadIdentity(dir string) (Identity, error) {
	path := filepath.Join(dir, KeyFile)
	b, err := os.ReadFile(path)
	if errors.Is(err, fs.ErrNotExist) {
		return Identity{}, fmt.Errorf("%w in %s", ErrNoIdentityFile, dir)
	}
	if err != nil {
		return Identity{}, fmt.Errorf("read key: %w", err)
	}
	blk, _ := pem.Decode(b)
	if blk == nil || blk.Type != "PRIVATE KEY" {
		return Identity{}, fmt.Errorf("read key: %s is not a PEM \"PRIVATE KEY\"", path)
	}
	k, err := x509.ParsePKCS8PrivateKey(blk.Bytes)
	if err != nil {
		return Identity{}, fmt.Errorf("read key %s: %w", path, err)
	}
	priv, ok := k.(ed25519.PrivateKey)
	if !ok {
		return Identity{}, fmt.Errorf("read key: %s holds a %T, not an Ed25519 key", path, k)
	}
	return Identity{Key: priv, File: path}, nil
}

// CreateIdentity makes a new identity and writes it to dir/key.pem (the
// file 0600, dir 0700). An existing key is kept, and the error wraps
// fs.ErrExist, unless replace is true — which loses the old identity and
// the agent names registered with it.
func CreateIdentity(dir string, replace bool) (Identity, error) {
	id, err := NewIdentity()
	if err != nil {
		return Identity{}, err
	}
	if err := id.Save(dir, replace); err != nil {
		return Identity{}, err
	}
	return id, nil
}

// Save writes the identity's key to dir/key.pem as CreateIdentity does.
func (id *Identity) Save(dir string, replace bool) error {
	pemKey, err := EncodeKey(id.Key)
	if err != nil {
		return err
	}
	path := filepath.Join(dir, KeyFile)
	if err := WriteFileAtomic(path, pemKey, replace); err != nil {
		return err
	}
	id.File = path
	return nil
}

// EncodeKey renders priv as the PKCS#8 PEM of a key file.
func EncodeKey(priv ed25519.PrivateKey) ([]byte, error) {
	der, err := x509.MarshalPKCS8PrivateKey(priv)
	if err != nil {
		return nil, fmt.Errorf("encode key: %w", err)
	}
	return pem.EncodeToMemory(&pem.Block{Type: "PRIVATE KEY", Bytes: der}), nil
}

// WriteFileAtomic writes data to path (mode 0600, creating its directory
// 0700) through a temporary file in the same directory, so a reader (or a
// crash) never sees a partial file. With replace false it refuses to
// replace an existing file, atomically too (the error wraps fs.ErrExist):
// the temporary file is hard-linked to path, which fails if path exists,
// where a stat followed by a rename would race another writer. Key files
// are written with it; tools keeping state beside an identity use it too.
func WriteFileAtomic(path string, data []byte, replace bool) error {
	dir := filepath.Dir(path)
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return fmt.Errorf("create %s: %w", dir, err)
	}
	tmp, err := os.CreateTemp(dir, "."+filepath.Base(path)+".tmp-*")
	if err != nil {
		return fmt.Errorf("write %s: %w", path, err)
	}
	name := tmp.Name()
	defer os.Remove(name) // after a rename there is nothing left to remove
	// CreateTemp makes the file 0600 already; Chmod says so whatever the umask.
	if err := tmp.Chmod(0o600); err != nil {
		_ = tmp.Close()
		return fmt.Errorf("write %s: %w", path, err)
	}
	if _, err := tmp.Write(data); err != nil {
		_ = tmp.Close()
		return fmt.Errorf("write %s: %w", path, err)
	}
	if err := tmp.Sync(); err != nil {
		_ = tmp.Close()
		return fmt.Errorf("write %s: %w", path, err)
	}
	if err := tmp.Close(); err != nil {
		return fmt.Errorf("write %s: %w", path, err)
	}
	if replace {
		if err := os.Rename(name, path); err != nil {
			return fmt.Errorf("write %s: %w", path, err)
		}
		return nil
	}
	if err := os.Link(name, path); err != nil {
		if errors.Is(err, fs.ErrExist) {
			return fmt.Errorf("write %s: %w", path, fs.ErrExist)
		}
		return fmt.Errorf("write %s: %w", path, err)
	}
	return nil
}
