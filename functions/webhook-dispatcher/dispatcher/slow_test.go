package dispatcher_test

import (
	"context"
	"fmt"
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
// answer (each attempt runs into the 5 s timeout) and one answers at once.
// Through the path an event takes in AWS — the dispatcher's stream trigger
// on the engine's change feed (memory's own; DynamoDB Local's real table
// stream, read with the Streams API as Lambda reads it), the delivery
// queue, the deliverer's queue trigger with the route table's settings —
// every event reaches the fast endpoint within 1 s of its commit on
// memory, within 3 s on DynamoDB Local: the slowest of 10 is checked, so
// that is the p99 too. DynamoDB Local's bound is looser because its Java
// process shares make test's two cores with four other jobs (a quiet
// machine measures a p99 under 1 s, docs/scale.md); 3 s still proves the
// point, as a delivery queued behind a hanging attempt would wait out its
// 5 s timeout (delivery.AttemptTimeout). Events come
// every 200 ms for 2 s; the slow attempts still hang when the test ends,
// about 3 s in all on memory, 5 s on DynamoDB Local. Bolt is left out: its
// feed is memory's path with fsyncs, and the claim is about the stream.
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
			slow := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				select {
				case <-hang:
				case <-r.Context().Done():
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
			committed := map[string]time.Time{}
			for range n {
				e, at := put()
				committed[e.ID] = at
				time.Sleep(every)
			}
			var lat []time.Duration
			bound := time.Second
			if eng.Name != "memory" {
				bound = 3 * time.Second
			}
			if bound >= delivery.AttemptTimeout {
				t.Fatalf("bound %v does not separate a free delivery from one behind a %v attempt", bound, delivery.AttemptTimeout)
			}
			deadline := time.After(bound + 2*time.Second)
			for len(lat) < n {
				select {
				case h := <-fastHits:
					at, ok := committed[h.id]
					if !ok {
						t.Fatalf("fast endpoint got %s, not one of the events", h.id)
					}
					lat = append(lat, h.at.Sub(at))
					delete(committed, h.id)
				case <-deadline:
					t.Fatalf("%d of %d events reached the fast endpoint; latencies so far %v", len(lat), n, lat)
				}
			}
			slices.Sort(lat)
			p99 := lat[(n*99+99)/100-1] // nearest rank: of 10, the slowest
			t.Logf("%s: commit → fast delivery over %d events with 50 hanging endpoints: median %v, p99 %v", eng.Name, n, lat[n/2], p99)
			if p99 > bound {
				t.Errorf("p99 commit → delivery %v, want within %v (all: %v)", p99, bound, lat)
			}
		})
	}
}
