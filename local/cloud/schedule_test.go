package cloud_test

import (
	"context"
	"errors"
	"log/slog"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/a2awire/a2awire/local/cloud"
	"github.com/a2awire/a2awire/shared/capture"
	"github.com/a2awire/a2awire/shared/logging"
	"github.com/aws/aws-lambda-go/events"
)

func TestParseRate(t *testing.T) {
	for expr, want := range map[string]time.Duration{
		"rate(1 minute)": time.Minute, "rate(5 minutes)": 5 * time.Minute,
		"rate(1 hour)": time.Hour, "rate(2 hours)": 2 * time.Hour, "rate(1 day)": 24 * time.Hour, "rate(3 days)": 72 * time.Hour,
	} {
		if got, err := cloud.ParseRate(expr); err != nil || got != want {
			t.Errorf("%s = %v, %v; want %v", expr, got, err, want)
		}
	}
	for _, bad := range []string{"rate(0 minutes)", "rate(1 minutes)", "rate(5 minute)", "rate(5 seconds)", "rate(x minutes)", "every minute", "cron(0 12 * * ? *)"} {
		if _, err := cloud.ParseRate(bad); err == nil {
			t.Errorf("%s accepted", bad)
		}
	}
	if _, err := cloud.ParseRate("cron(0 12 * * ? *)"); err == nil || !strings.Contains(err.Error(), "cron expressions are not supported") {
		t.Errorf("cron error = %v", err)
	}
}

type manualTicker struct {
	c     chan time.Time
	every time.Duration
}

func (m *manualTicker) C() <-chan time.Time { return m.c }
func (m *manualTicker) Stop()               {}

func TestScheduleFiresEventBridgeEvents(t *testing.T) {
	var (
		mu  sync.Mutex
		got []events.EventBridgeEvent
	)
	fired := make(chan struct{}, 10)
	fn := func(_ context.Context, e events.EventBridgeEvent) error {
		mu.Lock()
		got = append(got, e)
		mu.Unlock()
		fired <- struct{}{}
		return nil
	}
	tick := &manualTicker{c: make(chan time.Time)}
	s := &cloud.Schedule{
		Entry: cloud.NewEntry("fn-cron", fn, time.Second), Expression: "rate(5 minutes)", Log: logging.Discard(),
		NewTicker: func(d time.Duration) cloud.Ticker { tick.every = d; return tick },
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- s.Run(ctx) }()
	at := time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)
	for i := range 2 {
		tick.c <- at.Add(time.Duration(i) * 5 * time.Minute)
		select {
		case <-fired:
		case <-time.After(5 * time.Second):
			t.Fatal("schedule did not invoke the function")
		}
	}
	cancel()
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	if tick.every != 5*time.Minute {
		t.Errorf("ticker period %v", tick.every)
	}
	mu.Lock()
	defer mu.Unlock()
	if len(got) != 2 {
		t.Fatalf("%d invocations", len(got))
	}
	e := got[0]
	if e.DetailType != "Scheduled Event" || e.Source != "aws.events" || !e.Time.Equal(at) || string(e.Detail) != "{}" ||
		len(e.Resources) != 1 || !strings.Contains(e.Resources[0], "fn-cron") || e.ID == "" || e.ID == got[1].ID {
		t.Errorf("event %+v", e)
	}
	if !got[1].Time.Equal(at.Add(5 * time.Minute)) {
		t.Errorf("second event at %v", got[1].Time)
	}
}

func TestScheduleRefusesCron(t *testing.T) {
	s := &cloud.Schedule{Entry: cloud.NewEntry("fn", func() {}, time.Second), Expression: "cron(0 * * * ? *)", Log: logging.Discard()}
	if err := s.Run(context.Background()); err == nil {
		t.Error("cron accepted")
	}
}

// TestScheduleLogsEachInvocation: a tick whose invocation succeeds writes
// a "scheduled invocation" line with outcome=ok, one that fails its error
// line: the log shows every run of the schedule.
func TestScheduleLogsEachInvocation(t *testing.T) {
	calls := 0
	fn := func(context.Context, events.EventBridgeEvent) error {
		calls++
		if calls == 2 {
			return errors.New("boom")
		}
		return nil
	}
	logs := &capture.Buffer{}
	tick := &manualTicker{c: make(chan time.Time)}
	s := &cloud.Schedule{
		Entry: cloud.NewEntry("fn-cron", fn, time.Second), Expression: "rate(1 minute)", Log: slog.New(slog.NewTextHandler(logs, nil)),
		NewTicker: func(time.Duration) cloud.Ticker { return tick },
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- s.Run(ctx) }()
	at := time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)
	tick.c <- at
	tick.c <- at.Add(time.Minute)
	tick.c <- at.Add(2 * time.Minute) // taken only once the second run is logged
	cancel()
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	out := logs.String()
	if n := strings.Count(out, `level=INFO msg="scheduled invocation" function=fn-cron duration_ms=`); n < 1 {
		t.Errorf("no success line:\n%s", out)
	}
	if !strings.Contains(out, `level=ERROR msg="scheduled invocation failed" function=fn-cron`) {
		t.Errorf("no failure line:\n%s", out)
	}
}
