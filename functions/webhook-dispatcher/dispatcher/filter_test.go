package dispatcher_test

import (
	"testing"
	"time"

	"github.com/a2awire/a2awire/functions/webhook-dispatcher/dispatcher"
	"github.com/a2awire/a2awire/local/cloud"
	"github.com/a2awire/a2awire/shared/routes"
	"github.com/a2awire/a2awire/shared/store"
	"github.com/a2awire/a2awire/shared/world"
	"github.com/aws/aws-lambda-go/events"
)

// TestStreamFilterPassesEveryEvent: the route table's filter on the
// dispatcher's stream passes the INSERT of every event item world writes —
// public, agents-visible and private — and not the event head's, nor an
// event's TTL delete.
func TestStreamFilterPassesEveryEvent(t *testing.T) {
	cfg := routes.Config(dispatcher.Function)
	f, err := cloud.NewFilter(cfg.Triggers[0].Patterns())
	if err != nil {
		t.Fatal(err)
	}
	ids := world.NewIDs()
	now := time.Now()
	var evs []world.Event
	for _, vis := range []world.Visibility{world.Public, world.Agents, world.Private} {
		rcpt := ""
		if vis == world.Private {
			rcpt = "aw:sha256:" + "00000000000000000000000000000000000000000000000000000000000000aa"
		}
		e, err := ids.NewEvent("w1", world.AgentJoined, vis, rcpt, map[string]any{"x": 1}, now)
		if err != nil {
			t.Fatal(err)
		}
		evs = append(evs, e)
	}
	rec := func(name string, k store.Key, it store.Item) events.DynamoDBEventRecord {
		keys := store.StreamImage(store.Item{store.AttrPK: store.S(k.PK), store.AttrSK: store.S(k.SK)})
		r := events.DynamoDBEventRecord{EventName: name, Change: events.DynamoDBStreamRecord{Keys: keys, SequenceNumber: "1"}}
		if it != nil {
			r.Change.NewImage = store.StreamImage(it)
		}
		return r
	}
	for _, e := range evs {
		k := world.EventKey(e)
		if ok, err := f.MatchValue(rec(store.EventInsert, k, store.Item{world.AttrType: store.S(world.TypeEvent)})); !ok || err != nil {
			t.Errorf("%s event INSERT filtered out (%v)", e.Visibility, err)
		}
		if ok, _ := f.MatchValue(rec(store.EventRemove, k, nil)); ok {
			t.Errorf("%s event REMOVE passes", e.Visibility)
		}
	}
	if ok, _ := f.MatchValue(rec(store.EventInsert, world.EventHeadKey("w1"), store.Item{})); ok {
		t.Error("event head INSERT passes")
	}
	if ok, _ := f.MatchValue(rec(store.EventInsert, world.WebhookKey("w1", "aw:x"), store.Item{})); ok {
		t.Error("webhook item INSERT passes")
	}
}
