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
	"encoding/json"
	"fmt"
	"log/slog"
	"maps"
	"net/http"
	"slices"
	"strings"
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

// StreamBuilder builds a streaming function (routes.Function.Streaming):
// an http.Handler that writes its answer as it goes. Its main hands it to
// aws-lambda-go's lambdaurl (a function URL with InvokeMode
// RESPONSE_STREAM); the harness calls it directly with a writer that
// flushes. It sees the request as net/http does: the signature, the route
// and its parameters are its own to check and match.
type StreamBuilder func(Env) (http.Handler, error)

// Builder is b as a Builder, for the harness's one list of builders: the
// value it builds is the http.Handler.
func (b StreamBuilder) Builder() Builder {
	return func(e Env) (any, error) {
		h, err := b(e)
		if err != nil {
			return nil, err
		}
		return h, nil
	}
}

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

// ParseNetworkKey reads a NetworkKeyEnv value; "" is no key. The value is
// the standard base64 of the 32-byte seed, or a JSON object holding it:
// the whole SecretString of a Secrets Manager secret stored as key/value
// (the console's default form), which a dynamic reference without a JSON
// key hands over as it is. Of an object, the member named by
// NetworkKeyJSONNames is taken, or the only member when there is one. An
// error names the object's members, never a value.
func ParseNetworkKey(s string) (ed25519.PrivateKey, error) {
	s = strings.TrimSpace(s)
	if s == "" {
		return nil, nil
	}
	if strings.HasPrefix(s, "{") {
		var err error
		if s, err = seedFromJSON(s); err != nil {
			return nil, err
		}
	}
	seed, err := base64.StdEncoding.Strict().DecodeString(s)
	if err != nil || len(seed) != ed25519.SeedSize {
		return nil, fmt.Errorf("%s is not the standard base64 of a %d-byte Ed25519 seed", NetworkKeyEnv, ed25519.SeedSize)
	}
	return ed25519.NewKeyFromSeed(seed), nil
}

// NetworkKeyJSONNames are the members a JSON-form signing-key secret may
// hold the seed under, tried in this order.
var NetworkKeyJSONNames = []string{"seed", "networkSigningKey", NetworkKeyEnv, "privateKey", "key"}

// seedFromJSON picks the seed out of a JSON object (see ParseNetworkKey).
func seedFromJSON(s string) (string, error) {
	var m map[string]any
	if err := json.Unmarshal([]byte(s), &m); err != nil {
		return "", fmt.Errorf("%s starts with '{' but is not a JSON object", NetworkKeyEnv)
	}
	for _, name := range NetworkKeyJSONNames {
		if v, ok := m[name].(string); ok {
			return strings.TrimSpace(v), nil
		}
	}
	if len(m) == 1 {
		for _, v := range m {
			if v, ok := v.(string); ok {
				return strings.TrimSpace(v), nil
			}
		}
	}
	names := slices.Sorted(maps.Keys(m))
	return "", fmt.Errorf("%s is a JSON object with members %q: want one member, or one named %q, holding the seed "+
		"(or name the member in networkSigningKeySecret as <secret>:SecretString:<member>)", NetworkKeyEnv, names, NetworkKeyJSONNames[0])
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

// SigningKeyError is KeysFromEnv's error for a signing key it could not
// use: unreadable, or not the private half of the network's public key.
// The public key KeysFromEnv returns beside it is still good, so a
// function can run without signing (webhooks v1 only) instead of failing
// at every start.
type SigningKeyError struct{ Err error }

func (e *SigningKeyError) Error() string { return e.Err.Error() }

func (e *SigningKeyError) Unwrap() error { return e.Err }

// KeysFromEnv reads the network's keys from getenv: the signing key when
// NetworkKeyEnv is set (its public half then too), else only the public
// key of NetworkPublicKeyEnv. When both are set they must pair. A signing
// key it cannot use is a *SigningKeyError, returned with the public key
// of NetworkPublicKeyEnv and no private key.
func KeysFromEnv(getenv func(string) string) (ed25519.PrivateKey, ed25519.PublicKey, error) {
	pub, err := ParseNetworkPublicKey(getenv(NetworkPublicKeyEnv))
	if err != nil {
		return nil, nil, err
	}
	priv, err := ParseNetworkKey(getenv(NetworkKeyEnv))
	if err != nil {
		return nil, pub, &SigningKeyError{Err: err}
	}
	if priv == nil {
		return nil, pub, nil
	}
	derived := priv.Public().(ed25519.PublicKey)
	if pub != nil && !pub.Equal(derived) {
		return nil, pub, &SigningKeyError{Err: fmt.Errorf("%s is not the private half of %s (the networkPublicKey the deploy was given)", NetworkKeyEnv, NetworkPublicKeyEnv)}
	}
	return priv, derived, nil
}
