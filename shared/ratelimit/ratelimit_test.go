package ratelimit_test

import (
	"context"
	"maps"
	"os"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/a2awire/a2awire/shared/apierror"
	"github.com/a2awire/a2awire/shared/auth"
	"github.com/a2awire/a2awire/shared/httperr"
	"github.com/a2awire/a2awire/shared/ratelimit"
	"github.com/a2awire/a2awire/shared/store"
	"github.com/a2awire/a2awire/shared/store/dynamo"
	"github.com/a2awire/a2awire/shared/store/dynamo/capacity"
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

const lobby = "lobby"

// Agents: well-formed awnIds.
var (
	agentA = auth.AWNIDPrefix + strings.Repeat("a", 64)
	agentB = auth.AWNIDPrefix + strings.Repeat("b", 64)
)

// t0 is 10 s into a minute.
var t0 = time.Date(2026, 12, 1, 7, 0, 10, 0, time.UTC)

// clock is a settable clock.
type clock struct {
	mu  sync.Mutex
	now time.Time
}

func (c *clock) Now() time.Time { c.mu.Lock(); defer c.mu.Unlock(); return c.now }
func (c *clock) Set(t time.Time) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.now = t
}

func everyEngine(t *testing.T, f func(t *testing.T, st store.Store)) {
	for _, e := range stores.All(local) {
		t.Run(e.Name, func(t *testing.T) { f(t, e.Open(t)) })
	}
}

// allowed makes n calls and returns how many were allowed; every refusal
// must be RateLimited (Errorf, not Fatalf: it also runs in goroutines).
func allowed(t *testing.T, l *ratelimit.Limiter, awnID string, op ratelimit.Op, n int) int {
	t.Helper()
	ok := 0
	for range n {
		err := l.Allow(context.Background(), lobby, awnID, op)
		switch {
		case err == nil:
			ok++
		case apierror.KindOf(err) != apierror.RateLimited:
			t.Errorf("Allow: %v, want nil or RateLimited", err)
			return ok
		}
	}
	return ok
}

func TestDefaultLimits(t *testing.T) {
	want := ratelimit.Limits{"send": 30, "read": 60, "agents": 120, "ping": 30, "actions": 60, "join": 300}
	if got := ratelimit.DefaultLimits(); !maps.Equal(got, want) {
		t.Fatalf("DefaultLimits() = %v, want %v", got, want)
	}
}

func TestLimitsFromEnv(t *testing.T) {
	env := func(m map[string]string) func(string) string { return func(k string) string { return m[k] } }
	got, err := ratelimit.LimitsFromEnv(env(nil))
	if err != nil || !maps.Equal(got, ratelimit.DefaultLimits()) {
		t.Fatalf("empty environment: %v, %v; want the defaults", got, err)
	}
	got, err = ratelimit.LimitsFromEnv(env(map[string]string{
		"RATE_LIMIT_SEND": "5", "RATE_LIMIT_READ": " 7 ", "RATE_LIMIT_AGENTS": "1",
		"RATE_LIMIT_PING": "1000000", "RATE_LIMIT_ACTIONS": "", "RATE_LIMIT_JOIN": "9",
	}))
	want := ratelimit.Limits{"send": 5, "read": 7, "agents": 1, "ping": 1000000, "actions": 60, "join": 9}
	if err != nil || !maps.Equal(got, want) {
		t.Fatalf("LimitsFromEnv = %v, %v; want %v", got, err, want)
	}
	for _, bad := range []string{"0", "-3", "ten", "1.5", "9999999999999999999999", "5/min"} {
		for _, name := range []string{"RATE_LIMIT_SEND", "RATE_LIMIT_READ", "RATE_LIMIT_AGENTS", "RATE_LIMIT_PING", "RATE_LIMIT_ACTIONS"} {
			_, err := ratelimit.LimitsFromEnv(env(map[string]string{name: bad}))
			if err == nil || !strings.Contains(err.Error(), name) {
				t.Fatalf("%s=%q: error %v, want one naming %s", name, bad, err, name)
			}
		}
	}
}

func TestAllowWindow(t *testing.T) {
	everyEngine(t, func(t *testing.T, st store.Store) {
		c := &clock{now: t0}
		l := ratelimit.New(st, ratelimit.Limits{ratelimit.Send: 3}, ratelimit.WithClock(c.Now))
		if l.Limit(ratelimit.Send) != 3 || l.Limit(ratelimit.Read) != 60 {
			t.Fatalf("limits send %d read %d, want 3 and the default 60", l.Limit(ratelimit.Send), l.Limit(ratelimit.Read))
		}
		if n := allowed(t, l, agentA, ratelimit.Send, 3); n != 3 {
			t.Fatalf("%d of the first 3 sends allowed", n)
		}
		c.Set(t0.Add(20*time.Second + 300*time.Millisecond)) // 30.3 s into the minute
		err := l.Allow(context.Background(), lobby, agentA, ratelimit.Send)
		if apierror.KindOf(err) != apierror.RateLimited {
			t.Fatalf("the 4th send: %v, want RateLimited", err)
		}
		e := apierror.From(err)
		if e.RetryAfter != 29700*time.Millisecond {
			t.Fatalf("RetryAfter %v, want 29.7s (until the minute ends)", e.RetryAfter)
		}
		if !strings.Contains(e.Message, "3") || !strings.Contains(e.Message, "send") || !strings.Contains(e.Message, "per minute") {
			t.Fatalf("message %q should name the op and its limit", e.Message)
		}
		if httperr.WorldCode(e) != "RATE_LIMITED" || httperr.Status(e.Kind) != 429 {
			t.Fatalf("code %s status %d", httperr.WorldCode(e), httperr.Status(e.Kind))
		}
		// Other ops, agents and worlds have their own counts.
		if n := allowed(t, l, agentA, ratelimit.Read, 5); n != 5 {
			t.Fatalf("reads allowed %d, want 5: send's count must not touch read", n)
		}
		if n := allowed(t, l, agentB, ratelimit.Send, 4); n != 3 {
			t.Fatalf("another agent's sends allowed %d of 4, want 3", n)
		}
		if err := l.Allow(context.Background(), "other-world", agentA, ratelimit.Send); err != nil {
			t.Fatalf("the same agent in another world: %v", err)
		}
		// The last instant of the minute is still refused; the next
		// minute starts afresh.
		c.Set(time.Date(2026, 12, 1, 7, 0, 59, 999_999_999, time.UTC))
		if n := allowed(t, l, agentA, ratelimit.Send, 1); n != 0 {
			t.Fatal("a send in the last nanosecond of a full window was allowed")
		}
		c.Set(time.Date(2026, 12, 1, 7, 1, 0, 0, time.UTC))
		if n := allowed(t, l, agentA, ratelimit.Send, 5); n != 3 {
			t.Fatalf("the next minute allowed %d of 5, want 3", n)
		}
		// The window item expires a few minutes after its window.
		it, err := st.Get(context.Background(), ratelimit.WindowKey(lobby, agentA, ratelimit.Send, c.Now()))
		if err != nil {
			t.Fatal(err)
		}
		exp, err := it.Int(store.AttrExpiresAt)
		end := time.Date(2026, 12, 1, 7, 2, 0, 0, time.UTC)
		if err != nil || exp <= end.Unix() || exp > end.Add(10*time.Minute).Unix() {
			t.Fatalf("expiresAt %d (%v), want a few minutes after the window ends at %d", exp, err, end.Unix())
		}
		if n, _ := it.Int("n"); n != 3 {
			t.Fatalf("window count %d, want 3 (refused requests are not counted)", n)
		}
		if it.Key().PK != "RATE#lobby#"+agentA || it.Key().SK != "send#"+strconv.FormatInt(c.Now().Unix()/60, 10) {
			t.Fatalf("window key %v", it.Key())
		}
	})
}

func TestUnknownOpAndMalformedIDs(t *testing.T) {
	st := &storetest.Counting{Store: stores.Memory().Open(t)}
	l := ratelimit.New(st, nil)
	err := l.Allow(context.Background(), lobby, agentA, "teleport")
	if apierror.KindOf(err) != apierror.Internal {
		t.Fatalf("unknown op: %v, want Internal", err)
	}
	huge := strings.Repeat("x", 3000)
	for _, c := range []struct{ w, a string }{{huge, agentA}, {lobby, huge}, {lobby, "awn_a"}, {"Lobby", agentA}} {
		if err := l.Allow(context.Background(), c.w, c.a, ratelimit.Send); apierror.KindOf(err) != apierror.NotJoined {
			t.Fatalf("malformed ids: %v, want NotJoined", err)
		}
	}
	if got := st.Take(); got != [3]int64{} {
		t.Fatalf("refusals made store calls %v", got)
	}
}

// TestConcurrentLimit: of 50 concurrent calls against a limit of 20, exactly
// 20 are allowed, on every engine.
func TestConcurrentLimit(t *testing.T) {
	everyEngine(t, func(t *testing.T, st store.Store) {
		c := &clock{now: t0}
		l := ratelimit.New(st, ratelimit.Limits{ratelimit.Ping: 20}, ratelimit.WithClock(c.Now))
		var ok, limited atomic.Int64
		var wg sync.WaitGroup
		errs := make(chan error, 50)
		for range 50 {
			wg.Add(1)
			go func() {
				defer wg.Done()
				err := l.Allow(context.Background(), lobby, agentA, ratelimit.Ping)
				switch {
				case err == nil:
					ok.Add(1)
				case apierror.KindOf(err) == apierror.RateLimited:
					limited.Add(1)
				default:
					errs <- err
				}
			}()
		}
		wg.Wait()
		close(errs)
		for err := range errs {
			t.Fatalf("Allow: %v", err)
		}
		if ok.Load() != 20 || limited.Load() != 30 {
			t.Fatalf("50 concurrent calls, limit 20: %d allowed, %d limited; want 20 and 30", ok.Load(), limited.Load())
		}
	})
}

// TestSharedAcrossInstances: two Limiters, each with its own DynamoDB
// client, over one DynamoDB Local table share one count, as two Lambda
// instances do.
func TestSharedAcrossInstances(t *testing.T) {
	client, table := dynamolocal.NewTable(t, local)
	other := local.Client()
	c := &clock{now: t0}
	l1 := ratelimit.New(dynamo.New(client, table), ratelimit.Limits{ratelimit.Actions: 10}, ratelimit.WithClock(c.Now))
	l2 := ratelimit.New(dynamo.New(other, table), ratelimit.Limits{ratelimit.Actions: 10}, ratelimit.WithClock(c.Now))
	var wg sync.WaitGroup
	var n1, n2 int
	wg.Add(2)
	go func() { defer wg.Done(); n1 = allowed(t, l1, agentA, ratelimit.Actions, 8) }()
	go func() { defer wg.Done(); n2 = allowed(t, l2, agentA, ratelimit.Actions, 8) }()
	wg.Wait()
	if n1+n2 != 10 {
		t.Fatalf("two instances allowed %d + %d of 16 calls, want 10 in all", n1, n2)
	}
}

// TestCost: a rate check is one UpdateItem, allowed or refused.
func TestCost(t *testing.T) {
	m := capacity.New()
	client, table := dynamolocal.NewTable(t, local, m.Option())
	st := &storetest.Counting{Store: dynamo.New(client, table)}
	c := &clock{now: t0}
	l := ratelimit.New(st, ratelimit.Limits{ratelimit.Send: 1}, ratelimit.WithClock(c.Now))
	m.Take()
	for i := range 2 { // the first is allowed, the second refused
		err := l.Allow(context.Background(), lobby, agentA, ratelimit.Send)
		if (i == 0 && err != nil) || (i == 1 && apierror.KindOf(err) != apierror.RateLimited) {
			t.Fatalf("call %d: %v", i, err)
		}
		use := m.Take()
		t.Logf("rate check %d:\n%v", i, use)
		if got := use.Calls(); !maps.Equal(got, map[string]int{"UpdateItem": 1}) {
			t.Fatalf("rate check %d made calls %v, want one UpdateItem", i, got)
		}
		if got := st.Take(); got != [3]int64{0, 0, 1} {
			t.Fatalf("rate check %d made item API calls %v, want one write", i, got)
		}
	}
}

// TestAllowWorld: joins are counted per world whoever joins: the limit
// holds across fresh keys, another world has its own count, and a malformed
// world is refused without a store call.
func TestAllowWorld(t *testing.T) {
	ctx := context.Background()
	st := memory.New()
	now := time.Date(2026, 12, 1, 7, 0, 10, 0, time.UTC)
	l := ratelimit.New(st, ratelimit.Limits{ratelimit.Join: 3}, ratelimit.WithClock(func() time.Time { return now }))
	for i := range 3 {
		if err := l.AllowWorld(ctx, "lobby", ratelimit.Join); err != nil {
			t.Fatalf("join %d: %v", i, err)
		}
	}
	err := l.AllowWorld(ctx, "lobby", ratelimit.Join)
	if e := apierror.From(err); e.Kind != apierror.RateLimited || e.RetryAfter != 50*time.Second {
		t.Fatalf("the 4th join of the minute: %v, want RateLimited retrying in 50 s", err)
	}
	if err := l.AllowWorld(ctx, "other", ratelimit.Join); err != nil {
		t.Fatalf("another world: %v", err)
	}
	if err := l.AllowWorld(ctx, "Bad World", ratelimit.Join); apierror.KindOf(err) != apierror.NotFound {
		t.Fatalf("a malformed world: %v", err)
	}
	now = now.Add(time.Minute)
	if err := l.AllowWorld(ctx, "lobby", ratelimit.Join); err != nil {
		t.Fatalf("the next minute: %v", err)
	}
}
