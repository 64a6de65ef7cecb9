package dynamostream_test

import (
	"context"
	"errors"
	"fmt"
	"math/big"
	"sync"
	"testing"
	"time"

	"github.com/aws/aws-lambda-go/events"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"

	"github.com/a2awire/a2awire/shared/store"
	"github.com/a2awire/a2awire/shared/store/dynamo/dynamostream"
	"github.com/a2awire/a2awire/shared/store/storetest"
)

// change is what the feed must carry for one committed write of one key.
type change struct {
	name     string
	old, new store.Item
}

// TestStreamFeed drives a mixed series of writes (failed conditions,
// transactions, a write that changes nothing) through DynamoDB Local and
// checks that its stream, read through the feed, carries exactly the
// committed changes, once, in commit order per key, with the images Get
// returned before and after, in the shape Lambda delivers.
func TestStreamFeed(t *testing.T) {
	s, client, table := newStore(t)
	ctx := context.Background()
	a, b, c := store.Key{PK: "p", SK: "a"}, store.Key{PK: "p", SK: "b"}, store.Key{PK: "q", SK: "c"}
	storetest.MustWrite(t, s, store.Put(store.Key{PK: "before", SK: "feed"}, nil)) // before the feed: not delivered

	streams := local.StreamsClient()
	feed, err := dynamostream.NewFeed(ctx, streams, client, table, dynamostream.WithPollInterval(20*time.Millisecond))
	if err != nil {
		t.Fatal(err)
	}

	want := map[store.Key][]change{}
	write := func(wantErr bool, actions ...store.Action) {
		t.Helper()
		before := map[store.Key]store.Item{}
		for _, x := range actions {
			before[x.Key], _ = s.Get(ctx, x.Key)
		}
		_, err := s.Write(ctx, actions...)
		if (err != nil) != wantErr {
			t.Fatalf("write %v: error %v, want error: %t", actions, err, wantErr)
		}
		for _, x := range actions {
			after, _ := s.Get(ctx, x.Key)
			old := before[x.Key]
			switch {
			case old == nil && after != nil:
				want[x.Key] = append(want[x.Key], change{store.EventInsert, nil, after})
			case old != nil && after == nil:
				want[x.Key] = append(want[x.Key], change{store.EventRemove, old, nil})
			case old != nil && !store.EqualItems(old, after):
				want[x.Key] = append(want[x.Key], change{store.EventModify, old, after})
			}
		}
	}
	write(false, store.Put(a, store.Item{"n": store.N(1), "tags": store.SS("x", "y"), "m": &types.AttributeValueMemberM{Value: store.Item{"l": &types.AttributeValueMemberL{Value: []types.AttributeValue{store.N(1), store.S("z")}}}}}))
	write(false, store.Update(a).AddNum("n", 2).SetAttr("s", store.S("hello")))
	write(true, store.Update(a).AddNum("n", 1).When(store.Eq("n", store.N(0))))                       // failed: nothing
	write(true, store.Put(b, nil), store.Update(a).SetAttr("x", store.N(1)).When(store.ItemAbsent())) // failed tx: nothing
	write(false, store.Put(b, store.Item{"v": store.B([]byte{1, 2})}), store.Update(a).Del("s"), store.Put(c, nil))
	write(false, store.Put(c, nil)) // the same item again: no change
	write(false, store.Delete(a), store.Update(b).SetAttr("v", store.Bool(true)), store.Check(c, store.ItemExists()))
	write(false, store.Delete(a)) // already gone: no change
	write(false, store.Put(a, store.Item{"again": store.Null()}))
	total := 0
	for _, cs := range want {
		total += len(cs)
	}
	if total != 8 {
		t.Fatalf("the series makes %d changes, want 8", total)
	}

	read := func(consumer string, commit bool) []events.DynamoDBEventRecord {
		t.Helper()
		var got []events.DynamoDBEventRecord
		for len(got) < total {
			rctx, cancel := context.WithTimeout(ctx, 10*time.Second)
			recs, err := feed.Read(rctx, consumer, 3)
			cancel()
			if err != nil {
				t.Fatalf("%s after %d records: %v", consumer, len(got), err)
			}
			if len(recs) == 0 || len(recs) > 3 {
				t.Fatalf("a read returned %d records", len(recs))
			}
			if !commit {
				again, err := feed.Read(ctx, consumer, 3)
				if err != nil || len(again) == 0 || again[0].EventID != recs[0].EventID {
					t.Fatalf("a second read without commit: %v, %v", again, err)
				}
				if err := feed.Commit(ctx, consumer, recs[len(recs)-1].Change.SequenceNumber); err != nil {
					t.Fatal(err)
				}
			} else if err := feed.Commit(ctx, consumer, recs[len(recs)-1].Change.SequenceNumber); err != nil {
				t.Fatal(err)
			}
			got = append(got, recs...)
		}
		// Nothing more: no duplicate, no record of a failed write.
		rctx, cancel := context.WithTimeout(ctx, 300*time.Millisecond)
		defer cancel()
		if extra, err := feed.Read(rctx, consumer, 10); !errors.Is(err, context.DeadlineExceeded) {
			t.Fatalf("%s: after the %d changes: %d records, %v", consumer, total, len(extra), err)
		}
		return got
	}
	for _, consumer := range []string{"first", "second"} {
		got := read(consumer, consumer == "first")
		next := map[store.Key]int{}
		lastSeq := map[store.Key]*big.Int{}
		for _, r := range got {
			keys, err := store.FromStreamImage(r.Change.Keys)
			if err != nil || len(keys) != 2 {
				t.Fatalf("keys %v: %v", r.Change.Keys, err)
			}
			k := keys.Key()
			i := next[k]
			next[k]++
			if i >= len(want[k]) {
				t.Fatalf("%s: an extra record for %s: %s", consumer, k, r.EventName)
			}
			w := want[k][i]
			old, err1 := store.FromStreamImage(r.Change.OldImage)
			nw, err2 := store.FromStreamImage(r.Change.NewImage)
			if err1 != nil || err2 != nil {
				t.Fatal(err1, err2)
			}
			if r.EventName != w.name || (old == nil) != (w.old == nil) || (nw == nil) != (w.new == nil) ||
				(old != nil && !store.EqualItems(old, w.old)) || (nw != nil && !store.EqualItems(nw, w.new)) {
				t.Errorf("%s: %s change %d: %s old %v new %v, want %s old %v new %v", consumer, k, i, r.EventName, old, nw, w.name, w.old, w.new)
			}
			seq, ok := new(big.Int).SetString(r.Change.SequenceNumber, 10)
			if !ok || (lastSeq[k] != nil && seq.Cmp(lastSeq[k]) <= 0) {
				t.Errorf("%s: sequence number %q out of order for %s", consumer, r.Change.SequenceNumber, k)
			}
			lastSeq[k] = seq
			if r.EventSource != "aws:dynamodb" || r.EventSourceArn != feed.ARN() || r.EventSourceArn == "" || r.EventID == "" ||
				r.AWSRegion == "" || r.EventVersion == "" || r.Change.StreamViewType != "NEW_AND_OLD_IMAGES" ||
				r.Change.SizeBytes <= 0 || r.Change.ApproximateCreationDateTime.IsZero() {
				t.Errorf("record fields: %+v", r)
			}
		}
		for k, cs := range want {
			if next[k] != len(cs) {
				t.Errorf("%s: %s: %d records, want %d", consumer, k, next[k], len(cs))
			}
		}
	}
	if err := feed.Commit(ctx, "first", "12345"); !errors.Is(err, store.ErrInvalid) {
		t.Errorf("commit of an unknown sequence number: %v", err)
	}

	// From the trim horizon, the write made before the first feed comes first.
	all, err := dynamostream.NewFeed(ctx, streams, client, table, dynamostream.FromTrimHorizon())
	if err != nil {
		t.Fatal(err)
	}
	recs, err := all.Read(ctx, "x", 1)
	if err != nil || len(recs) != 1 || recs[0].Change.Keys["pk"].String() != "before" {
		t.Fatalf("trim horizon: %v, %v", recs, err)
	}
}

// TestStreamFeedNeedsAStream: a table without a stream is an error, not a
// feed that never delivers.
func TestStreamFeedNeedsAStream(t *testing.T) {
	_, err := dynamostream.NewFeed(context.Background(), local.StreamsClient(), local.Client(), "no-such-table")
	if err == nil {
		t.Fatal("a feed on a missing table")
	}
}

// TestStreamFeedOnAnEmptyTable: a feed started on a table with no record
// yet delivers the first writes, even when another table wrote in between
// (DynamoDB Local numbers records across tables; see readShard).
func TestStreamFeedOnAnEmptyTable(t *testing.T) {
	ctx := context.Background()
	s, client, table := newStore(t)
	other, _, _ := newStore(t)
	feed, err := dynamostream.NewFeed(ctx, local.StreamsClient(), client, table, dynamostream.WithPollInterval(10*time.Millisecond))
	if err != nil {
		t.Fatal(err)
	}
	storetest.MustWrite(t, other, store.Put(store.Key{PK: "other", SK: "1"}, nil))
	storetest.MustWrite(t, s, store.Put(store.Key{PK: "mine", SK: "1"}, nil))
	rctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	recs, err := feed.Read(rctx, "fn", 10)
	if err != nil || len(recs) != 1 || recs[0].Change.Keys["pk"].String() != "mine" || recs[0].EventName != store.EventInsert {
		t.Fatalf("read %v, %v; want the one insert", recs, err)
	}
}

// TestStreamFeedConcurrentConsumers: consumers reading and committing at
// once (as the harness's stream triggers do) each get every record once;
// with named consumers, records all of them committed are dropped.
func TestStreamFeedConcurrentConsumers(t *testing.T) {
	ctx := context.Background()
	s, client, table := newStore(t)
	consumers := []string{"c1", "c2", "c3"}
	feed, err := dynamostream.NewFeed(ctx, local.StreamsClient(), client, table,
		dynamostream.WithPollInterval(10*time.Millisecond), dynamostream.WithFeedConsumers(consumers...))
	if err != nil {
		t.Fatal(err)
	}
	const n = 30
	got := make([][]string, len(consumers))
	var wg sync.WaitGroup
	for i, c := range consumers {
		wg.Go(func() {
			rctx, cancel := context.WithTimeout(ctx, 30*time.Second)
			defer cancel()
			for len(got[i]) < n {
				recs, err := feed.Read(rctx, c, 4)
				if err != nil {
					t.Errorf("%s after %d: %v", c, len(got[i]), err)
					return
				}
				for _, r := range recs {
					got[i] = append(got[i], r.Change.Keys["sk"].String())
				}
				if err := feed.Commit(rctx, c, recs[len(recs)-1].Change.SequenceNumber); err != nil {
					t.Error(err)
					return
				}
			}
		})
	}
	for i := range n {
		storetest.MustWrite(t, s, store.Put(store.Key{PK: "p", SK: fmt.Sprintf("%03d", i)}, nil))
	}
	wg.Wait()
	for i, keys := range got {
		for j, k := range keys {
			if k != fmt.Sprintf("%03d", j) {
				t.Fatalf("%s: record %d is %s (of %v)", consumers[i], j, k, keys)
			}
		}
		if len(keys) != n {
			t.Errorf("%s: %d records, want %d", consumers[i], len(keys), n)
		}
	}
	// Everything committed by every named consumer: a late consumer finds
	// nothing held.
	lctx, cancel := context.WithTimeout(ctx, 100*time.Millisecond)
	defer cancel()
	if recs, err := feed.Read(lctx, "late", 10); !errors.Is(err, context.DeadlineExceeded) {
		t.Errorf("late consumer: %d records, %v", len(recs), err)
	}
}
