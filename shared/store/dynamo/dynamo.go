// Package dynamo is the DynamoDB engine of the item API (store.Store) on
// aws-sdk-go-v2, and a change feed (store.Feed) over the table's DynamoDB
// Stream. It knows no domain: it turns Get, Query and Write into DynamoDB
// requests one for one.
//
// The table is defined once in shared/store/schema (pk/sk strings, the
// sparse index gsi1 on gsi1pk/gsi1sk, TTL on expiresAt, a NEW_AND_OLD_IMAGES
// stream); CreateTable builds it for tests and the local harness, and the
// CDK app deploys the same definition.
//
// # Requests
//
// A Write of one Put, Update or Delete is one PutItem, UpdateItem or
// DeleteItem; a lone ConditionCheck and every Write of several actions is
// one TransactWriteItems. Conditions and updates are built with the SDK's
// expression builder; attribute names always travel as placeholders, so
// reserved words, dots and brackets in names mean nothing to DynamoDB's
// parser.
//
// # Errors
//
//   - A failed condition is a *store.ConditionFailedError naming the action
//     (for a transaction, the first action DynamoDB cancelled with
//     ConditionalCheckFailed) and, when the action asked (OnFailReturn), the
//     item in the way (ReturnValuesOnConditionCheckFailure ALL_OLD).
//   - ValidationException (an Update whose result is over 400 KB, ADD onto a
//     string…) and a ValidationError cancellation wrap store.ErrInvalid.
//   - Throttling (ProvisionedThroughputExceeded, Throttling,
//     RequestLimitExceeded) and transaction conflicts are retried with
//     jittered exponential backoff (10 attempts, 5 ms to 500 ms by
//     default; WithRetry); when they persist the error wraps
//     store.ErrUnavailable, and nothing was written.
//   - When a write may have been applied but no answer says so (a lost
//     connection, an internal error, the context ending mid-request) the
//     error wraps ErrOutcomeUnknown and not ErrUnavailable. A transaction
//     first resends under the same client request token, which DynamoDB
//     deduplicates, to settle the outcome; a single-item write does not
//     resend (an ADD would count twice). See policy.run.
//   - A Store keeps at most 16 requests in flight (WithMaxInFlight) and
//     does not send one whose context has less time left than a round trip
//     now takes: such a request fails with store.ErrUnavailable, nothing
//     written, instead of waiting inside DynamoDB until its caller has
//     gone and leaving an unknown outcome (issue 9's 1,000 concurrent
//     appends on DynamoDB Local).
//
// The SDK's own retryer is switched off per call (this package retries):
// it would resend a single-item write after a lost answer, and its
// client-side retry quota would hide a throttling error behind its own.
// The client's other settings are used as they are.
//
// # Cost per operation
//
// Every request sets ReturnConsumedCapacity TOTAL, so the capacity
// package's meter sees the units. Gets and table queries are strongly
// consistent (twice the price of eventual reads): a replay must see the
// write that completed a moment ago. gsi1 is eventually consistent, as
// DynamoDB's global indexes are (half the units of the table's reads).
// AWS on-demand units count reads per 4 KB, writes per 1 KB, and double
// for transactions; the last column is what DynamoDB Local reports
// (TestCosts logs it).
//
//	item API                       calls                              AWS units                 Local
//	Get (hit or miss)              1 GetItem, consistent              1 read per 4 KB           same
//	Query (one page)               1 Query (table: consistent)        1 read per 4 KB read      same
//	Write: 1 Put                   1 PutItem                          1 write per KB            same
//	Write: 1 Update                1 UpdateItem (ALL_NEW if asked)    1 write per KB (of the    same
//	                                                                    larger of old and new)
//	Write: 1 Delete                1 DeleteItem                       1 write per KB            same
//	Write: 1 ConditionCheck        1 TransactWriteItems               2 reads                   2
//	Write: n actions (2…100)       1 TransactWriteItems               2 writes per item per KB  2 per call
//	                                                                    (checks: 2 reads)
//	a failed condition             the same one call, which fails     billed, not reported      none
//	each retry (throttle/conflict) the same call again                as above                  as above
//
// So a Write costs one round trip whatever its size, and a read one per
// page.
//
// The change feed reads the stream, never the table: DescribeTable once,
// DescribeStream at the start and every 10 s (or when a shard ends), per
// open shard at the start a LATEST GetShardIterator and a one-record
// GetRecords from the trim horizon, then one GetRecords per shard per poll
// (every 200 ms while a Read waits). AWS bills these as stream read
// requests, not table capacity.
package dynamo

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
	"github.com/aws/smithy-go"

	"github.com/a2awire/a2awire/shared/store"
)

// Store is the DynamoDB engine. It is safe for concurrent use.
type Store struct {
	client  *dynamodb.Client
	table   string
	cursors store.Cursors
	retry   policy
}

var _ store.Store = (*Store)(nil)

// Option configures a Store.
type Option func(*Store)

// WithCursorSecret keys query cursors (see store.NewCursors); every engine
// instance serving one table should use the same secret.
func WithCursorSecret(secret []byte) Option {
	return func(s *Store) { s.cursors = store.NewCursors(secret) }
}

// WithRetry bounds the retries of throttled and conflicting requests:
// attempts in all (at least 1), backoff from base doubling up to max, with
// full jitter.
func WithRetry(attempts int, base, max time.Duration) Option {
	return func(s *Store) {
		s.retry.attempts, s.retry.base, s.retry.max = max1(attempts), base, max
	}
}

// WithSleep replaces the backoff's sleep (tests make it instant and record
// it). sleep must return ctx.Err() when ctx ends first.
func WithSleep(sleep func(ctx context.Context, d time.Duration) error) Option {
	return func(s *Store) { s.retry.sleep = sleep }
}

// WithMaxInFlight bounds the requests one Store has in flight (default
// 16; 0 or less: no bound). A Lambda instance serves one invocation at a
// time and never meets the bound; the local harness, one process serving
// every caller, does: without it a burst of callers queues its requests
// inside DynamoDB (Local), where a request that outlives its caller's
// deadline leaves an unknown outcome. Held back here, a request that
// cannot be sent in time fails with store.ErrUnavailable, nothing written.
// For the same reason a request is not sent when its context has less time
// left than a round trip takes now (a moving average of the last ones,
// forgotten after a second without any).
func WithMaxInFlight(n int) Option {
	return func(s *Store) {
		s.retry.slots = nil
		if n > 0 {
			s.retry.slots = make(chan struct{}, n)
		}
	}
}

func max1(n int) int { return max(n, 1) }

// New returns the engine on table, which must exist (see CreateTable).
func New(client *dynamodb.Client, table string, opts ...Option) *Store {
	s := &Store{
		client:  client,
		table:   table,
		cursors: store.NewCursors(nil),
		retry: policy{attempts: defaultAttempts, base: defaultBase, max: defaultMax, sleep: sleep,
			slots: make(chan struct{}, defaultInFlight), latency: &ewma{}},
	}
	for _, o := range opts {
		o(s)
	}
	return s
}

func keyItem(k store.Key) map[string]types.AttributeValue {
	return map[string]types.AttributeValue{store.AttrPK: store.S(k.PK), store.AttrSK: store.S(k.SK)}
}

// Get returns the item at k (a strongly consistent GetItem).
func (s *Store) Get(ctx context.Context, k store.Key) (store.Item, error) {
	if err := store.ValidateKey(k); err != nil {
		return nil, fmt.Errorf("dynamo: get %s: %w", k, err)
	}
	var out *dynamodb.GetItemOutput
	err := s.retry.run(ctx, readReq, func(ctx context.Context, _ bool) error {
		var err error
		out, err = s.client.GetItem(ctx, &dynamodb.GetItemInput{
			TableName:              &s.table,
			Key:                    keyItem(k),
			ConsistentRead:         aws.Bool(true),
			ReturnConsumedCapacity: types.ReturnConsumedCapacityTotal,
		}, noSDKRetry)
		return err
	})
	if err != nil {
		return nil, fmt.Errorf("dynamo: get %s: %w", k, mapError(err))
	}
	if out.Item == nil {
		return nil, fmt.Errorf("dynamo: get %s: %w", k, store.ErrNotFound)
	}
	return out.Item, nil
}

// Query reads one page of a partition of the table or of gsi1. The page's
// cursor is DynamoDB's LastEvaluatedKey, sealed by store.Cursors: a page
// cut by the limit or by the 1 MB cap carries one even when nothing
// follows, and the page that reaches the end carries "".
func (s *Store) Query(ctx context.Context, q store.Query) (store.Page, error) {
	if err := store.ValidateQuery(q); err != nil {
		return store.Page{}, fmt.Errorf("dynamo: query: %w", err)
	}
	in := &dynamodb.QueryInput{
		TableName:              &s.table,
		ScanIndexForward:       aws.Bool(!q.Backward),
		ReturnConsumedCapacity: types.ReturnConsumedCapacityTotal,
	}
	if q.Index == store.IndexGSI1 {
		in.IndexName = aws.String(store.IndexGSI1)
	} else {
		in.ConsistentRead = aws.Bool(true)
	}
	if q.Limit > 0 {
		in.Limit = aws.Int32(int32(min(q.Limit, 1<<30)))
	}
	if q.Cursor != "" {
		p, err := s.cursors.Decode(q)
		if err != nil {
			return store.Page{}, fmt.Errorf("dynamo: query: %w", err)
		}
		if q.Index == "" && atEnd(q, p.SK) {
			// The page before ended on the range's inclusive end: nothing
			// follows in the table (sort keys are unique in a partition),
			// and DynamoDB Local refuses that start key ("does not match
			// the range key predicate").
			return store.Page{Items: []store.Item{}}, nil
		}
		in.ExclusiveStartKey = map[string]types.AttributeValue{store.AttrPK: store.S(p.PK), store.AttrSK: store.S(p.SK)}
		if q.Index == store.IndexGSI1 {
			in.ExclusiveStartKey[store.AttrGSI1PK] = store.S(p.GSI1PK)
			in.ExclusiveStartKey[store.AttrGSI1SK] = store.S(p.GSI1SK)
		}
	}
	e, err := keyExpr(q)
	if err != nil {
		return store.Page{}, fmt.Errorf("dynamo: query: %w", err)
	}
	in.KeyConditionExpression, in.ExpressionAttributeNames, in.ExpressionAttributeValues = e.keyCond, e.names, e.values

	var out *dynamodb.QueryOutput
	err = s.retry.run(ctx, readReq, func(ctx context.Context, _ bool) error {
		var err error
		out, err = s.client.Query(ctx, in, noSDKRetry)
		return err
	})
	if err != nil {
		return store.Page{}, fmt.Errorf("dynamo: query: %w", mapError(err))
	}
	page := store.Page{Items: make([]store.Item, len(out.Items))}
	for i, it := range out.Items {
		page.Items[i] = it
	}
	switch lek := store.Item(out.LastEvaluatedKey); {
	case len(lek) > 0:
		page.Cursor = s.cursors.Encode(q, store.PositionOf(q, lek))
	case q.Limit > 0 && len(page.Items) == q.Limit:
		// DynamoDB Local leaves LastEvaluatedKey out when a forward query
		// with an upper sort-key bound (BETWEEN, <, <=) fills its limit
		// with the range's last item; DynamoDB's rule, which every engine
		// keeps, is that a page cut by the limit carries a cursor.
		page.Cursor = s.cursors.Encode(q, store.PositionOf(q, page.Items[len(page.Items)-1]))
	}
	return page, nil
}

// atEnd reports whether sort key sk is the inclusive end of q's range in
// q's direction.
func atEnd(q store.Query, sk string) bool {
	switch c := q.SK; {
	case !q.Backward && (c.Op == store.SortBetween && sk == c.Value2 || c.Op == store.SortLE && sk == c.Value):
		return true
	case q.Backward && (c.Op == store.SortBetween && sk == c.Value || c.Op == store.SortGE && sk == c.Value):
		return true
	}
	return false
}

// Write applies actions atomically: one PutItem, UpdateItem or DeleteItem
// for a single action, one TransactWriteItems otherwise.
func (s *Store) Write(ctx context.Context, actions ...store.Action) ([]store.Item, error) {
	if err := store.ValidateWrite(actions); err != nil {
		return nil, fmt.Errorf("dynamo: write: %w", err)
	}
	exprs := make([]built, len(actions))
	for i, a := range actions {
		e, err := actionExpr(a)
		if err != nil {
			return nil, fmt.Errorf("dynamo: write: action %d (%s %s): %w", i, a.Kind, a.Key, err)
		}
		exprs[i] = e
	}
	results := make([]store.Item, len(actions))
	var err error
	if len(actions) == 1 && actions[0].Kind != store.CheckAction {
		results[0], err = s.writeOne(ctx, actions[0], exprs[0])
	} else {
		err = s.transact(ctx, actions, exprs)
	}
	if err != nil {
		return nil, fmt.Errorf("dynamo: write: %w", err)
	}
	return results, nil
}

func onFail(a store.Action) types.ReturnValuesOnConditionCheckFailure {
	if a.ReturnOnFail {
		return types.ReturnValuesOnConditionCheckFailureAllOld
	}
	return ""
}

// writeOne runs a single Put, Update or Delete.
func (s *Store) writeOne(ctx context.Context, a store.Action, e built) (store.Item, error) {
	var result store.Item
	err := s.retry.run(ctx, singleReq, func(ctx context.Context, _ bool) error {
		switch a.Kind {
		case store.PutAction:
			_, err := s.client.PutItem(ctx, &dynamodb.PutItemInput{
				TableName:                           &s.table,
				Item:                                store.WithKey(a.Item, a.Key),
				ConditionExpression:                 e.cond,
				ExpressionAttributeNames:            e.names,
				ExpressionAttributeValues:           e.values,
				ReturnValuesOnConditionCheckFailure: onFail(a),
				ReturnConsumedCapacity:              types.ReturnConsumedCapacityTotal,
			}, noSDKRetry)
			return err
		case store.UpdateAction:
			in := &dynamodb.UpdateItemInput{
				TableName:                           &s.table,
				Key:                                 keyItem(a.Key),
				UpdateExpression:                    e.update,
				ConditionExpression:                 e.cond,
				ExpressionAttributeNames:            e.names,
				ExpressionAttributeValues:           e.values,
				ReturnValuesOnConditionCheckFailure: onFail(a),
				ReturnConsumedCapacity:              types.ReturnConsumedCapacityTotal,
			}
			if a.ReturnNew {
				in.ReturnValues = types.ReturnValueAllNew
			}
			out, err := s.client.UpdateItem(ctx, in, noSDKRetry)
			if err == nil && a.ReturnNew {
				result = out.Attributes
			}
			return err
		default: // store.DeleteAction; ValidateWrite admits nothing else here
			_, err := s.client.DeleteItem(ctx, &dynamodb.DeleteItemInput{
				TableName:                           &s.table,
				Key:                                 keyItem(a.Key),
				ConditionExpression:                 e.cond,
				ExpressionAttributeNames:            e.names,
				ExpressionAttributeValues:           e.values,
				ReturnValuesOnConditionCheckFailure: onFail(a),
				ReturnConsumedCapacity:              types.ReturnConsumedCapacityTotal,
			}, noSDKRetry)
			return err
		}
	})
	if err != nil {
		var ccf *types.ConditionalCheckFailedException
		if errors.As(err, &ccf) {
			return nil, failed(0, a, ccf.Item)
		}
		return nil, mapError(err)
	}
	return result, nil
}

// transact runs actions as one TransactWriteItems.
func (s *Store) transact(ctx context.Context, actions []store.Action, exprs []built) error {
	items := make([]types.TransactWriteItem, len(actions))
	for i, a := range actions {
		e := exprs[i]
		switch a.Kind {
		case store.PutAction:
			items[i].Put = &types.Put{
				TableName: &s.table, Item: store.WithKey(a.Item, a.Key),
				ConditionExpression: e.cond, ExpressionAttributeNames: e.names, ExpressionAttributeValues: e.values,
				ReturnValuesOnConditionCheckFailure: onFail(a),
			}
		case store.UpdateAction:
			items[i].Update = &types.Update{
				TableName: &s.table, Key: keyItem(a.Key), UpdateExpression: e.update,
				ConditionExpression: e.cond, ExpressionAttributeNames: e.names, ExpressionAttributeValues: e.values,
				ReturnValuesOnConditionCheckFailure: onFail(a),
			}
		case store.DeleteAction:
			items[i].Delete = &types.Delete{
				TableName: &s.table, Key: keyItem(a.Key),
				ConditionExpression: e.cond, ExpressionAttributeNames: e.names, ExpressionAttributeValues: e.values,
				ReturnValuesOnConditionCheckFailure: onFail(a),
			}
		case store.CheckAction:
			items[i].ConditionCheck = &types.ConditionCheck{
				TableName: &s.table, Key: keyItem(a.Key),
				ConditionExpression: e.cond, ExpressionAttributeNames: e.names, ExpressionAttributeValues: e.values,
				ReturnValuesOnConditionCheckFailure: onFail(a),
			}
		}
	}
	token := ""
	err := s.retry.run(ctx, txReq, func(ctx context.Context, keepToken bool) error {
		if !keepToken || token == "" {
			token = newToken()
		}
		_, err := s.client.TransactWriteItems(ctx, &dynamodb.TransactWriteItemsInput{
			TransactItems:          items,
			ClientRequestToken:     aws.String(token),
			ReturnConsumedCapacity: types.ReturnConsumedCapacityTotal,
		}, noSDKRetry)
		return err
	})
	if err == nil {
		return nil
	}
	var tce *types.TransactionCanceledException
	if errors.As(err, &tce) {
		for i, r := range tce.CancellationReasons {
			if aws.ToString(r.Code) == "ConditionalCheckFailed" && i < len(actions) {
				return failed(i, actions[i], r.Item)
			}
		}
		for i, r := range tce.CancellationReasons {
			if aws.ToString(r.Code) == "ValidationError" {
				return fmt.Errorf("action %d: %s: %w", i, aws.ToString(r.Message), store.ErrInvalid)
			}
		}
	}
	return mapError(err)
}

// failed builds the condition failure of action i; old is DynamoDB's ALL_OLD
// image (empty when no item was there).
func failed(i int, a store.Action, old map[string]types.AttributeValue) error {
	e := &store.ConditionFailedError{Action: i}
	if a.ReturnOnFail && len(old) > 0 {
		e.Item = old
	}
	return e
}

// mapError maps DynamoDB's request errors onto the item API's; retry
// outcomes (store.ErrUnavailable, ErrOutcomeUnknown) are already wrapped.
func mapError(err error) error {
	var api smithy.APIError
	if errors.As(err, &api) && api.ErrorCode() == "ValidationException" &&
		!errors.Is(err, store.ErrUnavailable) && !errors.Is(err, ErrOutcomeUnknown) {
		return fmt.Errorf("%s: %w", api.ErrorMessage(), store.ErrInvalid)
	}
	return err
}
