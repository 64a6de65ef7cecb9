package harness_test

import (
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/a2awire/a2awire/local/cloud"
	"github.com/a2awire/a2awire/local/harness"
	"github.com/a2awire/a2awire/shared/capture"
	"github.com/a2awire/a2awire/shared/logging"
	"github.com/a2awire/a2awire/shared/store/memory"
	"github.com/a2awire/a2awire/shared/webhook"
	"github.com/a2awire/a2awire/shared/world"
)

// TestHarnessLogsTriggersAndDeliveries: the harness's log shows what its
// triggers did, as it shows requests — the dispatcher's stream batch, the
// delivery queue's batch, the failed delivery with the receiver's status
// and its retry, and the retry schedule's run — so a failed delivery
// leaves a trace a person can read.
func TestHarnessLogsTriggersAndDeliveries(t *testing.T) {
	st := memory.New(memory.WithFeedConsumers(harness.StreamConsumers(nil)...))
	defer st.Close()
	logs := &capture.Buffer{}
	tick := make(chanTicker)
	h := mustHarness(t, harness.Options{Log: logging.New(logs, logging.Text, slog.LevelInfo), Store: st,
		NewTicker: func(time.Duration) cloud.Ticker { return tick }})
	ctx, stop := run(t, h)
	defer stop()
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) { w.WriteHeader(http.StatusInternalServerError) }))
	defer srv.Close()
	if _, err := st.Write(ctx, world.BareMembership("lobby", "aw:a")...); err != nil {
		t.Fatal(err)
	}
	if _, err := webhook.NewStore(st).Set(ctx, "lobby", "aw:a", srv.URL); err != nil {
		t.Fatal(err)
	}
	e, _ := world.NewIDs().NewEvent("lobby", world.AgentJoined, world.Public, "", map[string]any{"awnId": "aw:b"}, time.Now())
	if _, err := st.Write(ctx, world.EventPut(e)); err != nil {
		t.Fatal(err)
	}
	wants := []string{
		`msg="stream batch" function=webhook-dispatcher`,
		`msg="queue batch" function=webhook-deliver queue=webhook-deliveries`,
		`level=WARN msg="webhook delivery" world=lobby event=` + e.ID + ` type=agent.joined recipient=aw:a url=` + srv.URL + ` attempt=1 status=500`,
		`outcome="failed: the receiver answered 500; retry in`,
		`msg="scheduled invocation" function=webhook-retry`,
	}
	deadline := time.Now().Add(5 * time.Second)
	for {
		out, missing := logs.String(), ""
		for _, w := range wants {
			if !strings.Contains(out, w) {
				missing = w
				break
			}
		}
		if missing == "" {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("the harness log lacks %q:\n%s", missing, out)
		}
		// Every schedule of the table takes this ticker, and a tick goes
		// to whichever loop is waiting: tick until webhook-retry ran.
		select {
		case tick <- time.Now():
		default:
		}
		time.Sleep(5 * time.Millisecond)
	}
}
