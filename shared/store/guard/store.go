package guard

import (
	"context"
	"slices"
	"sync"

	"github.com/a2awire/a2awire/shared/store"
)

// Store is a store.Store that settles the guard of the request in each
// call's context (see the package doc); without a guard in the context it
// is the store it wraps.
type Store struct {
	inner store.Store
}

// Wrap returns st guarded; a store already guarded is returned as it is.
func Wrap(st store.Store) store.Store {
	if st == nil {
		return nil
	}
	if g, ok := st.(*Store); ok {
		return g
	}
	return &Store{inner: st}
}

// Unwrap returns the store s wraps.
func (s *Store) Unwrap() store.Store { return s.inner }

func unwrap(st store.Store) store.Store {
	for {
		g, ok := st.(*Store)
		if !ok {
			return st
		}
		st = g.inner
	}
}

// Get reads beside the guard's parts and answers once both are done; a
// read kept ahead (Ahead) answers without a call.
func (s *Store) Get(ctx context.Context, k store.Key) (store.Item, error) {
	r, guarded := From(ctx)
	rd := GetRead(k)
	if guarded {
		if e := r.take(ctx, rd); e != nil {
			return e.item, r.served(ctx, e)
		}
	}
	var it store.Item
	var mine *kept
	if guarded {
		mine = r.launch(ctx, s.inner, rd)
	}
	err := s.beside(ctx, func() error {
		var err error
		it, err = s.inner.Get(ctx, k)
		if mine != nil {
			mine.fill(it, store.Page{}, err)
		}
		return err
	})
	return it, err
}

// Query reads beside the guard's parts and answers once both are done; a
// read kept ahead (Ahead) answers without a call.
func (s *Store) Query(ctx context.Context, q store.Query) (store.Page, error) {
	r, guarded := From(ctx)
	rd := QueryRead(q)
	if guarded {
		if e := r.take(ctx, rd); e != nil {
			return e.page, r.served(ctx, e)
		}
	}
	var p store.Page
	var mine *kept
	if guarded {
		mine = r.launch(ctx, s.inner, rd)
	}
	err := s.beside(ctx, func() error {
		var err error
		p, err = s.inner.Query(ctx, q)
		if mine != nil {
			mine.fill(nil, p, err)
		}
		return err
	})
	return p, err
}

// beside runs read while the request's guard is settled (by this call when
// it is pending, else by whoever claimed it), and returns the guard's
// error first.
func (s *Store) beside(ctx context.Context, read func() error) error {
	r, ok := From(ctx)
	if !ok {
		return read()
	}
	parts, st, claimed := r.claim()
	if !claimed {
		err := read()
		if gerr := r.wait(ctx); gerr != nil {
			return refuse(gerr)
		}
		return err
	}
	var wg sync.WaitGroup
	var gerr error
	wg.Go(func() { gerr = writeAlone(ctx, st, parts) })
	err := read()
	wg.Wait()
	r.finish(gerr)
	if gerr != nil {
		return refuse(gerr)
	}
	return err
}

// Write carries the pending guard in the same transaction when it can,
// else writes it first; a guard being settled by another call is waited
// for.
func (s *Store) Write(ctx context.Context, actions ...store.Action) ([]store.Item, error) {
	if _, ok := From(ctx); !ok {
		return s.inner.Write(ctx, actions...)
	}
	acts, finish := Take(ctx, actions)
	if len(acts) == 0 {
		if err := finish(nil, len(actions)); err != nil {
			return nil, err
		}
		return s.inner.Write(ctx, actions...)
	}
	res, err := s.inner.Write(ctx, append(append([]store.Action(nil), actions...), acts...)...)
	if err := finish(err, len(actions)); err != nil {
		return nil, err
	}
	return res[:len(actions)], nil
}

// carriable reports whether the pending parts can join actions in one
// transaction: no action returns its item, the total is within
// store.MaxActions, and no item is named twice — except a guard check that
// an item exists where the write's own action on that item holds only if
// it exists (implied: the write alone holds it; see Take). Otherwise the
// guard goes first.
func carriable(r *Request, actions []store.Action) bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.state != pending || len(r.parts) == 0 {
		return true // nothing to carry: Take answers at once
	}
	if len(actions)+len(r.parts) > store.MaxActions {
		return false
	}
	keys := make(map[store.Key]bool, len(actions))
	for _, a := range actions {
		if a.ReturnNew {
			return false
		}
		keys[a.Key] = true
	}
	carried := 0
	for _, p := range r.parts {
		if implied(p, actions) {
			continue
		}
		if keys[p.Action.Key] {
			return false
		}
		carried++
	}
	// Nothing left to carry (every part implied): the guard goes first,
	// so that Take's empty acts keep meaning "nothing pending".
	return carried > 0
}

// implied reports whether p is a check that its item exists and one of
// actions, on the same item or one of its Twins, is conditioned on
// something only an existing item can satisfy, or, on one of its HeldBy,
// is conditioned at all: the write holds p itself, and a failure of that
// condition is the write's to answer (it is the guard's when the guard,
// written alone after the failure, fails too: Take).
func implied(p Part, actions []store.Action) bool {
	if p.Action.Kind != store.CheckAction || !requiresItem(p.Action.If) {
		return false
	}
	if e, ok := p.Action.If.(store.AttrExists); !ok || e.Attr != store.AttrPK || e.Not {
		return false
	}
	for _, a := range actions {
		if a.If == nil {
			continue
		}
		if (a.Key == p.Action.Key || slices.Contains(p.Twins, a.Key)) && requiresItem(a.If) || slices.Contains(p.HeldBy, a.Key) {
			return true
		}
	}
	return false
}

// requiresItem reports whether c can hold only for an existing item.
func requiresItem(c store.Cond) bool {
	switch c := c.(type) {
	case store.AttrExists:
		return !c.Not
	case store.Compare:
		return c.Op != store.OpNe // a missing attribute fails every other comparison
	case store.AndCond:
		for _, x := range c {
			if requiresItem(x) {
				return true
			}
		}
	case store.OrCond:
		for _, x := range c {
			if !requiresItem(x) {
				return false
			}
		}
		return len(c) > 0
	}
	return false
}
