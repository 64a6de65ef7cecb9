package fanout_test

import (
	"context"
	"testing"
	"time"

	"github.com/a2awire/a2awire/cmd/a2awire-bench/fanout"
	"github.com/a2awire/a2awire/functions/webhook-deliver/deliverer"
	"github.com/a2awire/a2awire/functions/webhook-dispatcher/dispatcher"
	"github.com/a2awire/a2awire/local/cloud"
	"github.com/a2awire/a2awire/local/harness"
	"github.com/a2awire/a2awire/shared/egress"
	"github.com/a2awire/a2awire/shared/logging"
	"github.com/a2awire/a2awire/shared/routes"
	"github.com/a2awire/a2awire/shared/store/memory"
	"github.com/a2awire/a2awire/shared/webhook"
)

// TestFanOutThroughFeed: 100 receivers on 127.0.0.1 in one world each get
// every one of 3 events, enqueued by the dispatcher's Lambda entry from
// the memory engine's feed and delivered by the deliverer's from the
// delivery queue; the figures are logged, not asserted.
func TestFanOutThroughFeed(t *testing.T) {
	st := memory.New()
	defer st.Close()
	d, err := webhook.NewDispatcher(webhook.Config{Store: st, Client: egress.NewClient(egress.Options{AllowLoopback: true, AllowHTTP: true}),
		Queue: harness.NewQueues(nil)[routes.DeliveryQueue]})
	if err != nil {
		t.Fatal(err)
	}
	cfg := routes.Config(dispatcher.Function)
	s := &cloud.Stream{Entry: cloud.NewEntry(dispatcher.Function, dispatcher.New(d), time.Duration(cfg.TimeoutSeconds)*time.Second),
		Feed: st, Trigger: cfg.Triggers[0], Log: logging.Discard()}
	wcfg := routes.Config(deliverer.Function)
	m := &cloud.QueueMapping{Entry: cloud.NewEntry(deliverer.Function, deliverer.New(d), time.Duration(wcfg.TimeoutSeconds)*time.Second),
		Queue: d.Queue(), Trigger: wcfg.Triggers[0], Log: logging.Discard()}
	ctx, cancel := context.WithCancel(t.Context())
	done, mdone := make(chan struct{}), make(chan struct{})
	go func() { _ = s.Run(ctx); close(done) }()
	go func() { _ = m.Run(ctx); close(mdone) }()
	defer func() { cancel(); <-done; <-mdone }()

	r, err := fanout.Run(ctx, fanout.Options{Store: st, Receivers: 100, Events: 3})
	if err != nil {
		t.Fatal(err)
	}
	if r.Deliveries != 300 || len(r.Latencies) != 300 || r.P50 > r.P99 || r.P99 > r.Max {
		t.Fatalf("result %+v", r)
	}
	t.Logf("100 receivers × 3 events: p50 %v, p99 %v, max %v, %.0f deliveries/s", r.P50, r.P99, r.Max, r.PerSecond)
}

// TestFanOutOneListener: receivers on one listener, each its own path
// (and so its own endpoint), all get the event.
func TestFanOutOneListener(t *testing.T) {
	st := memory.New()
	defer st.Close()
	d, err := webhook.NewDispatcher(webhook.Config{Store: st, Client: egress.NewClient(egress.Options{AllowLoopback: true, AllowHTTP: true})})
	if err != nil {
		t.Fatal(err)
	}
	r, err := fanout.Run(t.Context(), fanout.Options{Store: st, Receivers: 50, OneListener: true, Deliver: d.Dispatch})
	if err != nil || r.Deliveries != 50 {
		t.Fatalf("%+v %v", r, err)
	}
	hooks, err := d.Store().Enabled(t.Context(), "fanout")
	if err != nil {
		t.Fatal(err)
	}
	urls := map[string]bool{}
	for _, h := range hooks {
		urls[h.URL] = true
	}
	if len(urls) != 50 {
		t.Fatalf("%d distinct webhook URLs, want 50", len(urls))
	}
}

// TestFanOutDirect: with Deliver set, the events are delivered by the
// caller's Dispatcher (no feed), and a missing delivery is an error.
func TestFanOutDirect(t *testing.T) {
	st := memory.New()
	defer st.Close()
	d, err := webhook.NewDispatcher(webhook.Config{Store: st, Client: egress.NewClient(egress.Options{AllowLoopback: true, AllowHTTP: true})})
	if err != nil {
		t.Fatal(err)
	}
	r, err := fanout.Run(t.Context(), fanout.Options{Store: st, Receivers: 10, Deliver: d.Dispatch})
	if err != nil || r.Deliveries != 10 {
		t.Fatalf("%+v %v", r, err)
	}
	// Nothing delivers: the run fails at its timeout instead of hanging.
	if _, err := fanout.Run(t.Context(), fanout.Options{Store: st, World: "nobody", Receivers: 2, Timeout: 200 * time.Millisecond}); err == nil {
		t.Fatal("no deliveries and no error")
	}
}
