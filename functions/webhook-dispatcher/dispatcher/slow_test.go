package dispatcher_test

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/a2awire/a2awire/shared/egress"
	"github.com/a2awire/a2awire/shared/store/storetest/stores"
	"github.com/a2awire/a2awire/shared/webhook"
	"github.com/a2awire/a2awire/shared/webhook/delivery"
	"github.com/a2awire/a2awire/shared/world"
)

// TestSlowEndpointsDoNotDelayTheFastOne: 50 members' endpoints never
// answer (each attempt runs into the 5 s timeout, delivery.AttemptTimeout)
// and one answers at once. Through the path an event takes in AWS — the
// dispatcher's stream trigger on the engine's change feed (memory's own;
// DynamoDB Local's real table stream, read with the Streams API as Lambda
// reads it), the delivery queue, the deliverer's queue trigger with the
// route table's settings — every one of 10 events
// (2 on DynamoDB Local) reaches the fast endpoint before the first
// hanging attempt has ended:
// no delivery to it waits behind them. The check is causal rather than a latency bound: a
// delivery queued behind a hanging attempt could not arrive before that
// attempt's end. Events come every 200 ms for 2 s on memory, so the last
// one has about 3 s to arrive; every 50 ms for 0.1 s on DynamoDB Local,
// about 4.8 s (a machine too loaded to carry an event through the pipeline
// in that time fails it; under make test's load DynamoDB Local took
// 0.7–2.6 s). The commit → delivery latencies are logged;
// their quiet-machine p99s (within the 1 s the scale docs give) are in
// docs/scale.md. Bolt is left out: its feed is memory's path with fsyncs,
// and the claim is about the stream.
func TestSlowEndpointsDoNotDelayTheFastOne(t *testing.T) {
	for _, eng := range stores.All(local) {
		if eng.Name == "bolt" {
			continue
		}
		t.Run(eng.Name, func(t *testing.T) {
			st, feed := eng.OpenFeed(t)
			ctx, cancel := context.WithCancel(t.Context())
			defer cancel()
			hang := make(chan struct{})
			// slowEnded closes when the first hanging attempt ends (its
			// client gave up).
			slowEnded := make(chan struct{})
			var endOnce sync.Once
			var slowEnd time.Time // written before slowEnded closes
			slow := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				// The server notices the client hanging up (and cancels
				// r's context) only once the body is read.
				_, _ = io.Copy(io.Discard, r.Body)
				select {
				case <-hang:
				case <-r.Context().Done():
					endOnce.Do(func() { slowEnd = time.Now(); close(slowEnded) })
				}
			}))
			defer slow.Close()
			defer slow.CloseClientConnections()
			defer close(hang)
			type hit struct {
				id string
				at time.Time
			}
			fastHits := make(chan hit, 100)
			fast := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				fastHits <- hit{r.Header.Get("webhook-id"), time.Now()}
				w.WriteHeader(http.StatusNoContent)
			}))
			defer fast.Close()

			d, err := webhook.NewDispatcher(webhook.Config{
				Store:  st,
				Client: egress.NewClient(egress.Options{AllowLoopback: true, AllowHTTP: true, Timeout: delivery.AttemptTimeout}),
				Queue:  deliveryQueue(),
			})
			if err != nil {
				t.Fatal(err)
			}
			var members []string
			for i := range 51 {
				members = append(members, fmt.Sprintf("aw:m%02d", i))
			}
			addMember(t, st, "w", members...)
			for i, m := range members {
				// One endpoint per slow member: its own path, its own cap.
				url := fmt.Sprintf("%s/slow/%d", slow.URL, i)
				if i == 50 {
					url = fast.URL + "/fast"
				}
				if _, err := d.Store().Set(ctx, "w", m, url); err != nil {
					t.Fatal(err)
				}
			}
			var wg sync.WaitGroup
			runPipeline(ctx, &wg, d, feed)
			defer wg.Wait()
			defer cancel()

			// The stream's first read may still be starting (DynamoDB
			// Local's shards): a warm-up event reaches the fast endpoint
			// first, and starts the 50 hanging attempts.
			ids := world.NewIDs()
			put := func() (world.Event, time.Time) {
				e, _ := ids.NewEvent("w", world.AgentJoined, world.Public, "", map[string]any{"awnId": "aw:x"}, time.Now())
				at := time.Now()
				if _, err := st.Write(ctx, world.EventPut(e)); err != nil {
					t.Fatal(err)
				}
				return e, at
			}
			warm, _ := put()
			select {
			case h := <-fastHits:
				if h.id != warm.ID {
					t.Fatalf("warm-up delivered %s", h.id)
				}
			case <-time.After(10 * time.Second):
				t.Fatal("the warm-up event never reached the fast endpoint")
			}

			every, n := 200*time.Millisecond, 10
			if eng.Name != "memory" {
				// DynamoDB Local carries each event's 51 deliveries
				// (and the 50 deferrals) through a JVM sharing make
				// test's two cores: fewer events, sooner, so the last
				// one is not still in that queue when the first hanging
				// attempt ends. Each event's latency there grows by
				// 1.5–2 s per event before it on a loaded machine (0.4 s,
				// 1.8 s, 3.9 s, then past the 5 s end at a load of 8), so
				// 2 events, 50 ms apart: each still commits while the 50
				// hanging attempts are in flight, which is what is tested.
				every, n = 50*time.Millisecond, 2
			}
			committed, seen := map[string]time.Time{}, map[string]bool{warm.ID: true}
			for range n {
				e, at := put()
				committed[e.ID] = at
				time.Sleep(every)
			}
			// A backstop, far past the claim: the pipeline stalled.
			stalled := time.After(time.Minute)
			var lat []time.Duration
			got := func(h hit) {
				at, ok := committed[h.id]
				switch {
				case !ok && seen[h.id]:
					// Delivery is at least once (a receiver dedupes by
					// webhook-id); a repeat is not this test's concern.
					return
				case !ok:
					t.Fatalf("fast endpoint got %s, not one of the events", h.id)
				}
				lat = append(lat, h.at.Sub(at))
				delete(committed, h.id)
				seen[h.id] = true
			}
			for len(lat) < n {
				select {
				case h := <-fastHits:
					got(h)
				case <-slowEnded:
					// Hits that came before the end may not have been
					// read yet.
					for len(lat) < n {
						select {
						case h := <-fastHits:
							if h.at.Before(slowEnd) {
								got(h)
								continue
							}
						default:
						}
						break
					}
					if len(lat) == n {
						break
					}
					t.Fatalf("a hanging attempt ended (after %v) while %d of %d events had not reached the fast endpoint: they waited behind it; latencies so far %v",
						delivery.AttemptTimeout, n-len(lat), n, lat)
				case <-stalled:
					t.Fatalf("neither all %d events at the fast endpoint nor a hanging attempt's end within a minute; latencies so far %v", n, lat)
				}
			}
			slices.Sort(lat)
			p99 := lat[(n*99+99)/100-1] // nearest rank: of 10, the slowest
			t.Logf("%s: commit → fast delivery over %d events with 50 hanging endpoints: median %v, p99 %v", eng.Name, n, lat[n/2], p99)
		})
	}
}
