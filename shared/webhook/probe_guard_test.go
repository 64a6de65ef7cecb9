package webhook_test

import (
	"context"
	"errors"
	"testing"

	"github.com/a2awire/a2awire/shared/store"
	"github.com/a2awire/a2awire/shared/store/guard"
	"github.com/a2awire/a2awire/shared/store/storetest/stores"
	"github.com/a2awire/a2awire/shared/world"
)

// TestProbeSettlesTheGuard: inside a guarded request whose webhook read
// was read ahead (world-ping on a cold instance: the read answers without
// waiting for the guard), the probe settles the guard before it POSTs, so
// a refused request (a nonce used already) sends nothing.
func TestProbeSettlesTheGuard(t *testing.T) {
	st := stores.Memory().Open(t)
	g := guard.Wrap(st)
	d := newDispatcher(t, g, nil, nil)
	rc := newReceiver(t)
	if _, err := asMember(t, st, d.Store()).Set(t.Context(), "w", "aw:fast", rc.URL); err != nil {
		t.Fatal(err)
	}
	used := store.Key{PK: "NONCE#k", SK: "N#1"}
	if _, err := st.Write(t.Context(), store.Put(used, store.Item{"type": store.S("nonce")})); err != nil {
		t.Fatal(err)
	}
	errUsed := errors.New("nonce already used")
	ctx, _ := guard.Begin(context.Background())
	stop := guard.Ahead(ctx, guard.GetRead(world.WebhookKey("w", "aw:fast")))
	if _, err := g.Get(ctx, world.MemberKeyKey("w", "k")); !errors.Is(err, store.ErrNotFound) { // the key lookup
		t.Fatal(err)
	}
	stop()
	guard.Add(ctx, g, guard.Part{Action: store.Put(used, store.Item{"type": store.S("nonce")}).When(store.ItemAbsent()),
		Refused: func(*store.ConditionFailedError) error { return errUsed }})
	if ok, _, err := d.Probe(ctx, "w", "aw:fast"); ok || !errors.Is(err, errUsed) {
		t.Fatalf("probe under a refused guard: %v %v, want the guard's error", ok, err)
	}
	// Probe returns only after its POST is answered: any POST is queued.
	if n := len(rc.reqs); n != 0 {
		t.Fatalf("the probe POSTed %d times under a refused guard", n)
	}
}
