package webhook_test

import (
	"net/http"
	"net/http/httptest"
	"sync"
	"testing"
	"time"

	"github.com/a2awire/a2awire/shared/store"
	"github.com/a2awire/a2awire/shared/webhook"
	"github.com/a2awire/a2awire/shared/world"
)

// stalled is a receiver whose first gated request waits for release: the
// attempt of a worker that outlives its lease. Every other request is
// answered at once with other.
type stalled struct {
	*httptest.Server
	arrived chan struct{}
	release chan int

	mu    sync.Mutex
	gated bool // the next request is the stalled one
	other int
}

func newStalled(t *testing.T) *stalled {
	t.Helper()
	s := &stalled{arrived: make(chan struct{}, 1), release: make(chan int, 1), other: http.StatusInternalServerError}
	s.Server = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		s.mu.Lock()
		stall, code := s.gated, s.other
		s.gated = false
		s.mu.Unlock()
		if stall {
			s.arrived <- struct{}{}
			code = <-s.release
		}
		w.WriteHeader(code)
	}))
	t.Cleanup(s.Close)
	return s
}

// set makes the next request the stalled one and answers the others with
// other.
func (s *stalled) set(gate bool, other int) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.gated, s.other = gate, other
}

// TestSettleAfterLostLease: a worker whose attempt outlives its claim's
// Lease, so that another worker claimed the retry and settled it, settles
// nothing: the other worker's outcome stands, whichever way each attempt
// went. Each case guards one branch of settle's condition on the claim:
//
//   - delivered: the late worker's delete would drop the retry the other
//     worker scheduled;
//   - next retry: its rewrite would bring back a retry the other worker
//     delivered;
//   - dead letter (410): its delete would drop the other worker's retry
//     and its dead letter would record a failure that is not the last.
func TestSettleAfterLostLease(t *testing.T) {
	cases := []struct {
		name string
		// late is what the stalled worker's attempt gets; heir what the
		// worker that took the claim over gets.
		late, heir int
		// wantRetry is the attempts of the retry left scheduled (0: none).
		wantRetry int
	}{
		{name: "delivered", late: http.StatusNoContent, heir: http.StatusInternalServerError, wantRetry: 2},
		{name: "next retry", late: http.StatusInternalServerError, heir: http.StatusNoContent, wantRetry: 0},
		{name: "dead letter", late: http.StatusGone, heir: http.StatusInternalServerError, wantRetry: 2},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			everyEngine(t, func(t *testing.T, st store.Store) {
				ctx := t.Context()
				c := &clock{now: t0}
				d := newDispatcher(t, st, c, nil)
				rc := newStalled(t)
				addMember(t, st, "w", "aw:a") // only a member's webhook is set and delivered to
				if _, err := d.Store().Set(ctx, "w", "aw:a", rc.URL); err != nil {
					t.Fatal(err)
				}
				// The first attempt fails: a retry is due after the first wait.
				e := event(t, "w", world.PresenceChanged, world.Public, "", map[string]any{}, t0)
				if err := d.Dispatch(ctx, e); err != nil {
					t.Fatal(err)
				}
				c.Advance(time.Minute)

				// Worker A claims the retry and stalls in its attempt.
				rc.set(true, tc.heir)
				late := make(chan error, 1)
				go func() {
					_, err := d.RunRetries(ctx)
					late <- err
				}()
				select {
				case <-rc.arrived:
				case <-time.After(10 * time.Second):
					t.Fatal("worker A's attempt never reached the receiver")
				}

				// A's lease runs out; worker B claims the retry and settles it.
				c.Advance(webhook.Lease + time.Second)
				rep, err := d.RunRetries(ctx)
				if err != nil || rep.Sent != 1 {
					t.Fatalf("worker B after the lease: %+v, %v", rep, err)
				}

				// A's attempt ends; its settle must find the claim gone.
				rc.release <- tc.late
				select {
				case err := <-late:
					if err != nil {
						t.Fatalf("worker A: %v", err)
					}
				case <-time.After(10 * time.Second):
					t.Fatal("worker A did not finish")
				}

				due, err := d.Store().Due(ctx, c.Now().Add(72*time.Hour), 10)
				if err != nil {
					t.Fatal(err)
				}
				switch {
				case tc.wantRetry == 0 && len(due) != 0:
					t.Fatalf("B delivered the event, but a retry is scheduled: %+v", due)
				case tc.wantRetry != 0 && (len(due) != 1 || due[0].Event.ID != e.ID || due[0].Attempts != tc.wantRetry):
					t.Fatalf("retries %+v, want B's retry of %s after %d attempts", due, e.ID, tc.wantRetry)
				}
				dls, err := d.Store().DeadLetters(ctx, "w", "aw:a", t0.Add(-time.Hour))
				if err != nil || len(dls) != 0 {
					t.Fatalf("dead letters %+v, %v; want none", dls, err)
				}
			})
		})
	}
}
