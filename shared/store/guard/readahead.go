package guard

import (
	"context"
	"errors"

	"github.com/a2awire/a2awire/shared/store"
)

// Read is one read a request's handler will make — a Get of an item or a
// Query — named before the handler runs, so that it can be read ahead
// (Ahead).
type Read struct {
	get   bool
	key   store.Key
	query store.Query
}

// GetRead is a Get of k.
func GetRead(k store.Key) Read { return Read{get: true, key: k} }

// QueryRead is a Query of q (one page, exactly q: a read ahead answers
// only the same Query).
func QueryRead(q store.Query) Read { return Read{query: q} }

// kept is one read ahead (or made while reads ahead were armed): its
// answer, for the handler's next call of the same read.
type kept struct {
	done chan struct{}
	item store.Item
	page store.Page
	err  error
	uses int // how many more calls it answers
}

func (k *kept) fill(it store.Item, p store.Page, err error) {
	k.item, k.page, k.err = it, p, err
	close(k.done)
}

// Ahead arms reads for the request of ctx: the next Get or Query made
// through a guarded store (Wrap) in this request issues them all, side by
// side with itself, and keeps their answers; the answer of every Get or
// Query made while armed is kept too. A later call of the same read (the
// same key, or the same Query) takes its kept answer instead of calling the
// store — once: a second call, a read made again after a lost condition,
// goes to the store. A read named twice answers two calls.
//
// The route middleware (shared/access) arms a route's reads around its key
// lookup and disarms them after it (stop): when the lookup must read an
// item (a member key not seen by this instance, a world's manifest for its
// owner's key), the handler's first reads go in the same round trip; when
// it reads nothing (a key cached), nothing is read ahead and nothing
// changes. stop drops the reads not issued by then; kept answers stay.
//
// A kept answer is older than a call made later by the round trip it
// saved. Every domain that reads ahead holds what it read as a condition
// of its write (a member's joinedAt, the manifest's listing version), as it
// does for any read. Reads ahead are made before the signature is
// verified: a request with a bad signature costs them too (reads only,
// and only when the key lookup reads). A kept answer taken while the
// guard is pending leaves it pending, for the handler's write to carry:
// reads have no effect, and a handler acting outside the store settles the
// guard first (Settle).
func Ahead(ctx context.Context, reads ...Read) (stop func()) {
	r, ok := From(ctx)
	if !ok {
		return func() {}
	}
	r.mu.Lock()
	r.armed, r.aheadOn = append([]Read(nil), reads...), true
	r.mu.Unlock()
	return func() {
		r.mu.Lock()
		r.armed, r.aheadOn = nil, false
		r.mu.Unlock()
	}
}

// Kept returns the item a Get of k read ahead (or while reads ahead were
// armed) in the request of ctx, without taking it and without a store
// call; false when there is none, or it was not found. A domain that can
// use what the key lookup read (the member key item) asks first.
func Kept(ctx context.Context, k store.Key) (store.Item, bool) {
	r, ok := From(ctx)
	if !ok {
		return nil, false
	}
	r.mu.Lock()
	e := r.kept[GetRead(k)]
	r.mu.Unlock()
	if e == nil {
		return nil, false
	}
	select {
	case <-e.done:
	case <-ctx.Done():
		return nil, false
	}
	if e.err != nil {
		return nil, false
	}
	return e.item, true
}

// take returns the kept answer of rd, waiting for it when it is being
// read, and uses it up; nil when there is none to use (none kept, used up,
// or it failed otherwise than not found: the caller reads itself).
func (r *Request) take(ctx context.Context, rd Read) *kept {
	r.mu.Lock()
	e := r.kept[rd]
	if e == nil || e.uses == 0 {
		r.mu.Unlock()
		return nil
	}
	e.uses--
	r.mu.Unlock()
	select {
	case <-e.done:
	case <-ctx.Done():
		return nil
	}
	if e.err != nil && !errors.Is(e.err, store.ErrNotFound) {
		return nil
	}
	return e
}

// launch, when reads ahead are armed, issues every armed read but own on
// inner (each its own goroutine) and returns the entry own's answer is
// kept in (fill it); nil when nothing is armed.
func (r *Request) launch(ctx context.Context, inner store.Store, own Read) *kept {
	r.mu.Lock()
	defer r.mu.Unlock()
	if !r.aheadOn {
		return nil
	}
	if r.kept == nil {
		r.kept = map[Read]*kept{}
	}
	mine := &kept{done: make(chan struct{}), uses: 1}
	for _, rd := range r.armed {
		if rd == own {
			mine.uses++
			continue
		}
		if e := r.kept[rd]; e != nil {
			e.uses++
			continue
		}
		e := &kept{done: make(chan struct{}), uses: 1}
		r.kept[rd] = e
		go func() {
			if rd.get {
				it, err := inner.Get(ctx, rd.key)
				e.fill(it, store.Page{}, err)
				return
			}
			p, err := inner.Query(ctx, rd.query)
			e.fill(nil, p, err)
		}()
	}
	r.armed = nil
	r.kept[own] = mine
	return mine
}

// served answers a call from its kept answer e: at once while the guard is
// pending (it stays so), else once the guard has settled, its error first.
func (r *Request) served(ctx context.Context, e *kept) error {
	if err := r.wait(ctx); err != nil {
		return refuse(err)
	}
	return e.err
}
