// Package dynamo is the DynamoDB store adapter (aws-sdk-go-v2): one table for
// everything (single-table design), conditional writes for idempotency
// records and one transaction per ledger append.
//
// The table is defined once in shared/store/schema (pk/sk strings, GSI gsi1,
// TTL on expiresAt, stream NEW_AND_OLD_IMAGES); CreateTable builds it from
// there for tests and the local harness, and the CDK app deploys the same
// definition.
//
// # Key patterns
//
//	entity                 pk                 sk                        notable attributes
//	idempotency record     IDEM#<scope>       KEY#<key>                 state, requestHash, status, body,
//	                                                                    expiresAtNano, inProgressUntilNano,
//	                                                                    expiresAt (TTL, epoch seconds)
//	ledger account         LEDGER#<account>   ACCOUNT                   entries, balanceCents
//	ledger entry           LEDGER#<account>   SEQ#<20-digit sequence>   entryId, sequence, amountCents,
//	                                                                    memo, balanceCents, createdAtNano
//	ledger entry-id guard  LEDGER#<account>   ENTRYID#<entry id>        a copy of the entry's attributes
//
// Every item also has "type" (idem, ledger-account, ledger-entry,
// ledger-entry-id) so a stream consumer can tell items apart without parsing
// keys. Scope and key live in separate key attributes, so "#" inside an id
// cannot make two ids collide. An account's items share one partition, so
// ListLedger is one Query on pk with begins_with(sk, "SEQ#"), in sequence
// order thanks to the zero padding.
//
// Expiry is decided from expiresAtNano and inProgressUntilNano (nanosecond
// precision, compared by the reader with the caller's now); expiresAt is only
// for DynamoDB's TTL sweeper, which may run days late, and is rounded up so
// it never deletes a record early.
//
// # Concurrency
//
// Racing claims of one idempotency key meet in one conditional PutItem:
// exactly one wins and the others get the winner's record. Ledger appends
// are optimistic: a transaction conditional on the account's entry count,
// retried with jittered backoff when another append got there first (up to
// 200 attempts; the conformance suite's 200 concurrent appends pass). Appends
// to one account through one Store are first queued in-process, so racing
// goroutines of one process (the local harness) do not burn round trips on
// lost races; separate processes (Lambda instances) race optimistically.
//
// # Cost per operation
//
// Every request sets ReturnConsumedCapacity=TOTAL, so the capacity package's
// meter sees the units. Reads are strongly consistent (twice the price of an
// eventually consistent read) because a replay must see the write that
// completed a moment ago. The AWS column is on-demand request units for
// items under 1 KB (reads per 4 KB, writes per 1 KB, transactional writes
// double); the last column is what DynamoDB Local reports, which the tests
// log.
//
//	operation                   calls                                 AWS units          Local reports
//	GetIdem (hit or miss)       1 GetItem, consistent                 1 read             1
//	ClaimIdem won               1 PutItem, conditional                1 write            1
//	ClaimIdem refused           1 PutItem, fails; ALL_OLD = record    1 write            (not reported)
//	CompleteIdem                1 UpdateItem, conditional             1 write + 1/KB     1
//	DeleteIdem                  1 DeleteItem, conditional             1 write            1
//	AppendLedger                1 GetItem + 1 TransactWriteItems      1 read + 6 write   1 + 2
//	  each race lost to         +1 TransactWriteItems (cancelled;     not reported       (not reported)
//	  another process             ALL_OLD = the account now)
//	  duplicate entry id        1 GetItem + 1 TransactWriteItems      1 read + cancelled 1 + (not reported)
//	                              (cancelled; ALL_OLD = stored entry)
//	LedgerBalance               1 GetItem, consistent                 1 read             1
//	ListLedger                  1 Query per 1 MB page, consistent     1 read per 4 KB    1 per 4 KB
//
// So an idempotent first execution costs 2 writes (claim + complete) and a
// replay 1 read (GetIdem) or 1 write (a refused ClaimIdem, which returns the
// record). Failed conditional writes and cancelled transactions consume
// capacity on AWS but report none.
//
// The tests in this package assert these call counts against DynamoDB Local.
package dynamo

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"

	"github.com/a2awire/a2awire/shared/store"
	"github.com/a2awire/a2awire/shared/store/internal/check"
)

// Optimistic retry of AppendLedger. An append loses only to an append from
// another process that committed between its read and its transaction, so
// every round of losers has a winner, and the jittered exponential backoff
// spreads the losers out. The bound is generous: a lost race costs one
// cancelled transaction, not correctness, and giving up turns into a 500.
const (
	appendMaxAttempts = 200
	appendBackoffBase = 2 * time.Millisecond
	appendBackoffMax  = 250 * time.Millisecond
)

// Store is the DynamoDB adapter. It is safe for concurrent use.
type Store struct {
	client   *dynamodb.Client
	table    string
	accounts keyedMutex // queues this process's appends per account
}

// New returns a store on table, which must already exist (see CreateTable).
func New(client *dynamodb.Client, table string) *Store {
	return &Store{client: client, table: table, accounts: keyedMutex{m: map[string]*keyLock{}}}
}

// Close releases nothing: the client is the caller's and is shared.
func (s *Store) Close() error { return nil }

// GetIdem returns the live record for (scope, key), or ErrNotFound when there
// is none or it is no longer live at now. Cost: 1 consistent GetItem.
func (s *Store) GetIdem(ctx context.Context, scope, key string, now time.Time) (store.IdemRecord, error) {
	if err := check.IdemKey(scope, key); err != nil {
		return store.IdemRecord{}, fmt.Errorf("dynamo: get idempotency: %w", err)
	}
	out, err := s.client.GetItem(ctx, &dynamodb.GetItemInput{
		TableName:              &s.table,
		Key:                    keyOf(idemPK(scope), idemSK(key)),
		ConsistentRead:         aws.Bool(true),
		ReturnConsumedCapacity: types.ReturnConsumedCapacityTotal,
	})
	if err != nil {
		return store.IdemRecord{}, fmt.Errorf("dynamo: get idempotency: %w", err)
	}
	if out.Item == nil {
		return store.IdemRecord{}, fmt.Errorf("dynamo: get idempotency: %w", store.ErrNotFound)
	}
	rec, err := decodeIdem(out.Item)
	if err != nil {
		return store.IdemRecord{}, fmt.Errorf("dynamo: get idempotency: %w", err)
	}
	if !rec.Live(now) {
		return store.IdemRecord{}, fmt.Errorf("dynamo: get idempotency: %w", store.ErrNotFound)
	}
	return rec, nil
}

// ClaimIdem creates rec in progress unless a live record holds (scope, key),
// in which case it returns that record and ErrExists. Cost: 1 conditional
// PutItem either way; a refused claim gets the live record back through
// ReturnValuesOnConditionCheckFailure=ALL_OLD instead of a second read.
func (s *Store) ClaimIdem(ctx context.Context, rec store.IdemRecord, now time.Time) (store.IdemRecord, error) {
	rec, err := check.Claim(rec, now)
	if err != nil {
		return store.IdemRecord{}, fmt.Errorf("dynamo: claim idempotency: %w", err)
	}
	_, err = s.client.PutItem(ctx, &dynamodb.PutItemInput{
		TableName: &s.table,
		Item:      idemItem(rec),
		// The negation of IdemRecord.Live: absent, expired, or in progress
		// past the holder's deadline.
		ConditionExpression: aws.String("attribute_not_exists(#pk) OR #exp <= :now OR (#state = :inProgress AND #until <= :now)"),
		ExpressionAttributeNames: map[string]string{
			"#pk": attrPK, "#exp": attrExpiresAtNano, "#state": attrState, "#until": attrInProgressUntil,
		},
		ExpressionAttributeValues: map[string]types.AttributeValue{
			":now": numAV(check.Nanos(now)), ":inProgress": strAV(string(store.IdemInProgress)),
		},
		ReturnValuesOnConditionCheckFailure: types.ReturnValuesOnConditionCheckFailureAllOld,
		ReturnConsumedCapacity:              types.ReturnConsumedCapacityTotal,
	})
	var ccf *types.ConditionalCheckFailedException
	if errors.As(err, &ccf) {
		old, derr := decodeIdem(ccf.Item)
		if derr != nil {
			return store.IdemRecord{}, fmt.Errorf("dynamo: claim idempotency: refused, and the live record: %w", derr)
		}
		return old, fmt.Errorf("dynamo: claim idempotency: %w", store.ErrExists)
	}
	if err != nil {
		return store.IdemRecord{}, fmt.Errorf("dynamo: claim idempotency: %w", err)
	}
	return rec, nil
}

// CompleteIdem stores the response of an in-progress record still held under
// requestHash; ErrNotFound when it is absent, completed or taken over. Cost:
// 1 conditional UpdateItem.
func (s *Store) CompleteIdem(ctx context.Context, scope, key, requestHash string, status int, body []byte) error {
	if err := check.IdemKey(scope, key); err != nil {
		return fmt.Errorf("dynamo: complete idempotency: %w", err)
	}
	if err := check.Body(body); err != nil {
		return fmt.Errorf("dynamo: complete idempotency: %w", err)
	}
	_, err := s.client.UpdateItem(ctx, &dynamodb.UpdateItemInput{
		TableName:           &s.table,
		Key:                 keyOf(idemPK(scope), idemSK(key)),
		UpdateExpression:    aws.String("SET #state = :completed, #status = :status, #body = :body"),
		ConditionExpression: aws.String("#state = :inProgress AND #hash = :hash"),
		ExpressionAttributeNames: map[string]string{
			"#state": attrState, "#status": attrStatus, "#body": attrBody, "#hash": attrRequestHash,
		},
		ExpressionAttributeValues: map[string]types.AttributeValue{
			":completed":  strAV(string(store.IdemCompleted)),
			":inProgress": strAV(string(store.IdemInProgress)),
			":status":     numAV(int64(status)),
			":body":       &types.AttributeValueMemberB{Value: nonNil(body)},
			":hash":       strAV(requestHash),
		},
		ReturnConsumedCapacity: types.ReturnConsumedCapacityTotal,
	})
	var ccf *types.ConditionalCheckFailedException
	if errors.As(err, &ccf) {
		return fmt.Errorf("dynamo: complete idempotency: %w", store.ErrNotFound)
	}
	if err != nil {
		return fmt.Errorf("dynamo: complete idempotency: %w", err)
	}
	return nil
}

// DeleteIdem removes the record if it is still held under requestHash; a
// missing or re-claimed record is left alone and is not an error. Cost: 1
// conditional DeleteItem.
func (s *Store) DeleteIdem(ctx context.Context, scope, key, requestHash string) error {
	if err := check.IdemKey(scope, key); err != nil {
		return fmt.Errorf("dynamo: delete idempotency: %w", err)
	}
	_, err := s.client.DeleteItem(ctx, &dynamodb.DeleteItemInput{
		TableName:                 &s.table,
		Key:                       keyOf(idemPK(scope), idemSK(key)),
		ConditionExpression:       aws.String("#hash = :hash"),
		ExpressionAttributeNames:  map[string]string{"#hash": attrRequestHash},
		ExpressionAttributeValues: map[string]types.AttributeValue{":hash": strAV(requestHash)},
		ReturnConsumedCapacity:    types.ReturnConsumedCapacityTotal,
	})
	var ccf *types.ConditionalCheckFailedException
	if err != nil && !errors.As(err, &ccf) {
		return fmt.Errorf("dynamo: delete idempotency: %w", err)
	}
	return nil
}

// AppendLedger appends e to its account with the next sequence and the new
// balance. An EntryID already in the account returns the stored entry and
// ErrExists and changes nothing.
//
// An attempt reads the account item (consistent) and writes one transaction
// of three items: the account (conditional on the entry count just read, or
// on its absence), the entry at the next sequence and the entry-id guard
// (both conditional on not existing). When another append committed in
// between, the account condition fails, its ALL_OLD image is the account's
// new state, and the next attempt (after a jittered backoff) starts from it
// without reading again. A failed guard condition means the entry id exists,
// and its ALL_OLD image is the stored entry.
//
// Appends to one account through one Store are queued in-process first:
// racing them optimistically would only burn round trips on lost races.
// Appends from different processes (Lambda instances) race optimistically.
func (s *Store) AppendLedger(ctx context.Context, e store.LedgerEntry) (store.LedgerEntry, error) {
	e, err := check.Entry(e)
	if err != nil {
		return store.LedgerEntry{}, fmt.Errorf("dynamo: append ledger: %w", err)
	}
	if err := s.accounts.lock(ctx, e.Account); err != nil {
		return store.LedgerEntry{}, fmt.Errorf("dynamo: append ledger: %w", err)
	}
	defer s.accounts.unlock(e.Account)

	var cur map[string]types.AttributeValue // the account item; nil: read it
	known := false
	for attempt := 0; ; attempt++ {
		if !known {
			out, err := s.client.GetItem(ctx, &dynamodb.GetItemInput{
				TableName:              &s.table,
				Key:                    keyOf(ledgerPK(e.Account), accountSK),
				ConsistentRead:         aws.Bool(true),
				ReturnConsumedCapacity: types.ReturnConsumedCapacityTotal,
			})
			if err != nil {
				return store.LedgerEntry{}, fmt.Errorf("dynamo: append ledger: read account: %w", err)
			}
			cur = out.Item
		}
		r := s.tryAppend(ctx, e, cur)
		switch {
		case r.err == nil:
			return r.entry, nil
		case errors.Is(r.err, store.ErrExists):
			return r.entry, fmt.Errorf("dynamo: append ledger: entry %q: %w", e.EntryID, r.err)
		case !r.retry:
			return store.LedgerEntry{}, fmt.Errorf("dynamo: append ledger: %w", r.err)
		}
		cur, known = r.account, r.account != nil
		if attempt+1 >= appendMaxAttempts {
			return store.LedgerEntry{}, fmt.Errorf("dynamo: append ledger: gave up after %d attempts: %w", appendMaxAttempts, r.err)
		}
		if err := sleep(ctx, backoff(attempt)); err != nil {
			return store.LedgerEntry{}, fmt.Errorf("dynamo: append ledger: %w", err)
		}
	}
}

// appendResult is the outcome of one append attempt.
type appendResult struct {
	entry store.LedgerEntry
	err   error // nil, ErrExists (entry is the stored one), or why it failed
	retry bool  // the attempt lost a race; try again
	// account is the account item as it is now when the attempt lost to
	// another append (the ALL_OLD image of the failed condition), or nil.
	account map[string]types.AttributeValue
}

// tryAppend makes one attempt from cur, the account item (nil: none yet).
func (s *Store) tryAppend(ctx context.Context, e store.LedgerEntry, cur map[string]types.AttributeValue) appendResult {
	entries, balance, err := decodeAccount(cur)
	if err != nil {
		return appendResult{err: err}
	}
	e.Sequence = entries + 1
	e.BalanceCents = balance + e.AmountCents

	pk := ledgerPK(e.Account)
	account := &types.Update{
		TableName:        &s.table,
		Key:              keyOf(pk, accountSK),
		UpdateExpression: aws.String("SET #type = :type, #account = :account, #entries = :entries, #balance = :balance"),
		ExpressionAttributeNames: map[string]string{
			"#type": attrType, "#account": attrAccount, "#entries": attrEntries, "#balance": attrBalanceCents,
		},
		ExpressionAttributeValues: map[string]types.AttributeValue{
			":type": strAV(typeAccount), ":account": strAV(e.Account),
			":entries": numAV(e.Sequence), ":balance": numAV(e.BalanceCents),
		},
		ReturnValuesOnConditionCheckFailure: types.ReturnValuesOnConditionCheckFailureAllOld,
	}
	if cur == nil {
		account.ConditionExpression = aws.String("attribute_not_exists(#pk)")
		account.ExpressionAttributeNames["#pk"] = attrPK
	} else {
		account.ConditionExpression = aws.String("#entries = :prev")
		account.ExpressionAttributeValues[":prev"] = numAV(entries)
	}
	notExists := aws.String("attribute_not_exists(#pk)")
	pkName := map[string]string{"#pk": attrPK}
	_, err = s.client.TransactWriteItems(ctx, &dynamodb.TransactWriteItemsInput{
		TransactItems: []types.TransactWriteItem{
			{Update: account},
			{Put: &types.Put{
				TableName:                &s.table,
				Item:                     entryItem(e, seqSK(e.Sequence), typeEntry),
				ConditionExpression:      notExists,
				ExpressionAttributeNames: pkName,
			}},
			{Put: &types.Put{
				TableName:                           &s.table,
				Item:                                entryItem(e, entryIDSK(e.EntryID), typeEntryIDGuard),
				ConditionExpression:                 notExists,
				ExpressionAttributeNames:            pkName,
				ReturnValuesOnConditionCheckFailure: types.ReturnValuesOnConditionCheckFailureAllOld,
			}},
		},
		ReturnConsumedCapacity: types.ReturnConsumedCapacityTotal,
	})
	if err == nil {
		return appendResult{entry: e}
	}
	var conflict *types.TransactionConflictException
	if errors.As(err, &conflict) {
		return appendResult{err: err, retry: true}
	}
	var tce *types.TransactionCanceledException
	if !errors.As(err, &tce) {
		return appendResult{err: fmt.Errorf("write transaction: %w", err)}
	}
	reasons := tce.CancellationReasons
	if len(reasons) != 3 {
		return appendResult{err: fmt.Errorf("write transaction: %d cancellation reasons for 3 items: %w", len(reasons), err)}
	}
	if aws.ToString(reasons[2].Code) == codeConditionalCheckFailed {
		stored, err := s.storedEntry(ctx, e, reasons[2].Item)
		if err != nil {
			return appendResult{err: err}
		}
		return appendResult{entry: stored, err: store.ErrExists}
	}
	code := func(i int) string { return aws.ToString(reasons[i].Code) }
	switch {
	case code(0) == codeConditionalCheckFailed:
		// Another append committed since cur was read; its image is the
		// account now.
		return appendResult{err: err, retry: true, account: reasons[0].Item}
	case code(0) == codeTransactionConflict || code(1) == codeTransactionConflict || code(2) == codeTransactionConflict:
		return appendResult{err: err, retry: true}
	case code(1) == codeConditionalCheckFailed:
		// The account agreed with cur, yet the next sequence is taken:
		// the items disagree, and retrying cannot fix that.
		return appendResult{err: fmt.Errorf("write transaction: entry %d of %q exists but the account has %d entries: %w",
			e.Sequence, e.Account, entries, err)}
	}
	return appendResult{err: fmt.Errorf("write transaction: %w", err)}
}

// Cancellation reason codes of TransactWriteItems.
const (
	codeConditionalCheckFailed = "ConditionalCheckFailed"
	codeTransactionConflict    = "TransactionConflict"
)

// storedEntry decodes the guard item returned with a duplicate entry id, or
// reads it when DynamoDB did not return it.
func (s *Store) storedEntry(ctx context.Context, e store.LedgerEntry, old map[string]types.AttributeValue) (store.LedgerEntry, error) {
	if old == nil {
		out, err := s.client.GetItem(ctx, &dynamodb.GetItemInput{
			TableName:              &s.table,
			Key:                    keyOf(ledgerPK(e.Account), entryIDSK(e.EntryID)),
			ConsistentRead:         aws.Bool(true),
			ReturnConsumedCapacity: types.ReturnConsumedCapacityTotal,
		})
		if err != nil {
			return store.LedgerEntry{}, fmt.Errorf("read existing entry: %w", err)
		}
		if out.Item == nil {
			return store.LedgerEntry{}, fmt.Errorf("entry id %q refused as existing but not found", e.EntryID)
		}
		old = out.Item
	}
	return decodeEntry(old)
}

// backoff is full jitter over an exponential ceiling.
func backoff(attempt int) time.Duration {
	ceil := appendBackoffMax
	if attempt < 16 {
		ceil = min(appendBackoffMax, appendBackoffBase<<attempt)
	}
	return rand.N(ceil) + 1
}

func sleep(ctx context.Context, d time.Duration) error {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return ctx.Err()
	case <-t.C:
		return nil
	}
}

// LedgerBalance returns the account's balance and entry count; ErrNotFound
// when it has no entries. Cost: 1 consistent GetItem.
func (s *Store) LedgerBalance(ctx context.Context, account string) (store.Balance, error) {
	if err := check.ID("account", account); err != nil {
		return store.Balance{}, fmt.Errorf("dynamo: ledger balance: %w", err)
	}
	out, err := s.client.GetItem(ctx, &dynamodb.GetItemInput{
		TableName:              &s.table,
		Key:                    keyOf(ledgerPK(account), accountSK),
		ConsistentRead:         aws.Bool(true),
		ReturnConsumedCapacity: types.ReturnConsumedCapacityTotal,
	})
	if err != nil {
		return store.Balance{}, fmt.Errorf("dynamo: ledger balance: %w", err)
	}
	if out.Item == nil {
		return store.Balance{}, fmt.Errorf("dynamo: ledger balance: %w", store.ErrNotFound)
	}
	entries, balance, err := decodeAccount(out.Item)
	if err != nil {
		return store.Balance{}, fmt.Errorf("dynamo: ledger balance: %w", err)
	}
	return store.Balance{Account: account, BalanceCents: balance, Entries: entries}, nil
}

// ListLedger returns the account's entries in sequence order; an empty,
// non-nil slice when there are none. Cost: 1 consistent Query per 1 MB page.
func (s *Store) ListLedger(ctx context.Context, account string) ([]store.LedgerEntry, error) {
	if err := check.ID("account", account); err != nil {
		return nil, fmt.Errorf("dynamo: list ledger: %w", err)
	}
	pages := dynamodb.NewQueryPaginator(s.client, &dynamodb.QueryInput{
		TableName:                 &s.table,
		KeyConditionExpression:    aws.String("#pk = :pk AND begins_with(#sk, :seq)"),
		ExpressionAttributeNames:  map[string]string{"#pk": attrPK, "#sk": attrSK},
		ExpressionAttributeValues: map[string]types.AttributeValue{":pk": strAV(ledgerPK(account)), ":seq": strAV(seqSKPrefix)},
		ConsistentRead:            aws.Bool(true),
		ReturnConsumedCapacity:    types.ReturnConsumedCapacityTotal,
	})
	out := []store.LedgerEntry{}
	for pages.HasMorePages() {
		page, err := pages.NextPage(ctx)
		if err != nil {
			return nil, fmt.Errorf("dynamo: list ledger: %w", err)
		}
		for _, it := range page.Items {
			e, err := decodeEntry(it)
			if err != nil {
				return nil, fmt.Errorf("dynamo: list ledger: %w", err)
			}
			out = append(out, e)
		}
	}
	return out, nil
}

// nonNil keeps an empty body an empty B value rather than a missing one.
func nonNil(b []byte) []byte {
	if b == nil {
		return []byte{}
	}
	return b
}
