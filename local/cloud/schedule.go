package cloud

import (
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"regexp"
	"strconv"
	"strings"
	"time"

	"github.com/aws/aws-lambda-go/events"
)

// ParseRate parses an EventBridge rate expression, "rate(N unit)" with unit
// minute (N = 1), minutes, hour, hours, day or days. Cron expressions are
// refused: the harness has no cron scheduler.
func ParseRate(expr string) (time.Duration, error) {
	if strings.HasPrefix(expr, "cron(") {
		return 0, fmt.Errorf("schedule %q: cron expressions are not supported by the local harness; use rate(N minutes|hours|days)", expr)
	}
	m := rateRe.FindStringSubmatch(expr)
	if m == nil {
		return 0, fmt.Errorf("schedule %q: want rate(N minute|minutes|hour|hours|day|days)", expr)
	}
	n, err := strconv.Atoi(m[1])
	if err != nil || n <= 0 {
		return 0, fmt.Errorf("schedule %q: the rate must be a positive whole number", expr)
	}
	singular := !strings.HasSuffix(m[2], "s")
	if singular != (n == 1) {
		// EventBridge refuses "rate(1 minutes)" and "rate(5 minute)".
		return 0, fmt.Errorf("schedule %q: use the singular unit for 1 and the plural otherwise", expr)
	}
	unit := map[string]time.Duration{"minute": time.Minute, "hour": time.Hour, "day": 24 * time.Hour}[strings.TrimSuffix(m[2], "s")]
	return time.Duration(n) * unit, nil
}

var rateRe = regexp.MustCompile(`^rate\((\d+) (minutes?|hours?|days?)\)$`)

// Ticker is what a schedule waits on; time.Ticker in production, a
// channel the test drives otherwise.
type Ticker interface {
	C() <-chan time.Time
	Stop()
}

type realTicker struct{ *time.Ticker }

func (t realTicker) C() <-chan time.Time { return t.Ticker.C }

// NewTicker returns a time.Ticker as a Ticker.
func NewTicker(d time.Duration) Ticker { return realTicker{time.NewTicker(d)} }

// Schedule is an EventBridge rule invoking a function on a rate: each tick
// sends an events.EventBridgeEvent of detail-type "Scheduled Event" from
// source "aws.events", as the rule's target invocation does. A failed
// invocation is logged (EventBridge's asynchronous invocation would retry
// it; the next tick comes anyway).
type Schedule struct {
	Entry *Entry
	// Expression is the rule's rate expression.
	Expression string
	Log        *slog.Logger
	// NewTicker makes the ticker; nil means NewTicker.
	NewTicker func(time.Duration) Ticker
}

// Run fires the schedule until ctx ends. It fails at once on an
// expression it cannot run.
func (s *Schedule) Run(ctx context.Context) error {
	every, err := ParseRate(s.Expression)
	if err != nil {
		return fmt.Errorf("%s: %w", s.Entry.Name(), err)
	}
	newTicker := s.NewTicker
	if newTicker == nil {
		newTicker = NewTicker
	}
	t := newTicker(every)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return nil
		case now := <-t.C():
			payload, err := json.Marshal(ScheduledEvent(s.Entry.Name(), now))
			if err != nil {
				return err
			}
			start := time.Now()
			_, err = s.Entry.Invoke(ctx, payload)
			switch {
			case err != nil && ctx.Err() == nil:
				s.Log.ErrorContext(ctx, "scheduled invocation failed", "function", s.Entry.Name(), "err", err)
			case err == nil:
				s.Log.LogAttrs(ctx, slog.LevelInfo, "scheduled invocation", slog.String("function", s.Entry.Name()),
					slog.Int64("duration_ms", time.Since(start).Milliseconds()), slog.String("outcome", "ok"))
			}
		}
	}
}

// ScheduledEvent is the event an EventBridge schedule rule sends to fn at t.
func ScheduledEvent(fn string, t time.Time) events.EventBridgeEvent {
	id := NewRequestID()
	return events.EventBridgeEvent{
		Version:    "0",
		ID:         id[:8] + "-" + id[8:12] + "-" + id[12:16] + "-" + id[16:20] + "-" + id[20:],
		DetailType: "Scheduled Event",
		Source:     "aws.events",
		AccountID:  "000000000000",
		Time:       t.UTC().Truncate(time.Second),
		Region:     "local",
		Resources:  []string{"arn:aws:events:local:000000000000:rule/" + fn + "-schedule"},
		Detail:     json.RawMessage("{}"),
	}
}
