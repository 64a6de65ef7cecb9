package escrowhttp_test

import (
	"context"
	"testing"

	"github.com/aws/aws-lambda-go/events"

	"github.com/a2awire/a2awire/shared/escrowhttp"
	"github.com/a2awire/a2awire/shared/function"
	"github.com/a2awire/a2awire/shared/logging"
	"github.com/a2awire/a2awire/shared/store/memory"
)

// TestBuildReadsDisputeWindow: a DISPUTE_WINDOW that is not a positive Go
// duration fails the builders (a Lambda whose init fails), a valid one or
// none builds, and the schedule's entry takes an EventBridge event.
func TestBuildReadsDisputeWindow(t *testing.T) {
	st := memory.New()
	t.Cleanup(func() { _ = st.Close() })
	env := func(window string) function.Env {
		return function.Env{Name: escrowhttp.Schedule, Log: logging.Discard(), Store: st,
			Getenv: func(k string) string {
				if k == "DISPUTE_WINDOW" {
					return window
				}
				return ""
			}}
	}
	for _, bad := range []string{"soon", "-1h", "0s"} {
		if _, err := escrowhttp.BuildSchedule(env(bad)); err == nil {
			t.Errorf("DISPUTE_WINDOW %q built", bad)
		}
		if _, err := escrowhttp.BuildEscrows(env(bad)); err == nil {
			t.Errorf("DISPUTE_WINDOW %q built the escrows function", bad)
		}
	}
	for _, good := range []string{"", "2h"} {
		h, err := escrowhttp.BuildSchedule(env(good))
		if err != nil {
			t.Fatalf("DISPUTE_WINDOW %q: %v", good, err)
		}
		run, ok := h.(escrowhttp.ScheduleHandler)
		if !ok {
			t.Fatalf("the schedule's entry is a %T", h)
		}
		if err := run(context.Background(), events.EventBridgeEvent{DetailType: "Scheduled Event"}); err != nil {
			t.Errorf("a tick with nothing due: %v", err)
		}
	}
}
