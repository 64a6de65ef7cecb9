// Package guard carries a signed request's guard writes — the nonce claim,
// the rate-limit count, the membership and world checks — into the first
// store call the request's handler makes, so that they cost no round trip
// of their own.
//
// # Why
//
// Lambda bills duration, so every DynamoDB round trip made after another is
// paid in latency and in GB-seconds. A signed world request used to make its
// guard calls one after another before the handler ran: the member key, the
// world's manifest, the nonce Put, the rate-limit Update, then the domain's
// write — four or five round trips where two do. The guard's writes are
// plain conditional actions on items no domain touches (NONCE#…, RATE#…)
// and its checks are "this item exists", so they fit the domain's own
// transaction, or run beside the domain's first read.
//
// # How
//
// The route middleware (shared/access) opens a Request in the request's
// context (Begin) before it verifies the signature. Whoever would have
// written a guard item adds it instead (Add): auth.Nonces.Claim, the
// ratelimit.Limiter, world.Service.MemberKey on a cached key. Each Part is
// an action and the error to answer when its condition fails. Nothing else
// changes in handlers or domains: the store every domain is built over is
// wrapped (Wrap, in function.Env.NeedStore), and the wrapper settles the
// guard with the request's first call:
//
//   - a Write carries the guard's actions after its own, in the same
//     transaction (one round trip). A guard action failing → the part's
//     error; a domain condition failing → the guard is written alone (on
//     this error path only) and its error, if any, comes first, so a
//     request is refused for the same reason, in the same order, as when
//     the guard ran first. A guard check that an item exists is left out
//     when the Write's own action on that item is conditioned on
//     something only an existing item satisfies (a removal's update of
//     the manifest): the Write holds it, and a transaction may not name
//     an item twice. A Write that cannot carry them (an Update returning
//     its item, which a transaction cannot do; a Write that would pass
//     100 actions or name a guard item otherwise) writes the guard first,
//     and writes nothing when it refused.
//   - a Get or Query runs beside the guard (the guard's parts, each its
//     own call, all at once) and returns only once the guard has settled:
//     reads have no effect, so nothing is visible before the guard holds.
//   - a call made while the guard is being settled by another waits for
//     that outcome before it writes.
//   - a writer that builds its own Write out of several requests' actions
//     (world.Log's group commit) takes each request's guard with Take and
//     reports the outcome to it.
//
// # Reads ahead
//
// The guard saves the round trips of its own writes; the key lookup of a
// signing key this instance has not seen (a member key item, a world's
// manifest for its owner's key) is a read the handler's reads would wait
// for. A route names its handler's first reads from its path and body
// (access.Route.ReadAhead), and the middleware arms them around the key
// lookup (Ahead): the lookup's read issues them all beside itself, and
// the handler's calls of the same reads take the answers kept (each once)
// instead of calling the store; what the lookup itself read is kept too
// (Kept: a leave takes the membership from the member key item). So the
// lookup and the handler's reads are one round trip, and its write the
// second. A kept answer taken while the guard is pending leaves it
// pending for the handler's write to carry (readahead.go gives the rules:
// staleness, conditions, unverified requests).
//
// Whatever the handler did, the middleware settles a guard still pending
// when the handler returns (a handler that refused bad input without a
// store call), and answers the guard's error instead of the handler's when
// the guard failed: it holds the handler's answer until then. A handler
// that acts outside the store (an HTTP call to a webhook or a provider)
// before any store call must call Settle first; a handler that streams
// settles the guard at its first Flush.
//
// # Costs
//
// Carried in a transaction, the nonce Put and the rate-limit Update are
// transactional writes: 2 write units each in DynamoDB on-demand where a
// PutItem and an UpdateItem cost 1. That is 2 write units a request more
// (about $1.25 a million at $0.625 per million write units) to save two
// round trips (10 ms at 5 ms a call; at 256 MB of arm64 Lambda about $0.03
// a million of GB-seconds). The money favours the separate calls; the
// latency the client sees does not. The choice made here is the latency:
// docs/cost.md puts both figures side by side per route. Reads do not pay
// it: beside a read the guard's parts are separate calls at 1 unit each.
package guard

import (
	"context"
	"errors"
	"sync"

	"github.com/a2awire/a2awire/shared/store"
)

// Part is one guard write or check.
type Part struct {
	// Action is the write (a conditional Put or Update) or the check
	// (Check with an ItemExists condition).
	Action store.Action
	// Refused is the error to answer when Action's condition fails.
	Refused func(*store.ConditionFailedError) error
	// Twins are the keys of items that exist exactly when a check's item
	// does (written and deleted in the same transactions: a member key
	// item and its member item): a writer's own action requiring one of
	// them to exist holds the check as well, which is then not carried
	// (a ConditionCheck, 2 write units, saved).
	Twins []store.Key
	// HeldBy are the keys of items whose writer vouches that its
	// conditioned actions on them in a guarded write hold the check as
	// well (a world's event head, whose update in every commit refuses a
	// deleted world, for the check that the world's manifest exists:
	// package world). A writer's own conditioned action on one of them
	// holds the check, which is then not carried.
	HeldBy []store.Key
}

// state of a Request's guard.
type state int

const (
	pending  state = iota // parts may still be added; nothing written yet
	inFlight              // a call is settling it
	settled               // done: err holds the outcome
)

// Request is one request's guard.
type Request struct {
	mu    sync.Mutex
	parts []Part
	st    store.Store // the unwrapped store the parts are written to
	state state
	err   error
	done  chan struct{}

	// Reads ahead (readahead.go): armed until the first call issues
	// them (while aheadOn), and the answers kept for the handler.
	armed   []Read
	aheadOn bool
	kept    map[Read]*kept
}

type ctxKey struct{}

// Begin opens a guard for one request in ctx.
func Begin(ctx context.Context) (context.Context, *Request) {
	r := &Request{done: make(chan struct{})}
	return context.WithValue(ctx, ctxKey{}, r), r
}

// From returns the request's guard, if ctx carries one.
func From(ctx context.Context) (*Request, bool) {
	r, ok := ctx.Value(ctxKey{}).(*Request)
	return r, ok && r != nil
}

// Without returns ctx with its guard hidden: a writer that took the guard
// (Take) makes its own store calls under it, which must not wait for the
// guard they are themselves settling.
func Without(ctx context.Context) context.Context {
	if _, ok := From(ctx); !ok {
		return ctx
	}
	return context.WithValue(ctx, ctxKey{}, (*Request)(nil))
}

// Add adds p, written to st, to the guard of ctx's request and reports
// true; false when ctx has no guard open (or it has already settled), and
// the caller then writes p itself, as it always did.
func Add(ctx context.Context, st store.Store, p Part) bool {
	r, ok := From(ctx)
	if !ok {
		return false
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.state != pending {
		return false
	}
	if r.st == nil {
		r.st = unwrap(st)
	}
	r.parts = append(r.parts, p)
	return true
}

// Active reports whether ctx carries a guard that still takes parts: a
// lookup that can defer a check (world's cached member key) asks first.
func Active(ctx context.Context) bool {
	r, ok := From(ctx)
	if !ok {
		return false
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.state == pending
}

// Err returns the guard's outcome once settled (nil before, and when it
// held).
func (r *Request) Err() error {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.state != settled {
		return nil
	}
	return r.err
}

// claim moves a pending guard to inFlight and returns its parts; ok is
// false when another call already claimed it, or when it has no parts yet
// (it stays pending).
func (r *Request) claim() ([]Part, store.Store, bool) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.state != pending {
		return nil, nil, false
	}
	if len(r.parts) == 0 {
		// Nothing yet: a call made before the guard's parts are added
		// (the member key's own read) leaves it pending for the next.
		return nil, nil, false
	}
	r.state = inFlight
	return r.parts, r.st, true
}

// finish records the outcome of a claimed guard.
func (r *Request) finish(err error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.state, r.err = settled, err
	close(r.done)
}

// wait returns the guard's outcome, waiting while another call settles it.
func (r *Request) wait(ctx context.Context) error {
	r.mu.Lock()
	s := r.state
	r.mu.Unlock()
	if s == pending {
		return nil
	}
	select {
	case <-r.done:
		return r.Err()
	case <-ctx.Done():
		return ctx.Err()
	}
}

// Settle writes ctx's pending guard now, alone, and returns its outcome
// (waiting for it when another call is settling it); nil without a guard.
func Settle(ctx context.Context) error {
	r, ok := From(ctx)
	if !ok {
		return nil
	}
	if parts, st, ok := r.claim(); ok {
		r.finish(writeAlone(ctx, st, parts))
	}
	return r.wait(ctx)
}

// Refused is the error a store call returns when the request's guard
// refused it; it wraps the part's error (an *apierror.Error: 401 nonce
// already used, 429, NOT_JOINED…), which the middleware answers.
type Refused struct{ Err error }

func (e *Refused) Error() string { return "guard: " + e.Err.Error() }
func (e *Refused) Unwrap() error { return e.Err }

// refuse wraps a guard's failure for the domain that made the call.
func refuse(err error) error {
	if err == nil {
		return nil
	}
	var ref *Refused
	if errors.As(err, &ref) {
		return err
	}
	return &Refused{Err: err}
}

// writeAlone writes the parts without a domain action: every part its own
// call, all at once (one round trip; 1 write unit a Put or Update rather
// than a transaction's 2), a check as a Get. The first failing part, in the
// order they were added, decides the error.
func writeAlone(ctx context.Context, st store.Store, parts []Part) error {
	errs := make([]error, len(parts))
	var wg sync.WaitGroup
	for i, p := range parts {
		wg.Go(func() {
			if p.Action.Kind == store.CheckAction {
				_, err := st.Get(ctx, p.Action.Key)
				if errors.Is(err, store.ErrNotFound) {
					errs[i] = p.Refused(&store.ConditionFailedError{Action: i})
					return
				}
				errs[i] = err
				return
			}
			_, err := st.Write(ctx, p.Action)
			var cf *store.ConditionFailedError
			if errors.As(err, &cf) {
				errs[i] = p.Refused(cf)
				return
			}
			errs[i] = err
		})
	}
	wg.Wait()
	for _, err := range errs {
		if err != nil {
			return err
		}
	}
	return nil
}

// Take hands the pending guard of ctx to a writer that builds its own
// Write: acts go after the writer's own actions (at index offset onward),
// and finish, called with that Write's outcome, returns the error to
// answer (the guard's when one of its parts failed, or, when the writer's
// own condition failed, the guard's if writing it alone fails too). acts is
// empty when there is nothing to carry; finish then returns err as it is.
//
// own are the writer's actions: when the guard cannot join them (see
// Store.Write), Take writes the guard first and acts is empty.
func Take(ctx context.Context, own []store.Action) (acts []store.Action, finish func(err error, offset int) error) {
	r, ok := From(ctx)
	if !ok {
		return nil, func(err error, _ int) error { return err }
	}
	if !carriable(r, own) {
		if err := Settle(ctx); err != nil {
			return nil, func(error, int) error { return refuse(err) }
		}
		return nil, func(err error, _ int) error { return err }
	}
	if err := r.wait(ctx); err != nil {
		return nil, func(error, int) error { return refuse(err) }
	}
	parts, st, ok := r.claim()
	if !ok {
		// Another call claimed it meanwhile: its outcome comes first.
		if err := r.wait(ctx); err != nil {
			return nil, func(error, int) error { return refuse(err) }
		}
		return nil, func(err error, _ int) error { return err }
	}
	// A check the writer's own action on its item implies is left to
	// that action (carriable): it is not carried.
	var carried []Part
	for _, p := range parts {
		if !implied(p, own) {
			carried = append(carried, p)
		}
	}
	acts = make([]store.Action, len(carried))
	for i, p := range carried {
		acts[i] = p.Action
	}
	return acts, func(err error, offset int) error {
		var cf *store.ConditionFailedError
		switch {
		case err == nil:
			r.finish(nil)
			return nil
		case errors.As(err, &cf) && cf.Action >= offset && cf.Action < offset+len(carried):
			gerr := carried[cf.Action-offset].Refused(cf)
			r.finish(gerr)
			return refuse(gerr)
		case errors.As(err, &cf):
			// The writer's own condition failed; the guard, unwritten,
			// comes first as it would have before the write.
			gerr := writeAlone(ctx, st, parts)
			r.finish(gerr)
			if gerr != nil {
				return refuse(gerr)
			}
			return err
		default:
			// Nothing written (or unknown): the request fails; the
			// guard is not to be written again after it.
			r.finish(err)
			return err
		}
	}
}
