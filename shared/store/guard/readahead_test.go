package guard_test

import (
	"context"
	"errors"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/a2awire/a2awire/shared/store"
	"github.com/a2awire/a2awire/shared/store/guard"
	"github.com/a2awire/a2awire/shared/store/memory"
	"github.com/a2awire/a2awire/shared/store/roundtrips"
)

// counted counts the calls that reach the store.
type counted struct {
	store.Store
	mu    sync.Mutex
	calls int
}

func (c *counted) count() {
	c.mu.Lock()
	c.calls++
	c.mu.Unlock()
}

func (c *counted) n() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.calls
}

func (c *counted) Get(ctx context.Context, k store.Key) (store.Item, error) {
	c.count()
	return c.Store.Get(ctx, k)
}

func (c *counted) Query(ctx context.Context, q store.Query) (store.Page, error) {
	c.count()
	return c.Store.Query(ctx, q)
}

func (c *counted) Write(ctx context.Context, a ...store.Action) ([]store.Item, error) {
	c.count()
	return c.Store.Write(ctx, a...)
}

var (
	manifestK = store.Key{PK: "WORLD#w", SK: "MANIFEST"}
	inboxQ    = store.Query{PK: "INBOX#w#b", Limit: 80}
)

// aheadSetup is a guarded store over a measured, counted memory store
// holding the member key, the manifest and one inbox message.
func aheadSetup(t *testing.T) (store.Store, *roundtrips.Store, *counted, store.Store) {
	t.Helper()
	mem := memory.New()
	t.Cleanup(func() { _ = mem.Close() })
	for _, k := range []store.Key{memberK, manifestK, domainK} {
		if _, err := mem.Write(context.Background(), store.Put(k, store.Item{"type": store.S("x")})); err != nil {
			t.Fatal(err)
		}
	}
	c := &counted{Store: mem}
	rt := roundtrips.WithDelay(c, 10*time.Millisecond)
	return guard.Wrap(rt), rt, c, mem
}

// request is a cold member route as the middleware runs it: the reads
// armed around the key lookup (a Get of the member key), the nonce added
// once the signature verified, then the handler's reads (the manifest, the
// inbox, the member key again) and its write.
func request(t *testing.T, g store.Store, ahead bool) (context.Context, error) {
	t.Helper()
	ctx, _ := guard.Begin(context.Background())
	stop := func() {}
	if ahead {
		stop = guard.Ahead(ctx, guard.GetRead(manifestK), guard.QueryRead(inboxQ))
	}
	if _, err := g.Get(ctx, memberK); err != nil { // the key lookup
		t.Fatal(err)
	}
	stop()
	addNonce(t, ctx, g)
	var wg sync.WaitGroup
	var merr, qerr error
	var page store.Page
	wg.Go(func() { _, merr = g.Get(ctx, manifestK) })
	wg.Go(func() { page, qerr = g.Query(ctx, inboxQ) })
	wg.Wait()
	if merr != nil || qerr != nil {
		t.Fatal(merr, qerr)
	}
	if len(page.Items) != 1 {
		t.Fatalf("inbox page of %d items, want 1", len(page.Items))
	}
	_, err := g.Write(ctx, store.Delete(domainK))
	return ctx, err
}

// TestReadAhead: with the handler's reads armed around the key lookup, the
// lookup and those reads are one round trip and the write (carrying the
// guard) the second; without, three. Each kept answer serves one call.
func TestReadAhead(t *testing.T) {
	g, rt, c, mem := aheadSetup(t)
	ctx, err := request(t, g, true)
	if err != nil {
		t.Fatal(err)
	}
	if n := rt.Take(); n != 2 {
		t.Fatalf("read ahead: %d round trips, want 2", n)
	}
	if n := c.n(); n != 4 { // member key, manifest, inbox, the transaction
		t.Fatalf("read ahead: %d calls, want 4", n)
	}
	if !exists(t, mem, nonceK) || exists(t, mem, domainK) {
		t.Fatal("the write did not carry the nonce, or did not delete the message")
	}
	// Kept answers serve once: the manifest read again goes to the store.
	if _, err := g.Get(ctx, manifestK); err != nil {
		t.Fatal(err)
	}
	if n := c.n(); n != 5 {
		t.Fatalf("a second read of the manifest made %d calls in all, want 5 (the kept answer is used up)", n)
	}
	// What the lookup read is kept for the domain to look at.
	if it, ok := guard.Kept(ctx, memberK); !ok || it.Str("type") != "x" {
		t.Fatalf("Kept(member key) = %v, %v", it, ok)
	}
	rt.Take()

	g2, rt2, _, _ := aheadSetup(t)
	if _, err := request(t, g2, false); err != nil {
		t.Fatal(err)
	}
	if n := rt2.Take(); n != 3 {
		t.Fatalf("without reads ahead: %d round trips, want 3", n)
	}
}

// A kept answer leaves the guard pending: a replayed nonce still refuses
// the write that follows, with the guard's error, and it writes nothing.
func TestReadAheadKeepsTheGuard(t *testing.T) {
	g, _, _, mem := aheadSetup(t)
	if _, err := mem.Write(context.Background(), store.Put(nonceK, store.Item{"type": store.S("nonce")})); err != nil {
		t.Fatal(err)
	}
	_, err := request(t, g, true)
	if !errors.Is(err, errNonce) {
		t.Fatalf("write after kept reads with a used nonce: %v, want the nonce's error", err)
	}
	if !exists(t, mem, domainK) {
		t.Fatal("the refused write deleted the message")
	}
}

// Reads armed but not issued when stop is called are not read: a key
// lookup that reads nothing (a cached key) changes nothing.
func TestReadAheadStopped(t *testing.T) {
	g, _, c, _ := aheadSetup(t)
	ctx, _ := guard.Begin(context.Background())
	stop := guard.Ahead(ctx, guard.GetRead(manifestK), guard.QueryRead(inboxQ))
	stop()
	if _, err := g.Get(ctx, manifestK); err != nil {
		t.Fatal(err)
	}
	if n := c.n(); n != 1 {
		t.Fatalf("%d calls, want 1 (nothing read ahead after stop)", n)
	}
	if _, ok := guard.Kept(ctx, memberK); ok {
		t.Fatal("Kept reports a read nobody made")
	}
}

// A guard check that an item exists rides in a write whose own action on
// that item is conditioned on its existing (a removal's update of the
// manifest): one call, one round trip; when the item is gone, the guard's
// error answers, as when the guard went first.
func TestImpliedCheck(t *testing.T) {
	for _, gone := range []bool{false, true} {
		g, rt, c, mem := aheadSetup(t)
		if gone {
			if _, err := mem.Write(context.Background(), store.Delete(memberK)); err != nil {
				t.Fatal(err)
			}
		}
		ctx, _ := guard.Begin(context.Background())
		addNonce(t, ctx, g)
		guard.Add(ctx, g, guard.Part{Action: store.Check(memberK, store.ItemExists()),
			Refused: func(*store.ConditionFailedError) error { return errMember }})
		_, err := g.Write(ctx, store.Update(memberK).SetAttr("n", store.N(1)).When(store.ItemExists()), store.Delete(domainK))
		if gone {
			if !errors.Is(err, errMember) {
				t.Fatalf("the item gone: %v, want the check's error", err)
			}
			continue
		}
		if err != nil {
			t.Fatal(err)
		}
		if n, calls := rt.Take(), c.n(); n != 1 || calls != 1 {
			t.Fatalf("%d round trips and %d calls, want 1 and 1 (the check implied by the write)", n, calls)
		}
		if !exists(t, mem, nonceK) {
			t.Fatal("the nonce was not carried")
		}
	}
}

// writes records the actions of every Write.
type writes struct {
	store.Store
	mu   sync.Mutex
	acts [][]store.Action
}

func (w *writes) Write(ctx context.Context, acts ...store.Action) ([]store.Item, error) {
	w.mu.Lock()
	w.acts = append(w.acts, acts)
	w.mu.Unlock()
	return w.Store.Write(ctx, acts...)
}

// guardedWrite writes own and a domain Put under a guard of a nonce and
// p, over a store holding the items existing, and returns the error and
// the actions of each Write the store was given.
func guardedWrite(t *testing.T, existing []store.Key, p guard.Part, own store.Action) ([][]store.Action, error) {
	t.Helper()
	mem := memory.New()
	t.Cleanup(func() { _ = mem.Close() })
	for _, k := range existing {
		if _, err := mem.Write(context.Background(), store.Put(k, store.Item{"type": store.S("x")})); err != nil {
			t.Fatal(err)
		}
	}
	w := &writes{Store: mem}
	g := guard.Wrap(w)
	ctx, _ := guard.Begin(context.Background())
	addNonce(t, ctx, g)
	guard.Add(ctx, g, p)
	_, err := g.Write(ctx, own, store.Put(domainK, store.Item{"type": store.S("x")}))
	return w.acts, err
}

// carriedIn reports whether the one Write of acts carried the check on
// key, and fails unless it carried the nonce.
func carriedIn(t *testing.T, acts [][]store.Action, key store.Key) bool {
	t.Helper()
	if len(acts) != 1 {
		t.Fatalf("%d writes, want 1 carrying the guard", len(acts))
	}
	if !slices.ContainsFunc(acts[0], func(a store.Action) bool { return a.Key == nonceK }) {
		t.Fatal("the nonce was not carried")
	}
	return slices.ContainsFunc(acts[0], func(a store.Action) bool { return a.Key == key })
}

// A guard check of an item is held by a write whose own action requires
// the check's twin (an item that exists exactly when it does: a member key
// and its member): it is not carried, the write is one call, and when both
// are gone the guard's error answers. A writer's action on the twin that
// does not require it leaves the check carried.
func TestTwinImpliesCheck(t *testing.T) {
	twinK := store.Key{PK: "WORLD#w", SK: "MEMBER#a"}
	for _, c := range []struct {
		name    string
		own     store.Action
		gone    bool
		carried bool
	}{
		{"checked twin", store.Check(twinK, store.ItemExists()), false, false},
		{"checked twin, both gone", store.Check(twinK, store.ItemExists()), true, false},
		{"twin updated unconditionally", store.Update(twinK).SetAttr("n", store.N(1)), false, true},
	} {
		t.Run(c.name, func(t *testing.T) {
			existing := []store.Key{memberK, twinK}
			if c.gone {
				existing = nil
			}
			acts, err := guardedWrite(t, existing, guard.Part{Action: store.Check(memberK, store.ItemExists()),
				Refused: func(*store.ConditionFailedError) error { return errMember }, Twins: []store.Key{twinK}}, c.own)
			if c.gone {
				if !errors.Is(err, errMember) {
					t.Fatalf("both gone: %v, want the check's error", err)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if checked := carriedIn(t, acts, memberK); checked != c.carried {
				t.Fatalf("the guard's check carried: %v, want %v (actions %v)", checked, c.carried, acts[0])
			}
		})
	}
}

// TestHeldByImpliesCheck: a check whose HeldBy names an item is not
// carried in a write with a conditioned action on that item (the item's
// writer keeps a condition that holds the check: a world's event head,
// which refuses a deleted world, for the check that its manifest exists),
// and is carried when that action has no condition.
func TestHeldByImpliesCheck(t *testing.T) {
	headK := store.Key{PK: "EVENTHEAD#w", SK: "HEAD"}
	for _, c := range []struct {
		name    string
		own     store.Action
		carried bool
	}{
		{"conditioned head", store.Update(headK).SetAttr("last", store.S("b")).When(store.NotExists("deleted")), false},
		{"head updated unconditionally", store.Update(headK).SetAttr("last", store.S("b")), true},
	} {
		t.Run(c.name, func(t *testing.T) {
			acts, err := guardedWrite(t, []store.Key{manifestK}, guard.Part{Action: store.Check(manifestK, store.ItemExists()),
				Refused: func(*store.ConditionFailedError) error { return errMember }, HeldBy: []store.Key{headK}}, c.own)
			if err != nil {
				t.Fatal(err)
			}
			if checked := carriedIn(t, acts, manifestK); checked != c.carried {
				t.Fatalf("the guard's check carried: %v, want %v (actions %v)", checked, c.carried, acts[0])
			}
		})
	}
}
