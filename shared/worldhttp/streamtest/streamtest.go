// Package streamtest runs the event stream's resume scenario over a store:
// Events events appended by Appenders writers into one world while a
// member's stream (GET /v0/worlds/{world}/events/stream, the handler the
// function serves, behind a real HTTP server on 127.0.0.1) is cut three
// times and reopened after the last id it got. It checks what the reader
// got — every event exactly once, in strictly increasing id order, each
// frame's id: and event: those of its JSON — and measures each event's
// commit → reader latency.
//
// Two callers hold it to different things: worldhttp's test runs it on
// memory, bolt and DynamoDB Local under make test's race detector and
// load, for exactly-once delivery; make bench (row 8) runs it on DynamoDB
// Local on a machine doing nothing else, where the commit → reader p99 has
// its target of 1 s. A latency figure is a measurement, so it lives in the
// bench; the test bounds it only loosely.
package streamtest

import (
	"bytes"
	"context"
	"crypto/ed25519"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/a2awire/a2awire/shared/auth"
	"github.com/a2awire/a2awire/shared/ratelimit"
	"github.com/a2awire/a2awire/shared/sse"
	"github.com/a2awire/a2awire/shared/store"
	"github.com/a2awire/a2awire/shared/world"
	"github.com/a2awire/a2awire/shared/worldhttp"
)

const (
	// Events is how many events the writers append.
	Events = 1000
	// Appenders is how many goroutines append them: the log's group
	// commit writes the events waiting together in one transaction,
	// which keeps 1,000 of them on DynamoDB Local to seconds.
	Appenders = 24
	// EventType is the type of the events the writers append.
	EventType = "test.step"
	// World is the world the scenario runs in.
	World = "river"
)

// cuts are the counts of events read after which the reader goes away
// mid-stream, with the rest of the page it was reading unread. The
// second reopening resumes with ?after=, the others with Last-Event-ID.
var cuts = []int{250, 500, 750}

// Report is what one run measured.
type Report struct {
	// Streamed is how many events the reader got over all its
	// connections, the writers' and the world's own (joins, presence).
	Streamed int
	// Connections is how many streams the reader opened.
	Connections int
	// Wrote is how long the writers took to append all Events.
	Wrote time.Duration
	// Latency is each written event's commit (its Append returned) →
	// reader (its frame parsed) time, sorted.
	Latency []time.Duration
}

// Percentile is the p-th percentile (0–100) of r.Latency, nearest rank
// from below, as the bench's other rows take it.
func (r Report) Percentile(p int) time.Duration {
	if len(r.Latency) == 0 {
		return 0
	}
	return r.Latency[min(len(r.Latency)*p/100, len(r.Latency)-1)]
}

// key is the ed25519 key whose seed is seed repeated: fixed keys, so that
// a run's awnIds are the same on every engine.
func key(seed byte) ed25519.PrivateKey {
	return ed25519.NewKeyFromSeed(bytes.Repeat([]byte{seed}, ed25519.SeedSize))
}

func pub(k ed25519.PrivateKey) ed25519.PublicKey { return k.Public().(ed25519.PublicKey) }

// streamed is one event as the reader got it.
type streamed struct {
	id, typ string
	n       int // the step's n; -1 for another event
	at      time.Time
}

// Resume runs the scenario on st (an empty table: it creates the world
// and joins its members) and returns what it measured, or the first way
// the reader's view broke exactly-once, in-order delivery.
func Resume(ctx context.Context, st store.Store) (Report, error) {
	return ResumeShards(ctx, st, 1)
}

// ResumeShards is Resume in a world whose events are written across
// shards partitions (Manifest.EventShards): the stream reads them all
// side by side and merges them.
func ResumeShards(ctx context.Context, st store.Store, shards int) (Report, error) {
	deps := worldhttp.NewDeps(st, ratelimit.DefaultLimits(), "", nil, nil)
	o := deps.Options
	o.Function = "world-events-stream"
	h, err := worldhttp.NewEventStream(o, deps.World, worldhttp.StreamOptions{})
	if err != nil {
		return Report{}, err
	}
	srv := httptest.NewServer(h)
	defer srv.Close()
	if _, _, err := deps.World.PutWorld(ctx, world.Manifest{ID: World, EventShards: shards}, pub(key(40))); err != nil {
		return Report{}, fmt.Errorf("create the world: %w", err)
	}
	for k := byte(41); k <= 43; k++ {
		if _, _, err := deps.World.Join(ctx, World, pub(key(k)), nil); err != nil {
			return Report{}, fmt.Errorf("join: %w", err)
		}
	}
	signer, err := auth.NewSigner(key(41))
	if err != nil {
		return Report{}, err
	}
	r := &reader{c: &http.Client{Transport: &auth.Transport{Signer: signer}}, url: srv.URL + "/v0/worlds/" + World + "/events/stream"}

	ctx, cancel := context.WithTimeout(ctx, 60*time.Second)
	defer cancel()
	// The reader follows the world before anything happens in it.
	first, err := r.open(ctx, "", false)
	if err != nil {
		return Report{}, err
	}

	// The writers: each event's commit time by its n.
	var mu sync.Mutex
	committed := make(map[int]time.Time, Events)
	var wg sync.WaitGroup
	began := time.Now()
	var rep Report
	werr := make(chan error, Appenders)
	for i := range Appenders {
		wg.Go(func() {
			for n := i; n < Events; n += Appenders {
				err := deps.World.Append(ctx, world.Event{World: World, Type: EventType, Visibility: world.Public, Data: json.RawMessage(fmt.Sprintf(`{"n":%d}`, n))})
				if err != nil {
					werr <- fmt.Errorf("append %d: %w", n, err)
					cancel() // the reader waits for events that will not come
					return
				}
				mu.Lock()
				committed[n] = time.Now()
				if len(committed) == Events {
					rep.Wrote = time.Since(began)
				}
				mu.Unlock()
			}
		})
	}
	got, rerr := r.follow(ctx, first)
	wg.Wait()
	select {
	case err := <-werr:
		return Report{}, err
	default:
	}
	if rerr != nil {
		return Report{}, rerr
	}
	rep.Streamed, rep.Connections = len(got), len(cuts)+1

	seen := make(map[int]bool, Events)
	for i, s := range got {
		if i > 0 && s.id <= got[i-1].id {
			return Report{}, fmt.Errorf("event %d: id %s after %s: not in order", i, s.id, got[i-1].id)
		}
		if s.n < 0 {
			continue
		}
		if seen[s.n] {
			return Report{}, fmt.Errorf("event n=%d streamed twice", s.n)
		}
		seen[s.n] = true
		at, ok := committed[s.n]
		if !ok {
			return Report{}, fmt.Errorf("event n=%d streamed but never written", s.n)
		}
		rep.Latency = append(rep.Latency, s.at.Sub(at))
	}
	if len(seen) != Events {
		return Report{}, fmt.Errorf("%d distinct events streamed, want %d", len(seen), Events)
	}
	slices.Sort(rep.Latency)
	return rep, nil
}

// reader is the member who follows the stream.
type reader struct {
	c   *http.Client
	url string
}

// open opens the reader's stream, resuming after lastID (sent as
// Last-Event-ID, or as ?after= when query is set).
func (r *reader) open(ctx context.Context, lastID string, query bool) (*http.Response, error) {
	u := r.url
	if query && lastID != "" {
		u += "?after=" + lastID
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, u, nil)
	if err != nil {
		return nil, err
	}
	if !query && lastID != "" {
		req.Header.Set("Last-Event-ID", lastID)
	}
	resp, err := r.c.Do(req)
	if err != nil {
		return nil, fmt.Errorf("open the stream: %w", err)
	}
	if resp.StatusCode != http.StatusOK || !strings.HasPrefix(resp.Header.Get("Content-Type"), sse.ContentType) {
		body, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		return nil, fmt.Errorf("open the stream: %d %s %s", resp.StatusCode, resp.Header.Get("Content-Type"), body)
	}
	return resp, nil
}

// follow reads the stream from first, cutting it at each of cuts and
// reopening it after the last id read, until it has all Events of
// EventType.
func (r *reader) follow(ctx context.Context, first *http.Response) ([]streamed, error) {
	var got []streamed
	lastID := ""
	steps := 0
	for round := 0; steps < Events; round++ {
		resp := first
		if round > 0 {
			var err error
			if resp, err = r.open(ctx, lastID, round == 2); err != nil {
				return nil, err
			}
		}
		s := sse.NewReader(resp.Body, 0)
		for steps < Events {
			if round < len(cuts) && steps >= cuts[round] {
				break // cut: the reader goes away mid-stream
			}
			ev, err := s.Next()
			if err != nil {
				resp.Body.Close()
				if errors.Is(ctx.Err(), context.Canceled) {
					err = fmt.Errorf("%w (a writer failed)", err)
				}
				return nil, fmt.Errorf("round %d after %d events: %w", round, steps, err)
			}
			e := streamed{id: ev.ID, typ: ev.Type, n: -1, at: time.Now()}
			var body struct {
				EventID string `json:"eventId"`
				Type    string `json:"type"`
				Data    struct {
					N *int `json:"n"`
				} `json:"data"`
			}
			if err := json.Unmarshal([]byte(ev.Data), &body); err != nil || body.EventID != ev.ID || body.Type != ev.Type {
				resp.Body.Close()
				return nil, fmt.Errorf("event %q/%q data %s (%v)", ev.ID, ev.Type, ev.Data, err)
			}
			if ev.Type == EventType {
				if body.Data.N == nil {
					resp.Body.Close()
					return nil, fmt.Errorf("event %s: data %s has no n", ev.ID, ev.Data)
				}
				e.n = *body.Data.N
				steps++
			}
			got = append(got, e)
			lastID = s.LastID
		}
		resp.Body.Close()
	}
	return got, nil
}
