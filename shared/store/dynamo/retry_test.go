package dynamo_test

import (
	"context"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/a2awire/a2awire/shared/store"
	"github.com/a2awire/a2awire/shared/store/dynamo"
	"github.com/a2awire/a2awire/shared/store/dynamo/capacity"
)

// fake is a DynamoDB endpoint that answers each request from a script, so
// the retry policy is tested against throttling, conflicts and internal
// errors DynamoDB Local never produces.
type fake struct {
	t      *testing.T
	mu     sync.Mutex
	script func(op string, n int) (status int, body string) // n counts calls of op from 0
	calls  map[string]int
	tokens []string // ClientRequestToken of each TransactWriteItems
}

const (
	ddbErr    = `{"__type":"com.amazonaws.dynamodb.v20120810#`
	throttled = ddbErr + `ProvisionedThroughputExceededException","message":"slow down"}`
	internal  = ddbErr + `InternalServerError","message":"oops"}`
)

func cancelled(codes ...string) string {
	reasons := make([]string, len(codes))
	for i, c := range codes {
		reasons[i] = `{"Code":"` + c + `"}`
	}
	return ddbErr + `TransactionCanceledException","message":"Transaction cancelled","CancellationReasons":[` + strings.Join(reasons, ",") + `]}`
}

func newFake(t *testing.T, script func(op string, n int) (int, string)) (*fake, *dynamo.Store, *capacity.Meter, *[]time.Duration) {
	t.Helper()
	f := &fake{t: t, script: script, calls: map[string]int{}}
	srv := httptest.NewServer(f)
	t.Cleanup(srv.Close)
	m := capacity.New()
	var sleeps []time.Duration
	s := dynamo.New(dynamo.LocalClient(srv.URL, m.Option()), "t",
		dynamo.WithRetry(5, time.Millisecond, 8*time.Millisecond),
		dynamo.WithSleep(func(ctx context.Context, d time.Duration) error {
			sleeps = append(sleeps, d)
			return ctx.Err()
		}))
	return f, s, m, &sleeps
}

func (f *fake) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	body, _ := io.ReadAll(r.Body)
	op := strings.TrimPrefix(r.Header.Get("X-Amz-Target"), "DynamoDB_20120810.")
	f.mu.Lock()
	n := f.calls[op]
	f.calls[op]++
	if op == "TransactWriteItems" {
		var in struct{ ClientRequestToken string }
		if err := json.Unmarshal(body, &in); err != nil {
			f.t.Error(err)
		}
		f.tokens = append(f.tokens, in.ClientRequestToken)
	}
	f.mu.Unlock()
	status, resp := f.script(op, n)
	w.Header().Set("Content-Type", "application/x-amz-json-1.0")
	w.WriteHeader(status)
	_, _ = io.WriteString(w, resp)
}

func (f *fake) count(op string) int {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.calls[op]
}

var (
	k1, k2 = store.Key{PK: "p", SK: "1"}, store.Key{PK: "p", SK: "2"}
	put1   = store.Put(k1, store.Item{"v": store.N(1)})
	tx     = []store.Action{put1, store.Update(k2).AddNum("n", 1)}
)

func TestThrottledThenSucceeds(t *testing.T) {
	f, s, m, sleeps := newFake(t, func(op string, n int) (int, string) {
		if n < 3 {
			return 400, throttled
		}
		return 200, `{}`
	})
	if _, err := s.Write(context.Background(), put1); err != nil {
		t.Fatal(err)
	}
	if f.count("PutItem") != 4 || len(*sleeps) != 3 {
		t.Fatalf("%d requests, %d sleeps; want 4 and 3", f.count("PutItem"), len(*sleeps))
	}
	for i, d := range *sleeps {
		if d <= 0 || d > time.Millisecond<<i {
			t.Errorf("backoff %d: %v, want (0, %v]", i, d, time.Millisecond<<i)
		}
	}
	if got := m.Snapshot()["PutItem"]; got.Calls != 4 || got.Errors != 3 {
		t.Errorf("meter %+v: every attempt is a call", got)
	}
}

// TestOverloadIsUnavailable: throttling and conflicts that outlast the
// bound end in ErrUnavailable (503) for every kind of request, never in an
// unclassified error (500).
func TestOverloadIsUnavailable(t *testing.T) {
	for name, c := range map[string]struct {
		status int
		body   string
		run    func(s *dynamo.Store) error
		op     string
	}{
		"PutItem throttled": {400, throttled, func(s *dynamo.Store) error { _, err := s.Write(context.Background(), put1); return err }, "PutItem"},
		"UpdateItem conflict": {400, ddbErr + `TransactionConflictException","message":"conflict"}`,
			func(s *dynamo.Store) error {
				_, err := s.Write(context.Background(), store.Update(k1).AddNum("n", 1))
				return err
			}, "UpdateItem"},
		"DeleteItem request limit": {400, ddbErr + `RequestLimitExceeded","message":"limit"}`,
			func(s *dynamo.Store) error { _, err := s.Write(context.Background(), store.Delete(k1)); return err }, "DeleteItem"},
		"transaction conflict": {400, cancelled("None", "TransactionConflict"),
			func(s *dynamo.Store) error { _, err := s.Write(context.Background(), tx...); return err }, "TransactWriteItems"},
		"transaction throttled": {400, ddbErr + `ThrottlingException","message":"slow"}`,
			func(s *dynamo.Store) error { _, err := s.Write(context.Background(), tx...); return err }, "TransactWriteItems"},
		"GetItem throttled":      {400, throttled, func(s *dynamo.Store) error { _, err := s.Get(context.Background(), k1); return err }, "GetItem"},
		"GetItem internal error": {500, internal, func(s *dynamo.Store) error { _, err := s.Get(context.Background(), k1); return err }, "GetItem"},
		"Query throttled": {400, throttled, func(s *dynamo.Store) error {
			_, err := s.Query(context.Background(), store.Query{PK: "p"})
			return err
		}, "Query"},
	} {
		t.Run(name, func(t *testing.T) {
			f, s, _, _ := newFake(t, func(string, int) (int, string) { return c.status, c.body })
			err := c.run(s)
			if !errors.Is(err, store.ErrUnavailable) || errors.Is(err, dynamo.ErrOutcomeUnknown) {
				t.Fatalf("error %v, want ErrUnavailable", err)
			}
			if f.count(c.op) != 5 {
				t.Errorf("%d attempts, want the bound (5)", f.count(c.op))
			}
		})
	}
}

// TestConflictRetriesWithAFreshToken: a cancelled transaction applied
// nothing, so its retry is a new request, never a replay of the
// cancellation from DynamoDB's idempotency window.
func TestConflictRetriesWithAFreshToken(t *testing.T) {
	f, s, _, _ := newFake(t, func(_ string, n int) (int, string) {
		if n == 0 {
			return 400, cancelled("TransactionConflict", "None")
		}
		return 200, `{}`
	})
	if _, err := s.Write(context.Background(), tx...); err != nil {
		t.Fatal(err)
	}
	if len(f.tokens) != 2 || f.tokens[0] == f.tokens[1] || f.tokens[0] == "" {
		t.Fatalf("tokens %q, want two different ones", f.tokens)
	}
}

// TestUnknownOutcome: an internal error may hide an applied write.
func TestUnknownOutcome(t *testing.T) {
	t.Run("single write is not resent", func(t *testing.T) {
		f, s, _, _ := newFake(t, func(string, int) (int, string) { return 500, internal })
		_, err := s.Write(context.Background(), store.Update(k1).AddNum("n", 1))
		if !errors.Is(err, dynamo.ErrOutcomeUnknown) || errors.Is(err, store.ErrUnavailable) {
			t.Fatalf("error %v, want ErrOutcomeUnknown only", err)
		}
		if f.count("UpdateItem") != 1 {
			t.Fatalf("%d attempts: an ADD must not be resent", f.count("UpdateItem"))
		}
	})
	t.Run("transaction resent with its token settles it", func(t *testing.T) {
		f, s, _, _ := newFake(t, func(_ string, n int) (int, string) {
			switch n {
			case 0:
				return 500, internal
			case 1:
				return 400, ddbErr + `TransactionInProgressException","message":"in progress"}`
			}
			return 200, `{}`
		})
		if _, err := s.Write(context.Background(), tx...); err != nil {
			t.Fatal(err)
		}
		if len(f.tokens) != 3 || f.tokens[0] != f.tokens[1] || f.tokens[1] != f.tokens[2] {
			t.Fatalf("tokens %q, want one token resent", f.tokens)
		}
	})
	t.Run("transaction resent gets a final answer", func(t *testing.T) {
		_, s, _, _ := newFake(t, func(_ string, n int) (int, string) {
			if n == 0 {
				return 500, internal
			}
			return 400, cancelled("None", "ConditionalCheckFailed")
		})
		_, err := s.Write(context.Background(), tx...)
		var cf *store.ConditionFailedError
		if !errors.As(err, &cf) || cf.Action != 1 || errors.Is(err, dynamo.ErrOutcomeUnknown) {
			t.Fatalf("error %v, want the condition failure of action 1", err)
		}
	})
	t.Run("transaction never settled", func(t *testing.T) {
		f, s, _, _ := newFake(t, func(_ string, n int) (int, string) {
			if n == 0 {
				return 500, internal
			}
			return 400, throttled // throttled before the token is looked up
		})
		_, err := s.Write(context.Background(), tx...)
		if !errors.Is(err, dynamo.ErrOutcomeUnknown) || errors.Is(err, store.ErrUnavailable) {
			t.Fatalf("error %v, want ErrOutcomeUnknown only", err)
		}
		for _, tok := range f.tokens {
			if tok != f.tokens[0] {
				t.Fatalf("tokens %q, want one token throughout", f.tokens)
			}
		}
	})
}

// TestContextEndsDuringBackoff: giving up early after refusals still means
// nothing was written.
func TestContextEndsDuringBackoff(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	f := &fake{t: t, calls: map[string]int{}, script: func(string, int) (int, string) { return 400, throttled }}
	srv := httptest.NewServer(f)
	defer srv.Close()
	s := dynamo.New(dynamo.LocalClient(srv.URL), "t", dynamo.WithSleep(func(ctx context.Context, _ time.Duration) error {
		cancel() // the deadline arrives while backing off
		<-ctx.Done()
		return ctx.Err()
	}))
	_, err := s.Write(ctx, put1)
	if !errors.Is(err, store.ErrUnavailable) || !errors.Is(err, context.Canceled) {
		t.Fatalf("error %v, want ErrUnavailable and context.Canceled", err)
	}
	if f.count("PutItem") != 1 {
		t.Errorf("%d attempts after cancellation", f.count("PutItem"))
	}
}

// TestInFlightBound: a Store sends at most its bound of requests at once,
// and a request that cannot be sent before its deadline fails with
// ErrUnavailable (it was never sent, so nothing was written).
func TestInFlightBound(t *testing.T) {
	release := make(chan struct{})
	var mu sync.Mutex
	inFlight, peak := 0, 0
	f := &fake{t: t, calls: map[string]int{}, script: func(string, int) (int, string) {
		mu.Lock()
		inFlight++
		peak = max(peak, inFlight)
		mu.Unlock()
		<-release
		mu.Lock()
		inFlight--
		mu.Unlock()
		return 200, `{}`
	}}
	srv := httptest.NewServer(f)
	defer srv.Close()
	s := dynamo.New(dynamo.LocalClient(srv.URL), "t", dynamo.WithMaxInFlight(2))
	var wg sync.WaitGroup
	for i := range 2 {
		wg.Go(func() {
			if _, err := s.Write(context.Background(), store.Put(store.Key{PK: "p", SK: string(rune('a' + i))}, nil)); err != nil {
				t.Error(err)
			}
		})
	}
	for f.count("PutItem") < 2 { // both slots taken
		time.Sleep(time.Millisecond)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 50*time.Millisecond)
	defer cancel()
	_, err := s.Write(ctx, put1)
	if !errors.Is(err, store.ErrUnavailable) || errors.Is(err, dynamo.ErrOutcomeUnknown) {
		t.Errorf("a write that found no slot: %v, want ErrUnavailable", err)
	}
	close(release)
	wg.Wait()
	if f.count("PutItem") != 2 || peak != 2 {
		t.Errorf("server saw %d requests, at most %d at once; want 2 and 2", f.count("PutItem"), peak)
	}
}

// TestLatencyGuard: a write whose deadline is nearer than a round trip
// takes is not sent (ErrUnavailable), rather than sent to end unknown.
func TestLatencyGuard(t *testing.T) {
	f := &fake{t: t, calls: map[string]int{}, script: func(string, int) (int, string) {
		time.Sleep(200 * time.Millisecond) // every round trip takes 200 ms or more
		return 200, `{}`
	}}
	srv := httptest.NewServer(f)
	defer srv.Close()
	s := dynamo.New(dynamo.LocalClient(srv.URL), "t")
	if _, err := s.Write(context.Background(), put1); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 50*time.Millisecond)
	defer cancel()
	_, err := s.Write(ctx, put1)
	if !errors.Is(err, store.ErrUnavailable) || errors.Is(err, dynamo.ErrOutcomeUnknown) {
		t.Fatalf("write with 50 ms left: %v, want ErrUnavailable", err)
	}
	if f.count("PutItem") != 1 {
		t.Errorf("the guarded write was sent (%d requests)", f.count("PutItem"))
	}
}
