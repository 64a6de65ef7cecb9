// Package ratelimit holds the per-agent, per-minute request limits of the
// world routes (send 30, read 60, agents 120, ping 30, actions 60 by
// default) and the per-world limit of joins (300 a minute: a flood of
// fresh keys is a fresh agent each, so only the world can count it). The counts live in the store, so a limit holds across every
// Lambda instance and process serving one table, and each check is one
// conditional write with no read.
//
// # Items
//
//	item        pk                    sk                      type
//	ratewindow  RATE#<world>#<awnId>  <op>#<unix minute>      ratewindow
//	ratewindow  RATE#<world>          join#<unix minute>      ratewindow  (per world)
//
// Windows are fixed calendar minutes (Unix time / 60). A request adds 1 to
// the window's n, conditioned on n being below the limit (or the item being
// absent): the first request of a minute creates the item, the one that
// would pass the limit fails the condition and nothing is written. The item
// expires (expiresAt) a few minutes after its window ends; the TTL sweeper
// deletes it, and no read ever needs it again.
//
// Fixed windows allow up to twice the limit across a window boundary (the
// end of one minute and the start of the next); that is the price of one
// write per request, and the per-minute contract still holds for every
// calendar minute.
//
// Inside a request whose context carries a guard (shared/store/guard, opened
// by shared/access on signed routes), the count is not written at once: it
// joins the request's first store call — the domain's transaction, or
// beside its first read — so it costs no round trip of its own. A refused
// count then refuses the request with the same 429.
package ratelimit

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/a2awire/a2awire/shared/apierror"
	"github.com/a2awire/a2awire/shared/store"
	"github.com/a2awire/a2awire/shared/store/guard"
	worlds "github.com/a2awire/a2awire/shared/world"
)

// Op is a rate-limited operation.
type Op string

// The operations of the world routes that are limited.
const (
	Send    Op = "send"
	Read    Op = "read"
	Agents  Op = "agents"
	Ping    Op = "ping"
	Actions Op = "actions"
	// Join is counted per world, not per agent (AllowWorld): a flood of
	// fresh keys has a fresh agent each.
	Join Op = "join"
)

// ops lists every operation, in the order of the environment variables.
var ops = []Op{Send, Read, Agents, Ping, Actions, Join}

// Limits is requests per minute by operation.
type Limits map[Op]int

// DefaultLimits returns the default limits: send 30, read 60, agents 120,
// ping 30, actions 60 per agent per minute, and join 300 per world per
// minute.
func DefaultLimits() Limits {
	return Limits{Send: 30, Read: 60, Agents: 120, Ping: 30, Actions: 60, Join: 300}
}

// EnvVar is the environment variable configuring op's limit
// (RATE_LIMIT_SEND, …).
func EnvVar(op Op) string { return "RATE_LIMIT_" + strings.ToUpper(string(op)) }

// LimitsFromEnv returns the default limits with those set in the
// environment replaced (RATE_LIMIT_SEND, RATE_LIMIT_READ,
// RATE_LIMIT_AGENTS, RATE_LIMIT_PING, RATE_LIMIT_ACTIONS; unset or empty
// keeps the default). A value that is not a positive integer is an error
// naming the variable.
func LimitsFromEnv(getenv func(string) string) (Limits, error) {
	l := DefaultLimits()
	for _, op := range ops {
		name := EnvVar(op)
		v := strings.TrimSpace(getenv(name))
		if v == "" {
			continue
		}
		n, err := strconv.Atoi(v)
		if err != nil || n <= 0 {
			return nil, fmt.Errorf("ratelimit: %s must be a positive integer (requests per minute), not %q", name, v)
		}
		l[op] = n
	}
	return l, nil
}

// TypeWindow is the type attribute of window items.
const TypeWindow = "ratewindow"

const (
	attrType = "type"
	attrN    = "n"
	// keep is how long a window item outlives its window.
	keep = 3 * time.Minute
)

// WindowKey is the key of the item counting awnID's op requests in world
// during the minute that contains t.
func WindowKey(world, awnID string, op Op, t time.Time) store.Key {
	return store.Key{PK: "RATE#" + world + "#" + awnID, SK: string(op) + "#" + strconv.FormatInt(minute(t), 10)}
}

// minute is t's Unix minute (floored for times before 1970 too).
func minute(t time.Time) int64 {
	s := t.Unix()
	m := s / 60
	if s%60 < 0 {
		m--
	}
	return m
}

// Limiter checks requests against Limits in a store. It holds no mutable
// state; any number of Limiters over one table share the counts.
type Limiter struct {
	store  store.Store
	limits Limits
	now    func() time.Time
}

// Option configures a Limiter.
type Option func(*Limiter)

// WithClock replaces time.Now (which window a request counts in).
func WithClock(now func() time.Time) Option {
	return func(l *Limiter) {
		if now != nil {
			l.now = now
		}
	}
}

// New returns a Limiter over st with limits l; operations l does not name
// get their default. A limit that is not positive is a configuration error
// and panics (LimitsFromEnv refuses such values).
func New(st store.Store, l Limits, opts ...Option) *Limiter {
	if st == nil {
		panic("ratelimit: nil store")
	}
	limits := DefaultLimits()
	for op, n := range l {
		if n <= 0 {
			panic(fmt.Sprintf("ratelimit: limit of %q is %d; limits are positive", op, n))
		}
		limits[op] = n
	}
	lim := &Limiter{store: st, limits: limits, now: time.Now}
	for _, o := range opts {
		o(lim)
	}
	return lim
}

// Limit returns op's requests per minute (0 for an unknown op).
func (l *Limiter) Limit(op Op) int { return l.limits[op] }

// Allow counts one op request by awnID in world and reports whether it is
// within the limit: nil, or a RateLimited *apierror.Error whose RetryAfter
// is the time left until the current minute ends. Cost: one conditional
// UpdateItem, no read. A refused request is not counted. A malformed world
// or awnId (no member has one) is NotJoined without a store call.
func (l *Limiter) Allow(ctx context.Context, world, awnID string, op Op) error {
	limit, ok := l.limits[op]
	if !ok {
		return apierror.Wrap(apierror.Internal, fmt.Errorf("ratelimit: no limit for operation %q", op), "internal error; try again later")
	}
	if !worlds.ValidID(world) || !worlds.ValidAWNID(awnID) {
		// No member has such ids, and they must not reach the store as
		// oversized keys (a 500).
		return apierror.New(apierror.NotJoined, "you are not a member of this world; join it first")
	}
	now := l.now()
	return l.count(ctx, WindowKey(world, awnID, op, now), op, limit, now)
}

// AllowWorld is Allow for an operation counted per world (Join), whoever
// asks: one conditional UpdateItem of the world's window. A malformed
// world is NotFound without a store call.
func (l *Limiter) AllowWorld(ctx context.Context, world string, op Op) error {
	limit, ok := l.limits[op]
	if !ok {
		return apierror.Wrap(apierror.Internal, fmt.Errorf("ratelimit: no limit for operation %q", op), "internal error; try again later")
	}
	if !worlds.ValidID(world) {
		return apierror.New(apierror.NotFound, "no world is named %s", apierror.Quote(world))
	}
	now := l.now()
	return l.count(ctx, store.Key{PK: "RATE#" + world, SK: string(op) + "#" + strconv.FormatInt(minute(now), 10)}, op, limit, now)
}

// count adds one request to the window at k (of the minute of now) unless
// it is at limit.
func (l *Limiter) count(ctx context.Context, k store.Key, op Op, limit int, now time.Time) error {
	end := time.Unix((minute(now)+1)*60, 0)
	up := store.Update(k).
		AddNum(attrN, 1).
		SetAttr(attrType, store.S(TypeWindow)).
		SetAttr(store.AttrExpiresAt, store.ExpiresAt(end.Add(keep))).
		When(store.Or(store.NotExists(attrN), store.Lt(attrN, store.N(int64(limit)))))
	refused := func(*store.ConditionFailedError) error {
		wait := end.Sub(now)
		return &apierror.Error{Kind: apierror.RateLimited, RetryAfter: wait,
			Message: fmt.Sprintf("rate limit exceeded: at most %d %s requests per minute; retry in %d s", limit, op, int((wait+time.Second-1)/time.Second))}
	}
	// Inside a guarded request the count joins the request's first store
	// call (the domain's transaction, or beside its first read).
	if guard.Add(ctx, l.store, guard.Part{Action: up, Refused: refused}) {
		return nil
	}
	_, err := l.store.Write(ctx, up)
	switch {
	case err == nil:
		return nil
	case errors.Is(err, store.ErrConditionFailed):
		return refused(nil)
	default:
		return apierror.FromStore("check rate limit", err)
	}
}
