package idempotency_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/a2awire/a2awire/shared/idempotency"
	"github.com/a2awire/a2awire/shared/logging"
	"github.com/a2awire/a2awire/shared/protocol"
	"github.com/a2awire/a2awire/shared/store"
	"github.com/a2awire/a2awire/shared/store/dynamo/dynamolocal"
	"github.com/a2awire/a2awire/shared/store/memory"
	"github.com/a2awire/a2awire/shared/store/storetest"
	"github.com/a2awire/a2awire/shared/store/storetest/stores"
)

// local is the DynamoDB Local server of this package's tests.
var local *dynamolocal.Server

func TestMain(m *testing.M) {
	os.Exit(dynamolocal.Main(m, func(s *dynamolocal.Server) { local = s }))
}

// clock is a settable time source starting at the real present, so that
// context deadlines (real times) and the guard's clock agree.
type clock struct {
	mu  sync.Mutex
	now time.Time
}

func newClock() *clock { return &clock{now: time.Now().Truncate(time.Millisecond)} }

func (c *clock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.now
}

func (c *clock) Advance(d time.Duration) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.now = c.now.Add(d)
}

// rig is a stateful test provider: capability "count" counts its runs and,
// per input, fails with a status. After holdNext, the next run (only) holds
// the task id: it signals started and waits for release.
type rig struct {
	h        http.Handler
	clock    *clock
	runs     atomic.Int64
	holdNext atomic.Bool
	started  chan struct{}
	release  chan struct{}
}

type countInput struct {
	// Fail makes the run fail with this status (400, 429, 500, 502).
	Fail int `json:"fail"`
	// Note only changes the request hash.
	Note string `json:"note"`
	// Big makes the output this many bytes long.
	Big int `json:"big"`
}

// hold starts a request that holds its task id until release is closed,
// and returns once it is running. Its response arrives on the channel.
func (r *rig) hold(t *testing.T, ctx context.Context, taskID, body string) <-chan resp {
	t.Helper()
	r.holdNext.Store(true)
	done := make(chan resp, 1)
	go func() { done <- r.do(t, ctx, taskID, body) }()
	select {
	case <-r.started:
	case <-time.After(10 * time.Second):
		t.Fatal("the holding request did not start")
	}
	return done
}

func newRig(t *testing.T, st store.Store, opts ...idempotency.Option) *rig {
	r := &rig{clock: newClock(), started: make(chan struct{}, 10), release: make(chan struct{})}
	g := idempotency.New(st, append([]idempotency.Option{idempotency.WithClock(r.clock.Now)}, opts...)...)
	p := protocol.NewProvider("test-agent", protocol.WithIdempotency(g), protocol.WithLogger(logging.Discard()))
	protocol.Handle(p, "count", func(ctx context.Context, in countInput) (map[string]any, error) {
		n := r.runs.Add(1)
		if r.holdNext.CompareAndSwap(true, false) {
			r.started <- struct{}{}
			<-r.release
		}
		switch in.Fail {
		case 0:
			return map[string]any{"run": n, "big": strings.Repeat("b", in.Big)}, nil
		case 400:
			return nil, protocol.Errorf(protocol.InvalidInput, "bad")
		case 429:
			return nil, &protocol.Error{Code: protocol.RateLimited, Message: "slow down", RetryAfter: time.Second}
		case 502:
			return nil, protocol.Errorf(protocol.Upstream, "upstream down")
		}
		return nil, errors.New("secret internal failure")
	})
	r.h = p
	return r
}

type resp struct {
	status     int
	body       string
	replayed   bool
	code       protocol.Code
	retryAfter string
}

func (r *rig) do(t *testing.T, ctx context.Context, taskID, body string) resp {
	t.Helper()
	req := httptest.NewRequestWithContext(ctx, http.MethodPost, "/invoke", strings.NewReader(body))
	req.Header.Set("Content-Type", "application/json")
	if taskID != "" {
		req.Header.Set(protocol.TaskIDHeader, taskID)
	}
	w := httptest.NewRecorder()
	r.h.ServeHTTP(w, req)
	if err := protocol.Verify(w.Code, w.Header(), w.Body.Bytes(), protocol.Expect{Agent: "test-agent", Capability: "count"}); err != nil {
		t.Errorf("response %d %s is not conformant: %v", w.Code, w.Body, err)
	}
	var eb protocol.ErrorBody
	_ = json.Unmarshal(w.Body.Bytes(), &eb)
	return resp{status: w.Code, body: w.Body.String(), replayed: w.Header().Get(protocol.ReplayedHeader) == "true",
		code: eb.Error, retryAfter: w.Header().Get("Retry-After")}
}

func (r *rig) post(t *testing.T, taskID, body string) resp {
	t.Helper()
	return r.do(t, context.Background(), taskID, body)
}

const (
	plain = `{"task":"count","input":{}}`
	other = `{"task":"count","input":{"note":"different"}}`
)

func expect(t *testing.T, step string, got resp, status int, code protocol.Code, replayed bool) {
	t.Helper()
	if got.status != status || got.code != code || got.replayed != replayed {
		t.Fatalf("%s: got %d %q replayed=%v, want %d %q replayed=%v: %s",
			step, got.status, got.code, got.replayed, status, code, replayed, got.body)
	}
}

// TestBehaviour runs every idempotency rule of docs/protocol.md on every
// engine.
func TestBehaviour(t *testing.T) {
	cases := []struct {
		name string
		fn   func(t *testing.T, st store.Store)
	}{
		{"completed repeat replays stored status and body", testReplay},
		{"insignificant whitespace is the same request", testWhitespace},
		{"different body under the same id is refused", testReused},
		{"repeat while in progress is refused", testInProgress},
		{"5xx deletes the record so a retry runs again", testFailureReleases},
		{"429 is not recorded", testRateLimitedReleases},
		{"4xx is recorded and replayed", testClientErrorRecorded},
		{"dead holder is taken over after its deadline", testTakeover},
		{"no deadline holds for the default hold", testDefaultHold},
		{"records expire after 24 h", testExpiry},
		{"task id length", testTaskIDLength},
		{"no task id runs every time", testNoTaskID},
		{"ids are scoped per agent and per id", testScopes},
		{"a response too large to store releases the id", testUnstorable},
		{"record item follows the documented key pattern", testRecordItem},
		{"fenced claims: a taken-over holder with the same request cannot complete or delete", testFencedClaims},
		{"calls per request", testCalls},
	}
	for _, s := range stores.All(local) {
		t.Run(s.Name, func(t *testing.T) {
			t.Parallel()
			for _, c := range cases {
				t.Run(c.name, func(t *testing.T) {
					t.Parallel()
					c.fn(t, s.Open(t))
				})
			}
		})
	}
}

func testReplay(t *testing.T, st store.Store) {
	r := newRig(t, st)
	first := r.post(t, "task-1", plain)
	expect(t, "first", first, 200, "", false)
	for i := range 3 {
		again := r.post(t, "task-1", plain)
		expect(t, fmt.Sprintf("repeat %d", i), again, 200, "", true)
		if again.body != first.body {
			t.Fatalf("replayed body %s, want the stored %s", again.body, first.body)
		}
	}
	if n := r.runs.Load(); n != 1 {
		t.Fatalf("ran %d times, want 1", n)
	}
}

func testWhitespace(t *testing.T, st store.Store) {
	r := newRig(t, st)
	expect(t, "first", r.post(t, "task-1", `{"task":"count","input":{"note":"x"}}`), 200, "", false)
	expect(t, "spaced", r.post(t, "task-1", "{ \"task\" : \"count\",\n \"input\" : { \"note\" : \"x\" } }"), 200, "", true)
}

func testReused(t *testing.T, st store.Store) {
	r := newRig(t, st)
	expect(t, "first", r.post(t, "task-1", plain), 200, "", false)
	expect(t, "other body", r.post(t, "task-1", other), 409, protocol.IdempotencyKeyReused, false)
	expect(t, "original again", r.post(t, "task-1", plain), 200, "", true)
	if n := r.runs.Load(); n != 1 {
		t.Fatalf("ran %d times, want 1", n)
	}
}

func testInProgress(t *testing.T, st store.Store) {
	r := newRig(t, st)
	done := r.hold(t, context.Background(), "task-1", plain)
	busy := r.post(t, "task-1", plain)
	expect(t, "same body while running", busy, 409, protocol.RequestInProgress, false)
	if busy.retryAfter == "" {
		t.Errorf("409 request_in_progress without Retry-After")
	}
	expect(t, "other body while running", r.post(t, "task-1", other), 409, protocol.IdempotencyKeyReused, false)
	close(r.release)
	first := <-done
	expect(t, "holder", first, 200, "", false)
	again := r.post(t, "task-1", plain)
	expect(t, "after completion", again, 200, "", true)
	if again.body != first.body || r.runs.Load() != 1 {
		t.Fatalf("replay %s after %d runs, want %s after 1", again.body, r.runs.Load(), first.body)
	}
}

func testFailureReleases(t *testing.T, st store.Store) {
	for _, status := range []int{500, 502} {
		r := newRig(t, st)
		id := fmt.Sprintf("task-%d", status)
		body := fmt.Sprintf(`{"task":"count","input":{"fail":%d}}`, status)
		first := r.post(t, id, body)
		if first.status != status {
			t.Fatalf("first: %d %s", first.status, first.body)
		}
		if strings.Contains(first.body, "secret") {
			t.Fatalf("internal error text reached the client: %s", first.body)
		}
		second := r.post(t, id, body)
		if second.status != status || second.replayed {
			t.Fatalf("retry after %d: %d replayed=%v", status, second.status, second.replayed)
		}
		if n := r.runs.Load(); n != 2 {
			t.Fatalf("after a %d the retry did not run again: %d runs", status, n)
		}
		// A failed id is free for any request, not only the same one.
		expect(t, "different body after failure", r.post(t, id, plain), 200, "", false)
	}
}

func testRateLimitedReleases(t *testing.T, st store.Store) {
	r := newRig(t, st)
	body := `{"task":"count","input":{"fail":429}}`
	expect(t, "first", r.post(t, "task-1", body), 429, protocol.RateLimited, false)
	expect(t, "retry", r.post(t, "task-1", body), 429, protocol.RateLimited, false)
	if n := r.runs.Load(); n != 2 {
		t.Fatalf("ran %d times, want 2", n)
	}
}

func testClientErrorRecorded(t *testing.T, st store.Store) {
	r := newRig(t, st)
	body := `{"task":"count","input":{"fail":400}}`
	first := r.post(t, "task-1", body)
	expect(t, "first", first, 400, protocol.InvalidInput, false)
	again := r.post(t, "task-1", body)
	expect(t, "repeat", again, 400, protocol.InvalidInput, true)
	if again.body != first.body || r.runs.Load() != 1 {
		t.Fatalf("400 not replayed: %s, %d runs", again.body, r.runs.Load())
	}
}

// testTakeover: a holder whose deadline passes without finishing is
// presumed dead (its Lambda was killed); the next request takes the id
// over. The deadline comes from the holder's context.
func testTakeover(t *testing.T, st store.Store) {
	r := newRig(t, st)
	deadline := r.clock.Now().Add(time.Hour)
	ctx, cancel := context.WithDeadline(context.Background(), deadline)
	defer cancel()
	done := r.hold(t, ctx, "task-1", plain)

	// The same request is refused as in progress until the deadline...
	r.clock.Advance(time.Hour - time.Millisecond)
	expect(t, "just before the holder's deadline", r.post(t, "task-1", plain), 409, protocol.RequestInProgress, false)
	// ...and taken over at it.
	r.clock.Advance(time.Millisecond)
	taker := r.post(t, "task-1", plain)
	expect(t, "at the holder's deadline", taker, 200, "", false)
	if n := r.runs.Load(); n != 2 {
		t.Fatalf("%d runs, want 2 (the dead holder and the taker)", n)
	}
	// The old holder wakes up late: its result is not recorded over the
	// taker's, and the id keeps replaying the taker's response.
	close(r.release)
	expect(t, "late holder", <-done, 200, "", false)
	again := r.post(t, "task-1", plain)
	expect(t, "after takeover", again, 200, "", true)
	if again.body != taker.body {
		t.Fatalf("replayed %s, want the taker's %s", again.body, taker.body)
	}
}

func testDefaultHold(t *testing.T, st store.Store) {
	r := newRig(t, st, idempotency.WithDefaultHold(10*time.Second))
	done := r.hold(t, context.Background(), "task-1", plain) // no deadline
	r.clock.Advance(10*time.Second - time.Millisecond)
	expect(t, "within the hold", r.post(t, "task-1", plain), 409, protocol.RequestInProgress, false)
	r.clock.Advance(time.Millisecond)
	expect(t, "after the hold", r.post(t, "task-1", plain), 200, "", false)
	close(r.release)
	<-done
}

func testExpiry(t *testing.T, st store.Store) {
	r := newRig(t, st)
	expect(t, "first", r.post(t, "task-1", plain), 200, "", false)
	r.clock.Advance(idempotency.DefaultTTL - time.Second)
	expect(t, "a second before 24 h", r.post(t, "task-1", plain), 200, "", true)
	r.clock.Advance(time.Second)
	expect(t, "at 24 h", r.post(t, "task-1", plain), 200, "", false)
	if n := r.runs.Load(); n != 2 {
		t.Fatalf("%d runs, want 2", n)
	}
	// A shorter TTL is configurable.
	r2 := newRig(t, st, idempotency.WithTTL(time.Minute))
	expect(t, "short ttl first", r2.post(t, "task-2", plain), 200, "", false)
	r2.clock.Advance(time.Minute)
	expect(t, "short ttl expired", r2.post(t, "task-2", plain), 200, "", false)
}

func testTaskIDLength(t *testing.T, st store.Store) {
	r := newRig(t, st)
	expect(t, "256 characters", r.post(t, strings.Repeat("x", 256), plain), 400, protocol.InvalidInput, false)
	expect(t, "255 characters", r.post(t, strings.Repeat("x", 255), plain), 200, "", false)
	expect(t, "255 characters again", r.post(t, strings.Repeat("x", 255), plain), 200, "", true)
	if n := r.runs.Load(); n != 1 {
		t.Fatalf("%d runs, want 1", n)
	}
}

func testNoTaskID(t *testing.T, st store.Store) {
	r := newRig(t, st)
	expect(t, "first", r.post(t, "", plain), 200, "", false)
	expect(t, "second", r.post(t, "", plain), 200, "", false)
	if n := r.runs.Load(); n != 2 {
		t.Fatalf("%d runs, want 2", n)
	}
}

func testScopes(t *testing.T, st store.Store) {
	r := newRig(t, st)
	expect(t, "a", r.post(t, "task-a", plain), 200, "", false)
	expect(t, "b", r.post(t, "task-b", plain), 200, "", false)
	// Another agent on the same store has its own ids, and separators
	// inside agent or id cannot make two pairs collide.
	for _, pair := range [][2]string{{"other-agent", "task-a"}, {"test-agent#KEY", "task-a"}, {"test-agent", "KEY#task-a"}} {
		g := idempotency.New(st)
		p := protocol.NewProvider(pair[0], protocol.WithIdempotency(g), protocol.WithLogger(logging.Discard()))
		p.HandleFunc("count", func(context.Context, json.RawMessage) (any, error) { return map[string]int{}, nil })
		req := httptest.NewRequest(http.MethodPost, "/invoke", strings.NewReader(plain))
		req.Header.Set("Content-Type", "application/json")
		req.Header.Set(protocol.TaskIDHeader, pair[1])
		w := httptest.NewRecorder()
		p.ServeHTTP(w, req)
		if w.Code != 200 || w.Header().Get(protocol.ReplayedHeader) != "" {
			t.Fatalf("agent %q, id %q: %d replayed=%q", pair[0], pair[1], w.Code, w.Header().Get(protocol.ReplayedHeader))
		}
	}
}

// testUnstorable: a response over DynamoDB's item size cannot be recorded;
// the guard releases the id instead of leaving it in progress, so a retry
// runs again at once rather than getting 409 until the holder's deadline.
func testUnstorable(t *testing.T, st store.Store) {
	r := newRig(t, st)
	body := fmt.Sprintf(`{"task":"count","input":{"big":%d}}`, store.MaxItemBytes)
	expect(t, "first", r.post(t, "task-big", body), 200, "", false)
	expect(t, "retry", r.post(t, "task-big", body), 200, "", false)
	if n := r.runs.Load(); n != 2 {
		t.Fatalf("%d runs, want 2", n)
	}
}

// testRecordItem reads the stored item through the item API: docs/storage.md's
// key-pattern table is what is on disk.
func testRecordItem(t *testing.T, st store.Store) {
	r := newRig(t, st)
	done := r.hold(t, context.Background(), "task-1", plain)
	it, err := st.Get(context.Background(), store.Key{PK: "IDEM#test-agent", SK: "KEY#task-1"})
	if err != nil {
		t.Fatal(err)
	}
	rec, err := idempotency.Decode(it)
	if err != nil {
		t.Fatal(err)
	}
	now := r.clock.Now()
	if it.Str("type") != idempotency.TypeRecord || rec.State != idempotency.InProgress || len(rec.Token) != 32 ||
		!rec.Expires.Equal(now.Add(idempotency.DefaultTTL)) || !rec.HoldUntil.Equal(now.Add(idempotency.DefaultHold)) {
		t.Fatalf("in-progress record %+v (type %q)", rec, it.Str("type"))
	}
	// The sweeper's attribute: epoch seconds, rounded up so that it never
	// deletes a record before it expires.
	ttl, err := it.Int(store.AttrExpiresAt)
	if exp := rec.Expires; err != nil || time.Unix(ttl, 0).Before(exp) || !time.Unix(ttl, 0).Before(exp.Add(time.Second)) {
		t.Fatalf("expiresAt %d (%v) for a record expiring at %s", ttl, err, exp)
	}
	close(r.release)
	first := <-done
	it, err = st.Get(context.Background(), idempotency.Key("test-agent", "task-1"))
	if err != nil {
		t.Fatal(err)
	}
	done2, err := idempotency.Decode(it)
	if err != nil || done2.State != idempotency.Completed || done2.Status != 200 || string(done2.Body) != first.body || done2.Token != rec.Token {
		t.Fatalf("completed record %+v (%v)", done2, err)
	}
}

// testFencedClaims is the claim-token conformance case: the
// holder's claim is taken over by a retry of the SAME request (same hash),
// so only the token tells them apart. The late holder's Commit and Abort
// change nothing; the heir's record stays intact and is the one replayed.
func testFencedClaims(t *testing.T, st store.Store) {
	ctx := context.Background()
	c := newClock()
	g := idempotency.New(st, idempotency.WithClock(c.Now))
	key := protocol.TaskKey{Agent: "agent", TaskID: "task-1", RequestHash: "same-hash"}
	holderCtx, cancel := context.WithDeadline(ctx, c.Now().Add(time.Minute))
	defer cancel()

	holder, rec, err := g.Begin(holderCtx, key)
	if err != nil || rec != nil || holder.Token == "" {
		t.Fatalf("holder's Begin: claim %+v, replay %v, %v", holder, rec, err)
	}
	c.Advance(time.Minute) // the holder is presumed dead
	heir, rec, err := g.Begin(ctx, key)
	if err != nil || rec != nil || heir.Token == "" || heir.Token == holder.Token {
		t.Fatalf("heir's Begin: claim %+v (holder's token %q), replay %v, %v", heir, holder.Token, rec, err)
	}
	read := func() idempotency.Record {
		t.Helper()
		it, err := st.Get(ctx, idempotency.Key("agent", "task-1"))
		if err != nil {
			t.Fatal(err)
		}
		r, err := idempotency.Decode(it)
		if err != nil {
			t.Fatal(err)
		}
		return r
	}
	heirs := read()

	// The holder wakes up late and tries to complete, then to release.
	err = g.Commit(ctx, holder, protocol.Recorded{Status: 200, Body: []byte("late holder")})
	if !errors.Is(err, idempotency.ErrClaimLost) {
		t.Fatalf("late holder's Commit: %v, want ErrClaimLost", err)
	}
	if got := read(); got.State != idempotency.InProgress || got.Token != heirs.Token || got.Body != nil {
		t.Fatalf("record after the late Commit: %+v, want the heir's in-progress record", got)
	}
	err = g.Abort(ctx, holder)
	if !errors.Is(err, idempotency.ErrClaimLost) {
		t.Fatalf("late holder's Abort: %v, want ErrClaimLost", err)
	}
	if got := read(); got.State != idempotency.InProgress || got.Token != heirs.Token {
		t.Fatalf("record after the late Abort: %+v, want the heir's in-progress record", got)
	}
	// A repeat still sees the heir running.
	if _, _, err := g.Begin(ctx, key); !isCode(err, protocol.RequestInProgress) {
		t.Fatalf("repeat while the heir runs: %v, want request_in_progress", err)
	}
	// The heir completes; the holder's Abort after that changes nothing
	// either, and the heir's response is the one replayed.
	if err := g.Commit(ctx, heir, protocol.Recorded{Status: 201, Body: []byte("heir")}); err != nil {
		t.Fatalf("heir's Commit: %v", err)
	}
	if err := g.Abort(ctx, holder); !errors.Is(err, idempotency.ErrClaimLost) {
		t.Fatalf("late holder's Abort after the heir's Commit: %v, want ErrClaimLost", err)
	}
	if err := g.Commit(ctx, heir, protocol.Recorded{Status: 500, Body: []byte("twice")}); !errors.Is(err, idempotency.ErrClaimLost) {
		t.Fatalf("second Commit: %v, want ErrClaimLost", err)
	}
	_, rec, err = g.Begin(ctx, key)
	if err != nil || rec == nil || rec.Status != 201 || string(rec.Body) != "heir" {
		t.Fatalf("replay after all that: %+v, %v; want the heir's 201", rec, err)
	}
}

func isCode(err error, code protocol.Code) bool {
	var pe *protocol.Error
	return errors.As(err, &pe) && pe.Code == code
}

// testCalls pins the item API calls per request (gets, queries, writes),
// the same on every engine: first run = Get + claim + commit; replay = Get;
// a failure = Get + claim + release.
func testCalls(t *testing.T, st store.Store) {
	c := &storetest.Counting{Store: st}
	r := newRig(t, c)
	steps := []struct {
		name, id, body string
		want           [3]int64
	}{
		{"first", "task-1", plain, [3]int64{1, 0, 2}},
		{"replay", "task-1", plain, [3]int64{1, 0, 0}},
		{"reused", "task-1", other, [3]int64{1, 0, 0}},
		{"failure", "task-2", `{"task":"count","input":{"fail":502}}`, [3]int64{1, 0, 2}},
		{"no task id", "", plain, [3]int64{0, 0, 0}},
	}
	for _, s := range steps {
		r.post(t, s.id, s.body)
		if got := c.Take(); got != s.want {
			t.Errorf("%s: [gets queries writes] = %v, want %v", s.name, got, s.want)
		}
	}
}

// TestConcurrentClaims sends 50 identical requests at once: exactly one runs,
// every other one gets its response replayed or 409 request_in_progress.
func TestConcurrentClaims(t *testing.T) {
	for _, s := range stores.All(local) {
		t.Run(s.Name, func(t *testing.T) {
			t.Parallel()
			r := newRig(t, s.Open(t))
			const n = 50
			var (
				wg    sync.WaitGroup
				start = make(chan struct{})
				out   = make([]resp, n)
			)
			for i := range n {
				wg.Go(func() {
					<-start
					out[i] = r.post(t, "same-task", plain)
				})
			}
			close(start)
			wg.Wait()
			var ok, replayed, busy int
			var body string
			for _, o := range out {
				switch {
				case o.status == 200 && !o.replayed:
					ok++
					body = o.body
				case o.status == 200:
					replayed++
				case o.status == 409 && o.code == protocol.RequestInProgress:
					busy++
				default:
					t.Errorf("unexpected response %d %s", o.status, o.body)
				}
			}
			for _, o := range out {
				if o.status == 200 && o.body != body {
					t.Errorf("200 bodies differ: %s vs %s", o.body, body)
				}
			}
			if ok != 1 || r.runs.Load() != 1 {
				t.Fatalf("%d fresh 200s and %d runs, want exactly 1", ok, r.runs.Load())
			}
			t.Logf("%s: 1 run, %d replayed, %d request_in_progress", s.Name, replayed, busy)
		})
	}
}

// TestConcurrentClaimRace races 50 Begins of one key with distinct request
// hashes at the store level, on every engine: exactly one claims, and each
// loser is answered from the winner's record (in progress or completed).
func TestConcurrentClaimRace(t *testing.T) {
	for _, s := range stores.All(local) {
		t.Run(s.Name, func(t *testing.T) {
			t.Parallel()
			g := idempotency.New(s.Open(t))
			const n = 50
			type result struct {
				claim protocol.Claim
				rec   *protocol.Recorded
				err   error
			}
			results := make([]result, n)
			start := make(chan struct{})
			var wg sync.WaitGroup
			for i := range n {
				wg.Go(func() {
					<-start
					key := protocol.TaskKey{Agent: "agent", TaskID: "race", RequestHash: fmt.Sprintf("h%02d", i)}
					c, rec, err := g.Begin(context.Background(), key)
					if err == nil && rec == nil {
						err = g.Commit(context.Background(), c, protocol.Recorded{Status: 200, Body: []byte("winner " + key.RequestHash)})
						if err != nil {
							err = fmt.Errorf("winner's commit: %w", err)
						}
					}
					results[i] = result{c, rec, err}
				})
			}
			close(start)
			wg.Wait()
			winner := ""
			for _, r := range results {
				if r.err == nil && r.rec == nil {
					if winner != "" {
						t.Fatalf("two claims won: %s and %s", winner, r.claim.RequestHash)
					}
					winner = r.claim.RequestHash
				}
			}
			if winner == "" {
				t.Fatalf("no claim won; first error: %v", results[0].err)
			}
			for i, r := range results {
				if r.claim.RequestHash == winner {
					continue
				}
				// Every loser has another hash: it must be told so.
				if !isCode(r.err, protocol.IdempotencyKeyReused) {
					t.Fatalf("loser %d: %+v %v, want idempotency_key_reused", i, r.rec, r.err)
				}
			}
			_, rec, err := g.Begin(context.Background(), protocol.TaskKey{Agent: "agent", TaskID: "race", RequestHash: winner})
			if err != nil || rec == nil || string(rec.Body) != "winner "+winner {
				t.Fatalf("winner's replay: %+v %v", rec, err)
			}
		})
	}
}

// failing is a store whose every operation fails with err.
type failing struct {
	store.Store
	getErr, writeErr error
}

func (f failing) Get(context.Context, store.Key) (store.Item, error) { return nil, f.getErr }
func (f failing) Write(context.Context, ...store.Action) ([]store.Item, error) {
	return nil, f.writeErr
}

var errDown = errors.New("dynamodb: connection refused to 10.0.0.7")

// TestStoreFailure: a store that is down is a 500 without its text; one that
// is overloaded (or a context that ran out) is a 503 with Retry-After. The
// capability never runs without a claim.
func TestStoreFailure(t *testing.T) {
	busy := fmt.Errorf("dynamo: throttled: %w", store.ErrUnavailable)
	cases := []struct {
		name   string
		st     failing
		status int
		code   protocol.Code
	}{
		{"read fails", failing{getErr: errDown}, 500, protocol.Internal},
		{"claim fails", failing{getErr: store.ErrNotFound, writeErr: errDown}, 500, protocol.Internal},
		{"read unavailable", failing{getErr: busy}, 503, protocol.Unavailable},
		{"claim unavailable", failing{getErr: store.ErrNotFound, writeErr: busy}, 503, protocol.Unavailable},
		{"read timed out", failing{getErr: fmt.Errorf("get: %w", context.DeadlineExceeded)}, 503, protocol.Unavailable},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			c.st.Store = memory.New()
			r := newRig(t, c.st)
			got := r.post(t, "task-1", plain)
			expect(t, "store down", got, c.status, c.code, false)
			if strings.Contains(got.body, "10.0.0.7") || strings.Contains(got.body, "dynamo") || strings.Contains(got.body, "throttled") {
				t.Fatalf("store error text reached the client: %s", got.body)
			}
			if c.status == 503 && got.retryAfter == "" {
				t.Fatalf("503 without Retry-After")
			}
			if r.runs.Load() != 0 {
				t.Fatal("the capability ran without a claim")
			}
		})
	}
}

// blindRead hides every record from Get, so that each request goes on to
// the claim and meets the record there: the race between read and claim.
type blindRead struct{ store.Store }

func (blindRead) Get(context.Context, store.Key) (store.Item, error) {
	return nil, store.ErrNotFound
}

func TestClaimRace(t *testing.T) {
	for _, s := range stores.All(local) {
		t.Run(s.Name, func(t *testing.T) {
			t.Parallel()
			r := newRig(t, blindRead{s.Open(t)})
			done := r.hold(t, context.Background(), "task-1", plain)
			expect(t, "claim meets in-progress record", r.post(t, "task-1", plain), 409, protocol.RequestInProgress, false)
			expect(t, "claim meets other body", r.post(t, "task-1", other), 409, protocol.IdempotencyKeyReused, false)
			close(r.release)
			first := <-done
			again := r.post(t, "task-1", plain)
			expect(t, "claim meets completed record", again, 200, "", true)
			if again.body != first.body {
				t.Fatalf("replayed %s, want %s", again.body, first.body)
			}
			// A dead record met at the claim is taken over there.
			r.clock.Advance(idempotency.DefaultTTL)
			expect(t, "claim over an expired record", r.post(t, "task-1", other), 200, "", false)
		})
	}
}

func TestInvalidTaskID(t *testing.T) {
	r := newRig(t, memory.New())
	expect(t, "not UTF-8", r.post(t, "task-\xff", plain), 400, protocol.InvalidInput, false)
}

func TestNoTimeLeft(t *testing.T) {
	r := newRig(t, memory.New())
	ctx, cancel := context.WithDeadline(context.Background(), r.clock.Now().Add(-time.Second))
	defer cancel()
	got := r.do(t, ctx, "task-1", plain)
	expect(t, "deadline passed", got, 503, protocol.Unavailable, false)
	if r.runs.Load() != 0 {
		t.Fatal("ran with no time left")
	}
	// Nothing was claimed, so the retry runs.
	expect(t, "retry", r.post(t, "task-1", plain), 200, "", false)
}
