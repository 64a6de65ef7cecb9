package main

import (
	"crypto/ed25519"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"time"

	awnc "github.com/a2awire/a2awire/shared/awn"
)

// Files in $AWN_HOME: the key (PKCS#8 PEM, written by package awn) and
// what awn remembers between runs.
const (
	keyFile   = awnc.KeyFile
	stateFile = "state.json"
)

// home returns $AWN_HOME, or ~/.config/awn (awnc.Home). It reads HOME
// through the injected environment rather than the process's, so a test
// never touches the real home directory.
func (a *app) home() (string, error) {
	h, err := awnc.Home(a.getenv)
	if err == nil && a.as != "" {
		h, err = awnc.ProfileDir(h, a.as)
	}
	if err != nil {
		return "", a.check(err)
	}
	return h, nil
}

// identity reads the agent's key from $AWN_HOME. A missing key is a usage
// error that says to run `awn init`.
func (a *app) identity() (awnc.Identity, error) {
	home, err := a.home()
	if err != nil {
		return awnc.Identity{}, err
	}
	id, err := awnc.LoadIdentity(home)
	if errors.Is(err, awnc.ErrNoIdentityFile) {
		if a.as != "" {
			return id, usageErrorf("no identity %s (no key in %s); run 'awn --as %s init' first", a.as, home, a.as)
		}
		return id, usageErrorf("no key in %s; run 'awn init' first (or set AWN_HOME)", home)
	}
	return id, err
}

// encodeKey renders priv as the PKCS#8 PEM of the key file.
func encodeKey(priv ed25519.PrivateKey) ([]byte, error) { return awnc.EncodeKey(priv) }

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
	return awnc.WriteFileAtomic(filepath.Join(home, stateFile), append(b, '\n'), true)
}
