package worldhttp_test

import (
	"context"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/a2awire/a2awire/shared/auth"
	"github.com/a2awire/a2awire/shared/ratelimit"
	"github.com/a2awire/a2awire/shared/sse"
	"github.com/a2awire/a2awire/shared/store"
	"github.com/a2awire/a2awire/shared/store/bolt"
	"github.com/a2awire/a2awire/shared/store/dynamo"
	"github.com/a2awire/a2awire/shared/store/dynamo/dynamolocal"
	"github.com/a2awire/a2awire/shared/store/memory"
	"github.com/a2awire/a2awire/shared/world"
	"github.com/a2awire/a2awire/shared/world/worldtest"
	"github.com/a2awire/a2awire/shared/worldhttp"
	"github.com/a2awire/a2awire/shared/worldhttp/streamtest"
)

// streamWriters is how many members besides the reader join the world.
const streamWriters = 2

// streamWorld is a world with reader and writer joined, and the event
// stream's handler over st behind a real HTTP server.
type streamWorld struct {
	st     store.Store
	w      *world.Service
	srv    *httptest.Server
	reader *agent
	// writers are the awnIds of members who write: a group commit holds
	// one action per member (its membership's condition), so several
	// writers' actions commit together.
	writers []string
	writer  string // the first of them
}

func newStreamWorld(t *testing.T, st store.Store, so worldhttp.StreamOptions, now func() time.Time) *streamWorld {
	t.Helper()
	deps := worldhttp.NewDeps(st, ratelimit.DefaultLimits(), "", nil, now)
	h, err := worldhttp.NewEventStream(fn(deps.Options, "world-events-stream"), deps.World, so)
	if err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer(h)
	t.Cleanup(srv.Close)
	ctx := context.Background()
	if _, _, err := deps.World.PutWorld(ctx, world.Manifest{ID: "river"}, pub(key(40))); err != nil {
		t.Fatal(err)
	}
	reader := newAgent(t, srv.URL, 41)
	sw := &streamWorld{st: st, w: deps.World, srv: srv, reader: reader}
	for k := byte(41); k <= 41+streamWriters; k++ {
		if _, _, err := deps.World.Join(ctx, "river", pub(key(k)), nil); err != nil {
			t.Fatal(err)
		}
		if k != 41 {
			sw.writers = append(sw.writers, auth.AWNID(pub(key(k))))
		}
	}
	sw.writer = sw.writers[0]
	return sw
}

// open opens the reader's stream, resuming after lastID (sent as
// Last-Event-ID, or as ?after= when query is set).
func (sw *streamWorld) open(t *testing.T, ctx context.Context, lastID string, query bool) *http.Response {
	t.Helper()
	path := sw.srv.URL + "/v0/worlds/river/events/stream"
	if query && lastID != "" {
		path += "?after=" + lastID
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, path, nil)
	if err != nil {
		t.Fatal(err)
	}
	if !query && lastID != "" {
		req.Header.Set("Last-Event-ID", lastID)
	}
	resp, err := sw.reader.c.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	if resp.StatusCode != http.StatusOK || !strings.HasPrefix(resp.Header.Get("Content-Type"), sse.ContentType) {
		body, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		t.Fatalf("stream: %d %s %s", resp.StatusCode, resp.Header.Get("Content-Type"), body)
	}
	return resp
}

// stepEvent is the type of the events the writers append.
const stepEvent = streamtest.EventType

// TestStreamResumesExactlyOnce: 1,000 events are appended by 24 writers
// while a reader's stream, opened before the first, is cut three times
// (once it has 250, 500 and 750 of them, with the rest of the page it was
// reading unread) and reopened after the last id it got (Last-Event-ID
// twice, ?after= once): the reader sees each of the 1,000 exactly once,
// every event in strictly increasing id order, and each `id:` and
// `event:` are those of the event's JSON (streamtest.Resume checks each).
// It logs the commit → reader latency and fails past a p99 of 1 s on
// memory and bolt, 5 s on DynamoDB Local (see maxP99). The stream reads
// the store every StreamPoll (250 ms) while idle, StreamFlowPoll (50 ms)
// after a read that found events.
func TestStreamResumesExactlyOnce(t *testing.T) {
	engines := []struct {
		name string
		// maxP99 bounds the commit → reader p99: one second on memory
		// and bolt. DynamoDB Local serves the stream's reads behind the
		// writers' transactions (this test saturates it), and under
		// make test's load (the race detector, every other suite on the
		// same DynamoDB Local) a single read there can take over a
		// second, so its bound here is 5 s. The 1 s target on DynamoDB
		// Local is held by make bench's row 8, the same scenario on a
		// machine doing nothing else: a test that fails on a loaded
		// machine for want of CPU would block every change rather than
		// catch one.
		maxP99 time.Duration
		open   func(t *testing.T) store.Store
	}{
		{"memory", time.Second, func(t *testing.T) store.Store {
			st := memory.New()
			t.Cleanup(func() { _ = st.Close() })
			return st
		}},
		{"bolt", time.Second, func(t *testing.T) store.Store {
			st, err := bolt.Open(filepath.Join(t.TempDir(), bolt.DefaultFile))
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { _ = st.Close() })
			return st
		}},
		{"dynamodb-local", 5 * time.Second, func(t *testing.T) store.Store {
			client, table := dynamolocal.NewTable(t, local)
			return dynamo.New(client, table)
		}},
	}
	for _, e := range engines {
		t.Run(e.name, func(t *testing.T) {
			rep, err := streamtest.Resume(context.Background(), e.open(t))
			if err != nil {
				t.Fatal(err)
			}
			p99 := rep.Percentile(99)
			t.Logf("%d events written in %v by %d writers, %d events streamed over %d connections; commit → reader p50 %v, p99 %v, max %v",
				streamtest.Events, rep.Wrote, streamtest.Appenders, rep.Streamed, rep.Connections, rep.Percentile(50), p99, rep.Percentile(100))
			if p99 > e.maxP99 {
				t.Errorf("commit → reader p99 %v, want ≤ %v", p99, e.maxP99)
			}
		})
	}
}

// TestStreamResumesAcrossShards is TestStreamResumesExactlyOnce in a world
// of 16 event shards, on memory: the stream reads the 16 partitions side by
// side and merges them, and the reader still gets each of the 1,000 events
// exactly once, in strictly increasing id order, across its three cuts.
// (The merge is the same code on every engine; TestShardedEventsConcurrentWriters
// in shared/world runs it on bolt and DynamoDB Local.)
func TestStreamResumesAcrossShards(t *testing.T) {
	st := memory.New()
	t.Cleanup(func() { _ = st.Close() })
	rep, err := streamtest.ResumeShards(context.Background(), st, world.MaxEventShards)
	if err != nil {
		t.Fatal(err)
	}
	spread := map[string]bool{}
	for _, pk := range worldtest.Placement(t, st, streamtest.World) {
		spread[pk] = true
	}
	if len(spread) != world.MaxEventShards {
		t.Fatalf("the events are in %d partitions, want %d", len(spread), world.MaxEventShards)
	}
	t.Logf("%d events streamed over %d connections from %d partitions; commit → reader p99 %v", rep.Streamed, rep.Connections, len(spread), rep.Percentile(99))
}

// fakeClock is the stream's wait clock and the world's clock: After
// records one wake-up at a time (a stream waits on one), and step moves
// the clock to it and wakes the stream.
type fakeClock struct {
	mu    sync.Mutex
	now   time.Time
	wake  chan time.Time
	at    time.Time
	armed chan struct{}
}

func newFakeClock() *fakeClock {
	return &fakeClock{now: time.Now().UTC(), armed: make(chan struct{}, 1)}
}

func (c *fakeClock) Now() time.Time { c.mu.Lock(); defer c.mu.Unlock(); return c.now }

func (c *fakeClock) After(d time.Duration) <-chan time.Time {
	ch := make(chan time.Time, 1)
	c.mu.Lock()
	c.wake, c.at = ch, c.now.Add(d)
	c.mu.Unlock()
	c.armed <- struct{}{}
	return ch
}

// step waits until the stream waits, then moves the clock to its wake-up
// and wakes it; it returns the wait.
func (c *fakeClock) step(t *testing.T) time.Duration {
	t.Helper()
	c.await(t)
	return c.fire()
}

// await waits until the stream waits on the clock.
func (c *fakeClock) await(t *testing.T) {
	t.Helper()
	select {
	case <-c.armed:
	case <-time.After(20 * time.Second):
		t.Fatal("the stream does not wait on its clock")
	}
}

// fire moves the clock to the wake-up the stream waits for (await first)
// and wakes it; it returns the wait.
func (c *fakeClock) fire() time.Duration {
	c.mu.Lock()
	d := c.at.Sub(c.now)
	c.now = c.at
	ch := c.wake
	c.mu.Unlock()
	ch <- c.at
	return d
}

// run steps the clock until it has advanced by at least d.
func (c *fakeClock) run(t *testing.T, d time.Duration) {
	t.Helper()
	for moved := time.Duration(0); moved < d; {
		moved += c.step(t)
	}
}

// TestStreamHeartbeatAndEnd: on a fake clock, a stream of at most 40 s
// writes a heartbeat comment at 15 s and at 30 s, then the retry hint and
// ends by itself at 40 s, having read the store every StreamPoll.
func TestStreamHeartbeatAndEnd(t *testing.T) {
	c := newFakeClock()
	st := memory.New()
	t.Cleanup(func() { _ = st.Close() })
	sw := newStreamWorld(t, st, worldhttp.StreamOptions{Clock: c, MaxDuration: 40 * time.Second}, c.Now)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	resp := sw.open(t, ctx, "", false)
	defer resp.Body.Close()
	done := make(chan []byte, 1)
	go func() {
		b, _ := io.ReadAll(resp.Body)
		done <- b
	}()
	steps := 0
	for moved := time.Duration(0); moved < 40*time.Second; steps++ {
		d := c.step(t)
		if d > worldhttp.StreamPoll {
			t.Fatalf("the stream waited %v, more than its poll interval", d)
		}
		moved += d
	}
	var body []byte
	select {
	case body = <-done:
	case <-ctx.Done():
		t.Fatal("the stream did not end at its duration")
	}
	text := string(body)
	if n := strings.Count(text, ": heartbeat\n"); n != 2 {
		t.Errorf("%d heartbeats in 40 s, want 2 (at 15 and 30 s):\n%s", n, text)
	}
	if !strings.Contains(text, "\nretry: 1000\n") {
		t.Errorf("no retry hint at the end:\n%s", text)
	}
	// The joins are the public events the reader sees.
	if n := strings.Count(text, "event: agent.joined\n"); n != streamWriters+1 {
		t.Errorf("%d agent.joined events, want %d:\n%s", n, streamWriters+1, text)
	}
	t.Logf("%d clock steps in 40 s", steps)
}

// TestStreamPacesItsReads: on a fake clock, a read that found events is
// followed by the next one StreamFlowPoll later, a read that found none
// by the next StreamPoll later, so a quiet stream reads at the idle pace
// and a busy one follows closely.
func TestStreamPacesItsReads(t *testing.T) {
	c := newFakeClock()
	st := memory.New()
	t.Cleanup(func() { _ = st.Close() })
	sw := newStreamWorld(t, st, worldhttp.StreamOptions{Clock: c}, c.Now)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	resp := sw.open(t, ctx, "", false)
	defer resp.Body.Close()
	go func() { _, _ = io.Copy(io.Discard, resp.Body) }()
	want := func(what string, got, want time.Duration) {
		t.Helper()
		if got != want {
			t.Fatalf("after %s the stream waited %v, want %v", what, got, want)
		}
	}
	// The first pages (the joins, then the reader's own presence.changed,
	// committed beside the first read) until a read finds nothing.
	want("the first page (the joins)", c.step(t), worldhttp.StreamFlowPoll)
	for i := 0; ; i++ {
		d := c.step(t)
		if d == worldhttp.StreamPoll {
			break
		}
		if i == 3 {
			t.Fatalf("the stream still waits %v after a quiet world's pages", d)
		}
		want("a read that found events", d, worldhttp.StreamFlowPoll)
	}
	c.await(t) // after an empty read
	if err := sw.w.Append(ctx, world.Event{World: "river", Type: stepEvent, Visibility: world.Public, Data: json.RawMessage(`{"n":0}`)}); err != nil {
		t.Fatal(err)
	}
	want("an empty read", c.fire(), worldhttp.StreamPoll)
	want("a read that found an event", c.step(t), worldhttp.StreamFlowPoll)
	want("an empty read", c.step(t), worldhttp.StreamPoll)
	want("an empty read", c.step(t), worldhttp.StreamPoll)
}

// TestStreamIsPresence: a member whose only sign of life is an open
// stream stays online past ReachableWithin (the stream marks it as polled
// every StreamRefresh), its first stream announces presence.changed
// online, and once the stream is closed it goes offline ReachableWithin
// later.
func TestStreamIsPresence(t *testing.T) {
	c := newFakeClock()
	st := memory.New()
	t.Cleanup(func() { _ = st.Close() })
	sw := newStreamWorld(t, st, worldhttp.StreamOptions{Clock: c}, c.Now)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	resp := sw.open(t, ctx, "", false)
	go func() { _, _ = io.Copy(io.Discard, resp.Body) }()
	c.run(t, 3*world.ReachableWithin)
	if _, p, err := sw.w.PresenceIn(context.Background(), "river", sw.reader.awnID()); err != nil || p != world.PresenceOnline {
		t.Fatalf("presence with a stream open %v after %v: %q, %v", 3*world.ReachableWithin, "", p, err)
	}
	cancel()
	resp.Body.Close()
	// Wait for the handler to see the client go, then let time pass.
	deadline := time.Now().Add(10 * time.Second)
	for {
		c.mu.Lock()
		c.now = c.now.Add(world.ReachableWithin + time.Second)
		c.mu.Unlock()
		_, p, err := sw.w.PresenceIn(context.Background(), "river", sw.reader.awnID())
		if err != nil {
			t.Fatal(err)
		}
		if p == world.PresenceOffline {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("still online long after the stream closed")
		}
		select {
		case <-c.armed: // a last wake-up of the closing stream: release it
			c.mu.Lock()
			ch := c.wake
			c.mu.Unlock()
			ch <- c.now
		case <-time.After(10 * time.Millisecond):
		}
	}
	evs, err := sw.w.Events(context.Background(), "river", sw.writer, "", 100)
	if err != nil {
		t.Fatal(err)
	}
	online := slices.ContainsFunc(evs, func(e world.Event) bool {
		return e.Type == world.PresenceChanged && strings.Contains(string(e.Data), sw.reader.awnID()) && strings.Contains(string(e.Data), `"online"`)
	})
	if !online {
		t.Errorf("no presence.changed online for the streaming reader in %d events", len(evs))
	}
}

// TestStreamRefusals: a non-member gets 401 NOT_JOINED, a malformed
// Last-Event-ID or ?after= 400 INVALID_REQUEST, both as JSON before any
// stream starts.
func TestStreamRefusals(t *testing.T) {
	st := memory.New()
	t.Cleanup(func() { _ = st.Close() })
	sw := newStreamWorld(t, st, worldhttp.StreamOptions{}, nil)
	stranger := newAgent(t, sw.srv.URL, 39)
	for _, tc := range []struct {
		who    *agent
		query  string
		header string
		status int
		code   string
	}{
		{stranger, "", "", 401, "NOT_JOINED"},
		{sw.reader, "?after=nope", "", 400, "INVALID_REQUEST"},
		{sw.reader, "", "nope", 400, "INVALID_REQUEST"},
		{sw.reader, "", "7ZZZZZZZZZZZZZZZZZZZZZZZZZ", 400, "INVALID_REQUEST"},
	} {
		req, _ := http.NewRequest(http.MethodGet, sw.srv.URL+"/v0/worlds/river/events/stream"+tc.query, nil)
		if tc.header != "" {
			req.Header.Set("Last-Event-ID", tc.header)
		}
		resp, err := tc.who.c.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		var env struct {
			OK    bool `json:"ok"`
			Error struct {
				Code string `json:"code"`
			} `json:"error"`
		}
		err = json.NewDecoder(resp.Body).Decode(&env)
		resp.Body.Close()
		if resp.StatusCode != tc.status || err != nil || env.OK || env.Error.Code != tc.code {
			t.Errorf("%q %q: %d %+v (%v), want %d %s", tc.query, tc.header, resp.StatusCode, env, err, tc.status, tc.code)
		}
	}
	// An unsigned request is refused too.
	resp, err := http.Get(sw.srv.URL + "/v0/worlds/river/events/stream")
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusUnauthorized {
		t.Errorf("unsigned: %d, want 401", resp.StatusCode)
	}
}
