package guard_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/a2awire/a2awire/shared/store"
	"github.com/a2awire/a2awire/shared/store/guard"
	"github.com/a2awire/a2awire/shared/store/memory"
	"github.com/a2awire/a2awire/shared/store/roundtrips"
)

var (
	errNonce  = errors.New("nonce already used")
	errMember = errors.New("not joined")
	nonceK    = store.Key{PK: "NONCE#k", SK: "N#1"}
	memberK   = store.Key{PK: "WORLD#w", SK: "MKEY#k"}
	domainK   = store.Key{PK: "INBOX#w#b", SK: "MSG#1"}
)

// setup returns a guarded store over a measured memory store holding the
// member-key item, and a request context with the nonce claim and the
// membership check added to its guard.
func setup(t *testing.T) (context.Context, store.Store, *roundtrips.Store, store.Store) {
	t.Helper()
	mem := memory.New()
	t.Cleanup(func() { _ = mem.Close() })
	if _, err := mem.Write(context.Background(), store.Put(memberK, store.Item{"type": store.S("memberKey")})); err != nil {
		t.Fatal(err)
	}
	rt := roundtrips.WithDelay(mem, 10*time.Millisecond) // side-by-side calls overlap
	g := guard.Wrap(rt)
	ctx, _ := guard.Begin(context.Background())
	addNonce(t, ctx, g)
	if !guard.Add(ctx, g, guard.Part{Action: store.Check(memberK, store.ItemExists()),
		Refused: func(*store.ConditionFailedError) error { return errMember }}) {
		t.Fatal("Add on an open guard reported false")
	}
	return ctx, g, rt, mem
}

func addNonce(t *testing.T, ctx context.Context, g store.Store) {
	t.Helper()
	if !guard.Add(ctx, g, guard.Part{Action: store.Put(nonceK, store.Item{"type": store.S("nonce")}).When(store.ItemAbsent()),
		Refused: func(*store.ConditionFailedError) error { return errNonce }}) {
		t.Fatal("Add on an open guard reported false")
	}
}

func exists(t *testing.T, st store.Store, k store.Key) bool {
	t.Helper()
	_, err := st.Get(context.Background(), k)
	if err != nil && !errors.Is(err, store.ErrNotFound) {
		t.Fatal(err)
	}
	return err == nil
}

// A domain Write carries the guard in its own call: one round trip, the
// nonce claimed and the domain item written together.
func TestWriteCarriesTheGuard(t *testing.T) {
	ctx, g, rt, mem := setup(t)
	if _, err := g.Write(ctx, store.Put(domainK, store.Item{"type": store.S("message")})); err != nil {
		t.Fatal(err)
	}
	if n := rt.Take(); n != 1 {
		t.Fatalf("%d round trips, want 1", n)
	}
	if !exists(t, mem, nonceK) || !exists(t, mem, domainK) {
		t.Fatal("the nonce or the domain item is missing")
	}
	if err := guard.Settle(ctx); err != nil {
		t.Fatalf("settled guard: %v", err)
	}
}

// A replayed nonce refuses the Write with the guard's error, and the
// domain's item is not written.
func TestReplayRefusesTheWrite(t *testing.T) {
	ctx, g, _, mem := setup(t)
	if _, err := mem.Write(context.Background(), store.Put(nonceK, store.Item{"type": store.S("nonce")})); err != nil {
		t.Fatal(err)
	}
	_, err := g.Write(ctx, store.Put(domainK, store.Item{"type": store.S("message")}))
	if !errors.Is(err, errNonce) {
		t.Fatalf("err %v, want the nonce's", err)
	}
	if exists(t, mem, domainK) {
		t.Fatal("the domain item was written under a replayed nonce")
	}
	if err := guard.Settle(ctx); !errors.Is(err, errNonce) {
		t.Fatalf("Settle: %v, want the nonce's", err)
	}
}

// A domain condition failing while the guard fails too answers the
// guard's error (as when the guard was written first).
func TestGuardErrorComesBeforeTheDomains(t *testing.T) {
	ctx, g, _, mem := setup(t)
	if _, err := mem.Write(context.Background(), store.Delete(memberK)); err != nil {
		t.Fatal(err)
	}
	_, err := g.Write(ctx, store.Put(domainK, store.Item{"type": store.S("message")}).When(store.ItemExists()))
	if !errors.Is(err, errMember) {
		t.Fatalf("err %v, want the membership's", err)
	}
}

// A domain condition failing with the guard holding answers the domain's
// condition, and the guard is written (the nonce is spent).
func TestDomainConditionWithTheGuardHolding(t *testing.T) {
	ctx, g, _, mem := setup(t)
	_, err := g.Write(ctx, store.Put(domainK, store.Item{"type": store.S("message")}).When(store.ItemExists()))
	if !errors.Is(err, store.ErrConditionFailed) || errors.Is(err, errNonce) {
		t.Fatalf("err %v, want the domain's condition", err)
	}
	if !exists(t, mem, nonceK) {
		t.Fatal("the nonce was not claimed")
	}
}

// A read runs beside the guard (one round trip) and answers the guard's
// error when it fails.
func TestReadBesideTheGuard(t *testing.T) {
	ctx, g, rt, mem := setup(t)
	if _, err := g.Get(ctx, memberK); err != nil {
		t.Fatal(err)
	}
	if n := rt.Take(); n != 1 {
		t.Fatalf("%d round trips, want 1", n)
	}
	if !exists(t, mem, nonceK) {
		t.Fatal("the nonce was not claimed beside the read")
	}
	ctx2, _ := guard.Begin(context.Background())
	addNonce(t, ctx2, g)
	if _, err := g.Get(ctx2, memberK); !errors.Is(err, errNonce) {
		t.Fatalf("read under a replayed nonce: %v, want the nonce's", err)
	}
}

// A guard with no parts yet stays open through a read (the member key's
// own read comes before the checks are added).
func TestReadBeforeAnyPartLeavesTheGuardOpen(t *testing.T) {
	mem := memory.New()
	t.Cleanup(func() { _ = mem.Close() })
	g := guard.Wrap(mem)
	ctx, _ := guard.Begin(context.Background())
	if _, err := g.Get(ctx, memberK); !errors.Is(err, store.ErrNotFound) {
		t.Fatalf("Get: %v", err)
	}
	if !guard.Active(ctx) {
		t.Fatal("the guard closed on a read with no parts")
	}
	addNonce(t, ctx, g)
	if err := guard.Settle(ctx); err != nil {
		t.Fatal(err)
	}
	if !exists(t, mem, nonceK) {
		t.Fatal("Settle did not write the nonce")
	}
}

// Without a guard in the context the store is the one it wraps.
func TestNoGuard(t *testing.T) {
	mem := memory.New()
	t.Cleanup(func() { _ = mem.Close() })
	g := guard.Wrap(mem)
	if guard.Add(context.Background(), g, guard.Part{Action: store.Put(nonceK, store.Item{})}) {
		t.Fatal("Add without a guard reported true")
	}
	ctx, _ := guard.Begin(context.Background())
	if guard.Add(guard.Without(ctx), g, guard.Part{Action: store.Put(nonceK, store.Item{})}) {
		t.Fatal("Add under Without reported true")
	}
	if _, err := g.Write(context.Background(), store.Put(domainK, store.Item{"type": store.S("m")})); err != nil {
		t.Fatal(err)
	}
}
