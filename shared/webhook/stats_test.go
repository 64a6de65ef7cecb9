package webhook_test

import (
	"crypto/ed25519"
	"errors"
	"net/http"
	"testing"
	"time"

	"github.com/a2awire/a2awire/shared/auth"
	"github.com/a2awire/a2awire/shared/store"
	"github.com/a2awire/a2awire/shared/store/storetest/stores"
	"github.com/a2awire/a2awire/shared/world"
)

// TestCountersReadTheSameEverywhere: the counters on their own item are
// what GET …/webhook (Show), Get and the agent's view (world.AgentWorlds)
// show, the view's health included.
func TestCountersReadTheSameEverywhere(t *testing.T) {
	st := stores.Memory().Open(t)
	ctx := t.Context()
	c := &clock{now: t0}
	w := world.New(st, world.WithClock(c.Now))
	owner := ed25519.NewKeyFromSeed(make([]byte, ed25519.SeedSize)).Public().(ed25519.PublicKey)
	if _, _, err := w.PutWorld(ctx, world.Manifest{ID: "w", Description: "counters"}, owner); err != nil {
		t.Fatal(err)
	}
	seed := make([]byte, ed25519.SeedSize)
	seed[0] = 1
	me := ed25519.NewKeyFromSeed(seed).Public().(ed25519.PublicKey)
	if _, _, err := w.Join(ctx, "w", me, nil); err != nil {
		t.Fatal(err)
	}
	id := auth.AWNID(me)
	d := newDispatcher(t, st, c, nil)
	rc := newReceiver(t)
	if _, err := d.Store().Set(ctx, "w", id, rc.URL); err != nil {
		t.Fatal(err)
	}
	for i, answer := range []func(http.ResponseWriter, *http.Request){nil, nil, status(http.StatusInternalServerError)} {
		c.Advance(time.Second)
		rc.setAnswer(answer)
		if err := d.Dispatch(ctx, event(t, "w", world.MessageReceived, world.Private, id, map[string]any{"n": i}, c.Now())); err != nil {
			t.Fatal(err)
		}
		rc.next(t, time.Second)
	}
	v, err := d.Store().Show(ctx, "w", id)
	if err != nil || v.Stats.Delivered != 2 || v.Stats.Failed != 1 || v.Stats.LastError != "the receiver answered 500" ||
		v.Stats.LastErrorAt == nil || !v.Stats.LastErrorAt.Equal(c.Now()) || v.Stats.LastSuccessAt == nil || !v.Stats.LastSuccessAt.Equal(c.Now().Add(-time.Second)) {
		t.Fatalf("show: %+v, %v", v.Stats, err)
	}
	h, err := d.Store().Get(ctx, "w", id)
	if err != nil || h.Stats.Delivered != 2 || h.Stats.Failed != 1 || h.Stats.LastError != v.Stats.LastError {
		t.Fatalf("get: %+v, %v; show: %+v", h.Stats, err, v.Stats)
	}
	page, err := w.AgentWorlds(ctx, id, 0, "")
	if err != nil || len(page.Worlds) != 1 {
		t.Fatalf("agent's view: %+v, %v", page, err)
	}
	r := page.Worlds[0].Hook
	if !r.Set || r.Delivered != 2 || r.Failed != 1 || r.LastError != v.Stats.LastError ||
		!r.LastErrorAt.Equal(*v.Stats.LastErrorAt) || !r.LastSuccessAt.Equal(*v.Stats.LastSuccessAt) || world.Answered(page.Worlds[0].Member, r) {
		t.Fatalf("agent's view of the webhook: %+v; show: %+v", r, v.Stats)
	}

	// A leave takes the counters with the webhook: nothing of the
	// member's webhook outlives its membership.
	if _, err := st.Get(ctx, world.WebhookStatsKey("w", id)); err != nil {
		t.Fatalf("counters before the leave: %v", err)
	}
	if err := w.Leave(ctx, "w", id); err != nil {
		t.Fatal(err)
	}
	if it, err := st.Get(ctx, world.WebhookStatsKey("w", id)); !errors.Is(err, store.ErrNotFound) {
		t.Fatalf("counters after the leave: %v, %v; want not found", it, err)
	}
}
