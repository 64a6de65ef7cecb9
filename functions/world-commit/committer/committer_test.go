package committer_test

import (
	"context"
	"encoding/json"
	"errors"
	"log/slog"
	"slices"
	"testing"

	"github.com/aws/aws-lambda-go/events"

	"github.com/a2awire/a2awire/functions/world-commit/committer"
	"github.com/a2awire/a2awire/shared/apierror"
	"github.com/a2awire/a2awire/shared/auth"
	"github.com/a2awire/a2awire/shared/routes"
	"github.com/a2awire/a2awire/shared/world"
)

// answers commits by the action name: "leave" is a member who left, "busy"
// a store that refused, anything else commits.
type answers struct{ got []world.QueuedAction }

func (a *answers) CommitQueued(_ context.Context, qs []world.QueuedAction) []error {
	a.got = append(a.got, qs...)
	errs := make([]error, len(qs))
	for i, q := range qs {
		switch q.Action {
		case "leave":
			errs[i] = apierror.New(apierror.NotJoined, "not a member")
		case "busy":
			errs[i] = errors.New("store: unavailable")
		}
	}
	return errs
}

func message(t *testing.T, id, action string, receives string) events.SQSMessage {
	t.Helper()
	body, err := json.Marshal(world.QueuedAction{World: "w", ActionID: "01KBQ4Q8Y8W2Y8Y8Y8Y8Y8Y8Y8", AWNID: auth.AWNID(make([]byte, 32)), Action: action, Params: json.RawMessage(`{}`)})
	if err != nil {
		t.Fatal(err)
	}
	return events.SQSMessage{MessageId: id, Body: string(body), Attributes: map[string]string{"ApproximateReceiveCount": receives}}
}

// TestBatchItemFailures: a committed action and a dropped one (its member
// left) are acknowledged; one the store refused and a body that is not a
// queued action come back (the latter to reach the dead-letter queue);
// a message handed out before is marked Redelivered.
func TestBatchItemFailures(t *testing.T) {
	a := &answers{}
	h := committer.New(a, slog.New(slog.DiscardHandler))
	resp, err := h(context.Background(), events.SQSEvent{Records: []events.SQSMessage{
		message(t, "m1", "move", "1"),
		message(t, "m2", "leave", "1"),
		message(t, "m3", "busy", "2"),
		{MessageId: "m4", Body: `{"not":"an action"}`},
		message(t, "m5", "move", "3"),
	}})
	if err != nil {
		t.Fatal(err)
	}
	var kept []string
	for _, f := range resp.BatchItemFailures {
		kept = append(kept, f.ItemIdentifier)
	}
	slices.Sort(kept)
	if !slices.Equal(kept, []string{"m3", "m4"}) {
		t.Fatalf("batchItemFailures %v, want [m3 m4]", kept)
	}
	if len(a.got) != 4 {
		t.Fatalf("committer got %d actions, want 4", len(a.got))
	}
	for i, want := range []bool{false, false, true, true} {
		if a.got[i].Redelivered != want {
			t.Errorf("action %d: Redelivered %v, want %v", i, a.got[i].Redelivered, want)
		}
	}
}

// TestMarkersOutliveEveryMessage: a redriven or redelivered action must
// find its marker, so the marker outlives the longest a message lives on
// the action queue and on its dead-letter queue (whose age counts from the
// first send).
func TestMarkersOutliveEveryMessage(t *testing.T) {
	for _, name := range []string{routes.ActionQueue, routes.ActionDeadLetters} {
		q, ok := routes.QueueConfig(name)
		if !ok {
			t.Fatalf("no queue %s", name)
		}
		if life := q.RetentionSeconds; float64(life) >= world.QueuedMarkerTTL.Seconds() {
			t.Errorf("queue %s keeps a message %d s, the marker %v", name, life, world.QueuedMarkerTTL)
		}
	}
	tr := routes.Config(committer.Function).Triggers
	if len(tr) != 1 || tr[0].Queue != routes.ActionQueue || !tr[0].ReportBatchItemFailures {
		t.Fatalf("world-commit's trigger %+v: want the action queue with partial batch failures", tr)
	}
}
