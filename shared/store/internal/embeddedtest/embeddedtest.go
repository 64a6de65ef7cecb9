// Package embeddedtest holds the tests of what only the embedded engines
// (memory and bolt) do themselves, run on both: the TTL sweeper, the change
// feed's consumers and retention, and keys the engines must keep apart. The
// behaviour every engine shares with DynamoDB is storetest's.
package embeddedtest

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/aws/aws-lambda-go/events"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"

	"github.com/a2awire/a2awire/shared/store"
	"github.com/a2awire/a2awire/shared/store/internal/embedded"
)

// Engine is what both embedded engines offer.
type Engine interface {
	store.Store
	store.Feed
	Sweep() (int, error)
	Retained() (int, error)
	Close() error
}

// Options are what a test sets on the engine it opens.
type Options struct {
	Now        func() time.Time
	SweepEvery time.Duration // 0: no background sweeper
	Consumers  []string      // the feed's named consumers (WithFeedConsumers)
}

// Open returns a fresh engine (its cleanup registered on t).
type Open func(t *testing.T, o Options) Engine

// Clock is a settable clock for Options.Now.
type Clock struct {
	mu  sync.Mutex
	now time.Time
}

// NewClock returns a clock reading t.
func NewClock(t time.Time) *Clock { return &Clock{now: t} }

// Now reads the clock.
func (c *Clock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.now
}

// Add moves the clock forward.
func (c *Clock) Add(d time.Duration) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.now = c.now.Add(d)
}

// Run runs every case on engines made by open.
func Run(t *testing.T, open Open) {
	for _, c := range []struct {
		name string
		fn   func(*testing.T, Open)
	}{
		{"SweepDeletesExpiredOnly", testSweep},
		{"BackgroundSweeper", testBackgroundSweeper},
		{"FeedRetention", testFeedRetention},
		{"FeedKeptForLateConsumers", testFeedLateConsumer},
		{"FeedReadWaits", testFeedReadWaits},
		{"KeysStayApart", testKeysStayApart},
	} {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			c.fn(t, open)
		})
	}
}

var ctx = context.Background()

const t0 = 1_900_000_000 // epoch seconds of every test clock's start

func put(t *testing.T, s store.Store, pk, sk string, attrs store.Item) {
	t.Helper()
	if _, err := s.Write(ctx, store.Put(store.Key{PK: pk, SK: sk}, attrs)); err != nil {
		t.Fatalf("put %s/%s: %v", pk, sk, err)
	}
}

// readAll reads every record the consumer has not committed, committing as
// it goes, and fails if the feed has none.
func readAll(t *testing.T, f store.Feed, consumer string) []events.DynamoDBEventRecord {
	t.Helper()
	var all []events.DynamoDBEventRecord
	for {
		c, cancel := context.WithTimeout(ctx, 200*time.Millisecond)
		recs, err := f.Read(c, consumer, 1000)
		cancel()
		if errors.Is(err, context.DeadlineExceeded) {
			return all
		}
		if err != nil {
			t.Fatalf("read: %v", err)
		}
		all = append(all, recs...)
		if err := f.Commit(ctx, consumer, recs[len(recs)-1].Change.SequenceNumber); err != nil {
			t.Fatalf("commit: %v", err)
		}
	}
}

// testSweep: an expired item stays readable until a sweep, which deletes it
// (and its gsi1 entry) with a REMOVE record attributed to DynamoDB's TTL
// service; an item expiring later, or without expiresAt, stays.
func testSweep(t *testing.T, open Open) {
	clock := NewClock(time.Unix(t0, 0))
	s := open(t, Options{Now: clock.Now})
	idx := store.Item{store.AttrGSI1PK: store.S("g"), store.AttrGSI1SK: store.S("x")}
	with := func(exp string) store.Item {
		it := store.Item{}
		for k, v := range idx {
			it[k] = v
		}
		it[store.AttrExpiresAt] = &types.AttributeValueMemberN{Value: exp}
		return it
	}
	put(t, s, "p", "past", with(fmt.Sprint(t0-10)))
	put(t, s, "p", "halfsecond", with(fmt.Sprintf("%d.5", t0-1)))
	put(t, s, "p", "now", with(fmt.Sprint(t0))) // not before now: stays
	put(t, s, "p", "future", with(fmt.Sprint(t0+10)))
	put(t, s, "p", "never", idx)
	if _, err := s.Write(ctx, store.Delete(store.Key{PK: "p", SK: "never"})); err != nil {
		t.Fatal(err)
	}
	put(t, s, "p", "never", idx)

	if _, err := s.Get(ctx, store.Key{PK: "p", SK: "past"}); err != nil {
		t.Fatalf("an expired item not yet swept must still be returned (DynamoDB's TTL): %v", err)
	}
	n, err := s.Sweep()
	if err != nil || n != 2 {
		t.Fatalf("sweep deleted %d (%v), want 2", n, err)
	}
	for _, sk := range []string{"past", "halfsecond"} {
		if _, err := s.Get(ctx, store.Key{PK: "p", SK: sk}); !errors.Is(err, store.ErrNotFound) {
			t.Fatalf("swept item %s: %v", sk, err)
		}
	}
	page, err := s.Query(ctx, store.Query{Index: store.IndexGSI1, PK: "g"})
	if err != nil || len(page.Items) != 3 {
		t.Fatalf("gsi1 after sweep: %d items, %v; want now, future, never", len(page.Items), err)
	}
	recs := readAll(t, s, "c")
	var ttl, plain int
	for _, r := range recs {
		if r.EventName != store.EventRemove {
			continue
		}
		switch {
		case r.UserIdentity == nil:
			plain++
		case *r.UserIdentity == embedded.TTL:
			ttl++
			if sk := r.Change.Keys[store.AttrSK].String(); sk != "past" && sk != "halfsecond" {
				t.Fatalf("TTL removed %s", sk)
			}
			if r.Change.OldImage == nil || r.Change.NewImage != nil {
				t.Fatalf("TTL REMOVE images: %+v", r.Change)
			}
		default:
			t.Fatalf("REMOVE with identity %+v", *r.UserIdentity)
		}
	}
	if ttl != 2 || plain != 1 {
		t.Fatalf("%d TTL and %d plain REMOVE records, want 2 and 1", ttl, plain)
	}

	clock.Add(11 * time.Second)
	if n, err := s.Sweep(); err != nil || n != 2 {
		t.Fatalf("second sweep deleted %d (%v), want now and future", n, err)
	}
	if _, err := s.Get(ctx, store.Key{PK: "p", SK: "never"}); err != nil {
		t.Fatalf("item without expiresAt: %v", err)
	}
	// An Update that removes expiresAt takes the item off the sweeper's list.
	put(t, s, "p", "kept", with(fmt.Sprint(t0)))
	if _, err := s.Write(ctx, store.Update(store.Key{PK: "p", SK: "kept"}).Del(store.AttrExpiresAt)); err != nil {
		t.Fatal(err)
	}
	if n, err := s.Sweep(); err != nil || n != 0 {
		t.Fatalf("sweep after expiresAt was removed deleted %d (%v)", n, err)
	}
}

// testBackgroundSweeper: without any call, the engine's own goroutine
// deletes an expired item; Close stops it.
func testBackgroundSweeper(t *testing.T, open Open) {
	clock := NewClock(time.Unix(t0, 0))
	s := open(t, Options{Now: clock.Now, SweepEvery: time.Millisecond})
	put(t, s, "p", "old", store.Item{store.AttrExpiresAt: store.N(t0 - 1)})
	deadline := time.Now().Add(10 * time.Second)
	for {
		_, err := s.Get(ctx, store.Key{PK: "p", SK: "old"})
		if errors.Is(err, store.ErrNotFound) {
			break
		}
		if err != nil {
			t.Fatal(err)
		}
		if time.Now().After(deadline) {
			t.Fatal("the background sweeper did not delete an expired item within 10 s")
		}
		time.Sleep(5 * time.Millisecond)
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
}

// testFeedRetention: with named consumers, records stay until every one of
// them has committed them, a new consumer starts at the oldest retained
// record, and records older than 24 hours go regardless, so the feed is
// bounded.
func testFeedRetention(t *testing.T, open Open) {
	clock := NewClock(time.Unix(t0, 0))
	s := open(t, Options{Now: clock.Now, Consumers: []string{"a", "b"}})
	retained := func(want int) {
		t.Helper()
		if n, err := s.Retained(); err != nil || n != want {
			t.Fatalf("feed retains %d records (%v), want %d", n, err, want)
		}
	}
	for i := range 10 {
		put(t, s, "p", fmt.Sprint(i), store.Item{"n": store.N(int64(i))})
	}
	retained(10) // no consumer has committed anything
	a, err := s.Read(ctx, "a", 4)
	if err != nil || len(a) != 4 {
		t.Fatalf("a read %d (%v), want 4", len(a), err)
	}
	again, err := s.Read(ctx, "a", 4)
	if err != nil || len(again) != 4 || again[0].Change.SequenceNumber != a[0].Change.SequenceNumber {
		t.Fatal("a second Read without Commit must return the same records")
	}
	if err := s.Commit(ctx, "a", a[3].Change.SequenceNumber); err != nil {
		t.Fatal(err)
	}
	retained(10) // b has committed nothing
	b := readAll(t, s, "b")
	if len(b) != 10 {
		t.Fatalf("b read %d records, want 10", len(b))
	}
	retained(6) // a still needs its last 6
	if got := readAll(t, s, "a"); len(got) != 6 || got[0].Change.SequenceNumber != b[4].Change.SequenceNumber {
		t.Fatalf("a continued with %d records", len(got))
	}
	retained(0)
	if err := s.Commit(ctx, "a", store.SequenceNumber(1<<40)); !errors.Is(err, store.ErrInvalid) {
		t.Fatalf("commit of a sequence never issued: %v", err)
	}
	if err := s.Commit(ctx, "a", "x"); !errors.Is(err, store.ErrInvalid) {
		t.Fatalf("commit of a malformed sequence: %v", err)
	}

	// Records nobody consumes are dropped after 24 hours.
	for i := range 5 {
		put(t, s, "q", fmt.Sprint(i), nil)
	}
	clock.Add(embedded.Retention + time.Second)
	put(t, s, "q", "late", nil)
	retained(1)
	c := readAll(t, s, "c")
	if len(c) != 1 || c[0].Change.Keys[store.AttrSK].String() != "late" {
		t.Fatalf("a new consumer after the 24 h cut read %d records", len(c))
	}
	for _, r := range c {
		if r.EventSourceArn != embedded.StreamARN(embedded.DefaultTable) {
			t.Fatalf("eventSourceARN %q", r.EventSourceArn)
		}
	}
}

// testFeedLateConsumer: without named consumers, a commit drops nothing, so
// a consumer that starts late reads every record of the last 24 hours, as
// on DynamoDB Streams.
func testFeedLateConsumer(t *testing.T, open Open) {
	clock := NewClock(time.Unix(t0, 0))
	s := open(t, Options{Now: clock.Now})
	for i := range 3 {
		put(t, s, "p", fmt.Sprint(i), nil)
	}
	if got := readAll(t, s, "early"); len(got) != 3 {
		t.Fatalf("early consumer read %d records", len(got))
	}
	if got := readAll(t, s, "late"); len(got) != 3 {
		t.Fatalf("late consumer read %d records, want all 3", len(got))
	}
	clock.Add(embedded.Retention + time.Second)
	put(t, s, "p", "next", nil)
	if n, err := s.Retained(); err != nil || n != 1 {
		t.Fatalf("after 24 h the feed retains %d records (%v), want 1", n, err)
	}
}

// testFeedReadWaits: Read blocks until a record arrives, ends with its
// context, and Close wakes it.
func testFeedReadWaits(t *testing.T, open Open) {
	s := open(t, Options{Now: time.Now})
	got := make(chan []events.DynamoDBEventRecord, 1)
	go func() {
		recs, err := s.Read(ctx, "w", 10)
		if err != nil {
			t.Error(err)
		}
		got <- recs
	}()
	// Reading an empty feed returns only when its context ends.
	c, cancel := context.WithTimeout(ctx, 50*time.Millisecond)
	if _, err := s.Read(c, "other", 1); !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("read of an empty feed: %v", err)
	}
	cancel()
	put(t, s, "p", "s", nil)
	select {
	case recs := <-got:
		if len(recs) != 1 || recs[0].EventName != store.EventInsert {
			t.Fatalf("woken reader got %+v", recs)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("a write did not wake the blocked reader")
	}
	if err := s.Commit(ctx, "w", store.SequenceNumber(1)); err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() {
		_, err := s.Read(ctx, "w", 10)
		done <- err
	}()
	time.Sleep(20 * time.Millisecond)
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	select {
	case err := <-done:
		if !errors.Is(err, store.ErrUnavailable) {
			t.Fatalf("read interrupted by Close: %v", err)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("Close did not wake the blocked reader")
	}
}

// testKeysStayApart: keys that are prefixes of one another, or hold NUL
// bytes, never bleed into each other's partition or range.
func testKeysStayApart(t *testing.T, open Open) {
	s := open(t, Options{Now: time.Now})
	pks := []string{"a", "a\x00", "a\x00b", "ab", "a\x01", "\x00", "é"}
	for _, pk := range pks {
		for _, sk := range []string{"x", "x\x00", "x\x00y", "xy"} {
			put(t, s, pk, sk, store.Item{store.AttrGSI1PK: store.S(pk), store.AttrGSI1SK: store.S("k"), "v": store.S(pk + "|" + sk)})
		}
	}
	for _, pk := range pks {
		for _, index := range []string{"", store.IndexGSI1} {
			page, err := s.Query(ctx, store.Query{Index: index, PK: pk})
			if err != nil {
				t.Fatal(err)
			}
			if len(page.Items) != 4 {
				t.Fatalf("partition %q (index %q) holds %d items, want 4", pk, index, len(page.Items))
			}
			for _, it := range page.Items {
				if it.Str(store.AttrPK) != pk {
					t.Fatalf("partition %q (index %q) returned an item of %q", pk, index, it.Str(store.AttrPK))
				}
			}
		}
		page, err := s.Query(ctx, store.Query{PK: pk, SK: store.SKPrefix("x\x00")})
		if err != nil || len(page.Items) != 2 || page.Items[0].Str(store.AttrSK) != "x\x00" || page.Items[1].Str(store.AttrSK) != "x\x00y" {
			t.Fatalf("prefix x\\x00 in %q: %v, %v", pk, page.Items, err)
		}
	}
}
