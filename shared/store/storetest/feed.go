package storetest

import (
	"context"
	"errors"
	"fmt"
	"math/big"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-lambda-go/events"

	"github.com/a2awire/a2awire/shared/store"
)

// FeedDeadline bounds how long a case waits for a committed change to show
// up on a feed. DynamoDB Streams (and DynamoDB Local's) deliver
// asynchronously, so the cases poll Read until the records they expect are
// there, never longer than this.
const FeedDeadline = 10 * time.Second

// feedPoll is the pause between two polls of a feed that had too few
// records.
const feedPoll = 20 * time.Millisecond

// RunFeed runs the change-feed cases against stores and their feeds made by
// open, each case in parallel on its own fresh store and feed.
func RunFeed(t *testing.T, open func(t *testing.T) (store.Store, store.Feed)) {
	for _, c := range []struct {
		name string
		fn   func(t *testing.T, s store.Store, f store.Feed)
	}{
		{"Feed/CommittedChangesOnce", testFeedChanges},
		{"Feed/ReadRepeatsUntilCommit", testFeedCommit},
		{"Feed/ConsumersAreIndependent", testFeedConsumers},
	} {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			s, f := open(t)
			if s == nil || f == nil {
				t.Fatal("open returned a nil store or feed")
			}
			c.fn(t, s, f)
		})
	}
}

// change is one expected feed record.
type change struct {
	key      store.Key
	old, new store.Item
	what     string // the write that made it, for messages
}

func (c change) eventName() string {
	switch {
	case c.old == nil:
		return store.EventInsert
	case c.new == nil:
		return store.EventRemove
	}
	return store.EventModify
}

// recorder applies writes and records the changes the feed must carry:
// for each item a write touches, what Get returned before and after, when
// they differ.
type recorder struct {
	t       *testing.T
	s       store.Store
	changes []change
}

func (r *recorder) write(what string, wantErr error, actions ...store.Action) {
	r.t.Helper()
	before := make([]store.Item, len(actions))
	for i, a := range actions {
		before[i] = get(r.t, r.s, a.Key)
	}
	_, err := r.s.Write(r.t.Context(), actions...)
	switch {
	case wantErr == nil && err != nil:
		r.t.Fatalf("%s: %v", what, err)
	case wantErr != nil && !errors.Is(err, wantErr):
		r.t.Fatalf("%s: error %v, want %v", what, err, wantErr)
	}
	for i, a := range actions {
		after := get(r.t, r.s, a.Key)
		if err != nil && !sameItem(after, before[i]) {
			r.t.Fatalf("%s failed but changed %s", what, a.Key)
		}
		if sameItem(before[i], after) {
			continue
		}
		r.changes = append(r.changes, change{key: a.Key, old: before[i], new: after, what: what})
	}
}

// byPK groups expected changes by partition key, in commit order.
func byPK(cs []change) map[string][]change {
	out := map[string][]change{}
	for _, c := range cs {
		out[c.key.PK] = append(out[c.key.PK], c)
	}
	return out
}

// recordsByPK groups feed records by the pk of their Keys, in feed order.
func recordsByPK(t *testing.T, recs []events.DynamoDBEventRecord) map[string][]events.DynamoDBEventRecord {
	t.Helper()
	out := map[string][]events.DynamoDBEventRecord{}
	for _, r := range recs {
		keys, err := store.FromStreamImage(r.Change.Keys)
		if err != nil {
			t.Fatalf("record %s: Keys: %v", r.Change.SequenceNumber, err)
		}
		pk := keys.Str(store.AttrPK)
		out[pk] = append(out[pk], r)
	}
	return out
}

// readUntil polls f for consumer until done accepts the records read (all
// uncommitted ones, oldest first), or FeedDeadline passes.
func readUntil(t *testing.T, f store.Feed, consumer string, done func([]events.DynamoDBEventRecord) bool) []events.DynamoDBEventRecord {
	t.Helper()
	deadline := time.Now().Add(FeedDeadline)
	var last []events.DynamoDBEventRecord
	for {
		ctx, cancel := context.WithDeadline(t.Context(), deadline)
		recs, err := f.Read(ctx, consumer, 10000)
		cancel()
		switch {
		case err == nil:
			last = recs
			if done(recs) {
				return recs
			}
		case errors.Is(err, context.DeadlineExceeded) || errors.Is(err, context.Canceled):
		default:
			t.Fatalf("Read(%s): %v", consumer, err)
		}
		if time.Now().After(deadline) {
			t.Fatalf("feed consumer %s: the expected records did not arrive within %s; read %d:\n%s",
				consumer, FeedDeadline, len(last), showRecords(last))
		}
		time.Sleep(feedPoll)
	}
}

// hasKeys reports whether recs hold a record of each key.
func hasKeys(keys ...store.Key) func([]events.DynamoDBEventRecord) bool {
	return func(recs []events.DynamoDBEventRecord) bool {
		seen := map[store.Key]bool{}
		for _, r := range recs {
			if k, err := store.FromStreamImage(r.Change.Keys); err == nil {
				seen[k.Key()] = true
			}
		}
		for _, k := range keys {
			if !seen[k] {
				return false
			}
		}
		return true
	}
}

func showRecords(recs []events.DynamoDBEventRecord) string {
	var b strings.Builder
	for _, r := range recs {
		keys, _ := store.FromStreamImage(r.Change.Keys)
		oldImg, _ := store.FromStreamImage(r.Change.OldImage)
		newImg, _ := store.FromStreamImage(r.Change.NewImage)
		fmt.Fprintf(&b, "  %s %s %s old=%s new=%s\n", r.Change.SequenceNumber, r.EventName, keys.Key(), show(oldImg), show(newImg))
	}
	return b.String()
}

// checkRecord compares one feed record with the expected change.
func checkRecord(t *testing.T, r events.DynamoDBEventRecord, c change) {
	t.Helper()
	where := fmt.Sprintf("record %s (%s of %s)", r.Change.SequenceNumber, c.what, c.key)
	if r.EventName != c.eventName() {
		t.Errorf("%s: eventName %s, want %s", where, r.EventName, c.eventName())
	}
	if r.EventSource != "aws:dynamodb" {
		t.Errorf("%s: eventSource %q, want aws:dynamodb", where, r.EventSource)
	}
	if r.EventSourceArn == "" {
		t.Errorf("%s: no eventSourceARN", where)
	}
	if r.Change.StreamViewType != string(events.DynamoDBStreamViewTypeNewAndOldImages) {
		t.Errorf("%s: StreamViewType %q, want NEW_AND_OLD_IMAGES", where, r.Change.StreamViewType)
	}
	if r.Change.SequenceNumber == "" {
		t.Errorf("%s: no sequence number", where)
	}
	keys, err := store.FromStreamImage(r.Change.Keys)
	if err != nil || !sameItem(keys, item("pk", S(c.key.PK), "sk", S(c.key.SK))) {
		t.Errorf("%s: Keys %s (%v), want exactly pk and sk of %s", where, show(keys), err, c.key)
	}
	oldImg, err := store.FromStreamImage(r.Change.OldImage)
	if err != nil {
		t.Errorf("%s: OldImage: %v", where, err)
	}
	newImg, err := store.FromStreamImage(r.Change.NewImage)
	if err != nil {
		t.Errorf("%s: NewImage: %v", where, err)
	}
	if len(oldImg) == 0 {
		oldImg = nil
	}
	if len(newImg) == 0 {
		newImg = nil
	}
	if !sameItem(oldImg, c.old) {
		t.Errorf("%s: OldImage\n got  %s\n want %s (what Get returned before)", where, show(oldImg), show(c.old))
	}
	if !sameItem(newImg, c.new) {
		t.Errorf("%s: NewImage\n got  %s\n want %s (what Get returned after)", where, show(newImg), show(c.new))
	}
}

func seqNum(t *testing.T, seq string) *big.Int {
	t.Helper()
	n, ok := new(big.Int).SetString(seq, 10)
	if !ok {
		t.Fatalf("sequence number %q is not a decimal number", seq)
	}
	return n
}

// sentinelSK sorts after every sort key the feed cases use; one sentinel
// item per partition key, written last, marks the end of that partition's
// records (the feed's order is only promised per partition key).
const sentinelSK = "~end"

// testFeedChanges runs a mixed series of writes and checks the feed carries
// exactly the committed changes, once, in commit order per partition key.
// No multi-action write touches two items of one partition key, so that
// the order within a partition key is fully determined.
func testFeedChanges(t *testing.T, s store.Store, f store.Feed) {
	r := &recorder{t: t, s: s}
	a1, a2, a9 := key("fa", "1"), key("fa", "2"), key("fa", "9")
	b1, b2, b3 := key("fb", "1"), key("fb", "2"), key("fb", "3")
	c1, c2 := key("fc", "1"), key("fc", "2")

	r.write("put a1", nil, store.Put(a1, item("v", N("1"))))
	r.write("identical put of a1 (no change)", nil, store.Put(a1, item("v", N("1"))))
	r.write("put a1 with a number equal by value (no change)", nil, store.Put(a1, item("v", N("1.0"))))
	r.write("put a1 again, changed", nil, store.Put(a1, item("v", N("2"), "x", S("y"))))
	r.write("add to a1", nil, store.Update(a1).AddNum("v", 5))
	r.write("failed put of a2", store.ErrConditionFailed, store.Put(a2, nil).When(store.ItemExists()))
	r.write("failed update of a1", store.ErrConditionFailed, store.Update(a1).AddNum("v", 1).When(store.Eq("v", N("0"))))
	r.write("three-action write", nil,
		store.Put(b1, item("n", N("1"), "drop", S("me"))),
		store.Update(c1).SetAttr("s", S("c")),
		store.Delete(a1).When(store.ItemExists()))
	r.write("failed two-action write", store.ErrConditionFailed,
		store.Put(b2, item("never", Bool(true))),
		store.Check(c1, store.Eq("s", S("not c"))))
	r.write("delete of a missing item (no change)", nil, store.Delete(a9))
	r.write("remove an attribute of b1", nil, store.Update(b1).Del("drop"))
	r.write("set c1's attribute to its value (no change)", nil, store.Update(c1).SetAttr("s", S("c")))
	r.write("remove a missing attribute of c1 (no change)", nil, store.Update(c1).Del("nothing"))
	r.write("put a1 back", nil, store.Put(a1, item("back", Bool(true))))
	r.write("delete b1", nil, store.Delete(b1).When(store.ItemExists()))
	r.write("update that only removes, on a missing item", nil, store.Update(b3).Del("zz"))
	r.write("put every attribute type", nil, store.Put(c2, streamZoo()))
	r.write("reorder a set (no change)", nil, store.Update(c2).SetAttr("ss", SS("ç", "", "a", "b")))
	r.write("refused write", store.ErrInvalid, store.Put(c1, item("bad", SS())))
	r.write("index keys", nil, store.Update(b2).SetAttr(store.AttrGSI1PK, S("g")).SetAttr(store.AttrGSI1SK, S("1")))

	pks := []string{"fa", "fb", "fc"}
	var sentinels []store.Key
	for _, pk := range pks {
		k := key(pk, sentinelSK)
		r.write("sentinel", nil, store.Put(k, nil))
		sentinels = append(sentinels, k)
	}
	const consumer = "checker"
	recs := readUntil(t, f, consumer, hasKeys(sentinels...))
	got := recordsByPK(t, recs)
	want := byPK(r.changes)
	for pk := range got {
		if !slices.Contains(pks, pk) {
			t.Errorf("records of partition %q, which no write touched:\n%s", pk, showRecords(got[pk]))
		}
	}
	for _, pk := range pks {
		g, w := got[pk], want[pk]
		if len(g) != len(w) {
			t.Errorf("partition %s: %d records, want %d (one per committed change, in order):\n got:\n%s want:\n%s",
				pk, len(g), len(w), showRecords(g), showChanges(w))
			continue
		}
		var prev *big.Int
		for i := range g {
			checkRecord(t, g[i], w[i])
			n := seqNum(t, g[i].Change.SequenceNumber)
			if prev != nil && n.Cmp(prev) <= 0 {
				t.Errorf("partition %s: sequence number %s after %s does not increase", pk, n, prev)
			}
			prev = n
		}
	}
	// Every record once: no sequence number repeats.
	seen := map[string]bool{}
	for _, rec := range recs {
		if seen[rec.Change.SequenceNumber] {
			t.Errorf("sequence number %s delivered twice", rec.Change.SequenceNumber)
		}
		seen[rec.Change.SequenceNumber] = true
	}
}

func showChanges(cs []change) string {
	var b strings.Builder
	for _, c := range cs {
		fmt.Fprintf(&b, "  %s %s old=%s new=%s (%s)\n", c.eventName(), c.key, show(c.old), show(c.new), c.what)
	}
	return b.String()
}

func seqs(recs []events.DynamoDBEventRecord) []string {
	out := make([]string, len(recs))
	for i, r := range recs {
		out[i] = r.Change.SequenceNumber
	}
	return out
}

// testFeedCommit: Read without Commit returns the same records again (a
// failed batch is retried, never skipped); Commit moves past them; Read's
// max bounds a batch.
func testFeedCommit(t *testing.T, s store.Store, f store.Feed) {
	const consumer = "fn"
	k1, k2, k3 := key("fc", "1"), key("fc", "2"), key("fc", "3")
	put(t, s, k1, item("v", N("1")))
	put(t, s, k2, item("v", N("2")))
	put(t, s, k3, item("v", N("3")))
	all := readUntil(t, f, consumer, hasKeys(k1, k2, k3))
	if len(all) != 3 {
		t.Fatalf("3 puts, %d records:\n%s", len(all), showRecords(all))
	}
	again := readUntil(t, f, consumer, hasKeys(k1, k2, k3))
	if !slices.Equal(seqs(again), seqs(all)) {
		t.Errorf("Read without Commit: %q, then %q", seqs(all), seqs(again))
	}
	// max bounds a batch, oldest first.
	ctx, cancel := context.WithTimeout(t.Context(), FeedDeadline)
	defer cancel()
	two, err := f.Read(ctx, consumer, 2)
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(seqs(two), seqs(all[:2])) {
		t.Errorf("Read(max 2): %q, want %q", seqs(two), seqs(all[:2]))
	}

	if err := f.Commit(t.Context(), consumer, all[0].Change.SequenceNumber); err != nil {
		t.Fatal(err)
	}
	rest := readUntil(t, f, consumer, func(recs []events.DynamoDBEventRecord) bool { return len(recs) > 0 })
	if !slices.Equal(seqs(rest), seqs(all[1:])) {
		t.Errorf("after committing the first record: %q, want %q", seqs(rest), seqs(all[1:]))
	}
	if err := f.Commit(t.Context(), consumer, all[2].Change.SequenceNumber); err != nil {
		t.Fatal(err)
	}
	// Everything consumed: the next batch holds only a newer change.
	MustWrite(t, s, store.Delete(k2))
	next := readUntil(t, f, consumer, func(recs []events.DynamoDBEventRecord) bool { return len(recs) > 0 })
	if len(next) != 1 || next[0].EventName != store.EventRemove {
		t.Fatalf("after committing everything and deleting %s: %d records:\n%s", k2, len(next), showRecords(next))
	}
	checkRecord(t, next[0], change{key: k2, old: stored(k2, item("v", N("2"))), what: "delete"})
	if seqNum(t, next[0].Change.SequenceNumber).Cmp(seqNum(t, all[1].Change.SequenceNumber)) <= 0 {
		t.Errorf("the delete's sequence number %s does not follow the put's %s", next[0].Change.SequenceNumber, all[1].Change.SequenceNumber)
	}
}

// testFeedConsumers: each consumer has its own position. Both read before
// either commits (store.Feed: a consumer starts at the oldest record still
// held, and records every known consumer committed may be dropped).
func testFeedConsumers(t *testing.T, s store.Store, f store.Feed) {
	k1, k2, k3 := key("fk", "1"), key("fk", "2"), key("fk", "3")
	put(t, s, k1, nil)
	put(t, s, k2, nil)
	a := readUntil(t, f, "a", hasKeys(k1, k2))
	b := readUntil(t, f, "b", hasKeys(k1, k2))
	if len(a) != 2 || !slices.Equal(seqs(a), seqs(b)) {
		t.Fatalf("consumers a and b read different records:\n a:\n%s b:\n%s", showRecords(a), showRecords(b))
	}
	if err := f.Commit(t.Context(), "a", a[1].Change.SequenceNumber); err != nil {
		t.Fatal(err)
	}
	put(t, s, k3, nil)
	a2 := readUntil(t, f, "a", hasKeys(k3))
	if len(a2) != 1 {
		t.Errorf("consumer a after committing both records: %d records, want only the new one:\n%s", len(a2), showRecords(a2))
	}
	// a's commit moved nothing for b.
	b2 := readUntil(t, f, "b", hasKeys(k1, k2, k3))
	if len(b2) != 3 || !slices.Equal(seqs(b2[:2]), seqs(a)) {
		t.Errorf("consumer b (nothing committed) read %q; want %q and the new record", seqs(b2), seqs(a))
	}
	if err := f.Commit(t.Context(), "b", b2[0].Change.SequenceNumber); err != nil {
		t.Fatal(err)
	}
	b3 := readUntil(t, f, "b", hasKeys(k2, k3))
	if !slices.Equal(seqs(b3), seqs(b2[1:])) {
		t.Errorf("consumer b after committing one record: %q, want %q", seqs(b3), seqs(b2[1:]))
	}
	// b's commit moved nothing for a.
	a3 := readUntil(t, f, "a", hasKeys(k3))
	if !slices.Equal(seqs(a3), seqs(a2)) {
		t.Errorf("consumer a read %q after b's commit, want %q", seqs(a3), seqs(a2))
	}
}

// streamZoo is attributeZoo without its empty map: DynamoDB Local's stream
// sends an empty map as an empty attribute value ("mEmpty":{} instead of
// {"M":{}}), which the SDK's dynamodbstreams decoder turns into a copy of
// another attribute's value. Real DynamoDB Streams send {"M":{}}; the
// store cases (attributeZoo) still check empty maps on every engine.
func streamZoo() store.Item {
	z := attributeZoo()
	delete(z, "mEmpty")
	return z
}
