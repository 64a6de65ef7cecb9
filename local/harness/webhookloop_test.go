package harness_test

import (
	"context"
	"crypto/ed25519"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"sync"
	"testing"
	"time"

	"github.com/a2awire/a2awire/local/cloud"
	"github.com/a2awire/a2awire/local/harness"
	"github.com/a2awire/a2awire/shared/logging"
	"github.com/a2awire/a2awire/shared/routes"
	"github.com/a2awire/a2awire/shared/store/memory"
	"github.com/a2awire/a2awire/shared/webhook"
	"github.com/a2awire/a2awire/shared/world"
)

// TestWebhookAnswerLoopIsBounded (issue 26's fourth repro): members A and
// B run receivers that answer every delivery with an action, as
// `awn webhook serve --action reply` does; C acts once. Through the
// harness (the dispatcher driven from the memory engine's feed, answers
// forwarded through the world service under the action rate limit), the
// world ends with exactly 13 actions — C's, and one forwarded by each of
// A and B for each of the 6 events that were not themselves forwarded
// actions (the three joins, C's action, and the presence.changed of A and
// of B, each announced once when its webhook first answers) — and each
// receiver gets exactly 18 deliveries: those 6 and the 12 forwarded
// actions, whose answers are dropped (one hop only) and counted in the
// webhook's stats. Before the hop limit the two receivers fed each other
// without end.
func TestWebhookAnswerLoopIsBounded(t *testing.T) {
	const (
		events     = 6                  // 3 joins + C's action + 2 presence.changed, none a forwarded action
		forwarded  = 2 * events         // one answer forwarded per receiver per such event
		actions    = 1 + forwarded      // C's and the forwarded ones
		deliveries = events + forwarded // each receiver sees every one of them
		dropped    = forwarded          // each receiver's answers to the forwarded actions
	)
	st := memory.New(memory.WithFeedConsumers(harness.StreamConsumers(nil)...))
	defer st.Close()
	h := mustHarness(t, harness.Options{Log: logging.Discard(), Store: st,
		NewTicker: func(time.Duration) cloud.Ticker { return make(chanTicker) }})
	ctx, cancel := context.WithCancel(t.Context())
	defer cancel()
	svc := world.New(st)
	key := func(n byte) ed25519.PublicKey {
		return ed25519.NewKeyFromSeed(append(make([]byte, 31), n)).Public().(ed25519.PublicKey)
	}
	// A world listing no actions accepts any name, "reply" included.
	if _, _, err := svc.PutWorld(ctx, world.Manifest{ID: "loop"}, key(1)); err != nil {
		t.Fatal(err)
	}
	var ids []string
	for n := byte(2); n <= 4; n++ {
		m, _, err := svc.Join(ctx, "loop", key(n), nil)
		if err != nil {
			t.Fatal(err)
		}
		ids = append(ids, m.AWNID)
	}
	var mu sync.Mutex
	got := map[string]int{}
	over := make(chan string, 2)
	hooks := webhook.NewStore(st)
	for _, id := range ids[:2] {
		srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			_, _ = io.Copy(io.Discard, r.Body)
			mu.Lock()
			got[id]++
			if got[id] == deliveries+1 {
				over <- id
			}
			mu.Unlock()
			w.Header().Set("Content-Type", "application/json")
			_, _ = io.WriteString(w, `{"action":"reply","params":{}}`)
		}))
		t.Cleanup(srv.Close)
		if _, err := hooks.Set(ctx, "loop", id, srv.URL); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := svc.SubmitAction(ctx, "loop", ids[2], "reply", json.RawMessage(`{}`)); err != nil {
		t.Fatal(err)
	}
	_, stop := run(t, h)
	defer stop()
	// Settled: each receiver's stats count every delivery, and a stats
	// update follows the forwarding decision, so then every answer has
	// been forwarded or dropped and no new action can come.
	settled := func() bool {
		for _, id := range ids[:2] {
			w, err := hooks.Get(ctx, "loop", id)
			if err != nil {
				t.Fatal(err)
			}
			if w.Stats.Delivered < deliveries || w.Stats.ActionsDropped < dropped {
				return false
			}
		}
		return true
	}
	// Settling takes well under a second; the deadline only bounds a
	// failure. A delivery left waiting on the queue shows in the report.
	const settleWithin = 20 * time.Second
	deadline := time.After(settleWithin)
	for !settled() {
		select {
		case id := <-over:
			t.Fatalf("receiver %s got more than %d deliveries: the answers loop", id, deliveries)
		case <-deadline:
			mu.Lock()
			defer mu.Unlock()
			q := h.Queue(routes.DeliveryQueue)
			var stats []any
			for _, id := range ids[:2] {
				w, _ := hooks.Get(ctx, "loop", id)
				stats = append(stats, w.Stats)
			}
			t.Fatalf("not settled within %v: deliveries %v; delivery queue len %d held %d; stats %+v", settleWithin, got, q.Len(), q.Held(), stats)
		case <-time.After(10 * time.Millisecond):
		}
	}
	evs, err := svc.Events(ctx, "loop", ids[2], "", 100)
	if err != nil {
		t.Fatal(err)
	}
	n := 0
	for _, e := range evs {
		if e.Type == world.ActionSubmitted {
			n++
		}
	}
	mu.Lock()
	defer mu.Unlock()
	if n != actions || got[ids[0]] != deliveries || got[ids[1]] != deliveries {
		t.Fatalf("%d actions, deliveries %v; want %d actions and %d deliveries each", n, got, actions, deliveries)
	}
	for _, id := range ids[:2] {
		w, err := hooks.Get(ctx, "loop", id)
		if err != nil {
			t.Fatal(err)
		}
		if w.Stats.Delivered != deliveries || w.Stats.ActionsDropped != dropped {
			t.Fatalf("stats of %s: %+v, want %d delivered and %d actions dropped", id, w.Stats, deliveries, dropped)
		}
	}
}
