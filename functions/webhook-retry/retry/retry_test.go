package retry_test

import (
	"context"
	"net/http"
	"net/http/httptest"
	"sync/atomic"
	"testing"
	"time"

	"github.com/a2awire/a2awire/functions/webhook-retry/retry"
	"github.com/a2awire/a2awire/local/cloud"
	"github.com/a2awire/a2awire/shared/egress"
	"github.com/a2awire/a2awire/shared/routes"
	"github.com/a2awire/a2awire/shared/store"
	"github.com/a2awire/a2awire/shared/store/memory"
	"github.com/a2awire/a2awire/shared/webhook"
	"github.com/a2awire/a2awire/shared/world"
)

type failingQueries struct{ store.Store }

func (failingQueries) Query(context.Context, store.Query) (store.Page, error) {
	return store.Page{}, store.ErrUnavailable
}

// TestScheduledRunSendsDueRetries: the route table schedules the function
// every minute; an invocation with the schedule's event sends the retries
// due by then, and a run that cannot read the schedule fails the
// invocation (the retries stay for the next tick).
func TestScheduledRunSendsDueRetries(t *testing.T) {
	cfg := routes.Config(retry.Function)
	if len(cfg.Triggers) != 1 || cfg.Triggers[0].Kind != routes.ScheduleTrigger || cfg.Triggers[0].Schedule != "rate(1 minute)" {
		t.Fatalf("triggers %+v", cfg.Triggers)
	}
	st := memory.New()
	defer st.Close()
	now := time.Date(2026, 12, 1, 12, 0, 0, 0, time.UTC)
	var clockNS atomic.Int64
	clockNS.Store(now.UnixNano())
	clock := func() time.Time { return time.Unix(0, clockNS.Load()) }
	var hits atomic.Int64
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		if hits.Add(1) == 1 {
			w.WriteHeader(http.StatusInternalServerError)
			return
		}
		w.WriteHeader(http.StatusNoContent)
	}))
	defer srv.Close()
	d, err := webhook.NewDispatcher(webhook.Config{Store: st, Now: clock,
		Client: egress.NewClient(egress.Options{AllowLoopback: true, AllowHTTP: true})})
	if err != nil {
		t.Fatal(err)
	}
	// A webhook needs a member: the member item a join writes.
	if _, err := st.Write(t.Context(), world.BareMembership("w", "aw:a")...); err != nil {
		t.Fatal(err)
	}
	if _, err := d.Store().Set(t.Context(), "w", "aw:a", srv.URL); err != nil {
		t.Fatal(err)
	}
	e, _ := world.NewIDs().NewEvent("w", world.PresenceChanged, world.Public, "", map[string]any{}, now)
	if err := d.Dispatch(t.Context(), e); err != nil || hits.Load() != 1 {
		t.Fatalf("first attempt: %v, %d hits", err, hits.Load())
	}
	entry := cloud.NewEntry(retry.Function, retry.New(d, nil), time.Duration(cfg.TimeoutSeconds)*time.Second)
	invoke := func() error {
		raw := []byte(`{"version":"0","id":"x","detail-type":"Scheduled Event","source":"aws.events","time":"2026-12-01T12:01:00Z","detail":{}}`)
		_, err := entry.Invoke(t.Context(), raw)
		return err
	}
	if err := invoke(); err != nil || hits.Load() != 1 {
		t.Fatalf("tick before due: %v, %d hits", err, hits.Load())
	}
	clockNS.Store(now.Add(time.Minute).UnixNano())
	if err := invoke(); err != nil || hits.Load() != 2 {
		t.Fatalf("tick after due: %v, %d hits", err, hits.Load())
	}
	bad, err := webhook.NewDispatcher(webhook.Config{Store: failingQueries{st}})
	if err != nil {
		t.Fatal(err)
	}
	broken := cloud.NewEntry(retry.Function, retry.New(bad, nil), time.Second)
	if _, err := broken.Invoke(t.Context(), []byte(`{}`)); err == nil {
		t.Fatal("a run that cannot read the schedule succeeded")
	}
}
