// Package idempotency implements protocol.Idempotency over the item API
// (store.Store), so that a stateful provider built with the kit acts at most
// once per X-A2AWire-Task-Id. It is written once and runs on every
// engine: memory, bolt and DynamoDB.
//
// A provider opts in with one option:
//
//	g := idempotency.New(st) // st: any store.Store
//	p := protocol.NewProvider("my-agent", protocol.WithIdempotency(g))
//
// # Records
//
// One item per (agent, task id):
//
//	pk            IDEM#<agent>
//	sk            KEY#<task id>
//	type          "idem"
//	state         "in_progress" | "completed"
//	requestHash   the kit's digest of task and input
//	token         the holder's random claim token (32 hex digits)
//	holdUntil     nanoseconds since the epoch: an in-progress holder is
//	              presumed dead from then on (its Lambda deadline)
//	expires       nanoseconds since the epoch: the record ends then (24 h)
//	expiresAt     the same instant in epoch seconds, rounded up, for the
//	              engines' TTL sweeper (DynamoDB TTL), never read here
//	status, body  the stored response, once completed
//
// Agent and task id sit in different key attributes, so a "#" inside either
// cannot make two pairs collide.
//
// # Protocol
//
// Begin reads the record (1 Get). A live record decides at once: the same
// request completed → its stored response is replayed; still in progress →
// 409 request_in_progress; another request hash → 409
// idempotency_key_reused. When there is none, or it is dead (expired, or in
// progress past its holder's deadline), Begin claims the id with 1
// conditional Put: the condition is "absent, or expired, or in progress past
// the holder's deadline", so exactly one of any number of racing requests
// wins, and each loser reads the winner's record from the failed condition
// (ReturnOnFail) instead of a second Get. The claim carries a random claim
// token that travels to Commit (1 Update) and Abort (1 Delete), both
// conditioned on it: a holder whose claim was taken over after its deadline
// can neither complete nor delete its heir's record, even when the heir is a
// retry of the very same request.
//
// Expiry is decided from the stored times against the injected clock, never
// from the TTL sweeper, which deletes expired items only eventually.
//
// Store failures never leak: store.ErrUnavailable (throttled, contended) and
// a context that ran out become 503 unavailable with Retry-After; anything
// else becomes 500 internal_error, its text only in the logs.
package idempotency

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"time"
	"unicode/utf8"

	"github.com/a2awire/a2awire/shared/protocol"
	"github.com/a2awire/a2awire/shared/store"
)

// Key prefixes and attribute names of a record (see the package comment).
const (
	pkPrefix = "IDEM#"
	skPrefix = "KEY#"

	attrType        = "type"
	attrState       = "state"
	attrRequestHash = "requestHash"
	attrToken       = "token"
	attrHoldUntil   = "holdUntil"
	attrExpires     = "expires"
	attrStatus      = "status"
	attrBody        = "body"

	// TypeRecord is the "type" attribute of a record, so that a change feed
	// consumer can tell items apart without parsing keys.
	TypeRecord = "idem"
)

// State is the state of a record.
type State string

// Record states.
const (
	InProgress State = "in_progress"
	Completed  State = "completed"
)

// Defaults of a Guard.
const (
	// DefaultTTL is how long a record (and so a replayable response) lives.
	DefaultTTL = 24 * time.Hour
	// DefaultHold is how long an in-progress claim lasts when the context
	// has no deadline. Lambda contexts always have one; this covers
	// servers and tests that do not set one.
	DefaultHold = 30 * time.Second
	// RetryAfter is what a refused or unavailable request is told to wait.
	RetryAfter = time.Second
)

// ErrClaimLost means Commit or Abort presented a claim token that no longer
// holds the record: the holder was presumed dead and its claim taken over,
// or the record expired. Nothing was changed.
var ErrClaimLost = errors.New("idempotency: claim lost")

// Key returns the item key of the record for (agent, task id).
func Key(agent, taskID string) store.Key {
	return store.Key{PK: pkPrefix + agent, SK: skPrefix + taskID}
}

// Record is one stored record, decoded.
type Record struct {
	State       State
	RequestHash string
	Token       string
	HoldUntil   time.Time
	Expires     time.Time
	// Status and Body are the stored response once State is Completed.
	Status int
	Body   []byte
}

// Live reports whether the record still counts at now: it has not expired,
// and if in progress its holder's deadline has not passed. The claim
// condition of Begin is exactly its negation.
func (r Record) Live(now time.Time) bool {
	if !now.Before(r.Expires) {
		return false
	}
	return r.State == Completed || now.Before(r.HoldUntil)
}

// Decode reads a record item.
func Decode(it store.Item) (Record, error) {
	r := Record{
		State:       State(it.Str(attrState)),
		RequestHash: it.Str(attrRequestHash),
		Token:       it.Str(attrToken),
		Body:        it.Bytes(attrBody),
	}
	if r.State != InProgress && r.State != Completed {
		return Record{}, fmt.Errorf("idempotency: record %s has state %q", it.Key(), r.State)
	}
	hold, err := it.Int(attrHoldUntil)
	if err != nil {
		return Record{}, fmt.Errorf("idempotency: record %s: %w", it.Key(), err)
	}
	exp, err := it.Int(attrExpires)
	if err != nil {
		return Record{}, fmt.Errorf("idempotency: record %s: %w", it.Key(), err)
	}
	r.HoldUntil, r.Expires = time.Unix(0, hold), time.Unix(0, exp)
	if r.State == Completed {
		status, err := it.Int(attrStatus)
		if err != nil {
			return Record{}, fmt.Errorf("idempotency: record %s: %w", it.Key(), err)
		}
		r.Status = int(status)
	}
	return r, nil
}

// Guard is a protocol.Idempotency over a store.Store. It holds no state of
// its own, so one Guard serves any number of concurrent requests.
type Guard struct {
	store store.Store
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
func New(s store.Store, opts ...Option) *Guard {
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
// stored response, refuse with a 409 (or a 503 when the store is
// unavailable), or claim the id and let the caller run with the returned
// claim. Cost: 1 Get, plus 1 conditional Put when there is no live record.
func (g *Guard) Begin(ctx context.Context, key protocol.TaskKey) (protocol.Claim, *protocol.Recorded, error) {
	// Keys must be UTF-8 on every engine (DynamoDB would refuse them), and
	// that is the buyer's mistake, not ours.
	if !utf8.ValidString(key.TaskID) {
		return protocol.Claim{}, nil, protocol.Errorf(protocol.InvalidInput, "%s must be valid UTF-8", protocol.TaskIDHeader)
	}
	k := Key(key.Agent, key.TaskID)
	now := g.now()
	it, err := g.store.Get(ctx, k)
	switch {
	case err == nil:
		rec, err := Decode(it)
		if err != nil {
			return protocol.Claim{}, nil, internal("read", err)
		}
		if rec.Live(now) {
			r, err := decide(rec, key)
			return protocol.Claim{}, r, err
		}
	case !errors.Is(err, store.ErrNotFound):
		return protocol.Claim{}, nil, storeError("read", err)
	}

	until := now.Add(g.hold)
	if dl, ok := ctx.Deadline(); ok {
		until = dl
	}
	if !until.After(now) {
		// No time left to run: claiming would only block retries.
		return protocol.Claim{}, nil, &protocol.Error{Code: protocol.Unavailable,
			Message: "the request ran out of time before it started; retry", RetryAfter: RetryAfter}
	}
	token, err := newToken()
	if err != nil {
		return protocol.Claim{}, nil, internal("claim token", err)
	}
	expires := now.Add(g.ttl)
	item := store.Item{
		attrType:            store.S(TypeRecord),
		attrState:           store.S(string(InProgress)),
		attrRequestHash:     store.S(key.RequestHash),
		attrToken:           store.S(token),
		attrHoldUntil:       store.N(until.UnixNano()),
		attrExpires:         store.N(expires.UnixNano()),
		store.AttrExpiresAt: store.ExpiresAt(expires),
	}
	nowN := store.N(now.UnixNano())
	// The negation of Record.Live: absent, expired, or in progress past
	// the holder's deadline.
	dead := store.Or(
		store.ItemAbsent(),
		store.Le(attrExpires, nowN),
		store.And(store.Eq(attrState, store.S(string(InProgress))), store.Le(attrHoldUntil, nowN)),
	)
	_, err = g.store.Write(ctx, store.Put(k, item).When(dead).OnFailReturn())
	var cf *store.ConditionFailedError
	switch {
	case err == nil:
		return protocol.Claim{TaskKey: key, Token: token}, nil, nil
	case errors.As(err, &cf):
		// Another request claimed the id between our read and our write;
		// its record came back with the failure.
		if cf.Item == nil {
			return protocol.Claim{}, nil, internal("claim", fmt.Errorf("condition failed without the item in the way: %w", err))
		}
		rec, derr := Decode(cf.Item)
		if derr != nil {
			return protocol.Claim{}, nil, internal("claim", derr)
		}
		r, err := decide(rec, key)
		return protocol.Claim{}, r, err
	}
	return protocol.Claim{}, nil, storeError("claim", err)
}

// decide answers a request whose task id has a live record.
func decide(rec Record, key protocol.TaskKey) (*protocol.Recorded, error) {
	if rec.RequestHash != key.RequestHash {
		return nil, protocol.Errorf(protocol.IdempotencyKeyReused,
			"%s was already used for a different request; use a new task id", protocol.TaskIDHeader)
	}
	if rec.State == Completed {
		return &protocol.Recorded{Status: rec.Status, Body: rec.Body}, nil
	}
	return nil, &protocol.Error{
		Code:       protocol.RequestInProgress,
		Message:    "a request with this " + protocol.TaskIDHeader + " is still executing; retry later",
		RetryAfter: RetryAfter,
	}
}

// Commit stores the final response for replay, if c still holds the record;
// otherwise it changes nothing and returns an error wrapping ErrClaimLost.
// Cost: 1 conditional Update.
func (g *Guard) Commit(ctx context.Context, c protocol.Claim, rec protocol.Recorded) error {
	body := rec.Body
	if body == nil {
		body = []byte{}
	}
	_, err := g.store.Write(ctx, store.Update(Key(c.Agent, c.TaskID)).
		SetAttr(attrState, store.S(string(Completed))).
		SetAttr(attrStatus, store.N(int64(rec.Status))).
		SetAttr(attrBody, store.B(body)).
		When(store.And(store.Eq(attrToken, store.S(c.Token)), store.Eq(attrState, store.S(string(InProgress))))))
	switch {
	case errors.Is(err, store.ErrConditionFailed):
		return fmt.Errorf("idempotency: complete %s/%q: %w", c.Agent, c.TaskID, ErrClaimLost)
	case errors.Is(err, store.ErrInvalid):
		// The response cannot be stored (over DynamoDB's 400 KB item):
		// release the id rather than leave it in progress until the
		// holder's deadline, so that a retry runs again.
		if aerr := g.Abort(ctx, c); aerr != nil {
			return errors.Join(fmt.Errorf("idempotency: complete %s/%q: %w", c.Agent, c.TaskID, err), aerr)
		}
		return fmt.Errorf("idempotency: complete %s/%q (released instead): %w", c.Agent, c.TaskID, err)
	case err != nil:
		return fmt.Errorf("idempotency: complete %s/%q: %w", c.Agent, c.TaskID, err)
	}
	return nil
}

// Abort deletes the record after a failed execution so that a retry runs,
// if c still holds it; otherwise it changes nothing and returns an error
// wrapping ErrClaimLost. Cost: 1 conditional Delete.
func (g *Guard) Abort(ctx context.Context, c protocol.Claim) error {
	_, err := g.store.Write(ctx, store.Delete(Key(c.Agent, c.TaskID)).When(store.Eq(attrToken, store.S(c.Token))))
	switch {
	case errors.Is(err, store.ErrConditionFailed):
		return fmt.Errorf("idempotency: release %s/%q: %w", c.Agent, c.TaskID, ErrClaimLost)
	case err != nil:
		return fmt.Errorf("idempotency: release %s/%q: %w", c.Agent, c.TaskID, err)
	}
	return nil
}

// newToken returns a random claim token: 128 bits, so that no two claims
// ever share one.
func newToken() (string, error) {
	var b [16]byte
	if _, err := rand.Read(b[:]); err != nil {
		return "", err
	}
	return hex.EncodeToString(b[:]), nil
}

// storeError maps a store failure to what the client sees: an overloaded
// store or a context that ran out is a 503 to retry (nothing was decided);
// anything else is a 500. Neither carries the store's text.
func storeError(op string, err error) *protocol.Error {
	if errors.Is(err, store.ErrUnavailable) || errors.Is(err, context.DeadlineExceeded) || errors.Is(err, context.Canceled) {
		return &protocol.Error{
			Code:       protocol.Unavailable,
			Message:    "the provider's store is busy; retry with the same " + protocol.TaskIDHeader,
			RetryAfter: RetryAfter,
			Err:        fmt.Errorf("idempotency: %s: %w", op, err),
		}
	}
	return internal(op, err)
}

// internal hides a failure from the client; the kit logs Err.
func internal(op string, err error) *protocol.Error {
	return &protocol.Error{
		Code:    protocol.Internal,
		Message: "the provider could not check the task id; retry later",
		Err:     fmt.Errorf("idempotency: %s: %w", op, err),
	}
}
