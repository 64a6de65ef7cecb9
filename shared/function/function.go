// Package function says what one of a2awire's Lambda functions is: a
// Builder that turns an Env into the value its main passes to lambda.Start.
//
// Env holds the only things that differ between a function running in
// Lambda and the same function mounted by the local harness: the logger,
// the store, the environment variables, the clock, the egress policy and
// the network's key. Everything else a function needs it builds from
// these, in its builder, once — so Lambda (package lambdamain) and the
// harness cannot wire a function differently.
//
// Each function names its builder in the route table (routes.Function's
// Builder); cmd/a2awire-gen writes every functions/<name>/main.go and the
// harness's list of builders from that table.
package function

import (
	"crypto/ed25519"
	"encoding/base64"
	"fmt"
	"log/slog"
	"time"

	"github.com/a2awire/a2awire/shared/egress"
	"github.com/a2awire/a2awire/shared/queue"
	"github.com/a2awire/a2awire/shared/store"
	"github.com/a2awire/a2awire/shared/store/guard"
)

// Env is what a builder may depend on.
type Env struct {
	// Name is the function's name (its folder under functions/): a
	// function serves the routes the table gives that name.
	Name string
	// Log receives the function's structured logs; nil discards them.
	Log *slog.Logger
	// Store is the table; nil for a function with no table access.
	Store store.Store
	// Getenv reads the function's configuration (os.Getenv in Lambda);
	// nil reads nothing.
	Getenv func(string) string
	// Now is the clock of every timestamp the domains write or compare
	// (presence, rate-limit windows, retry schedules); nil is time.Now.
	// Signatures are checked against the real clock: clients sign with
	// theirs.
	Now func() time.Time
	// Egress is the policy of outbound calls to agents' URLs. Its zero
	// value is the cloud's (https only, public addresses only); the harness
	// allows http and loopback, where its receivers and providers run.
	Egress egress.Options
	// NetworkKey is the network's signing key; nil when the function is
	// not given it (webhooks are then signed v1 only).
	NetworkKey ed25519.PrivateKey
	// NetworkPublicKey is the public half of the network's key, for
	// functions that publish or check it without signing; nil when unknown.
	NetworkPublicKey ed25519.PublicKey
	// Queues opens a queue of the route table's queue table by name: the
	// harness's in-process queues. Nil in Lambda, where a function opens
	// Amazon SQS from the queue's URL variable (package sqsqueue).
	Queues func(name string) (queue.Queue, error)
}

// Builder builds what a function's main passes to lambda.Start (and the
// harness invokes): an HTTP route's entry, a stream or schedule handler or a
// custom resource. An error is an init failure.
type Builder func(Env) (any, error)

// Logger returns e.Log, or a logger that discards everything.
func (e Env) Logger() *slog.Logger {
	if e.Log != nil {
		return e.Log
	}
	return slog.New(slog.DiscardHandler)
}

// Env returns the value of the environment variable name ("" when unset
// or when e has no Getenv).
func (e Env) Env(name string) string {
	if e.Getenv == nil {
		return ""
	}
	return e.Getenv(name)
}

// Clock returns e.Now, or time.Now.
func (e Env) Clock() func() time.Time {
	if e.Now != nil {
		return e.Now
	}
	return time.Now
}

// NeedStore returns e.Store, or an error naming fn when it has none. The
// store is guarded (shared/store/guard): a signed request's nonce claim,
// rate-limit count and membership checks ride on its first store call, so
// every function's routes get that without a line of their own.
func (e Env) NeedStore(fn string) (store.Store, error) {
	if e.Store == nil {
		return nil, fmt.Errorf("%s: no table (TABLE_NAME)", fn)
	}
	return guard.Wrap(e.Store), nil
}

// Variables the network's key is read from in Lambda.
const (
	// NetworkKeyEnv holds the standard base64 of the network's 32-byte
	// Ed25519 seed; the deploy fills it from a secret for the functions
	// that sign (webhook deliveries and probes).
	NetworkKeyEnv = "NETWORK_SIGNING_KEY"
	// NetworkPublicKeyEnv holds the standard base64 of the network's
	// 32-byte public key, for the functions that only publish it.
	NetworkPublicKeyEnv = "NETWORK_PUBLIC_KEY"
)

// ParseNetworkKey reads a NetworkKeyEnv value; "" is no key.
func ParseNetworkKey(s string) (ed25519.PrivateKey, error) {
	if s == "" {
		return nil, nil
	}
	seed, err := base64.StdEncoding.Strict().DecodeString(s)
	if err != nil || len(seed) != ed25519.SeedSize {
		return nil, fmt.Errorf("%s is not the standard base64 of a %d-byte Ed25519 seed", NetworkKeyEnv, ed25519.SeedSize)
	}
	return ed25519.NewKeyFromSeed(seed), nil
}

// ParseNetworkPublicKey reads a NetworkPublicKeyEnv value; "" is no key.
func ParseNetworkPublicKey(s string) (ed25519.PublicKey, error) {
	if s == "" {
		return nil, nil
	}
	k, err := base64.StdEncoding.Strict().DecodeString(s)
	if err != nil || len(k) != ed25519.PublicKeySize {
		return nil, fmt.Errorf("%s is not the standard base64 of a %d-byte Ed25519 public key", NetworkPublicKeyEnv, ed25519.PublicKeySize)
	}
	return ed25519.PublicKey(k), nil
}

// KeysFromEnv reads the network's keys from getenv: the signing key when
// NetworkKeyEnv is set (its public half then too), else only the public
// key of NetworkPublicKeyEnv.
func KeysFromEnv(getenv func(string) string) (ed25519.PrivateKey, ed25519.PublicKey, error) {
	priv, err := ParseNetworkKey(getenv(NetworkKeyEnv))
	if err != nil {
		return nil, nil, err
	}
	if priv != nil {
		return priv, priv.Public().(ed25519.PublicKey), nil
	}
	pub, err := ParseNetworkPublicKey(getenv(NetworkPublicKeyEnv))
	return nil, pub, err
}
