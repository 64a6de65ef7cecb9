package dispatcher_test

import (
	"context"
	"crypto/ed25519"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/a2awire/a2awire/functions/webhook-deliver/deliverer"
	"github.com/a2awire/a2awire/functions/webhook-dispatcher/dispatcher"
	"github.com/a2awire/a2awire/local/cloud"
	"github.com/a2awire/a2awire/shared/egress"
	"github.com/a2awire/a2awire/shared/logging"
	"github.com/a2awire/a2awire/shared/queue"
	"github.com/a2awire/a2awire/shared/routes"
	"github.com/a2awire/a2awire/shared/store"
	"github.com/a2awire/a2awire/shared/store/dynamo/dynamolocal"
	"github.com/a2awire/a2awire/shared/store/storetest/stores"
	"github.com/a2awire/a2awire/shared/webhook"
	"github.com/a2awire/a2awire/shared/webhook/delivery"
	"github.com/a2awire/a2awire/shared/webhook/signature"
	"github.com/a2awire/a2awire/shared/world"
	"github.com/aws/aws-lambda-go/events"
)

var local *dynamolocal.Server

func TestMain(m *testing.M) {
	os.Exit(dynamolocal.Main(m, func(s *dynamolocal.Server) { local = s }))
}

type delivered struct {
	header http.Header
	body   []byte
	at     time.Time
}

// submitter stands in for the world service's ForwardAction: it appends
// the agents-visible action.submitted event the service writes, marked as
// forwarded.
type submitter struct {
	st  store.Store
	ids *world.IDs
}

func (s submitter) ForwardAction(ctx context.Context, worldID, awnID, action string, params json.RawMessage) (string, error) {
	e, err := s.ids.NewEvent(worldID, world.ActionSubmitted, world.Agents, "", map[string]any{"actionId": "a1", "awnId": awnID, "action": action, "params": params, "via": world.ViaWebhook}, time.Now())
	if err != nil {
		return "", err
	}
	_, err = s.st.Write(ctx, world.EventPut(e))
	return e.ID, err
}

// TestStreamDeliversWithinASecond drives the function's Lambda entry from
// each engine's change feed, and the deliverer's from the delivery queue
// it fills — memory's and bolt's own, DynamoDB Local's
// real table stream — with the route table's trigger settings: an event
// written to the table reaches a receiver on 127.0.0.1 within 1 s, signed
// (v1 with its secret, v1a with the network key). A receiver that answers
// with an action has it forwarded: the world's next event is that agent's
// action.submitted, delivered to the other member too; the agent's answer
// to its own action is not forwarded again.
func TestStreamDeliversWithinASecond(t *testing.T) {
	cfg := routes.Config(dispatcher.Function)
	if len(cfg.Triggers) != 1 || cfg.Triggers[0].Kind != routes.StreamTrigger || !cfg.Triggers[0].ReportBatchItemFailures {
		t.Fatalf("route table triggers of %s: %+v", dispatcher.Function, cfg.Triggers)
	}
	for _, eng := range stores.All(local) {
		t.Run(eng.Name, func(t *testing.T) {
			st, feed := eng.OpenFeed(t)
			ctx, cancel := context.WithCancel(t.Context())
			defer cancel()
			ids := world.NewIDs()
			key := ed25519.NewKeyFromSeed(make([]byte, 32))
			d, err := webhook.NewDispatcher(webhook.Config{
				Store:      st,
				Client:     egress.NewClient(egress.Options{AllowLoopback: true, AllowHTTP: true, Timeout: delivery.AttemptTimeout}),
				NetworkKey: key,
				Actions:    submitter{st: st, ids: ids},
				Queue:      deliveryQueue(),
			})
			if err != nil {
				t.Fatal(err)
			}
			var wg sync.WaitGroup
			runPipeline(ctx, &wg, d, feed)
			defer wg.Wait()
			defer cancel()

			recv := func() (*httptest.Server, chan delivered) {
				ch := make(chan delivered, 10)
				srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
					b, _ := io.ReadAll(r.Body)
					ch <- delivered{header: r.Header.Clone(), body: b, at: time.Now()}
					// A's receiver answers these two with an action.
					if r.URL.Path == "/acts" && (strings.Contains(string(b), `"event":"agent.joined"`) || strings.Contains(string(b), `"event":"action.submitted"`)) {
						_, _ = io.WriteString(w, `{"action":"wave","params":{"to":"all"}}`)
						return
					}
					w.WriteHeader(http.StatusNoContent)
				}))
				t.Cleanup(srv.Close)
				return srv, ch
			}
			srvA, gotA := recv()
			srvB, gotB := recv()
			addMember(t, st, "w", "aw:a", "aw:b")
			secretA, err := d.Store().Set(ctx, "w", "aw:a", srvA.URL+"/acts")
			if err != nil {
				t.Fatal(err)
			}
			if _, err := d.Store().Set(ctx, "w", "aw:b", srvB.URL+"/quiet"); err != nil {
				t.Fatal(err)
			}
			wait := func(ch chan delivered, within time.Duration) delivered {
				t.Helper()
				select {
				case g := <-ch:
					return g
				case <-time.After(within):
					t.Fatalf("nothing delivered within %v", within)
					return delivered{}
				}
			}
			// The feed's first read may still be starting (DynamoDB Local's
			// stream shards): a warm-up event first, then the timed one.
			warm, _ := ids.NewEvent("w", world.PresenceChanged, world.Public, "", map[string]any{}, time.Now())
			if _, err := st.Write(ctx, world.EventPut(warm)); err != nil {
				t.Fatal(err)
			}
			wait(gotA, 10*time.Second)
			wait(gotB, 10*time.Second)
			// Let the warm-up's own writes (stats) pass through the feed.
			time.Sleep(500 * time.Millisecond)

			// Five private events for A, one at a time: each reaches A's
			// receiver within 1 s of its commit, signed.
			var slowest time.Duration
			for i := range 5 {
				e, _ := ids.NewEvent("w", world.MessageReceived, world.Private, "aw:a", map[string]any{"from": "aw:b", "i": i}, time.Now())
				start := time.Now()
				if _, err := st.Write(ctx, world.EventPut(e)); err != nil {
					t.Fatal(err)
				}
				g := wait(gotA, time.Second)
				slowest = max(slowest, g.at.Sub(start))
				if g.header.Get("webhook-id") != e.ID {
					t.Fatalf("delivered %s, want %s", g.header.Get("webhook-id"), e.ID)
				}
				if err := signature.VerifyV1(g.header, g.body, secretA, 0); err != nil {
					t.Fatalf("v1: %v", err)
				}
				if err := signature.VerifyV1a(g.header, g.body, key.Public().(ed25519.PublicKey), 0); err != nil {
					t.Fatalf("v1a: %v", err)
				}
			}
			t.Logf("%s: event commit → delivery, slowest of 5: %v", eng.Name, slowest)
			select {
			case g := <-gotB:
				t.Fatalf("B got A's private event: %s", g.body)
			default:
			}

			// Action forwarding end to end.
			j, _ := ids.NewEvent("w", world.AgentJoined, world.Public, "", map[string]any{"awnId": "aw:c"}, time.Now())
			if _, err := st.Write(ctx, world.EventPut(j)); err != nil {
				t.Fatal(err)
			}
			wait(gotA, 2*time.Second)
			wait(gotB, 2*time.Second)
			for _, ch := range []chan delivered{gotA, gotB} {
				g := wait(ch, 2*time.Second)
				var body struct {
					Event   string
					Payload struct{ AWNID, Action string } `json:"payload"`
				}
				if err := json.Unmarshal(g.body, &body); err != nil {
					t.Fatal(err)
				}
				if body.Event != world.ActionSubmitted || body.Payload.AWNID != "aw:a" || body.Payload.Action != "wave" {
					t.Fatalf("after the answer: %s", g.body)
				}
			}
			// A answered its own action.submitted with an action too; it
			// was not forwarded, so nothing more comes.
			select {
			case g := <-gotB:
				t.Fatalf("a second forwarded action: %s", g.body)
			case <-time.After(500 * time.Millisecond):
			}
			p, err := st.Query(ctx, store.Query{PK: world.SharedEventsPK("w")})
			if err != nil {
				t.Fatal(err)
			}
			n := 0
			for _, it := range p.Items {
				if ev, err := world.DecodeEvent(it); err == nil && ev.Type == world.ActionSubmitted {
					n++
				}
			}
			if n != 1 {
				t.Fatalf("%d action.submitted events, want 1", n)
			}
		})
	}
}

// TestStreamSkipsNonEvents: the function's handler ignores every record
// that is not the INSERT of an event item — webhook items, retry items,
// stats updates, event removals — so its own writes never feed it; an
// event's INSERT enqueues its delivery and attempts nothing.
func TestStreamSkipsNonEvents(t *testing.T) {
	st := stores.Memory().Open(t)
	var hits atomic.Int64
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) { hits.Add(1); w.WriteHeader(204) }))
	defer srv.Close()
	q := deliveryQueue()
	d, err := webhook.NewDispatcher(webhook.Config{Store: st, Client: egress.NewClient(egress.Options{AllowLoopback: true, AllowHTTP: true}), Queue: q})
	if err != nil {
		t.Fatal(err)
	}
	addMember(t, st, "w", "aw:a")
	if _, err := d.Store().Set(t.Context(), "w", "aw:a", srv.URL); err != nil {
		t.Fatal(err)
	}
	hook, _ := st.Get(t.Context(), world.WebhookKey("w", "aw:a"))
	e, _ := world.NewIDs().NewEvent("w", world.PresenceChanged, world.Public, "", map[string]any{}, time.Now())
	evItem := store.Item{}
	for k, v := range world.EventPut(e).Item {
		evItem[k] = v
	}
	evItem[store.AttrPK], evItem[store.AttrSK] = store.S(world.SharedEventsPK("w")), store.S(e.ID)
	var seq uint64
	rec := func(name string, old, new store.Item) events.DynamoDBEventRecord {
		seq++
		r, _ := store.ChangeRecord("arn:test", seq, time.Now().Unix(), old, new)
		r.EventName = name
		return r
	}
	resp, err := dispatcher.New(d)(t.Context(), events.DynamoDBEvent{Records: []events.DynamoDBEventRecord{
		rec(store.EventInsert, nil, hook),
		rec(store.EventModify, hook, hook),
		rec(store.EventModify, evItem, evItem),
		rec(store.EventRemove, evItem, nil),
	}})
	if err != nil || len(resp.BatchItemFailures) != 0 || q.Len() != 0 || hits.Load() != 0 {
		t.Fatalf("resp %+v, err %v, %d enqueued, %d attempts", resp, err, q.Len(), hits.Load())
	}
	resp, err = dispatcher.New(d)(t.Context(), events.DynamoDBEvent{Records: []events.DynamoDBEventRecord{rec(store.EventInsert, nil, evItem)}})
	if err != nil || len(resp.BatchItemFailures) != 0 || q.Len() != 1 || hits.Load() != 0 {
		t.Fatalf("event insert: resp %+v, err %v, %d enqueued, %d attempts (want one delivery enqueued, none attempted)", resp, err, q.Len(), hits.Load())
	}
}

// failingQueries is a store whose Queries fail (the store is overloaded).
type failingQueries struct{ store.Store }

func (failingQueries) Query(context.Context, store.Query) (store.Page, error) {
	return store.Page{}, store.ErrUnavailable
}

// TestStreamReportsUnschedulable: a record whose recipients cannot be read
// is reported in batchItemFailures (and only that one: a private event's
// recipient is a Get, which still works).
func TestStreamReportsUnschedulable(t *testing.T) {
	st := stores.Memory().Open(t)
	d, err := webhook.NewDispatcher(webhook.Config{Store: failingQueries{st}, Queue: deliveryQueue()})
	if err != nil {
		t.Fatal(err)
	}
	ids := world.NewIDs()
	pub, _ := ids.NewEvent("w", world.PresenceChanged, world.Public, "", map[string]any{}, time.Now())
	priv, _ := ids.NewEvent("w", world.MessageReceived, world.Private, "aw:a", map[string]any{}, time.Now())
	var recs []events.DynamoDBEventRecord
	for i, e := range []world.Event{priv, pub} {
		it := store.Item{}
		for k, v := range world.EventPut(e).Item {
			it[k] = v
		}
		k := world.EventKey(e)
		it[store.AttrPK], it[store.AttrSK] = store.S(k.PK), store.S(k.SK)
		r, _ := store.ChangeRecord("arn:test", uint64(i+1), time.Now().Unix(), nil, it)
		recs = append(recs, r)
	}
	resp, err := dispatcher.New(d)(t.Context(), events.DynamoDBEvent{Records: recs})
	if err != nil || len(resp.BatchItemFailures) != 1 || resp.BatchItemFailures[0].ItemIdentifier != recs[1].Change.SequenceNumber {
		t.Fatalf("resp %+v, err %v; want the public event's record %s only", resp, err, recs[1].Change.SequenceNumber)
	}
}

// addMember writes the member items a join writes for awnIDs in worldID: a
// webhook needs a member.
func addMember(t *testing.T, st store.Store, worldID string, awnIDs ...string) {
	t.Helper()
	for _, id := range awnIDs {
		if _, err := st.Write(t.Context(), world.BareMembership(worldID, id)...); err != nil {
			t.Fatal(err)
		}
	}
}

// deliveryQueue is an in-process delivery queue with the route table's
// settings.
func deliveryQueue() *queue.Memory {
	cfg, _ := routes.QueueConfig(routes.DeliveryQueue)
	dead := queue.NewMemory(queue.Config{VisibilityTimeout: time.Minute})
	return queue.NewMemory(queue.Config{VisibilityTimeout: time.Duration(cfg.VisibilityTimeoutSeconds) * time.Second, MaxReceiveCount: cfg.MaxReceiveCount},
		queue.WithDeadLetter(dead))
}

// runPipeline drives the path an event takes in AWS, with the route
// table's trigger settings: the dispatcher's entry from feed (its stream
// trigger), the deliverer's from d's delivery queue (its queue trigger).
func runPipeline(ctx context.Context, wg *sync.WaitGroup, d *webhook.Dispatcher, feed store.Feed) {
	cfg := routes.Config(dispatcher.Function)
	stream := &cloud.Stream{Entry: cloud.NewEntry(dispatcher.Function, dispatcher.New(d), time.Duration(cfg.TimeoutSeconds)*time.Second),
		Feed: feed, Trigger: cfg.Triggers[0], Log: logging.Discard(),
		Backoff: cloud.Backoff{Initial: 10 * time.Millisecond, Max: 100 * time.Millisecond}}
	wcfg := routes.Config(deliverer.Function)
	mapping := &cloud.QueueMapping{Entry: cloud.NewEntry(deliverer.Function, deliverer.New(d), time.Duration(wcfg.TimeoutSeconds)*time.Second),
		Queue: d.Queue(), Trigger: wcfg.Triggers[0], Log: logging.Discard()}
	wg.Go(func() { _ = stream.Run(ctx) })
	wg.Go(func() { _ = mapping.Run(ctx) })
}
