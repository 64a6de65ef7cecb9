package harness_test

import (
	"context"
	"errors"
	"net/http/httptest"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/a2awire/a2awire/local/cloud"
	"github.com/a2awire/a2awire/local/harness"
	"github.com/a2awire/a2awire/shared/logging"
	"github.com/a2awire/a2awire/shared/routes"
	"github.com/a2awire/a2awire/shared/store/memory"
	"github.com/aws/aws-lambda-go/events"
)

type chanTicker chan time.Time

func (c chanTicker) C() <-chan time.Time { return c }
func (c chanTicker) Stop()               {}

// TestHarnessDrivesTriggers: through harness.New and Run, a schedule fires
// on its (injected) ticker, and a stream function that fails its first
// batch gets the same records again from the memory engine's feed.
func TestHarnessDrivesTriggers(t *testing.T) {
	st := memory.New()
	defer st.Close()
	var (
		mu      sync.Mutex
		batches [][]string
	)
	scheduled := make(chan events.EventBridgeEvent, 1)
	tick := make(chanTicker)
	var (
		period   time.Duration
		periodMu sync.Mutex
	)
	h := mustHarness(t, harness.Options{
		Log: logging.Discard(), Store: st,
		Backoff: cloud.Backoff{Initial: time.Millisecond, Max: time.Millisecond},
		// The route table's own schedules (webhook-retry, escrow-schedule)
		// (1 and 5 minutes) get a ticker that never fires, so the one
		// tick goes to test-schedule.
		NewTicker: func(d time.Duration) cloud.Ticker {
			if d != time.Minute && d != 5*time.Minute {
				periodMu.Lock()
				period = d
				periodMu.Unlock()
				return tick
			}
			return make(chanTicker)
		},
		Extra: []harness.Function{
			{Name: "test-stream", Handler: func(_ context.Context, e events.DynamoDBEvent) error {
				mu.Lock()
				defer mu.Unlock()
				var seqs []string
				for _, r := range e.Records {
					seqs = append(seqs, r.Change.SequenceNumber)
				}
				batches = append(batches, seqs)
				if len(batches) == 1 {
					return errors.New("first batch fails")
				}
				return nil
			}, Config: routes.Function{Name: "test-stream", TimeoutSeconds: 5, Triggers: []routes.Trigger{{Kind: routes.StreamTrigger}}}},
			{Name: "test-schedule", Handler: func(_ context.Context, e events.EventBridgeEvent) error {
				scheduled <- e
				return nil
			}, Config: routes.Function{Name: "test-schedule", TimeoutSeconds: 5, Triggers: []routes.Trigger{{Kind: routes.ScheduleTrigger, Schedule: "rate(10 minutes)"}}}},
		},
	})
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- h.Run(ctx) }()

	r := httptest.NewRequest("POST", "/agents/a2awire-ledger/invoke", strings.NewReader(`{"task":"record-entry","input":{"account":"trig","amount_cents":5}}`))
	r.Header.Set("Content-Type", "application/json")
	w := httptest.NewRecorder()
	h.ServeHTTP(w, r)
	if w.Code != 200 {
		t.Fatalf("record-entry: %d %s", w.Code, w.Body)
	}
	deadline := time.Now().Add(5 * time.Second)
	for {
		mu.Lock()
		n := len(batches)
		mu.Unlock()
		if n >= 2 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("%d batches, want a failed one and its retry", n)
		}
		time.Sleep(5 * time.Millisecond)
	}

	at := time.Date(2026, 12, 1, 0, 0, 0, 0, time.UTC)
	tick <- at
	select {
	case e := <-scheduled:
		if e.DetailType != "Scheduled Event" || !e.Time.Equal(at) {
			t.Errorf("scheduled event %+v", e)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("the schedule did not fire")
	}
	periodMu.Lock()
	if period != 10*time.Minute {
		t.Errorf("ticker period %v", period)
	}
	periodMu.Unlock()
	cancel()
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	mu.Lock()
	defer mu.Unlock()
	if len(batches[0]) == 0 || strings.Join(batches[0], ",") != strings.Join(batches[1], ",") {
		t.Errorf("retry got %v, want the failed batch %v again", batches[1], batches[0])
	}
	if got := strings.Join(h.Triggers(), "\n"); !strings.Contains(got, "test-schedule: schedule rate(10 minutes)") || !strings.Contains(got, "test-stream: table stream") {
		t.Errorf("Triggers() = %q", got)
	}
}

func TestHarnessRefusesBadTriggers(t *testing.T) {
	for name, f := range map[string]harness.Function{
		"cron": {Name: "x", Handler: func() {}, Config: routes.Function{Name: "x", TimeoutSeconds: 5, Triggers: []routes.Trigger{{Kind: routes.ScheduleTrigger, Schedule: "cron(0 * * * ? *)"}}}},
		"kind": {Name: "x", Handler: func() {}, Config: routes.Function{Name: "x", TimeoutSeconds: 5, Triggers: []routes.Trigger{{Kind: "sqs"}}}},
		"dup":  {Name: "fixture-clean", Handler: func() {}, Config: routes.Function{Name: "fixture-clean", TimeoutSeconds: 5}},
	} {
		if h, err := harness.New(harness.Options{Log: logging.Discard(), Extra: []harness.Function{f}}); err == nil {
			h.Close()
			t.Errorf("%s: accepted", name)
		}
	}
}

func TestStreamConsumers(t *testing.T) {
	extra := (&triggerProbe{}).functions()
	got := harness.StreamConsumers(extra)
	if !slices.Contains(got, "test-stream") || slices.Contains(got, "test-schedule") || !slices.IsSorted(got) {
		t.Errorf("StreamConsumers = %v, want test-stream and not test-schedule, sorted", got)
	}
	for _, fn := range got {
		if fn == "test-stream" {
			continue
		}
		if !slices.ContainsFunc(routes.Config(fn).Triggers, func(tr routes.Trigger) bool { return tr.Kind == routes.StreamTrigger }) {
			t.Errorf("%s has no stream trigger", fn)
		}
	}
}

// TestReservedConcurrency: Options.ReservedConcurrency reaches the named
// function's entry (an invocation past it is refused as Lambda refuses it,
// the function not called) and leaves the others unbounded; a name that is
// no function is refused.
func TestReservedConcurrency(t *testing.T) {
	hold, entered := make(chan struct{}), make(chan struct{}, 1)
	var calls sync.Map
	fn := func(name string) harness.Function {
		return harness.Function{Name: name, Handler: func(context.Context, events.EventBridgeEvent) error {
			n, _ := calls.LoadOrStore(name, new(int))
			*n.(*int)++
			entered <- struct{}{}
			<-hold
			return nil
		}, Config: routes.Function{Name: name, TimeoutSeconds: 5}}
	}
	h := mustHarness(t, harness.Options{Log: logging.Discard(), Extra: []harness.Function{fn("test-reserved")},
		ReservedConcurrency: map[string]int{"test-reserved": 1}})
	done := make(chan error, 1)
	go func() { _, err := h.Gateway.Invoke(context.Background(), "test-reserved", []byte("{}")); done <- err }()
	<-entered
	if _, err := h.Gateway.Invoke(context.Background(), "test-reserved", []byte("{}")); !errors.Is(err, cloud.ErrThrottled) {
		t.Errorf("at the reservation: %v, want ErrThrottled", err)
	}
	close(hold)
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	if n, _ := calls.Load("test-reserved"); *n.(*int) != 1 {
		t.Errorf("%d calls, want 1", *n.(*int))
	}
	if _, err := harness.New(harness.Options{Log: logging.Discard(), ReservedConcurrency: map[string]int{"no-such": 1}}); err == nil ||
		!strings.Contains(err.Error(), "no-such") {
		t.Errorf("unknown function: %v", err)
	}
}
