// Package bolt is the file-backed engine of the item API (bbolt), behind the
// local harness's -data DIR: everything in one file, so a reset is deleting
// it.
//
// Each Write is one bbolt read-write transaction, which makes it atomic
// (bbolt serializes writers), and every commit is fsync'd before the call
// returns: bbolt is opened with NoSync and the engine syncs the file itself
// after each commit, so that a test can count the syncs
// (TestEveryCommitSyncs). The price: bbolt's own two syncs per commit (data
// pages, then the meta page) become one after both are written. A process
// crash loses nothing either way (the page cache survives it); a power cut
// during that one sync could, in principle, persist the new meta page
// before the pages it points to.
// The change feed's records are written in the same transaction as the
// items they describe, and consumer positions are stored too, so the feed
// survives a restart and a kill -9 loses nothing acknowledged
// (crash_test.go).
//
// Layout (see embedded's order keys: each string component escaped and
// terminated, so keys sort as DynamoDB orders items and no pk can bleed into
// another's range; values in this package's lossless codec):
//
//	bucket     key                                        value
//	meta       "version"                                  "2"
//	meta       "seq"                                      uint64be(last sequence number)
//	items      c(pk) c(sk)                                item
//	gsi1       c(gsi1pk) c(gsi1sk) c(pk) c(sk)            c(pk) c(sk)
//	ttl        uint64be(expiresAt seconds ^ 1<<63) c(pk) c(sk)   empty
//	feed       uint64be(sequence)                         change record
//	consumers  consumer name                              uint64be(committed sequence)
//
// The semantics shared with the memory engine (conditions, updates, paging,
// records) live in shared/store/internal/embedded.
package bolt

import (
	"bytes"
	"context"
	"encoding/binary"
	"fmt"
	"os"
	"path/filepath"
	"sync"
	"time"

	"github.com/aws/aws-lambda-go/events"
	bbolt "go.etcd.io/bbolt"

	"github.com/a2awire/a2awire/shared/store"
	"github.com/a2awire/a2awire/shared/store/internal/embedded"
)

// DefaultFile is the file name the harness uses inside its -data directory.
const DefaultFile = "a2awire.db"

// schemaVersion is written into the meta bucket so a later layout change can
// detect and migrate (or refuse) an old file. Version 1 was the layout of
// the per-entity store before the item API.
const schemaVersion = "2"

// Bucket names (see the package comment).
var (
	bucketMeta      = []byte("meta")
	bucketItems     = []byte("items")
	bucketGSI1      = []byte("gsi1")
	bucketTTL       = []byte("ttl")
	bucketFeed      = []byte("feed")
	bucketConsumers = []byte("consumers")
	keyVersion      = []byte("version")
	keySeq          = []byte("seq")
)

// lockTimeout bounds the wait for bbolt's file lock, so a second process on
// the same file fails with an error instead of hanging.
const lockTimeout = 2 * time.Second

// sweepBatch bounds the deletions of one sweeper transaction, so a large
// backlog of expired items does not hold the writer lock for long.
const sweepBatch = 1000

// Option configures a Store.
type Option func(*config)

type config struct {
	table      string
	now        func() time.Time
	sweepEvery time.Duration
	secret     []byte
	consumers  []string
	wrapSync   func(sync func() error) error
}

// WithTable names the table in the change records' eventSourceARN (default
// "a2awire").
func WithTable(name string) Option { return func(c *config) { c.table = name } }

// WithClock replaces time.Now for TTL expiry and feed retention.
func WithClock(now func() time.Time) Option { return func(c *config) { c.now = now } }

// WithSweepInterval sets how often expired items are deleted (default one
// minute); d <= 0 turns the background sweeper off (Sweep still works).
func WithSweepInterval(d time.Duration) Option { return func(c *config) { c.sweepEvery = d } }

// WithFeedConsumers names the consumers the change feed is kept for (the
// stream-triggered functions): a record is dropped as soon as all of them,
// and every other consumer that has read the feed, have committed it.
// Without it records are dropped only after 24 hours, as DynamoDB Streams
// does, so a consumer that starts late still reads everything retained.
func WithFeedConsumers(names ...string) Option {
	return func(c *config) { c.consumers = append(c.consumers, names...) }
}

// WithCursorSecret keys query cursors (see store.NewCursors).
func WithCursorSecret(secret []byte) Option { return func(c *config) { c.secret = secret } }

// Store is the bbolt engine. It implements store.Store and store.Feed and is
// safe for concurrent use within one process (bbolt's file lock keeps other
// processes out).
type Store struct {
	db      *bbolt.DB
	sync    func() error
	cursors store.Cursors
	arn     string
	now     func() time.Time
	notify  embedded.Notifier
	// declared is set when the feed's consumers were named, so committed
	// records can be dropped (see WithFeedConsumers).
	declared bool

	closeOnce sync.Once
	closed    chan struct{}
	swept     sync.WaitGroup
}

var (
	_ store.Store = (*Store)(nil)
	_ store.Feed  = (*Store)(nil)
)

// Open opens (creating if needed, with its directory) the bbolt file at path
// and starts the TTL sweeper.
func Open(path string, opts ...Option) (*Store, error) {
	c := config{table: embedded.DefaultTable, now: time.Now, sweepEvery: embedded.DefaultSweepInterval}
	for _, o := range opts {
		o(&c)
	}
	if err := os.MkdirAll(filepath.Dir(path), 0o700); err != nil {
		return nil, fmt.Errorf("bolt: open %s: %w", path, err)
	}
	// NoSync: the engine fsyncs after each commit itself (Store.update), so
	// that the sync is a call a test can observe.
	db, err := bbolt.Open(path, 0o600, &bbolt.Options{Timeout: lockTimeout, NoSync: true})
	if err != nil {
		return nil, fmt.Errorf("bolt: open %s: %w", path, err)
	}
	s := &Store{
		db:       db,
		sync:     db.Sync,
		cursors:  store.NewCursors(c.secret),
		arn:      embedded.StreamARN(c.table),
		now:      c.now,
		closed:   make(chan struct{}),
		declared: len(c.consumers) > 0,
	}
	if c.wrapSync != nil {
		s.sync = func() error { return c.wrapSync(db.Sync) }
	}
	err = s.update(func(tx *bbolt.Tx) error {
		for _, name := range [][]byte{bucketMeta, bucketItems, bucketGSI1, bucketTTL, bucketFeed, bucketConsumers} {
			if _, err := tx.CreateBucketIfNotExists(name); err != nil {
				return err
			}
		}
		meta := tx.Bucket(bucketMeta)
		switch v := meta.Get(keyVersion); {
		case v == nil:
			if err := meta.Put(keyVersion, []byte(schemaVersion)); err != nil {
				return err
			}
		case string(v) != schemaVersion:
			return fmt.Errorf("file has layout version %q, this build reads %q (delete the file to start over)", v, schemaVersion)
		}
		for _, name := range c.consumers {
			if err := registerTx(tx, name); err != nil {
				return err
			}
		}
		return nil
	})
	if err != nil {
		_ = db.Close()
		return nil, fmt.Errorf("bolt: open %s: %w", path, err)
	}
	if c.sweepEvery > 0 {
		s.swept.Add(1)
		go embedded.SweepEvery(c.sweepEvery, s.closed, s.Sweep, s.swept.Done)
	}
	return s, nil
}

// Close stops the sweeper, wakes blocked feed readers and closes the file,
// releasing its lock.
func (s *Store) Close() error {
	var err error
	s.closeOnce.Do(func() {
		close(s.closed)
		s.swept.Wait()
		if cerr := s.db.Close(); cerr != nil {
			err = fmt.Errorf("bolt: close: %w", cerr)
		}
	})
	return err
}

// update runs fn in a read-write transaction and, once it has committed,
// syncs the file: no write is acknowledged before it is on disk. A sync
// that fails comes after the commit: readers of this process already see
// the write, and whether the disk holds it is unknown, so the error wraps
// store.ErrOutcomeUnknown, never ErrUnavailable ("nothing was written").
func (s *Store) update(fn func(*bbolt.Tx) error) error {
	if err := s.db.Update(fn); err != nil {
		return err
	}
	if err := s.sync(); err != nil {
		return fmt.Errorf("fsync after commit: %v: %w", err, store.ErrOutcomeUnknown)
	}
	return nil
}

// tableKey is an item's key in the items bucket.
func tableKey(k store.Key) []byte {
	return embedded.AppendComponent(embedded.AppendComponent(nil, k.PK), k.SK)
}

func getItem(tx *bbolt.Tx, k store.Key) (store.Item, error) {
	v := tx.Bucket(bucketItems).Get(tableKey(k))
	if v == nil {
		return nil, nil
	}
	it, err := decodeItem(v)
	if err != nil {
		return nil, fmt.Errorf("item %s: %w", k, err)
	}
	return it, nil
}

// Get returns the item at k.
func (s *Store) Get(ctx context.Context, k store.Key) (store.Item, error) {
	if err := ctx.Err(); err != nil {
		return nil, fmt.Errorf("bolt: get %s: %w", k, err)
	}
	if err := store.ValidateKey(k); err != nil {
		return nil, fmt.Errorf("bolt: get %s: %w", k, err)
	}
	var it store.Item
	err := s.db.View(func(tx *bbolt.Tx) error {
		var err error
		it, err = getItem(tx, k)
		return err
	})
	if err != nil {
		return nil, fmt.Errorf("bolt: get %s: %w", k, err)
	}
	if it == nil {
		return nil, fmt.Errorf("bolt: get %s: %w", k, store.ErrNotFound)
	}
	return it, nil
}

// Query reads one page of a partition of the table or of gsi1.
func (s *Store) Query(ctx context.Context, q store.Query) (store.Page, error) {
	if err := ctx.Err(); err != nil {
		return store.Page{}, fmt.Errorf("bolt: query: %w", err)
	}
	var page store.Page
	err := s.db.View(func(tx *bbolt.Tx) error {
		var err error
		page, err = embedded.Query(q, s.cursors, func(index, pk string, b embedded.Bounds, backward bool, fn func(store.Item) bool) error {
			return scan(tx, index, pk, b, backward, fn)
		})
		return err
	})
	if err != nil {
		return store.Page{}, fmt.Errorf("bolt: query: %w", err)
	}
	return page, nil
}

// scan walks one partition's keys within b. A gsi1 entry's value is the
// item's table key.
func scan(tx *bbolt.Tx, index, pk string, b embedded.Bounds, backward bool, fn func(store.Item) bool) error {
	bucket := tx.Bucket(bucketItems)
	if index == store.IndexGSI1 {
		bucket = tx.Bucket(bucketGSI1)
	}
	prefix := embedded.AppendComponent(nil, pk)
	lo := append(append([]byte(nil), prefix...), b.Lo...)
	var hi []byte
	if b.Hi != "" {
		hi = append(append([]byte(nil), prefix...), b.Hi...)
	} else {
		// The component terminator 0x00 0x01 bumped to 0x00 0x02 sorts
		// after every key of the partition and before any other.
		hi = append([]byte(nil), prefix...)
		hi[len(hi)-1]++
	}
	items := tx.Bucket(bucketItems)
	visit := func(v []byte) (bool, error) {
		if index == store.IndexGSI1 {
			if v = items.Get(v); v == nil {
				return false, fmt.Errorf("gsi1 entry without its item: %w", errCorrupt)
			}
		}
		it, err := decodeItem(v)
		if err != nil {
			return false, err
		}
		return fn(it), nil
	}
	c := bucket.Cursor()
	if backward {
		var k, v []byte
		if k, _ = c.Seek(hi); k == nil {
			k, v = c.Last()
		} else {
			k, v = c.Prev()
		}
		for ; k != nil && bytes.Compare(k, lo) >= 0; k, v = c.Prev() {
			if more, err := visit(v); err != nil || !more {
				return err
			}
		}
		return nil
	}
	for k, v := c.Seek(lo); k != nil && bytes.Compare(k, hi) < 0; k, v = c.Next() {
		if more, err := visit(v); err != nil || !more {
			return err
		}
	}
	return nil
}

// Write applies actions atomically in one transaction (see store.Store).
func (s *Store) Write(ctx context.Context, actions ...store.Action) ([]store.Item, error) {
	// A caller that gave up before the write started must not have it
	// applied behind its back.
	if err := ctx.Err(); err != nil {
		return nil, fmt.Errorf("bolt: write: %w", err)
	}
	var results []store.Item
	now := s.now()
	err := s.update(func(tx *bbolt.Tx) error {
		var changes []embedded.Change
		var err error
		results, changes, err = embedded.Plan(actions, func(k store.Key) (store.Item, error) { return getItem(tx, k) })
		if err != nil {
			return err
		}
		return apply(tx, changes, false, now)
	})
	if err != nil {
		return nil, fmt.Errorf("bolt: write: %w", err)
	}
	s.notify.Notify()
	return results, nil
}

func be64(n uint64) []byte { return binary.BigEndian.AppendUint64(nil, n) }

func ttlKey(at int64, tk []byte) []byte {
	return append(be64(uint64(at)^1<<63), tk...)
}

func indexKey(it store.Item, k store.Key) ([]byte, bool) {
	ipk, isk, ok := embedded.IndexKeys(it)
	if !ok {
		return nil, false
	}
	return append(embedded.AppendComponent(nil, ipk), embedded.IndexOrder(isk, k.PK, k.SK)...), true
}

// apply stores changes, their index and TTL entries, and their change
// records, inside tx.
func apply(tx *bbolt.Tx, changes []embedded.Change, byTTL bool, now time.Time) error {
	items, gsi1, ttl, feed, meta := tx.Bucket(bucketItems), tx.Bucket(bucketGSI1), tx.Bucket(bucketTTL), tx.Bucket(bucketFeed), tx.Bucket(bucketMeta)
	seq := lastSeq(tx)
	for _, c := range changes {
		if !embedded.Changed(c) {
			continue
		}
		tk := tableKey(c.Key)
		if c.Old != nil {
			if ik, ok := indexKey(c.Old, c.Key); ok {
				if err := gsi1.Delete(ik); err != nil {
					return err
				}
			}
			if at, ok := embedded.Expiry(c.Old); ok {
				if err := ttl.Delete(ttlKey(at, tk)); err != nil {
					return err
				}
			}
		}
		if c.New == nil {
			if err := items.Delete(tk); err != nil {
				return err
			}
		} else {
			if err := items.Put(tk, encodeItem(nil, c.New)); err != nil {
				return err
			}
			if ik, ok := indexKey(c.New, c.Key); ok {
				if err := gsi1.Put(ik, tk); err != nil {
					return err
				}
			}
			if at, ok := embedded.Expiry(c.New); ok {
				if err := ttl.Put(ttlKey(at, tk), nil); err != nil {
					return err
				}
			}
		}
		seq++
		if err := feed.Put(be64(seq), encodeRecord(now.Unix(), byTTL, c)); err != nil {
			return err
		}
	}
	if err := meta.Put(keySeq, be64(seq)); err != nil {
		return err
	}
	return trimOld(tx, now)
}

func lastSeq(tx *bbolt.Tx) uint64 {
	if v := tx.Bucket(bucketMeta).Get(keySeq); len(v) == 8 {
		return binary.BigEndian.Uint64(v)
	}
	return 0
}

// A stored change record: varint(created), a flags byte, the key, then the
// old and the new item when present. The events record is rebuilt from it
// on Read with embedded.Record, the same code the memory engine uses.
const (
	flagTTL = 1 << iota
	flagOld
	flagNew
)

func encodeRecord(created int64, byTTL bool, c embedded.Change) []byte {
	var flags byte
	if byTTL {
		flags |= flagTTL
	}
	if c.Old != nil {
		flags |= flagOld
	}
	if c.New != nil {
		flags |= flagNew
	}
	b := binary.AppendVarint(nil, created)
	b = append(b, flags)
	b = appendString(appendString(b, c.Key.PK), c.Key.SK)
	if c.Old != nil {
		b = encodeItem(b, c.Old)
	}
	if c.New != nil {
		b = encodeItem(b, c.New)
	}
	return b
}

type storedRecord struct {
	created int64
	byTTL   bool
	change  embedded.Change
}

func decodeRecord(b []byte) (storedRecord, error) {
	var r storedRecord
	created, n := binary.Varint(b)
	if n <= 0 || len(b) < n+1 {
		return r, errCorrupt
	}
	r.created = created
	flags := b[n]
	d := &decoder{b: b[n+1:]}
	r.byTTL = flags&flagTTL != 0
	r.change.Key = store.Key{PK: d.string(), SK: d.string()}
	if flags&flagOld != 0 {
		r.change.Old = d.item()
	}
	if flags&flagNew != 0 {
		r.change.New = d.item()
	}
	if d.err == nil && len(d.b) != 0 {
		d.err = errCorrupt
	}
	return r, d.err
}

// trimOld drops records older than the feed's retention.
func trimOld(tx *bbolt.Tx, now time.Time) error {
	cutoff := now.Add(-embedded.Retention).Unix()
	c := tx.Bucket(bucketFeed).Cursor()
	for k, v := c.First(); k != nil; k, v = c.First() {
		created, n := binary.Varint(v)
		if n <= 0 || created >= cutoff {
			return nil
		}
		if err := c.Delete(); err != nil {
			return err
		}
	}
	return nil
}

// Sweep deletes every item whose expiresAt is before now, as DynamoDB's TTL
// does, each with a REMOVE record attributed to the TTL service. It returns
// how many it deleted. The background sweeper calls it; tests may too.
func (s *Store) Sweep() (int, error) {
	total := 0
	for {
		now := s.now()
		n := 0
		err := s.update(func(tx *bbolt.Tx) error {
			var changes []embedded.Change
			c := tx.Bucket(bucketTTL).Cursor()
			for k, _ := c.First(); k != nil && len(changes) < sweepBatch; k, _ = c.Next() {
				if len(k) < 8 || int64(binary.BigEndian.Uint64(k[:8])^1<<63) > now.Unix() {
					break
				}
				pk, rest, err := embedded.SplitComponent(k[8:])
				if err != nil {
					return fmt.Errorf("ttl entry: %w", errCorrupt)
				}
				sk, _, err := embedded.SplitComponent(rest)
				if err != nil {
					return fmt.Errorf("ttl entry: %w", errCorrupt)
				}
				key := store.Key{PK: pk, SK: sk}
				it, err := getItem(tx, key)
				if err != nil {
					return err
				}
				if it != nil && embedded.Expired(it, now) {
					changes = append(changes, embedded.Change{Key: key, Old: it})
				}
			}
			n = len(changes)
			if n == 0 {
				return trimOld(tx, now)
			}
			return apply(tx, changes, true, now)
		})
		if err != nil {
			return total, fmt.Errorf("bolt: sweep: %w", err)
		}
		if n > 0 {
			s.notify.Notify()
		}
		total += n
		if n < sweepBatch {
			return total, nil
		}
	}
}

// Read returns up to max records after consumer's committed position,
// waiting for one if there is none (see store.Feed). A consumer read for
// the first time is registered just before the oldest retained record.
func (s *Store) Read(ctx context.Context, consumer string, max int) ([]events.DynamoDBEventRecord, error) {
	if err := embedded.ReadArgs(consumer, max); err != nil {
		return nil, fmt.Errorf("bolt: feed read: %w", err)
	}
	if err := s.register(consumer); err != nil {
		return nil, fmt.Errorf("bolt: feed read: %w", err)
	}
	recs, err := embedded.WaitRead(ctx, &s.notify, s.closed, func() ([]events.DynamoDBEventRecord, error) {
		var recs []events.DynamoDBEventRecord
		err := s.db.View(func(tx *bbolt.Tx) error {
			after, _ := position(tx, consumer)
			c := tx.Bucket(bucketFeed).Cursor()
			for k, v := c.Seek(be64(after + 1)); k != nil && len(recs) < max; k, v = c.Next() {
				r, err := decodeRecord(v)
				if err != nil {
					return fmt.Errorf("record %x: %w", k, err)
				}
				if rec, ok := embedded.Record(s.arn, binary.BigEndian.Uint64(k), r.created, r.change, r.byTTL); ok {
					recs = append(recs, rec)
				}
			}
			return nil
		})
		return recs, err
	})
	if err != nil {
		return nil, fmt.Errorf("bolt: feed read: %w", err)
	}
	return recs, nil
}

// position returns consumer's committed sequence and whether it is known.
func position(tx *bbolt.Tx, consumer string) (uint64, bool) {
	v := tx.Bucket(bucketConsumers).Get([]byte(consumer))
	if len(v) != 8 {
		return 0, false
	}
	return binary.BigEndian.Uint64(v), true
}

// register stores a new consumer's position: just before the oldest
// retained record, or at the end of an empty feed.
func (s *Store) register(consumer string) error {
	var known bool
	if err := s.db.View(func(tx *bbolt.Tx) error {
		_, known = position(tx, consumer)
		return nil
	}); err != nil || known {
		return err
	}
	return s.update(func(tx *bbolt.Tx) error { return registerTx(tx, consumer) })
}

func registerTx(tx *bbolt.Tx, consumer string) error {
	if consumer == "" {
		return fmt.Errorf("feed consumer is empty: %w", store.ErrInvalid)
	}
	if _, ok := position(tx, consumer); ok {
		return nil
	}
	at := lastSeq(tx)
	if k, _ := tx.Bucket(bucketFeed).Cursor().First(); k != nil {
		at = binary.BigEndian.Uint64(k) - 1
	}
	return tx.Bucket(bucketConsumers).Put([]byte(consumer), be64(at))
}

// Commit marks consumer's records up to seq as consumed and, when the
// feed's consumers were named, drops the records every consumer has
// consumed. Committing a position at or before
// the current one changes nothing.
func (s *Store) Commit(_ context.Context, consumer, seq string) error {
	n, err := embedded.CommitArgs(consumer, seq)
	if err != nil {
		return fmt.Errorf("bolt: feed commit: %w", err)
	}
	if err := s.register(consumer); err != nil {
		return fmt.Errorf("bolt: feed commit: %w", err)
	}
	now := s.now()
	err = s.update(func(tx *bbolt.Tx) error {
		if n > lastSeq(tx) {
			return fmt.Errorf("sequence %s was never issued: %w", seq, store.ErrInvalid)
		}
		consumers := tx.Bucket(bucketConsumers)
		if at, _ := position(tx, consumer); n > at {
			if err := consumers.Put([]byte(consumer), be64(n)); err != nil {
				return err
			}
		}
		if !s.declared {
			return trimOld(tx, now)
		}
		upTo := ^uint64(0)
		if err := consumers.ForEach(func(_, v []byte) error {
			if len(v) == 8 {
				upTo = min(upTo, binary.BigEndian.Uint64(v))
			}
			return nil
		}); err != nil {
			return err
		}
		c := tx.Bucket(bucketFeed).Cursor()
		for k, _ := c.First(); k != nil && binary.BigEndian.Uint64(k) <= upTo; k, _ = c.First() {
			if err := c.Delete(); err != nil {
				return err
			}
		}
		return trimOld(tx, now)
	})
	if err != nil {
		return fmt.Errorf("bolt: feed commit: %w", err)
	}
	return nil
}

// Retained returns how many change records the file holds, for tests of
// the feed's bound.
func (s *Store) Retained() (int, error) {
	var n int
	err := s.db.View(func(tx *bbolt.Tx) error {
		n = tx.Bucket(bucketFeed).Stats().KeyN
		return nil
	})
	return n, err
}
