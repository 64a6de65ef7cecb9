// Package dynamostream reads a table's DynamoDB Stream as a store.Feed, the
// way Lambda's event source mapping does, for the local harness on DynamoDB
// Local (and usable against AWS). It is its own package so that the Lambda
// functions, which never read the stream themselves (Lambda delivers it),
// do not link the DynamoDB Streams client and pay its package
// initialization at every cold start.
package dynamostream

import (
	"context"
	"errors"
	"fmt"
	"math/big"
	"sync"
	"time"

	"github.com/aws/aws-lambda-go/events"
	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/credentials"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	ddbtypes "github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
	"github.com/aws/aws-sdk-go-v2/service/dynamodbstreams"
	"github.com/aws/aws-sdk-go-v2/service/dynamodbstreams/types"

	"github.com/a2awire/a2awire/shared/store"
	"github.com/a2awire/a2awire/shared/store/dynamo"
)

// LocalClient returns a DynamoDB Streams client for a local endpoint
// (DynamoDB Local serves both APIs on one port), with the same dummy
// credentials and region as LocalClient.
func LocalClient(endpoint string, optFns ...func(*dynamodbstreams.Options)) *dynamodbstreams.Client {
	return dynamodbstreams.New(dynamodbstreams.Options{
		Region:       "us-east-1",
		BaseEndpoint: aws.String(endpoint),
		Credentials:  credentials.NewStaticCredentialsProvider(dynamo.LocalKey(), "local", ""),
	}, optFns...)
}

// Feed is a store.Feed over a table's DynamoDB Stream: what Lambda's
// event source mapping does, in-process, for the local harness with
// -dynamodb-endpoint (and usable against AWS).
//
// It reads the stream's shards in order (a parent shard to its end before
// its children, so the records of one key keep their commit order),
// converts each record to the events.DynamoDBEventRecord Lambda would
// deliver, and buffers them in memory. Each consumer has its own position
// in that buffer: Read returns the records after it (the same ones again
// until Commit), Commit advances it. As in the memory engine's feed, records
// are held for 24 hours (DynamoDB Streams' retention), or, when the
// consumers are named (WithFeedConsumers), until every one of them has
// committed them; a consumer seen for the first time starts at the oldest
// record held. Positions live in memory: a restarted feed starts again at
// LATEST, as a new event source mapping would.
//
// The stream is polled only while a Read waits, at most every poll
// interval (200 ms by default; DynamoDB Streams allows 5 GetRecords per
// second per shard, Lambda polls 4 times a second), and not while 10,000
// records wait that some consumer has not committed.
type Feed struct {
	streams      *dynamodbstreams.Client
	arn          string
	pollEvery    time.Duration
	refreshEvery time.Duration
	maxBuffered  int

	mu        sync.Mutex
	log       []entry // records from absolute index base on
	base      int64
	consumers map[string]int64 // absolute index of each consumer's next record
	declared  bool             // consumers were named: committed records can go
	highest   *big.Int         // the highest sequence number read, for Commit
	changed   chan struct{}    // closed and replaced when records arrive
	lastPoll  time.Time

	poller      chan struct{} // a token: one poll at a time
	shards      map[string]*shard
	order       []string // shard ids in the order found (parents before children)
	lastRefresh time.Time
	refresh     bool // a shard ended: look for its children
}

// entry is one buffered record and when it arrived.
type entry struct {
	rec events.DynamoDBEventRecord
	at  time.Time
}

// retention is how long records are held without named consumers:
// DynamoDB Streams keeps them 24 hours.
const retention = 24 * time.Hour

// shard is the read state of one stream shard (guarded by the poller token).
type shard struct {
	id, parent string
	iter       *string // nil: acquire one
	lastSeq    string  // the last record read, to resume after an expired iterator
	start      types.ShardIteratorType
	done       bool // read to its end, or before the feed's start
	// empty: the shard held no record when the feed started at LATEST
	// (see readShard's TrimmedDataAccessException case).
	empty bool
}

var _ store.Feed = (*Feed)(nil)

// Option configures a Feed.
type Option func(*config)

type config struct {
	consumers    []string
	trimHorizon  bool
	pollEvery    time.Duration
	refreshEvery time.Duration
	maxBuffered  int
}

// FromTrimHorizon starts the feed at the oldest record the stream holds
// (24 hours on AWS) instead of at LATEST.
func FromTrimHorizon() Option { return func(c *config) { c.trimHorizon = true } }

// WithFeedConsumers names the feed's consumers (the stream-triggered
// functions): a record is dropped as soon as all of them, and every other
// consumer that has read the feed, have committed it.
func WithFeedConsumers(names ...string) Option {
	return func(c *config) { c.consumers = append(c.consumers, names...) }
}

// WithPollInterval sets the least time between two polls of the stream.
func WithPollInterval(d time.Duration) Option { return func(c *config) { c.pollEvery = d } }

// NewFeed opens the stream of table (found with DescribeTable on db)
// and fixes its start: LATEST of every open shard, taken now, so every
// change committed after NewFeed returns is delivered (FromTrimHorizon
// for the whole stream).
func NewFeed(ctx context.Context, streams *dynamodbstreams.Client, db *dynamodb.Client, table string, opts ...Option) (*Feed, error) {
	cfg := config{pollEvery: 200 * time.Millisecond, refreshEvery: 10 * time.Second, maxBuffered: 10000}
	for _, o := range opts {
		o(&cfg)
	}
	out, err := db.DescribeTable(ctx, &dynamodb.DescribeTableInput{TableName: aws.String(table)})
	if err != nil {
		return nil, fmt.Errorf("dynamo: stream of %s: %w", table, err)
	}
	if out.Table == nil || out.Table.LatestStreamArn == nil ||
		out.Table.StreamSpecification == nil || !aws.ToBool(out.Table.StreamSpecification.StreamEnabled) {
		return nil, fmt.Errorf("dynamo: table %s has no stream enabled", table)
	}
	f := &Feed{
		streams:      streams,
		arn:          aws.ToString(out.Table.LatestStreamArn),
		pollEvery:    cfg.pollEvery,
		refreshEvery: cfg.refreshEvery,
		maxBuffered:  cfg.maxBuffered,
		consumers:    map[string]int64{},
		declared:     len(cfg.consumers) > 0,
		highest:      new(big.Int),
		changed:      make(chan struct{}),
		poller:       make(chan struct{}, 1),
		shards:       map[string]*shard{},
	}
	start := types.ShardIteratorTypeLatest
	if cfg.trimHorizon {
		start = types.ShardIteratorTypeTrimHorizon
	}
	if err := f.listShards(ctx, start, true); err != nil {
		return nil, err
	}
	for _, name := range cfg.consumers {
		f.consumers[name] = 0
	}
	f.lastRefresh = time.Now()
	return f, nil
}

// ARN is the stream's ARN (the records' eventSourceARN).
func (f *Feed) ARN() string { return f.arn }

// listShards adds shards not known yet. At construction (initial) shards
// start at start, and with LATEST a closed shard holds only older records
// and is skipped; LATEST iterators are taken at once so that the start is
// now, not the first poll. Shards found later are new, read from their
// beginning.
func (f *Feed) listShards(ctx context.Context, start types.ShardIteratorType, initial bool) error {
	var from *string
	for {
		out, err := f.streams.DescribeStream(ctx, &dynamodbstreams.DescribeStreamInput{
			StreamArn: aws.String(f.arn), ExclusiveStartShardId: from,
		})
		if err != nil {
			return fmt.Errorf("dynamo: describe stream %s: %w", f.arn, err)
		}
		d := out.StreamDescription
		if d == nil {
			return fmt.Errorf("dynamo: describe stream %s: no description", f.arn)
		}
		for _, s := range d.Shards {
			id := aws.ToString(s.ShardId)
			if _, ok := f.shards[id]; ok || id == "" {
				continue
			}
			sh := &shard{id: id, parent: aws.ToString(s.ParentShardId), start: types.ShardIteratorTypeTrimHorizon}
			if initial {
				sh.start = start
				closed := s.SequenceNumberRange != nil && s.SequenceNumberRange.EndingSequenceNumber != nil
				if start == types.ShardIteratorTypeLatest {
					if closed {
						sh.done = true
					} else if err := f.startLatest(ctx, sh); err != nil {
						return err
					}
				}
			}
			f.shards[id] = sh
			f.order = append(f.order, id)
		}
		if d.LastEvaluatedShardId == nil {
			return nil
		}
		from = d.LastEvaluatedShardId
	}
}

// startLatest takes sh's LATEST iterator and notes whether the shard holds
// any record yet (one GetRecords of one record from the trim horizon).
func (f *Feed) startLatest(ctx context.Context, sh *shard) error {
	th, err := f.streams.GetShardIterator(ctx, &dynamodbstreams.GetShardIteratorInput{
		StreamArn: aws.String(f.arn), ShardId: aws.String(sh.id), ShardIteratorType: types.ShardIteratorTypeTrimHorizon,
	})
	if err != nil {
		return fmt.Errorf("dynamo: shard iterator of %s: %w", sh.id, err)
	}
	if th.ShardIterator != nil {
		out, err := f.streams.GetRecords(ctx, &dynamodbstreams.GetRecordsInput{ShardIterator: th.ShardIterator, Limit: aws.Int32(1)})
		if err != nil {
			return fmt.Errorf("dynamo: read stream shard %s: %w", sh.id, err)
		}
		sh.empty = len(out.Records) == 0
	}
	return f.acquire(ctx, sh)
}

// acquire gets a shard iterator: after the last record read, or at the
// shard's start.
func (f *Feed) acquire(ctx context.Context, sh *shard) error {
	in := &dynamodbstreams.GetShardIteratorInput{StreamArn: aws.String(f.arn), ShardId: aws.String(sh.id), ShardIteratorType: sh.start}
	if sh.lastSeq != "" {
		in.ShardIteratorType, in.SequenceNumber = types.ShardIteratorTypeAfterSequenceNumber, aws.String(sh.lastSeq)
	}
	out, err := f.streams.GetShardIterator(ctx, in)
	if err != nil {
		return fmt.Errorf("dynamo: shard iterator of %s: %w", sh.id, err)
	}
	sh.iter = out.ShardIterator
	if sh.iter == nil {
		sh.done = true
	}
	return nil
}

// Read returns up to max records after consumer's committed position,
// polling the stream while there are none, until ctx ends.
func (f *Feed) Read(ctx context.Context, consumer string, max int) ([]events.DynamoDBEventRecord, error) {
	if consumer == "" || max <= 0 {
		return nil, fmt.Errorf("dynamo: feed read of %d records by %q: %w", max, consumer, store.ErrInvalid)
	}
	for {
		f.mu.Lock()
		if i := int(f.position(consumer) - f.base); i < len(f.log) {
			recs := make([]events.DynamoDBEventRecord, 0, min(max, len(f.log)-i))
			for _, e := range f.log[i:min(len(f.log), i+max)] {
				recs = append(recs, e.rec)
			}
			f.mu.Unlock()
			return recs, nil
		}
		changed, wait := f.changed, time.Until(f.lastPoll.Add(f.pollEvery))
		f.mu.Unlock()

		if wait <= 0 {
			if err := f.poll(ctx); err != nil {
				return nil, err
			}
			continue
		}
		t := time.NewTimer(wait)
		select {
		case <-ctx.Done():
			t.Stop()
			return nil, ctx.Err()
		case <-changed:
		case <-t.C:
		}
		t.Stop()
	}
}

// Commit marks consumer's records up to and including seq as consumed. A
// seq the consumer has already passed is a no-op; one the feed never read
// is an error wrapping store.ErrInvalid.
func (f *Feed) Commit(_ context.Context, consumer, seq string) error {
	n, ok := new(big.Int).SetString(seq, 10)
	if consumer == "" || !ok {
		return fmt.Errorf("dynamo: feed commit of %q by %q: %w", seq, consumer, store.ErrInvalid)
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	pos := f.position(consumer)
	for i := len(f.log) - 1; i >= 0; i-- {
		if f.log[i].rec.Change.SequenceNumber != seq {
			continue
		}
		if next := f.base + int64(i) + 1; next > pos {
			f.consumers[consumer] = next
			f.trim(time.Now())
		}
		return nil
	}
	if n.Sign() <= 0 || n.Cmp(f.highest) > 0 {
		return fmt.Errorf("dynamo: feed commit of %q by %s: no such record: %w", seq, consumer, store.ErrInvalid)
	}
	return nil // read and dropped already: committed before
}

// position returns consumer's next record, registering a new consumer at
// the oldest record held. Callers hold mu.
func (f *Feed) position(consumer string) int64 {
	pos, ok := f.consumers[consumer]
	if !ok || pos < f.base {
		pos = max(pos, f.base)
		f.consumers[consumer] = pos
	}
	return pos
}

// trim drops records past the retention and, when the consumers were
// named, the records every consumer has committed. Callers hold mu.
func (f *Feed) trim(now time.Time) {
	upTo := f.base
	if f.declared {
		upTo = f.base + int64(len(f.log))
		for _, p := range f.consumers {
			upTo = min(upTo, p)
		}
	}
	n := int(upTo - f.base)
	for n < len(f.log) && now.Sub(f.log[n].at) > retention {
		n++
	}
	if n > 0 {
		f.log = append([]entry(nil), f.log[n:]...)
		f.base += int64(n)
	}
}

// pending is how many held records some consumer has not committed (all
// of them while no consumer has come). Callers hold mu.
func (f *Feed) pending() int {
	end := f.base + int64(len(f.log))
	low := f.base
	if len(f.consumers) > 0 {
		low = end
		for _, p := range f.consumers {
			low = min(low, max(p, f.base))
		}
	}
	return int(end - low)
}

// poll reads every readable shard once and appends what it finds. Only one
// poll runs at a time; a caller that finds another polling (or a poll that
// just ran) returns and waits for the result instead.
func (f *Feed) poll(ctx context.Context) error {
	select {
	case f.poller <- struct{}{}:
	case <-ctx.Done():
		return ctx.Err()
	}
	defer func() { <-f.poller }()
	f.mu.Lock()
	recent := time.Since(f.lastPoll) < f.pollEvery
	full := f.pending() >= f.maxBuffered
	f.mu.Unlock()
	if recent {
		return nil
	}
	var found []events.DynamoDBEventRecord
	var err error
	if !full {
		found, err = f.readShards(ctx)
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	if len(found) == 0 || full {
		// Nothing new (or no room): wait a poll interval. After records,
		// poll again at once: a shard may hold more.
		f.lastPoll = time.Now()
	}
	if len(found) > 0 {
		now := time.Now()
		for _, r := range found {
			f.log = append(f.log, entry{rec: r, at: now})
			if n, ok := new(big.Int).SetString(r.Change.SequenceNumber, 10); ok && n.Cmp(f.highest) > 0 {
				f.highest = n
			}
		}
		close(f.changed)
		f.changed = make(chan struct{})
	}
	f.trim(time.Now())
	return err
}

// readShards makes one GetRecords per readable shard. Errors that a later
// poll may not meet (throttling, an expired iterator) are absorbed; the
// records read before an error are kept.
func (f *Feed) readShards(ctx context.Context) ([]events.DynamoDBEventRecord, error) {
	if f.refresh || time.Since(f.lastRefresh) >= f.refreshEvery {
		if err := f.listShards(ctx, types.ShardIteratorTypeTrimHorizon, false); err != nil {
			return nil, err
		}
		f.refresh, f.lastRefresh = false, time.Now()
	}
	var found []events.DynamoDBEventRecord
	for _, id := range f.order {
		sh := f.shards[id]
		if sh.done {
			continue
		}
		if p, ok := f.shards[sh.parent]; ok && !p.done {
			continue // the parent's records come first
		}
		recs, err := f.readShard(ctx, sh)
		found = append(found, recs...)
		if err != nil {
			return found, err
		}
	}
	return found, nil
}

func (f *Feed) readShard(ctx context.Context, sh *shard) ([]events.DynamoDBEventRecord, error) {
	for try := 0; ; try++ {
		if sh.iter == nil {
			if err := f.acquire(ctx, sh); err != nil {
				return nil, err
			}
			if sh.done {
				f.refresh = true
				return nil, nil
			}
		}
		out, err := f.streams.GetRecords(ctx, &dynamodbstreams.GetRecordsInput{ShardIterator: sh.iter, Limit: aws.Int32(1000)})
		var expired *types.ExpiredIteratorException
		var limited *types.LimitExceededException
		var trimmed *types.TrimmedDataAccessException
		switch {
		case errors.As(err, &expired) && try == 0:
			// Iterators live 15 minutes; resume after the last record.
			sh.iter = nil
			continue
		case errors.As(err, &trimmed) && try == 0 && sh.lastSeq == "" && sh.start == types.ShardIteratorTypeLatest && sh.empty:
			// DynamoDB Local numbers records across all its tables, and a
			// LATEST iterator taken on an empty shard points before the
			// shard's first record once another table has written: it
			// reports the gap as trimmed data. The shard was empty when the
			// feed started (checked then), so its whole content is new:
			// read it from the trim horizon. (On AWS a LATEST iterator is never behind the
			// trim horizon: it expires after 15 minutes, records after 24
			// hours.)
			sh.start, sh.iter = types.ShardIteratorTypeTrimHorizon, nil
			continue
		case errors.As(err, &limited):
			return nil, nil // over 5 reads a second: the next poll reads it
		case err != nil:
			return nil, fmt.Errorf("dynamo: read stream shard %s: %w", sh.id, err)
		}
		recs := make([]events.DynamoDBEventRecord, 0, len(out.Records))
		for _, r := range out.Records {
			rec, err := f.convert(r)
			if err != nil {
				return recs, fmt.Errorf("dynamo: read stream shard %s: %w", sh.id, err)
			}
			recs = append(recs, rec)
			sh.lastSeq = rec.Change.SequenceNumber
		}
		sh.iter = out.NextShardIterator
		if sh.iter == nil {
			sh.done, f.refresh = true, true // closed: its children follow
		}
		return recs, nil
	}
}

// convert turns an SDK stream record into the record Lambda delivers.
func (f *Feed) convert(r types.Record) (events.DynamoDBEventRecord, error) {
	rec := events.DynamoDBEventRecord{
		AWSRegion:      aws.ToString(r.AwsRegion),
		EventID:        aws.ToString(r.EventID),
		EventName:      string(r.EventName),
		EventSource:    aws.ToString(r.EventSource),
		EventVersion:   aws.ToString(r.EventVersion),
		EventSourceArn: f.arn,
	}
	if r.UserIdentity != nil {
		rec.UserIdentity = &events.DynamoDBUserIdentity{Type: aws.ToString(r.UserIdentity.Type), PrincipalID: aws.ToString(r.UserIdentity.PrincipalId)}
	}
	d := r.Dynamodb
	if d == nil {
		return rec, fmt.Errorf("record %s has no dynamodb field", rec.EventID)
	}
	var err error
	image := func(m map[string]types.AttributeValue) map[string]events.DynamoDBAttributeValue {
		it, cerr := streamItem(m)
		if cerr != nil && err == nil {
			err = cerr
		}
		return store.StreamImage(it)
	}
	rec.Change = events.DynamoDBStreamRecord{
		Keys:           image(d.Keys),
		NewImage:       image(d.NewImage),
		OldImage:       image(d.OldImage),
		SequenceNumber: aws.ToString(d.SequenceNumber),
		SizeBytes:      aws.ToInt64(d.SizeBytes),
		StreamViewType: string(d.StreamViewType),
	}
	if d.ApproximateCreationDateTime != nil {
		rec.Change.ApproximateCreationDateTime = events.SecondsEpochTime{Time: *d.ApproximateCreationDateTime}
	}
	return rec, err
}

// streamItem converts a stream image to an item (nil stays nil).
func streamItem(m map[string]types.AttributeValue) (store.Item, error) {
	if m == nil {
		return nil, nil
	}
	out := make(store.Item, len(m))
	for k, v := range m {
		x, err := streamValue(v)
		if err != nil {
			return nil, fmt.Errorf("attribute %s: %w", k, err)
		}
		out[k] = x
	}
	return out, nil
}

func streamValue(v types.AttributeValue) (ddbtypes.AttributeValue, error) {
	switch v := v.(type) {
	case *types.AttributeValueMemberS:
		return &ddbtypes.AttributeValueMemberS{Value: v.Value}, nil
	case *types.AttributeValueMemberN:
		return &ddbtypes.AttributeValueMemberN{Value: v.Value}, nil
	case *types.AttributeValueMemberB:
		return &ddbtypes.AttributeValueMemberB{Value: v.Value}, nil
	case *types.AttributeValueMemberBOOL:
		return &ddbtypes.AttributeValueMemberBOOL{Value: v.Value}, nil
	case *types.AttributeValueMemberNULL:
		return &ddbtypes.AttributeValueMemberNULL{Value: v.Value}, nil
	case *types.AttributeValueMemberSS:
		return &ddbtypes.AttributeValueMemberSS{Value: v.Value}, nil
	case *types.AttributeValueMemberNS:
		return &ddbtypes.AttributeValueMemberNS{Value: v.Value}, nil
	case *types.AttributeValueMemberBS:
		return &ddbtypes.AttributeValueMemberBS{Value: v.Value}, nil
	case *types.AttributeValueMemberL:
		l := make([]ddbtypes.AttributeValue, len(v.Value))
		for i, x := range v.Value {
			y, err := streamValue(x)
			if err != nil {
				return nil, err
			}
			l[i] = y
		}
		return &ddbtypes.AttributeValueMemberL{Value: l}, nil
	case *types.AttributeValueMemberM:
		m, err := streamItem(v.Value)
		if err != nil {
			return nil, err
		}
		if m == nil {
			m = store.Item{}
		}
		return &ddbtypes.AttributeValueMemberM{Value: m}, nil
	}
	return nil, fmt.Errorf("stream attribute value %T: %w", v, store.ErrInvalid)
}

// Convert turns an SDK stream record of the stream arn into the record
// Lambda delivers, as the feed does (the re-drive of given-up batches reads
// records back with it).
func Convert(arn string, r types.Record) (events.DynamoDBEventRecord, error) {
	return (&Feed{arn: arn}).convert(r)
}
