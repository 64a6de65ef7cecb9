// Package idempotency implements protocol.Idempotency on the store's
// idempotency records, so that a stateful provider built with the kit acts at
// most once per X-A2AWire-Task-Id (DESIGN §3).
//
// A provider opts in with one option:
//
//	g := idempotency.New(st) // st: memory, bolt or dynamo store
//	p := protocol.NewProvider("my-agent", protocol.WithIdempotency(g))
//
// The kit hashes each request and calls Begin before running a capability.
// Begin reads the record for (agent, task id) and, when there is none, claims
// it with one conditional write: in progress until the caller's deadline (the
// Lambda deadline in the context), expiring 24 h later. Exactly one of any
// number of concurrent requests wins the claim; the others see its record and
// get 409 request_in_progress, or, once it has completed, its stored status
// and body (the kit adds X-A2AWire-Replayed: true). A different request under
// the same id gets 409 idempotency_key_reused. Commit stores the final
// response; Abort (after a 5xx) deletes the claim so a retry runs again.
//
// Expiry is decided from the stored times against the injected clock, never
// from DynamoDB's TTL, which deletes expired items only eventually.
package idempotency

import (
	"context"
	"errors"
	"fmt"
	"time"
	"unicode/utf8"

	"github.com/a2awire/a2awire/shared/protocol"
	"github.com/a2awire/a2awire/shared/store"
)

// Store is what the guard needs of storage; the memory, bolt and dynamo
// adapters all satisfy it.
type Store interface {
	// GetIdem returns the live record, or ErrNotFound.
	GetIdem(ctx context.Context, scope, key string, now time.Time) (store.IdemRecord, error)
	// ClaimIdem creates rec in progress, or returns the live record in the
	// way together with ErrExists.
	ClaimIdem(ctx context.Context, rec store.IdemRecord, now time.Time) (store.IdemRecord, error)
	// CompleteIdem stores the response of an in-progress record held under
	// requestHash.
	CompleteIdem(ctx context.Context, scope, key, requestHash string, status int, body []byte) error
	// DeleteIdem removes the record if it is held under requestHash.
	DeleteIdem(ctx context.Context, scope, key, requestHash string) error
}

// Defaults of a Guard.
const (
	// DefaultTTL is how long a record (and so a replayable response) lives.
	DefaultTTL = 24 * time.Hour
	// DefaultHold is how long an in-progress claim lasts when the context
	// has no deadline. Lambda contexts always have one; this covers
	// servers and tests that do not set one.
	DefaultHold = 30 * time.Second
)

// Guard is a protocol.Idempotency backed by a Store. It holds no state of
// its own, so one Guard serves any number of concurrent requests.
type Guard struct {
	store Store
	now   func() time.Time
	ttl   time.Duration
	hold  time.Duration
}

var _ protocol.Idempotency = (*Guard)(nil)

// Option configures a Guard.
type Option func(*Guard)

// WithClock replaces time.Now, so tests can step past deadlines and expiry.
func WithClock(now func() time.Time) Option { return func(g *Guard) { g.now = now } }

// WithTTL sets how long records live (default DefaultTTL).
func WithTTL(d time.Duration) Option { return func(g *Guard) { g.ttl = d } }

// WithDefaultHold sets the in-progress hold used when the context has no
// deadline (default DefaultHold).
func WithDefaultHold(d time.Duration) Option { return func(g *Guard) { g.hold = d } }

// New returns a Guard over s.
func New(s Store, opts ...Option) *Guard {
	if s == nil {
		panic("idempotency: nil store")
	}
	g := &Guard{store: s, now: time.Now, ttl: DefaultTTL, hold: DefaultHold}
	for _, o := range opts {
		o(g)
	}
	return g
}

// Begin decides what to do with a request carrying a task id: replay a
// stored response, refuse with a 409, or claim the id and let the caller run
// (nil, nil).
func (g *Guard) Begin(ctx context.Context, key protocol.TaskKey) (*protocol.Recorded, error) {
	// The stores refuse identifiers that are not UTF-8 (DynamoDB would mangle
	// them), and that is the buyer's mistake, not ours.
	if !utf8.ValidString(key.TaskID) {
		return nil, protocol.Errorf(protocol.InvalidInput, "%s must be valid UTF-8", protocol.TaskIDHeader)
	}
	now := g.now()
	rec, err := g.store.GetIdem(ctx, key.Agent, key.TaskID, now)
	switch {
	case err == nil:
		return decide(rec, key)
	case !errors.Is(err, store.ErrNotFound):
		return nil, internal("read", err)
	}

	until := now.Add(g.hold)
	if dl, ok := ctx.Deadline(); ok {
		until = dl
	}
	if !until.After(now) {
		// No time left to run: claiming would only block retries.
		return nil, &protocol.Error{Code: protocol.Unavailable, Message: "the request ran out of time before it started", RetryAfter: time.Second}
	}
	claim := store.IdemRecord{
		Scope:           key.Agent,
		Key:             key.TaskID,
		State:           store.IdemInProgress,
		RequestHash:     key.RequestHash,
		ExpiresAt:       now.Add(g.ttl),
		InProgressUntil: until,
	}
	existing, err := g.store.ClaimIdem(ctx, claim, now)
	switch {
	case err == nil:
		return nil, nil
	case errors.Is(err, store.ErrExists):
		// Another request claimed the id between our read and our write.
		return decide(existing, key)
	}
	return nil, internal("claim", err)
}

// decide answers a request whose task id already has a live record.
func decide(rec store.IdemRecord, key protocol.TaskKey) (*protocol.Recorded, error) {
	if rec.RequestHash != key.RequestHash {
		return nil, protocol.Errorf(protocol.IdempotencyKeyReused,
			"task id %q was already used for a different request; use a new task id", key.TaskID)
	}
	if rec.State == store.IdemCompleted {
		return &protocol.Recorded{Status: rec.Status, Body: rec.Body}, nil
	}
	return nil, &protocol.Error{
		Code:       protocol.RequestInProgress,
		Message:    fmt.Sprintf("task id %q is still executing; retry later", key.TaskID),
		RetryAfter: time.Second,
	}
}

// Commit stores the final response for replay.
func (g *Guard) Commit(ctx context.Context, key protocol.TaskKey, rec protocol.Recorded) error {
	if err := g.store.CompleteIdem(ctx, key.Agent, key.TaskID, key.RequestHash, rec.Status, rec.Body); err != nil {
		return fmt.Errorf("idempotency: complete %s/%s: %w", key.Agent, key.TaskID, err)
	}
	return nil
}

// Abort releases the claim after a failed execution so that a retry runs.
func (g *Guard) Abort(ctx context.Context, key protocol.TaskKey) error {
	if err := g.store.DeleteIdem(ctx, key.Agent, key.TaskID, key.RequestHash); err != nil {
		return fmt.Errorf("idempotency: delete %s/%s: %w", key.Agent, key.TaskID, err)
	}
	return nil
}

// internal hides a store failure from the client; the kit logs Err.
func internal(op string, err error) *protocol.Error {
	return &protocol.Error{
		Code:    protocol.Internal,
		Message: "the provider could not check the task id; retry later",
		Err:     fmt.Errorf("idempotency: %s: %w", op, err),
	}
}
