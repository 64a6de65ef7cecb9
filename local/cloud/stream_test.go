package cloud_test

import (
	"context"
	"encoding/json"
	"errors"
	"log/slog"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/a2awire/a2awire/local/cloud"
	"github.com/a2awire/a2awire/shared/capture"
	"github.com/a2awire/a2awire/shared/logging"
	"github.com/a2awire/a2awire/shared/routes"
	"github.com/a2awire/a2awire/shared/store"
	"github.com/aws/aws-lambda-go/events"
)

// fakeFeed is a store.Feed over a fixed list of records, with one position
// per consumer, recording every commit.
type fakeFeed struct {
	mu      sync.Mutex
	recs    []events.DynamoDBEventRecord
	pos     map[string]int
	commits []string
	changed chan struct{}
}

func newFakeFeed(n int) *fakeFeed {
	f := &fakeFeed{pos: map[string]int{}, changed: make(chan struct{})}
	for i := 1; i <= n; i++ {
		f.recs = append(f.recs, events.DynamoDBEventRecord{
			EventName: "INSERT", EventSource: "aws:dynamodb",
			Change: events.DynamoDBStreamRecord{SequenceNumber: store.SequenceNumber(uint64(i)),
				Keys: map[string]events.DynamoDBAttributeValue{"pk": events.NewStringAttribute("p"), "sk": events.NewStringAttribute(store.SequenceNumber(uint64(i)))}},
		})
	}
	return f
}

func (f *fakeFeed) Read(ctx context.Context, consumer string, max int) ([]events.DynamoDBEventRecord, error) {
	for {
		f.mu.Lock()
		p := f.pos[consumer]
		ch := f.changed
		if p < len(f.recs) {
			out := slices.Clone(f.recs[p:min(len(f.recs), p+max)])
			f.mu.Unlock()
			return out, nil
		}
		f.mu.Unlock()
		select {
		case <-ctx.Done():
			return nil, ctx.Err()
		case <-ch:
		}
	}
}

func (f *fakeFeed) Commit(_ context.Context, consumer, seq string) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	i := slices.IndexFunc(f.recs, func(r events.DynamoDBEventRecord) bool { return r.Change.SequenceNumber == seq })
	if i < 0 {
		return errors.New("commit of an unknown sequence number")
	}
	f.pos[consumer] = i + 1
	f.commits = append(f.commits, seq)
	return nil
}

func (f *fakeFeed) committed(consumer string) int {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.pos[consumer]
}

// recorder is a stream-triggered function: it records each batch's
// sequence numbers and answers with script(batch number, records).
type recorder struct {
	mu      sync.Mutex
	batches [][]string
	script  func(n int, e events.DynamoDBEvent) (events.DynamoDBEventResponse, error)
}

func (r *recorder) handle(_ context.Context, e events.DynamoDBEvent) (events.DynamoDBEventResponse, error) {
	r.mu.Lock()
	var seqs []string
	for _, rec := range e.Records {
		seqs = append(seqs, rec.Change.SequenceNumber)
	}
	r.batches = append(r.batches, seqs)
	n := len(r.batches)
	r.mu.Unlock()
	return r.script(n, e)
}

func (r *recorder) seen() [][]string {
	r.mu.Lock()
	defer r.mu.Unlock()
	return slices.Clone(r.batches)
}

func seq(i int) string { return store.SequenceNumber(uint64(i)) }

func runStream(t *testing.T, f *fakeFeed, trig routes.Trigger, r *recorder, until func() bool) {
	t.Helper()
	s := &cloud.Stream{
		Entry:   cloud.NewEntry("fn-stream", r.handle, time.Second),
		Feed:    f,
		Trigger: trig,
		Log:     logging.Discard(),
		Backoff: cloud.Backoff{Initial: time.Millisecond, Max: 4 * time.Millisecond},
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- s.Run(ctx) }()
	deadline := time.After(10 * time.Second)
	for !until() {
		select {
		case <-deadline:
			cancel()
			t.Fatalf("stream did not get there; batches %v", r.seen())
		case <-time.After(time.Millisecond):
		}
	}
	cancel()
	select {
	case err := <-done:
		if err != nil {
			t.Fatalf("Run: %v", err)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("stream did not stop on cancel")
	}
}

func TestStreamDeliversBatchesInOrder(t *testing.T) {
	f := newFakeFeed(7)
	r := &recorder{script: func(int, events.DynamoDBEvent) (events.DynamoDBEventResponse, error) {
		return events.DynamoDBEventResponse{}, nil
	}}
	runStream(t, f, routes.Trigger{Kind: routes.StreamTrigger, BatchSize: 3}, r, func() bool { return f.committed("fn-stream") == 7 })
	want := [][]string{{seq(1), seq(2), seq(3)}, {seq(4), seq(5), seq(6)}, {seq(7)}}
	if got := r.seen(); !slices.EqualFunc(got, want, slices.Equal) {
		t.Errorf("batches %v, want %v", got, want)
	}
}

// TestStreamRetriesFailedBatchNeverSkips: an error, then a panic, then a
// timeout on the first batch; each time the same records come again.
func TestStreamRetriesFailedBatchNeverSkips(t *testing.T) {
	f := newFakeFeed(4)
	r := &recorder{script: func(n int, e events.DynamoDBEvent) (events.DynamoDBEventResponse, error) {
		switch n {
		case 1:
			return events.DynamoDBEventResponse{}, errors.New("boom")
		case 2:
			panic("kaboom")
		case 3:
			time.Sleep(1500 * time.Millisecond) // past the 1 s timeout
		}
		return events.DynamoDBEventResponse{}, nil
	}}
	runStream(t, f, routes.Trigger{Kind: routes.StreamTrigger, BatchSize: 2}, r, func() bool { return f.committed("fn-stream") == 4 })
	got := r.seen()
	first := []string{seq(1), seq(2)}
	for i := range 4 {
		if !slices.Equal(got[i], first) {
			t.Fatalf("attempt %d got %v, want the failed batch %v again (all: %v)", i+1, got[i], first, got)
		}
	}
	if !slices.Equal(got[4], []string{seq(3), seq(4)}) || len(got) != 5 {
		t.Errorf("after the retries: %v", got)
	}
	if !slices.Equal(f.commits, []string{seq(2), seq(4)}) {
		t.Errorf("commits %v, want only after successes", f.commits)
	}
}

// TestStreamBatchItemFailures: the function reports record 3 of 1..4
// failed; the feed is committed up to 2 and 3..4 come again.
func TestStreamBatchItemFailures(t *testing.T) {
	f := newFakeFeed(4)
	r := &recorder{script: func(n int, e events.DynamoDBEvent) (events.DynamoDBEventResponse, error) {
		if n == 1 {
			return events.DynamoDBEventResponse{BatchItemFailures: []events.DynamoDBBatchItemFailure{
				{ItemIdentifier: seq(4)}, {ItemIdentifier: seq(3)}}}, nil
		}
		if n == 2 {
			// The first record failed: nothing can be committed.
			return events.DynamoDBEventResponse{BatchItemFailures: []events.DynamoDBBatchItemFailure{{ItemIdentifier: seq(3)}}}, nil
		}
		return events.DynamoDBEventResponse{}, nil
	}}
	runStream(t, f, routes.Trigger{Kind: routes.StreamTrigger, BatchSize: 10, ReportBatchItemFailures: true}, r,
		func() bool { return f.committed("fn-stream") == 4 })
	want := [][]string{{seq(1), seq(2), seq(3), seq(4)}, {seq(3), seq(4)}, {seq(3), seq(4)}}
	if got := r.seen(); !slices.EqualFunc(got, want, slices.Equal) {
		t.Errorf("batches %v, want %v", got, want)
	}
	if !slices.Equal(f.commits, []string{seq(2), seq(4)}) {
		t.Errorf("commits %v", f.commits)
	}
}

// TestStreamIgnoresFailuresWithoutReportBatchItemFailures: without the
// setting, a response is not read, as Lambda does.
func TestStreamIgnoresFailuresWithoutReportBatchItemFailures(t *testing.T) {
	f := newFakeFeed(2)
	r := &recorder{script: func(int, events.DynamoDBEvent) (events.DynamoDBEventResponse, error) {
		return events.DynamoDBEventResponse{BatchItemFailures: []events.DynamoDBBatchItemFailure{{ItemIdentifier: seq(1)}}}, nil
	}}
	runStream(t, f, routes.Trigger{Kind: routes.StreamTrigger}, r, func() bool { return f.committed("fn-stream") == 2 })
	if got := r.seen(); len(got) != 1 {
		t.Errorf("batches %v, want one", got)
	}
}

// TestStreamUnknownFailureIdRetriesWholeBatch: a batchItemFailures entry that
// names no record of the batch fails all of it.
func TestStreamUnknownFailureIdRetriesWholeBatch(t *testing.T) {
	f := newFakeFeed(2)
	r := &recorder{script: func(n int, _ events.DynamoDBEvent) (events.DynamoDBEventResponse, error) {
		if n == 1 {
			return events.DynamoDBEventResponse{BatchItemFailures: []events.DynamoDBBatchItemFailure{{ItemIdentifier: "nope"}}}, nil
		}
		return events.DynamoDBEventResponse{}, nil
	}}
	runStream(t, f, routes.Trigger{Kind: routes.StreamTrigger, ReportBatchItemFailures: true}, r, func() bool { return f.committed("fn-stream") == 2 })
	want := [][]string{{seq(1), seq(2)}, {seq(1), seq(2)}}
	if got := r.seen(); !slices.EqualFunc(got, want, slices.Equal) {
		t.Errorf("batches %v, want %v", got, want)
	}
}

// TestStreamEventIsSerialized: the function receives the record through
// JSON, as from Lambda: images and keys intact.
func TestStreamEventIsSerialized(t *testing.T) {
	f := newFakeFeed(1)
	var got []byte
	r := &recorder{script: func(_ int, e events.DynamoDBEvent) (events.DynamoDBEventResponse, error) {
		got, _ = json.Marshal(e)
		return events.DynamoDBEventResponse{}, nil
	}}
	runStream(t, f, routes.Trigger{Kind: routes.StreamTrigger}, r, func() bool { return f.committed("fn-stream") == 1 })
	want, _ := json.Marshal(events.DynamoDBEvent{Records: f.recs})
	if string(got) != string(want) {
		t.Errorf("function saw %s\nwant %s", got, want)
	}
}

func TestStreamBatchWindowGathers(t *testing.T) {
	f := newFakeFeed(0)
	r := &recorder{script: func(int, events.DynamoDBEvent) (events.DynamoDBEventResponse, error) {
		return events.DynamoDBEventResponse{}, nil
	}}
	// Two records arrive 100 ms apart inside a 1 s window: one batch.
	go func() {
		for i := 1; i <= 2; i++ {
			time.Sleep(100 * time.Millisecond)
			f.mu.Lock()
			f.recs = append(f.recs, newFakeFeed(i).recs[i-1])
			close(f.changed)
			f.changed = make(chan struct{})
			f.mu.Unlock()
		}
	}()
	runStream(t, f, routes.Trigger{Kind: routes.StreamTrigger, BatchWindowSeconds: 1}, r, func() bool { return f.committed("fn-stream") == 2 })
	if got := r.seen(); len(got) != 1 || len(got[0]) != 2 {
		t.Errorf("batches %v, want one of two records", got)
	}
}

// TestStreamFilterPassesOverRecords: with the route table's event filter,
// only event INSERTs reach the function; the records around them are
// consumed, and a batch of only filtered records invokes nothing. A
// failure on a kept record still retries from that record.
func TestStreamFilterPassesOverRecords(t *testing.T) {
	f := newFakeFeed(0)
	names := []string{"INSERT", "MODIFY", "INSERT", "REMOVE", "INSERT", "INSERT", "INSERT"}
	pks := []string{"NONCE#x", "EVENTS#w", "EVENTS#w", "EVENTS#w", "EVENTS#w#aw:x", "RATE#x", "EVENTHEAD#w"}
	for i := range names {
		r := record(names[i], pks[i], "x")
		r.Change.SequenceNumber = seq(i + 1)
		f.recs = append(f.recs, r)
	}
	failed := false
	r := &recorder{script: func(n int, e events.DynamoDBEvent) (events.DynamoDBEventResponse, error) {
		if !failed && len(e.Records) == 2 {
			// The second kept record fails once: records up to the first
			// kept one are consumed, the second comes again.
			failed = true
			return events.DynamoDBEventResponse{BatchItemFailures: []events.DynamoDBBatchItemFailure{{ItemIdentifier: seq(5)}}}, nil
		}
		return events.DynamoDBEventResponse{}, nil
	}}
	trig := routes.Trigger{Kind: routes.StreamTrigger, BatchSize: 10, ReportBatchItemFailures: true, Filters: []routes.StreamFilter{routes.EventInserts()}}
	runStream(t, f, trig, r, func() bool { return f.committed("fn-stream") == 7 })
	want := [][]string{{seq(3), seq(5)}, {seq(5)}}
	if got := r.seen(); !slices.EqualFunc(got, want, slices.Equal) {
		t.Errorf("batches %v, want %v", got, want)
	}
	if !slices.Equal(f.commits, []string{seq(4), seq(7)}) {
		t.Errorf("commits %v, want past the first kept record, then to the end", f.commits)
	}

	// Only filtered records: consumed without an invocation.
	f = newFakeFeed(0)
	for i, pk := range []string{"NONCE#a", "RATE#b"} {
		r := record("INSERT", pk, "x")
		r.Change.SequenceNumber = seq(i + 1)
		f.recs = append(f.recs, r)
	}
	r = &recorder{script: func(int, events.DynamoDBEvent) (events.DynamoDBEventResponse, error) {
		return events.DynamoDBEventResponse{}, nil
	}}
	runStream(t, f, trig, r, func() bool { return f.committed("fn-stream") == 2 })
	if got := r.seen(); len(got) != 0 {
		t.Errorf("invoked with %v, want no invocation", got)
	}
}

// TestStreamLogsEachBatch: a batch the function took writes one "stream
// batch" line with its function, records and outcome; a failed one its
// error line with the attempt, so the log shows what the stream did.
func TestStreamLogsEachBatch(t *testing.T) {
	f := newFakeFeed(3)
	r := &recorder{script: func(n int, e events.DynamoDBEvent) (events.DynamoDBEventResponse, error) {
		if n == 1 {
			return events.DynamoDBEventResponse{}, errors.New("boom")
		}
		return events.DynamoDBEventResponse{}, nil
	}}
	logs := &capture.Buffer{}
	s := &cloud.Stream{
		Entry:   cloud.NewEntry("fn-stream", r.handle, time.Second),
		Feed:    f,
		Trigger: routes.Trigger{Kind: routes.StreamTrigger, BatchSize: 3},
		Log:     slog.New(slog.NewTextHandler(logs, nil)),
		Backoff: cloud.Backoff{Initial: time.Millisecond, Max: time.Millisecond},
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- s.Run(ctx) }()
	deadline := time.After(10 * time.Second)
	for f.committed("fn-stream") != 3 {
		select {
		case <-deadline:
			cancel()
			t.Fatalf("stream did not commit; batches %v", r.seen())
		case <-time.After(time.Millisecond):
		}
	}
	cancel()
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	out := logs.String()
	for _, want := range []string{
		`level=ERROR msg="stream batch failed; retrying" function=fn-stream records=3 attempt=1`,
		`level=INFO msg="stream batch" function=fn-stream records=3 filtered_out=0 duration_ms=`,
	} {
		if !strings.Contains(out, want) {
			t.Errorf("log lacks %q:\n%s", want, out)
		}
	}
	if n := strings.Count(out, `msg="stream batch"`); n != 1 {
		t.Errorf("%d success lines, want 1:\n%s", n, out)
	}
}
