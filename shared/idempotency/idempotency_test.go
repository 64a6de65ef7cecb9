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

func newRig(t *testing.T, st idempotency.Store, opts ...idempotency.Option) *rig {
	r := &rig{clock: newClock(), started: make(chan struct{}, 10), release: make(chan struct{})}
	g := idempotency.New(st, append([]idempotency.Option{idempotency.WithClock(r.clock.Now)}, opts...)...)
	p := protocol.NewProvider("test-agent", protocol.WithIdempotency(g), protocol.WithLogger(logging.Discard()))
	protocol.Handle(p, "count", func(ctx context.Context, in countInput) (map[string]int64, error) {
		n := r.runs.Add(1)
		if r.holdNext.CompareAndSwap(true, false) {
			r.started <- struct{}{}
			<-r.release
		}
		switch in.Fail {
		case 0:
			return map[string]int64{"run": n}, nil
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
	status   int
	body     string
	replayed bool
	code     protocol.Code
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
	return resp{status: w.Code, body: w.Body.String(), replayed: w.Header().Get(protocol.ReplayedHeader) == "true", code: eb.Error}
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

// TestBehaviour runs every idempotency rule of DESIGN §3 on every store.
func TestBehaviour(t *testing.T) {
	cases := []struct {
		name string
		fn   func(t *testing.T, st idempotency.Store)
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

func testReplay(t *testing.T, st idempotency.Store) {
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

func testWhitespace(t *testing.T, st idempotency.Store) {
	r := newRig(t, st)
	expect(t, "first", r.post(t, "task-1", `{"task":"count","input":{"note":"x"}}`), 200, "", false)
	expect(t, "spaced", r.post(t, "task-1", "{ \"task\" : \"count\",\n \"input\" : { \"note\" : \"x\" } }"), 200, "", true)
}

func testReused(t *testing.T, st idempotency.Store) {
	r := newRig(t, st)
	expect(t, "first", r.post(t, "task-1", plain), 200, "", false)
	expect(t, "other body", r.post(t, "task-1", other), 409, protocol.IdempotencyKeyReused, false)
	expect(t, "original again", r.post(t, "task-1", plain), 200, "", true)
	if n := r.runs.Load(); n != 1 {
		t.Fatalf("ran %d times, want 1", n)
	}
}

func testInProgress(t *testing.T, st idempotency.Store) {
	r := newRig(t, st)
	done := r.hold(t, context.Background(), "task-1", plain)
	expect(t, "same body while running", r.post(t, "task-1", plain), 409, protocol.RequestInProgress, false)
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

func testFailureReleases(t *testing.T, st idempotency.Store) {
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

func testRateLimitedReleases(t *testing.T, st idempotency.Store) {
	r := newRig(t, st)
	body := `{"task":"count","input":{"fail":429}}`
	expect(t, "first", r.post(t, "task-1", body), 429, protocol.RateLimited, false)
	expect(t, "retry", r.post(t, "task-1", body), 429, protocol.RateLimited, false)
	if n := r.runs.Load(); n != 2 {
		t.Fatalf("ran %d times, want 2", n)
	}
}

func testClientErrorRecorded(t *testing.T, st idempotency.Store) {
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
func testTakeover(t *testing.T, st idempotency.Store) {
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

func testDefaultHold(t *testing.T, st idempotency.Store) {
	r := newRig(t, st, idempotency.WithDefaultHold(10*time.Second))
	done := r.hold(t, context.Background(), "task-1", plain) // no deadline
	r.clock.Advance(10*time.Second - time.Millisecond)
	expect(t, "within the hold", r.post(t, "task-1", plain), 409, protocol.RequestInProgress, false)
	r.clock.Advance(time.Millisecond)
	expect(t, "after the hold", r.post(t, "task-1", plain), 200, "", false)
	close(r.release)
	<-done
}

func testExpiry(t *testing.T, st idempotency.Store) {
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

func testTaskIDLength(t *testing.T, st idempotency.Store) {
	r := newRig(t, st)
	expect(t, "256 characters", r.post(t, strings.Repeat("x", 256), plain), 400, protocol.InvalidInput, false)
	expect(t, "255 characters", r.post(t, strings.Repeat("x", 255), plain), 200, "", false)
	expect(t, "255 characters again", r.post(t, strings.Repeat("x", 255), plain), 200, "", true)
	if n := r.runs.Load(); n != 1 {
		t.Fatalf("%d runs, want 1", n)
	}
}

func testNoTaskID(t *testing.T, st idempotency.Store) {
	r := newRig(t, st)
	expect(t, "first", r.post(t, "", plain), 200, "", false)
	expect(t, "second", r.post(t, "", plain), 200, "", false)
	if n := r.runs.Load(); n != 2 {
		t.Fatalf("%d runs, want 2", n)
	}
}

func testScopes(t *testing.T, st idempotency.Store) {
	r := newRig(t, st)
	expect(t, "a", r.post(t, "task-a", plain), 200, "", false)
	expect(t, "b", r.post(t, "task-b", plain), 200, "", false)
	// Another agent on the same store has its own ids.
	g := idempotency.New(st)
	p := protocol.NewProvider("other-agent", protocol.WithIdempotency(g), protocol.WithLogger(logging.Discard()))
	p.HandleFunc("count", func(context.Context, json.RawMessage) (any, error) { return map[string]int{}, nil })
	req := httptest.NewRequest(http.MethodPost, "/invoke", strings.NewReader(plain))
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set(protocol.TaskIDHeader, "task-a")
	w := httptest.NewRecorder()
	p.ServeHTTP(w, req)
	if w.Code != 200 || w.Header().Get(protocol.ReplayedHeader) != "" {
		t.Fatalf("other agent, same id: %d replayed=%q", w.Code, w.Header().Get(protocol.ReplayedHeader))
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

// failing is a store whose every operation fails.
type failing struct{}

var errDown = errors.New("dynamodb: connection refused to 10.0.0.7")

func (failing) GetIdem(context.Context, string, string, time.Time) (store.IdemRecord, error) {
	return store.IdemRecord{}, errDown
}
func (failing) ClaimIdem(context.Context, store.IdemRecord, time.Time) (store.IdemRecord, error) {
	return store.IdemRecord{}, errDown
}
func (failing) CompleteIdem(context.Context, string, string, string, int, []byte) error {
	return errDown
}
func (failing) DeleteIdem(context.Context, string, string, string) error { return errDown }

// claimFails reads fine (nothing there) but cannot write.
type claimFails struct{ failing }

func (claimFails) GetIdem(context.Context, string, string, time.Time) (store.IdemRecord, error) {
	return store.IdemRecord{}, store.ErrNotFound
}

func TestStoreFailure(t *testing.T) {
	for name, st := range map[string]idempotency.Store{"read fails": failing{}, "claim fails": claimFails{}} {
		t.Run(name, func(t *testing.T) {
			r := newRig(t, st)
			got := r.post(t, "task-1", plain)
			expect(t, "store down", got, 500, protocol.Internal, false)
			if strings.Contains(got.body, "10.0.0.7") || strings.Contains(got.body, "dynamodb") {
				t.Fatalf("store error text reached the client: %s", got.body)
			}
			if r.runs.Load() != 0 {
				t.Fatal("the capability ran without a claim")
			}
		})
	}
}

// blindRead hides every record from GetIdem, so that each request goes on
// to ClaimIdem and meets the record there: the race between read and claim.
type blindRead struct{ idempotency.Store }

func (blindRead) GetIdem(context.Context, string, string, time.Time) (store.IdemRecord, error) {
	return store.IdemRecord{}, store.ErrNotFound
}

func TestClaimRace(t *testing.T) {
	r := newRig(t, blindRead{memory.New()})
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
