// Package memory is the in-process engine of the item API: the default of
// the local harness and the fastest engine for tests.
//
// Each partition of the table is kept sorted by sk, and each partition of
// gsi1 by (gsi1sk, pk, sk), so a Query is a binary search and a walk. gsi1 is
// sparse: only items carrying both gsi1pk and gsi1sk are in it. One
// read-write lock serializes writes, which makes each Write atomic; items are
// copied in and out, so a caller never shares memory with the store.
//
// Every committed change is also appended to the engine's change feed
// (store.Feed); records are dropped after 24 hours, as DynamoDB Streams
// does, and sooner once every named consumer has committed them
// (WithFeedConsumers). A background
// sweeper deletes items past their expiresAt, as DynamoDB's TTL does, so
// memory stays bounded by live data. The semantics shared with the bolt
// engine (conditions, updates, paging, records) live in
// shared/store/internal/embedded.
package memory

import (
	"context"
	"fmt"
	"sort"
	"sync"
	"time"

	"github.com/aws/aws-lambda-go/events"

	"github.com/a2awire/a2awire/shared/store"
	"github.com/a2awire/a2awire/shared/store/internal/embedded"
)

// Option configures a Store.
type Option func(*config)

type config struct {
	table      string
	now        func() time.Time
	sweepEvery time.Duration
	secret     []byte
	consumers  []string
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

// Store is the in-memory engine. It implements store.Store and store.Feed
// and is safe for concurrent use. The zero value is not usable; call New.
type Store struct {
	cursors store.Cursors
	arn     string
	now     func() time.Time

	mu       sync.RWMutex
	table    map[string]*partition // pk → items by sk
	index    map[string]*partition // gsi1pk → items by (gsi1sk, pk, sk)
	expiring map[store.Key]int64   // items with an expiresAt → its whole seconds

	feedMu    sync.Mutex // taken under mu by writers, alone by readers
	seq       uint64     // last sequence number issued
	log       []logEntry // retained records, oldest first
	consumers map[string]uint64
	declared  bool // consumers were named: committed records can go
	notify    embedded.Notifier

	closeOnce sync.Once
	closed    chan struct{}
	swept     sync.WaitGroup
}

// logEntry is one retained change; its record is built when read, from
// copies, so a consumer cannot reach the stored items.
type logEntry struct {
	seq    uint64
	at     time.Time
	change embedded.Change
	byTTL  bool
}

var (
	_ store.Store = (*Store)(nil)
	_ store.Feed  = (*Store)(nil)
)

// New returns an empty store whose sweeper runs until Close.
func New(opts ...Option) *Store {
	c := config{table: embedded.DefaultTable, now: time.Now, sweepEvery: embedded.DefaultSweepInterval}
	for _, o := range opts {
		o(&c)
	}
	s := &Store{
		cursors:   store.NewCursors(c.secret),
		arn:       embedded.StreamARN(c.table),
		now:       c.now,
		table:     map[string]*partition{},
		index:     map[string]*partition{},
		expiring:  map[store.Key]int64{},
		consumers: map[string]uint64{},
		declared:  len(c.consumers) > 0,
		closed:    make(chan struct{}),
	}
	for _, name := range c.consumers {
		s.consumers[name] = 0 // before the first record
	}
	if c.sweepEvery > 0 {
		s.swept.Add(1)
		go embedded.SweepEvery(c.sweepEvery, s.closed, s.Sweep, s.swept.Done)
	}
	return s
}

// Close stops the sweeper and wakes blocked feed readers. The data stays
// readable; Close exists so that every engine has the same life cycle.
func (s *Store) Close() error {
	s.closeOnce.Do(func() { close(s.closed) })
	s.swept.Wait()
	return nil
}

// Get returns a copy of the item at k.
func (s *Store) Get(ctx context.Context, k store.Key) (store.Item, error) {
	if err := ctx.Err(); err != nil {
		return nil, fmt.Errorf("memory: get %s: %w", k, err)
	}
	if err := store.ValidateKey(k); err != nil {
		return nil, fmt.Errorf("memory: get %s: %w", k, err)
	}
	s.mu.RLock()
	defer s.mu.RUnlock()
	it := s.get(k)
	if it == nil {
		return nil, fmt.Errorf("memory: get %s: %w", k, store.ErrNotFound)
	}
	return it.Clone(), nil
}

// get returns the stored item at k (not a copy), or nil. Callers hold mu.
func (s *Store) get(k store.Key) store.Item {
	p := s.table[k.PK]
	if p == nil {
		return nil
	}
	return p.get(embedded.TableOrder(k.SK))
}

// Query reads one page of a partition of the table or of gsi1.
func (s *Store) Query(ctx context.Context, q store.Query) (store.Page, error) {
	if err := ctx.Err(); err != nil {
		return store.Page{}, fmt.Errorf("memory: query: %w", err)
	}
	s.mu.RLock()
	defer s.mu.RUnlock()
	page, err := embedded.Query(q, s.cursors, s.scan)
	if err != nil {
		return store.Page{}, fmt.Errorf("memory: query: %w", err)
	}
	return page, nil
}

func (s *Store) scan(index, pk string, b embedded.Bounds, backward bool, fn func(store.Item) bool) error {
	parts := s.table
	if index == store.IndexGSI1 {
		parts = s.index
	}
	if p := parts[pk]; p != nil {
		p.scan(b, backward, func(it store.Item) bool { return fn(it.Clone()) })
	}
	return nil
}

// Write applies actions atomically (see store.Store).
func (s *Store) Write(ctx context.Context, actions ...store.Action) ([]store.Item, error) {
	// A caller that gave up before the write started must not have it
	// applied behind its back.
	if err := ctx.Err(); err != nil {
		return nil, fmt.Errorf("memory: write: %w", err)
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	results, changes, err := embedded.Plan(actions, func(k store.Key) (store.Item, error) { return s.get(k), nil })
	if err != nil {
		return nil, fmt.Errorf("memory: write: %w", err)
	}
	s.apply(changes, false)
	return results, nil
}

// apply stores changes and appends their records. Callers hold mu.
func (s *Store) apply(changes []embedded.Change, byTTL bool) {
	now := s.now()
	s.feedMu.Lock()
	defer s.feedMu.Unlock()
	appended := false
	for _, c := range changes {
		if !embedded.Changed(c) {
			continue
		}
		s.relink(c.Key, c.Old, c.New)
		s.seq++
		s.log = append(s.log, logEntry{seq: s.seq, at: now, change: c, byTTL: byTTL})
		appended = true
	}
	if appended {
		s.trim(now)
		s.notify.Notify()
	}
}

// relink replaces the stored item old (nil: none) at k with new (nil:
// none) in the table, in gsi1 (only items carrying both index keys are
// there) and in the expiry map. An entry whose order key stays the same is
// overwritten in place, which keeps an update of a partition's first item
// from shifting the whole partition twice.
func (s *Store) relink(k store.Key, old, new store.Item) {
	tk := embedded.TableOrder(k.SK)
	if new != nil {
		place(s.table, k.PK, tk, new)
	} else {
		remove(s.table, k.PK, tk)
	}
	oldPK, oldSK, inOld := embedded.IndexKeys(old)
	newPK, newSK, inNew := embedded.IndexKeys(new)
	if inOld && (!inNew || oldPK != newPK || oldSK != newSK) {
		remove(s.index, oldPK, embedded.IndexOrder(oldSK, k.PK, k.SK))
	}
	if inNew {
		place(s.index, newPK, embedded.IndexOrder(newSK, k.PK, k.SK), new)
	}
	if at, ok := embedded.Expiry(new); ok {
		s.expiring[k] = at
	} else {
		delete(s.expiring, k)
	}
}

func place(parts map[string]*partition, pk, key string, it store.Item) {
	p := parts[pk]
	if p == nil {
		p = &partition{}
		parts[pk] = p
	}
	p.put(key, it)
}

func remove(parts map[string]*partition, pk, key string) {
	if p := parts[pk]; p != nil {
		if p.delete(key); p.len() == 0 {
			delete(parts, pk)
		}
	}
}

// Sweep deletes every item whose expiresAt is before now, as DynamoDB's TTL
// does, each with a REMOVE record attributed to the TTL service. It returns
// how many it deleted (the error is always nil; bolt's Sweep can fail). The
// background sweeper calls it; tests may too.
func (s *Store) Sweep() (int, error) {
	now := s.now()
	s.mu.Lock()
	defer s.mu.Unlock()
	var changes []embedded.Change
	for k, at := range s.expiring {
		if at > now.Unix() {
			continue
		}
		if it := s.get(k); it != nil && embedded.Expired(it, now) {
			changes = append(changes, embedded.Change{Key: k, Old: it})
		}
	}
	// Map order is random; a stable order keeps the feed reproducible.
	sort.Slice(changes, func(i, j int) bool {
		a, b := changes[i].Key, changes[j].Key
		return a.PK < b.PK || a.PK == b.PK && a.SK < b.SK
	})
	s.apply(changes, true)
	s.feedMu.Lock()
	s.trim(now)
	s.feedMu.Unlock()
	return len(changes), nil
}

// Read returns up to max records after consumer's committed position,
// waiting for one if there is none (see store.Feed).
func (s *Store) Read(ctx context.Context, consumer string, max int) ([]events.DynamoDBEventRecord, error) {
	if err := embedded.ReadArgs(consumer, max); err != nil {
		return nil, fmt.Errorf("memory: feed read: %w", err)
	}
	recs, err := embedded.WaitRead(ctx, &s.notify, s.closed, func() ([]events.DynamoDBEventRecord, error) {
		s.feedMu.Lock()
		defer s.feedMu.Unlock()
		after := s.position(consumer)
		i := sort.Search(len(s.log), func(i int) bool { return s.log[i].seq > after })
		var recs []events.DynamoDBEventRecord
		for ; i < len(s.log) && len(recs) < max; i++ {
			e := s.log[i]
			c := embedded.Change{Key: e.change.Key, Old: e.change.Old.Clone(), New: e.change.New.Clone()}
			if rec, ok := embedded.Record(s.arn, e.seq, e.at.Unix(), c, e.byTTL); ok {
				recs = append(recs, rec)
			}
		}
		return recs, nil
	})
	if err != nil {
		return nil, fmt.Errorf("memory: feed read: %w", err)
	}
	return recs, nil
}

// Commit marks consumer's records up to seq as consumed. Committing a
// position at or before the current one changes nothing.
func (s *Store) Commit(_ context.Context, consumer, seq string) error {
	n, err := embedded.CommitArgs(consumer, seq)
	if err != nil {
		return fmt.Errorf("memory: feed commit: %w", err)
	}
	s.feedMu.Lock()
	defer s.feedMu.Unlock()
	if n > s.seq {
		return fmt.Errorf("memory: feed commit: sequence %s was never issued: %w", seq, store.ErrInvalid)
	}
	if n > s.position(consumer) {
		s.consumers[consumer] = n
	}
	s.trim(s.now())
	return nil
}

// position returns consumer's committed sequence, registering a new
// consumer just before the oldest retained record. Callers hold feedMu.
func (s *Store) position(consumer string) uint64 {
	if n, ok := s.consumers[consumer]; ok {
		return n
	}
	n := s.seq
	if len(s.log) > 0 {
		n = s.log[0].seq - 1
	}
	s.consumers[consumer] = n
	return n
}

// trim drops records older than the retention and, when the feed's
// consumers were named, the records every consumer has committed. Callers
// hold feedMu.
func (s *Store) trim(now time.Time) {
	var upTo uint64
	if s.declared {
		upTo = ^uint64(0)
		for _, n := range s.consumers {
			upTo = min(upTo, n)
		}
	}
	cutoff := now.Add(-embedded.Retention)
	i := 0
	for i < len(s.log) && (s.log[i].seq <= upTo || s.log[i].at.Before(cutoff)) {
		i++
	}
	if i > 0 {
		clear(s.log[:i]) // release the items for the garbage collector
		s.log = s.log[i:]
	}
}

// Retained returns how many change records the feed holds, for tests of its
// bound (the error is always nil, as in bolt's it is not).
func (s *Store) Retained() (int, error) {
	s.feedMu.Lock()
	defer s.feedMu.Unlock()
	return len(s.log), nil
}
