package main

import (
	"crypto/ed25519"
	"crypto/x509"
	"encoding/json"
	"encoding/pem"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"time"
)

// Files in $AWN_HOME. The key is PKCS#8 PEM, the form openssl and every
// crypto library read, so an agent's identity can leave awn.
const (
	keyFile   = "key.pem"
	stateFile = "state.json"
)

// home returns $AWN_HOME, or ~/.config/awn. It reads HOME through the
// injected environment rather than the process's, so a test never touches
// the real home directory.
func (a *app) home() (string, error) {
	if h := a.getenv("AWN_HOME"); h != "" {
		return h, nil
	}
	if h := a.getenv("HOME"); h != "" {
		return filepath.Join(h, ".config", "awn"), nil
	}
	return "", usageErrorf("neither AWN_HOME nor HOME is set; set AWN_HOME to the directory for awn's key and state")
}

// writeFileAtomic writes data to path through a temporary file in the same
// directory, so a reader (or a crash) never sees a partial file. With
// replace false it refuses to replace an existing file, atomically too: the
// temporary file is hard-linked to path, which fails if path exists, where a
// stat followed by a rename would race another awn.
func writeFileAtomic(path string, data []byte, replace bool) error {
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

// loadKey reads the agent's private key from $AWN_HOME. A missing key is a
// usage error that says to run `awn init`.
func (a *app) loadKey() (ed25519.PrivateKey, error) {
	home, err := a.home()
	if err != nil {
		return nil, err
	}
	path := filepath.Join(home, keyFile)
	b, err := os.ReadFile(path)
	if errors.Is(err, fs.ErrNotExist) {
		return nil, usageErrorf("no key in %s; run 'awn init' first (or set AWN_HOME)", home)
	}
	if err != nil {
		return nil, fmt.Errorf("read key: %w", err)
	}
	blk, _ := pem.Decode(b)
	if blk == nil || blk.Type != "PRIVATE KEY" {
		return nil, fmt.Errorf("read key: %s is not a PEM \"PRIVATE KEY\"", path)
	}
	k, err := x509.ParsePKCS8PrivateKey(blk.Bytes)
	if err != nil {
		return nil, fmt.Errorf("read key %s: %w", path, err)
	}
	priv, ok := k.(ed25519.PrivateKey)
	if !ok {
		return nil, fmt.Errorf("read key: %s holds a %T, not an Ed25519 key", path, k)
	}
	return priv, nil
}

// encodeKey renders priv as the PKCS#8 PEM of the key file.
func encodeKey(priv ed25519.PrivateKey) ([]byte, error) {
	der, err := x509.MarshalPKCS8PrivateKey(priv)
	if err != nil {
		return nil, fmt.Errorf("encode key: %w", err)
	}
	return pem.EncodeToMemory(&pem.Block{Type: "PRIVATE KEY", Bytes: der}), nil
}

// localState is what awn remembers between runs in $AWN_HOME/state.json:
// the agent last registered (the default of `agent online|offline`),
// per agent name, where it was registered and the presence last set, and
// per world, the webhook handler set.
type localState struct {
	LastRegistered string                `json:"last_registered,omitempty"`
	Agents         map[string]localAgent `json:"agents,omitempty"`
	// Handlers holds, per world, the webhook set with `agent set-handler`.
	Handlers map[string]localHandler `json:"handlers,omitempty"`
}

// localAgent is the local record of one registered agent.
type localAgent struct {
	// URL is the network the agent was registered with.
	URL      string `json:"url"`
	Endpoint string `json:"endpoint,omitempty"`
	// Status is the presence awn last set ("online"|"offline"); empty
	// until `agent online|offline` ran.
	Status       string    `json:"status,omitempty"`
	StatusAt     time.Time `json:"status_at,omitzero"`
	RegisteredAt time.Time `json:"registered_at,omitzero"`
}

// loadState reads the local state; a missing file is the empty state.
func (a *app) loadState() (localState, error) {
	var st localState
	home, err := a.home()
	if err != nil {
		return st, err
	}
	b, err := os.ReadFile(filepath.Join(home, stateFile))
	if errors.Is(err, fs.ErrNotExist) {
		return st, nil
	}
	if err != nil {
		return st, fmt.Errorf("read local state: %w", err)
	}
	if err := json.Unmarshal(b, &st); err != nil {
		return st, fmt.Errorf("read local state %s: not valid JSON", filepath.Join(home, stateFile))
	}
	return st, nil
}

// updateState applies fn to the local state and writes it atomically. Two
// awn runs at once may lose one update, never tear the file.
func (a *app) updateState(fn func(*localState)) error {
	st, err := a.loadState()
	if err != nil {
		return err
	}
	if st.Agents == nil {
		st.Agents = map[string]localAgent{}
	}
	fn(&st)
	b, err := json.MarshalIndent(st, "", "  ")
	if err != nil {
		return fmt.Errorf("encode local state: %w", err)
	}
	home, err := a.home()
	if err != nil {
		return err
	}
	return writeFileAtomic(filepath.Join(home, stateFile), append(b, '\n'), true)
}
