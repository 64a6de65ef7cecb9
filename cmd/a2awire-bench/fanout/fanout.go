// Package fanout measures webhook fan-out for the benchmarks: it starts n
// receivers on 127.0.0.1, registers each as a member's webhook of one
// world, commits public events and times each delivery from the event's
// commit to its arrival. Whatever delivers — the harness's dispatcher on
// the change feed, or a Dispatcher called directly — is the caller's
// choice (Options.Deliver), so the same figure can be taken through the
// Lambda entry and without it.
package fanout

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"slices"
	"sync"
	"time"

	"github.com/a2awire/a2awire/shared/store"
	"github.com/a2awire/a2awire/shared/webhook"
	"github.com/a2awire/a2awire/shared/world"
)

// Options are one measurement's settings.
type Options struct {
	// Store is the table the webhooks and events are written to.
	Store store.Store
	// World is the world the receivers join; "" means "fanout".
	World string
	// Receivers is how many webhooks; 0 means 100.
	Receivers int
	// Events is how many events are sent, one after the other, each
	// awaited by every receiver; 0 means 1.
	Events int
	// Deliver, when set, is called with each committed event (e.g. a
	// Dispatcher's Dispatch). Nil means something already consumes the
	// table's change feed (the harness's webhook-dispatcher).
	Deliver func(context.Context, ...world.Event) error
	// Timeout bounds the wait for one event's deliveries; 0 means 10 s.
	Timeout time.Duration
	// OneListener serves every receiver from one listener, each on its
	// own path (/r/<i>): as many endpoints (URLs, each with its own
	// concurrency cap) as receivers, without a socket each, so 10,000 fit.
	OneListener bool
}

// Result is what a measurement saw.
type Result struct {
	// Deliveries is how many arrived (Receivers × Events when all did).
	Deliveries int
	// Latencies are commit → arrival, one per delivery, sorted.
	Latencies     []time.Duration
	P50, P99, Max time.Duration
	// PerSecond is Deliveries over the time from the first commit to the
	// last arrival.
	PerSecond float64
}

// Run measures fan-out with o.
func Run(ctx context.Context, o Options) (Result, error) {
	if o.Store == nil {
		return Result{}, errors.New("fanout: no store")
	}
	if o.World == "" {
		o.World = "fanout"
	}
	if o.Receivers <= 0 {
		o.Receivers = 100
	}
	if o.Events <= 0 {
		o.Events = 1
	}
	if o.Timeout <= 0 {
		o.Timeout = 10 * time.Second
	}
	type arrival struct {
		eventID string
		at      time.Time
	}
	arrivals := make(chan arrival, o.Receivers*o.Events)
	h := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		arrivals <- arrival{r.Header.Get("webhook-id"), time.Now()}
		w.WriteHeader(http.StatusNoContent)
	})
	hooks := webhook.NewStore(o.Store)
	var servers []*http.Server
	var wg sync.WaitGroup
	defer func() {
		for _, s := range servers {
			_ = s.Close()
		}
		wg.Wait()
	}()
	listen := func() (string, error) {
		ln, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			return "", err
		}
		s := &http.Server{Handler: h, ReadHeaderTimeout: 5 * time.Second}
		servers = append(servers, s)
		wg.Go(func() { _ = s.Serve(ln) })
		return "http://" + ln.Addr().String(), nil
	}
	var shared string
	if o.OneListener {
		var err error
		if shared, err = listen(); err != nil {
			return Result{}, fmt.Errorf("fanout: listener: %w", err)
		}
	}
	for i := range o.Receivers {
		url := shared + fmt.Sprintf("/r/%d", i)
		if !o.OneListener {
			base, err := listen()
			if err != nil {
				return Result{}, fmt.Errorf("fanout: receiver %d: %w", i, err)
			}
			url = base + "/"
		}
		id := fmt.Sprintf("aw:fanout-%05d", i)
		// A webhook needs a member: the stand-in agent gets the member
		// item a join writes, without a key behind it.
		if _, err := o.Store.Write(ctx, world.BareMembership(o.World, id)...); err != nil {
			return Result{}, fmt.Errorf("fanout: member %d: %w", i, err)
		}
		if _, err := hooks.Set(ctx, o.World, id, url); err != nil {
			return Result{}, fmt.Errorf("fanout: webhook %d: %w", i, err)
		}
	}
	ids := world.NewIDs()
	evlog := world.NewLog(o.Store, ids, nil)
	var res Result
	var first, last time.Time
	for range o.Events {
		e, err := ids.NewEvent(o.World, world.PresenceChanged, world.Public, "", map[string]any{"bench": true}, time.Now())
		if err != nil {
			return res, err
		}
		start := time.Now()
		if first.IsZero() {
			first = start
		}
		if e, err = evlog.Commit(ctx, e); err != nil {
			return res, fmt.Errorf("fanout: event: %w", err)
		}
		if o.Deliver != nil {
			if err := o.Deliver(ctx, e); err != nil {
				return res, fmt.Errorf("fanout: deliver: %w", err)
			}
		}
		timeout := time.NewTimer(o.Timeout)
		for got := 0; got < o.Receivers; {
			select {
			case a := <-arrivals:
				if a.eventID != e.ID {
					continue
				}
				got++
				res.Deliveries++
				res.Latencies = append(res.Latencies, a.at.Sub(start))
				last = a.at
			case <-timeout.C:
				return finish(res, first, last), fmt.Errorf("fanout: %d of %d deliveries of event %s within %v", got, o.Receivers, e.ID, o.Timeout)
			case <-ctx.Done():
				timeout.Stop()
				return finish(res, first, last), ctx.Err()
			}
		}
		timeout.Stop()
	}
	return finish(res, first, last), nil
}

func finish(r Result, first, last time.Time) Result {
	slices.Sort(r.Latencies)
	if n := len(r.Latencies); n > 0 {
		r.P50 = r.Latencies[n/2]
		r.P99 = r.Latencies[min(n-1, (n*99+99)/100-1)]
		r.Max = r.Latencies[n-1]
	}
	if el := last.Sub(first); el > 0 {
		r.PerSecond = float64(r.Deliveries) / el.Seconds()
	}
	return r
}
