package dispatcher_test

import (
	"context"
	"errors"
	"net/http"
	"net/http/httptest"
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
	"github.com/a2awire/a2awire/shared/store/dynamo/dynamostream"
	"github.com/a2awire/a2awire/shared/store/storetest/stores"
	"github.com/a2awire/a2awire/shared/streamredrive"
	"github.com/a2awire/a2awire/shared/webhook"
	"github.com/a2awire/a2awire/shared/webhook/delivery"
	"github.com/a2awire/a2awire/shared/world"
)

// brokenQueue is the delivery queue while SQS refuses every send.
type brokenQueue struct {
	queue.Queue
	broken atomic.Bool
	sends  atomic.Int64
}

func (q *brokenQueue) Send(ctx context.Context, msgs ...queue.Message) error {
	if q.broken.Load() {
		q.sends.Add(1)
		return errors.New("SQS unavailable")
	}
	return q.Queue.Send(ctx, msgs...)
}

// TestStreamGiveUpIsRedriven: the path a record takes in AWS when the
// dispatcher cannot do its work, on DynamoDB Local's real stream. While the
// delivery queue refuses every send, the stream trigger (the route table's
// settings: 10 retries, bisection) splits the failing batch down to single
// records, retries each 10 times and then gives up on it: its metadata
// lands in the on-failure queue, and the stream moves on (an event written
// after the queue recovers is delivered). The re-drive (the core of
// cmd/a2awire-redrive, reading the records back with GetShardIterator and
// GetRecords) replays every given-up batch through the dispatcher's entry:
// every event reaches the webhook, none is lost, the queue is empty. A
// failure record naming sequence numbers the stream does not hold is
// reported as not recovered and stays in the queue.
func TestStreamGiveUpIsRedriven(t *testing.T) {
	st, feed := stores.Dynamo(local).OpenFeed(t)
	ctx, cancel := context.WithCancel(t.Context())
	defer cancel()
	got := make(chan string, 100)
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		got <- r.Header.Get("webhook-id")
		w.WriteHeader(http.StatusNoContent)
	}))
	defer srv.Close()
	q := &brokenQueue{Queue: deliveryQueue()}
	d, err := webhook.NewDispatcher(webhook.Config{Store: st, Queue: q,
		Client: egress.NewClient(egress.Options{AllowLoopback: true, AllowHTTP: true, Timeout: delivery.AttemptTimeout})})
	if err != nil {
		t.Fatal(err)
	}
	addMember(t, st, "w", "aw:a")
	if _, err := d.Store().Set(ctx, "w", "aw:a", srv.URL); err != nil {
		t.Fatal(err)
	}
	cfg := routes.Config(dispatcher.Function)
	tr := cfg.Triggers[0]
	if tr.StreamRetries() != 10 || !tr.BisectOnError {
		t.Fatalf("dispatcher's stream trigger: %+v", tr)
	}
	entry := cloud.NewEntry(dispatcher.Function, dispatcher.New(d), time.Duration(cfg.TimeoutSeconds)*time.Second)
	failures := queue.NewMemory(queue.Config{VisibilityTimeout: time.Minute})
	stream := &cloud.Stream{Entry: entry, Feed: feed, Trigger: tr, Log: logging.Discard(), Failures: failures,
		Backoff: cloud.Backoff{Initial: time.Millisecond, Max: 5 * time.Millisecond}}
	wcfg := routes.Config(deliverer.Function)
	mapping := &cloud.QueueMapping{Entry: cloud.NewEntry(deliverer.Function, deliverer.New(d), time.Duration(wcfg.TimeoutSeconds)*time.Second),
		Queue: q.Queue, Trigger: wcfg.Triggers[0], Log: logging.Discard()}
	var wg sync.WaitGroup
	defer wg.Wait()
	defer cancel()
	wg.Go(func() { _ = stream.Run(ctx) })
	wg.Go(func() { _ = mapping.Run(ctx) })

	ids := world.NewIDs()
	put := func() string {
		e, _ := ids.NewEvent("w", world.AgentJoined, world.Public, "", map[string]any{"awnId": "aw:x"}, time.Now())
		if _, err := st.Write(ctx, world.EventPut(e)); err != nil {
			t.Fatal(err)
		}
		return e.ID
	}
	q.broken.Store(true)
	lost := map[string]bool{}
	for range 3 {
		lost[put()] = true
	}
	waitFor(t, 30*time.Second, "three given-up batches", func() bool { return failures.Len() == 3 })
	// 3 records, each handed over alone 11 times (the first try and 10
	// retries), plus the whole-batch tries before the splits.
	if n := q.sends.Load(); n < 33 {
		t.Errorf("%d failed sends, want at least 33", n)
	}
	q.broken.Store(false)
	after := put()
	select {
	case id := <-got:
		if id != after {
			t.Fatalf("delivered %s before the re-drive, want %s", id, after)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("the stream did not move on past the given-up batches")
	}

	streams := &streamredrive.StreamsReader{API: dynamostream.LocalClient(local.Endpoint())}
	r := &streamredrive.Redriver{Failures: failures, Stream: streams, Function: entry, BatchSize: tr.BatchSize}
	rep, err := r.Run(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if rep.Batches != 3 || rep.Recovered != 3 || len(rep.Lost) != 0 || rep.Records < 3 {
		t.Fatalf("re-drive report %+v", rep)
	}
	// Three deliveries to one endpoint at once: its concurrency cap
	// defers some by seconds; nothing here is about latency.
	deadline := time.After(45 * time.Second)
	for len(lost) > 0 {
		select {
		case id := <-got:
			delete(lost, id)
		case <-deadline:
			t.Fatalf("after the re-drive, never delivered: %v", lost)
		}
	}
	if n := failures.Len(); n != 0 {
		t.Errorf("%d failure records left after a whole re-drive", n)
	}

	// A batch of a stream that no longer exists (a table deleted and made
	// again has a new stream): reported, kept.
	goneARN := "arn:aws:dynamodb:ddblocal:000000000000:table/gone/stream/2026-01-01T00:00:00.000"
	if err := failures.Send(ctx, queue.Message{Body: `{"requestContext":{"condition":"RetryAttemptsExhausted"},"DDBStreamBatchInfo":{"startSequenceNumber":"000000000000000000001","endSequenceNumber":"000000000000000000002","batchSize":2,"streamArn":"` + goneARN + `"}}`}); err != nil {
		t.Fatal(err)
	}
	rep, err = r.Run(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if rep.Recovered != 0 || len(rep.Lost) != 1 || !strings.Contains(rep.Lost[0].Why, streamredrive.ErrGone.Error()) || rep.Lost[0].Records != 2 {
		t.Fatalf("re-drive of a range the stream does not hold: %+v", rep)
	}
	t.Logf("not recovered, as it should be: %s", rep.Lost[0].Why)
	if n := failures.Len(); n != 1 {
		t.Errorf("the unrecovered failure record is gone (%d left)", n)
	}
}

func waitFor(t *testing.T, d time.Duration, what string, ok func() bool) {
	t.Helper()
	deadline := time.Now().Add(d)
	for !ok() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(10 * time.Millisecond)
	}
}
