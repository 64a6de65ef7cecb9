package main

import (
	"bytes"
	"context"
	"crypto/ed25519"
	"encoding/json"
	"fmt"
	"maps"
	"net/http"
	"net/http/httptest"
	"time"

	"github.com/a2awire/a2awire/cmd/a2awire-bench/fanout"
	"github.com/a2awire/a2awire/functions/webhook-deliver/deliverer"
	"github.com/a2awire/a2awire/functions/webhook-dispatcher/dispatcher"
	"github.com/a2awire/a2awire/local/cloud"
	"github.com/a2awire/a2awire/shared/egress"
	"github.com/a2awire/a2awire/shared/logging"
	"github.com/a2awire/a2awire/shared/queue"
	"github.com/a2awire/a2awire/shared/routes"
	"github.com/a2awire/a2awire/shared/store"
	"github.com/a2awire/a2awire/shared/store/dynamo"
	"github.com/a2awire/a2awire/shared/store/dynamo/capacity"
	"github.com/a2awire/a2awire/shared/store/dynamo/dynamolocal"
	"github.com/a2awire/a2awire/shared/store/memory"
	"github.com/a2awire/a2awire/shared/webhook"
	"github.com/a2awire/a2awire/shared/world"
	"github.com/aws/aws-lambda-go/events"
)

// loopbackClient is the dispatcher's HTTP client as the local harness
// builds it: the egress rules with 127.0.0.1 and http allowed, since the
// measured receivers listen there.
func loopbackClient() *http.Client {
	return egress.NewClient(egress.Options{AllowLoopback: true, AllowHTTP: true})
}

// networkKey is a fixed network signing key, so deliveries carry v1a as
// they do when NETWORK_SIGNING_KEY is set.
func networkKey() ed25519.PrivateKey {
	return ed25519.NewKeyFromSeed(bytes.Repeat([]byte{41}, ed25519.SeedSize))
}

// webhookCostRow is row 4m: the DynamoDB calls of delivering one event,
// through the webhook-dispatcher's Lambda entry (the stream batch as JSON,
// as Lambda hands it over) on DynamoDB Local: a private event to its one
// recipient, and a public event to 5 webhooks that all answer 204.
func webhookCostRow(ctx context.Context, server *dynamolocal.Server, table string) Row {
	row := Row{ID: "4m", Name: "DynamoDB cost: webhook delivery (webhook-dispatcher; private event; public event to 5 webhooks)",
		Method: "one stream record (the event's INSERT, built by store.ChangeRecord) as JSON through the webhook-dispatcher's Lambda entry (cloud.NewEntry over dispatcher.New), then the deliveries it enqueued through webhook-deliver's handler (network key set, loopback receivers answering 204), on DynamoDB Local; calls and units from shared/store/dynamo/capacity; target = the webhook rows of docs/storage.md's cost table",
		Target: "private: 3 GetItem (webhook twice, membership) + 1 Query + 2 PutItem + 1 DeleteItem (endpoint slot and limit) + 1 UpdateItem (stats); public to N: 1+N Query + 2N GetItem + 2N PutItem + N DeleteItem + N UpdateItem; + 1 UpdateItem of the webhook item per outcome that changes whether it answered (each webhook's first success here: 1 private, 4 public), + 1 PutItem per failed attempt (none here)"}
	m := capacity.New()
	st := dynamo.New(server.Client(m.Option()), table)
	q := deliveryQueue()
	d, err := webhook.NewDispatcher(webhook.Config{Store: st, Client: loopbackClient(), NetworkKey: networkKey(), Actions: world.New(st), Log: logging.Discard(), Queue: q})
	if err != nil {
		return failed(row, err)
	}
	work := deliverer.New(d)
	cfg := routes.Config(dispatcher.Function)
	entry := cloud.NewEntry(dispatcher.Function, dispatcher.New(d), time.Duration(max(cfg.TimeoutSeconds, 3))*time.Second)
	receiver := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { w.WriteHeader(http.StatusNoContent) }))
	defer receiver.Close()
	const w = "bench-hooks"
	hooks := webhook.NewStore(st)
	for i := range 5 {
		id := fmt.Sprintf("aw:bench-hook-%d", i)
		// A webhook needs a member: the member item a join writes.
		if _, err := st.Write(ctx, world.BareMembership(w, id)...); err != nil {
			return failed(row, fmt.Errorf("member %d: %w", i, err))
		}
		if _, err := hooks.Set(ctx, w, id, fmt.Sprintf("%s/%d", receiver.URL, i)); err != nil {
			return failed(row, fmt.Errorf("webhook %d: %w", i, err))
		}
	}
	ids := world.NewIDs()
	evlog := world.NewLog(st, ids, nil)
	seq := uint64(0)
	deliver := func(vis world.Visibility, recipient string) (capacity.Report, error) {
		e, err := ids.NewEvent(w, world.PresenceChanged, vis, recipient, map[string]any{"bench": true}, time.Now())
		if err != nil {
			return nil, err
		}
		if e, err = evlog.Commit(ctx, e); err != nil {
			return nil, fmt.Errorf("event: %w", err)
		}
		put := world.EventPut(e)
		it := maps.Clone(put.Item)
		it[store.AttrPK], it[store.AttrSK] = store.S(put.Key.PK), store.S(put.Key.SK)
		seq++
		rec, _ := store.ChangeRecord("arn:aws:dynamodb:local:000000000000:table/"+table+"/stream/bench", seq, time.Now().Unix(), nil, it)
		payload, err := json.Marshal(events.DynamoDBEvent{Records: []events.DynamoDBEventRecord{rec}})
		if err != nil {
			return nil, err
		}
		m.Reset()
		out, err := entry.Invoke(ctx, payload)
		if err != nil {
			return nil, fmt.Errorf("webhook-dispatcher: %w", err)
		}
		var resp struct {
			BatchItemFailures []any `json:"batchItemFailures"`
		}
		if err := json.Unmarshal(out, &resp); err == nil && len(resp.BatchItemFailures) > 0 {
			return nil, fmt.Errorf("webhook-dispatcher reported failures: %s", out)
		}
		// The deliverer works what the dispatcher enqueued.
		for {
			msgs, err := q.Receive(ctx, queue.MaxBatch, 0)
			if err != nil || len(msgs) == 0 {
				break
			}
			var ev events.SQSEvent
			for _, r := range msgs {
				ev.Records = append(ev.Records, events.SQSMessage{MessageId: r.ID, ReceiptHandle: r.Receipt, Body: r.Body,
					Attributes: map[string]string{"ApproximateReceiveCount": fmt.Sprint(r.ReceiveCount)}})
			}
			resp, err := work(ctx, ev)
			if err != nil || len(resp.BatchItemFailures) > 0 {
				return nil, fmt.Errorf("webhook-deliver: %v %+v", err, resp)
			}
			for _, r := range msgs {
				_ = q.Delete(ctx, r.Receipt)
			}
		}
		return m.Take(), nil
	}
	start := time.Now()
	private, err := deliver(world.Private, "aw:bench-hook-0")
	if err != nil {
		return failed(row, err)
	}
	privateMS := float64(time.Since(start).Microseconds()) / 1000
	public, err := deliver(world.Public, "")
	if err != nil {
		return failed(row, err)
	}
	// The dispatcher reads the recipients (a private event: its webhook; a
	// public one: one Query); per delivery the deliverer queries and takes
	// the endpoint's slot, reads the webhook and the membership, frees the
	// slot, raises the endpoint's limit after a fast answer and counts it;
	// a webhook's first success changes whether it answered, which the
	// webhook item keeps for presence (1 UpdateItem): hook 0's in the
	// private delivery, hooks 1–4's in the public one.
	privBudget := budget{calls: map[string]int{"GetItem": 3, "Query": 1, "PutItem": 2, "DeleteItem": 1, "UpdateItem": 1 + 1}}
	pubBudget := budget{calls: map[string]int{"Query": 6, "GetItem": 10, "PutItem": 10, "DeleteItem": 5, "UpdateItem": 5 + 4}}
	pt, ut := private.Total(), public.Total()
	row.Result = fmt.Sprintf("private: %s; %g read + %g write units; public to 5: %s; %g read + %g write units",
		callsString(private.Calls()), pt.ReadUnits, pt.WriteUnits, callsString(public.Calls()), ut.ReadUnits, ut.WriteUnits)
	row.Values = map[string]float64{"private_calls": float64(pt.Calls), "public5_calls": float64(ut.Calls),
		"private_read_units": pt.ReadUnits, "private_write_units": pt.WriteUnits, "public5_read_units": ut.ReadUnits, "public5_write_units": ut.WriteUnits,
		"private_ms": privateMS,
		// One delivery of a private event: the dispatcher's invocation
		// and the deliverer's (each its own batch at worst), 3 SQS
		// requests (send, receive, delete; batches of 10 cut them), the
		// Lambda time of both (measured end to end here, on DynamoDB
		// Local, against a loopback receiver) and the units; the stream's
		// reads by a Lambda trigger are not billed.
		"usd_per_million": deliveryUSDPerMillion(privateMS, routes.Config(dispatcher.Function).MemoryMB, pt.ReadUnits, pt.WriteUnits)}
	row.Status = within(privBudget.allows(private.Calls()) && pubBudget.allows(public.Calls()))
	return row
}

// fanoutRow is row 7: 100 webhooks on 127.0.0.1 in one world, events
// committed one after another on the memory engine (the store `make local`
// runs), delivered by the webhook-dispatcher's Lambda entry driven from
// the engine's change feed with the route table's trigger, as the harness
// drives it; each delivery timed from the event's commit to its arrival.
func fanoutRow(ctx context.Context, events int) Row {
	row := Row{ID: "7", Name: "webhook fan-out: deliveries/s to 100 loopback receivers in one world, p99 event → delivery",
		Target: "reported (no written target)", Status: Info,
		Method: fmt.Sprintf("cmd/a2awire-bench/fanout: 100 receivers on 127.0.0.1, %d public events committed one after another on the memory engine, each awaited by all; enqueued by the webhook-dispatcher's Lambda entry driven from the engine's change feed and delivered by webhook-deliver's from the in-process delivery queue, each with its route-table trigger (cloud.Stream, cloud.QueueMapping, as make local runs them); latency = commit → arrival; deliveries/s = deliveries ÷ first commit → last arrival", events)}
	return runFanout(ctx, row, fanout.Options{Receivers: 100, Events: events, Timeout: 30 * time.Second})
}

// fanoutWideRow is row 9: one public event to 10,000 webhooks, all on one
// loopback listener, each on its own path (so 10,000 endpoints, each with
// its own concurrency cap), through the same path as row 7. Bounded by a
// 60 s wait for the deliveries.
func fanoutWideRow(ctx context.Context) Row {
	row := Row{ID: "9", Name: "webhook fan-out: one public event to 10,000 loopback webhooks (one listener, many paths): deliveries/s, p99 commit → delivery",
		Target: "reported (no written target)", Status: Info,
		Method: "cmd/a2awire-bench/fanout with OneListener: 10,000 members of one world, each a webhook http://127.0.0.1:<port>/r/<i> on one listener; one public event committed on the memory engine, enqueued as 10,000 messages by the webhook-dispatcher's Lambda entry from the engine's change feed and delivered by webhook-deliver's entry from the in-process delivery queue (route-table triggers: batches of 10, 100 concurrent invocations); latency = commit → arrival; deliveries/s = deliveries ÷ commit → last arrival; wait bounded at 60 s"}
	return runFanout(ctx, row, fanout.Options{Receivers: 10000, Events: 1, OneListener: true, Timeout: 60 * time.Second})
}

// runFanout measures o through the dispatcher's and the deliverer's
// Lambda entries on a fresh memory store, as make local runs them.
func runFanout(ctx context.Context, row Row, o fanout.Options) Row {
	st := memory.New()
	defer st.Close()
	d, err := webhook.NewDispatcher(webhook.Config{Store: st, Client: loopbackClient(), NetworkKey: networkKey(), Actions: world.New(st), Log: logging.Discard(), Queue: deliveryQueue()})
	if err != nil {
		return failed(row, err)
	}
	cfg := routes.Config(dispatcher.Function)
	if len(cfg.Triggers) == 0 {
		return failed(row, fmt.Errorf("%s has no stream trigger in the route table", dispatcher.Function))
	}
	s := &cloud.Stream{Entry: cloud.NewEntry(dispatcher.Function, dispatcher.New(d), time.Duration(max(cfg.TimeoutSeconds, 3))*time.Second),
		Feed: st, Trigger: cfg.Triggers[0], Log: logging.Discard()}
	wcfg := routes.Config(deliverer.Function)
	mapping := &cloud.QueueMapping{Entry: cloud.NewEntry(deliverer.Function, deliverer.New(d), time.Duration(wcfg.TimeoutSeconds)*time.Second),
		Queue: d.Queue(), Trigger: wcfg.Triggers[0], Log: logging.Discard()}
	sctx, cancel := context.WithCancel(ctx)
	done := make(chan struct{})
	go func() { _ = s.Run(sctx); close(done) }()
	mdone := make(chan struct{})
	go func() { _ = mapping.Run(sctx); close(mdone) }()
	defer func() { cancel(); <-done; <-mdone }()
	o.Store = st
	r, err := fanout.Run(ctx, o)
	if err != nil {
		return failed(row, err)
	}
	row.Result = fmt.Sprintf("%.0f deliveries/s; p50 %s, p99 %s, max %s (%d deliveries)", r.PerSecond, msString(r.P50), msString(r.P99), msString(r.Max), r.Deliveries)
	row.Values = map[string]float64{"deliveries_per_second": r.PerSecond, "p50_ms": ms(r.P50), "p99_ms": ms(r.P99), "max_ms": ms(r.Max), "deliveries": float64(r.Deliveries)}
	return row
}

// msString renders d in milliseconds with two decimals.
func msString(d time.Duration) string { return fmt.Sprintf("%.2f ms", ms(d)) }

// deliveryQueue is an in-process delivery queue with the route table's
// settings, as the harness runs it.
func deliveryQueue() *queue.Memory {
	cfg, _ := routes.QueueConfig(routes.DeliveryQueue)
	return queue.NewMemory(queue.Config{VisibilityTimeout: time.Duration(cfg.VisibilityTimeoutSeconds) * time.Second, MaxReceiveCount: cfg.MaxReceiveCount},
		queue.WithDeadLetter(queue.NewMemory(queue.Config{VisibilityTimeout: time.Minute})))
}

// deliveryUSDPerMillion is what a million webhook deliveries of one event
// to one receiver cost at the list prices of latency.go: two Lambda
// invocations (dispatcher, deliverer) and ms of their time at memoryMB,
// three SQS requests, and the DynamoDB units.
func deliveryUSDPerMillion(ms float64, memoryMB int, readUnits, writeUnits float64) float64 {
	per := 2*usdLambdaRequest + ms/1000*float64(memoryMB)/1024*usdLambdaGBSecond + 3*usdSQSRequest +
		readUnits*usdReadUnit + writeUnits*usdWriteUnit
	return per * 1e6
}
