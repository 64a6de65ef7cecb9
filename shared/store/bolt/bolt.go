// Package bolt is the file-backed store adapter (bbolt) behind the local
// harness's -data DIR: everything in one file, so a reset is deleting it.
//
// Every write is one bbolt read-write transaction, and bbolt fsyncs each
// commit before Update returns, so an acknowledged write survives kill -9 (a
// crash test in this package proves it). bbolt serializes writers, which
// gives the ledger its atomic, gap-free sequence without any retry logic.
//
// Layout (keys are length-prefixed so no id can collide with another's
// prefix; values are JSON with explicit field names):
//
//	bucket   key                                  value
//	meta     "version"                            "1"
//	idem     lp(scope) key                        idemItem
//	account  account                              accountItem {balanceCents, entries}
//	entry    lp(account) uint64be(sequence)       entryItem
//	entryid  lp(account) entryID                  uint64be(sequence)
//
// lp(s) is uvarint(len(s)) followed by s. The entry bucket's big-endian
// sequence keeps an account's entries in order for a cursor scan.
package bolt

import (
	"bytes"
	"context"
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"sync/atomic"
	"time"

	bbolt "go.etcd.io/bbolt"

	"github.com/a2awire/a2awire/shared/store"
	"github.com/a2awire/a2awire/shared/store/internal/check"
)

// DefaultFile is the file name the harness uses inside its -data directory.
const DefaultFile = "a2awire.db"

// schemaVersion is written into the meta bucket so a later layout change can
// detect and migrate (or refuse) an old file.
const schemaVersion = "1"

// Bucket names (see the package comment).
const (
	bucketMeta    = "meta"
	bucketIdem    = "idem"
	bucketAccount = "account"
	bucketEntry   = "entry"
	bucketEntryID = "entryid"
)

// sweepEvery is how many claims pass between sweeps of expired idempotency
// records (DynamoDB's TTL does this in the cloud).
const sweepEvery = 1024

// lockTimeout bounds the wait for bbolt's file lock, so a second process on
// the same file fails with an error instead of hanging.
const lockTimeout = 2 * time.Second

// Store is a bbolt-backed store. It is safe for concurrent use.
type Store struct {
	db     *bbolt.DB
	claims atomic.Int64
}

// Open opens (creating if needed, with its directory) the bbolt file at path.
func Open(path string) (*Store, error) {
	if err := os.MkdirAll(filepath.Dir(path), 0o700); err != nil {
		return nil, fmt.Errorf("bolt: open %s: %w", path, err)
	}
	db, err := bbolt.Open(path, 0o600, &bbolt.Options{Timeout: lockTimeout})
	if err != nil {
		return nil, fmt.Errorf("bolt: open %s: %w", path, err)
	}
	err = db.Update(func(tx *bbolt.Tx) error {
		for _, name := range []string{bucketMeta, bucketIdem, bucketAccount, bucketEntry, bucketEntryID} {
			if _, err := tx.CreateBucketIfNotExists([]byte(name)); err != nil {
				return err
			}
		}
		meta := tx.Bucket([]byte(bucketMeta))
		switch v := meta.Get([]byte("version")); {
		case v == nil:
			return meta.Put([]byte("version"), []byte(schemaVersion))
		case string(v) != schemaVersion:
			return fmt.Errorf("file has layout version %q, this build reads %q", v, schemaVersion)
		}
		return nil
	})
	if err != nil {
		_ = db.Close()
		return nil, fmt.Errorf("bolt: open %s: %w", path, err)
	}
	return &Store{db: db}, nil
}

// Close closes the file; it releases the file lock.
func (s *Store) Close() error {
	if err := s.db.Close(); err != nil {
		return fmt.Errorf("bolt: close: %w", err)
	}
	return nil
}

// idemItem is an idempotency record as stored.
type idemItem struct {
	Scope               string `json:"scope"`
	Key                 string `json:"key"`
	State               string `json:"state"`
	RequestHash         string `json:"requestHash"`
	Status              int    `json:"status,omitempty"`
	Body                []byte `json:"body,omitempty"`
	ExpiresAtNano       int64  `json:"expiresAtNano"`
	InProgressUntilNano int64  `json:"inProgressUntilNano"`
}

func toIdemItem(r store.IdemRecord) idemItem {
	return idemItem{
		Scope: r.Scope, Key: r.Key, State: string(r.State), RequestHash: r.RequestHash,
		Status: r.Status, Body: r.Body,
		ExpiresAtNano: check.Nanos(r.ExpiresAt), InProgressUntilNano: check.Nanos(r.InProgressUntil),
	}
}

func (it idemItem) record() store.IdemRecord {
	return store.IdemRecord{
		Scope: it.Scope, Key: it.Key, State: store.IdemState(it.State), RequestHash: it.RequestHash,
		Status: it.Status, Body: it.Body,
		ExpiresAt: check.FromNanos(it.ExpiresAtNano), InProgressUntil: check.FromNanos(it.InProgressUntilNano),
	}
}

// accountItem is an account's running state.
type accountItem struct {
	BalanceCents int64 `json:"balanceCents"`
	Entries      int64 `json:"entries"`
}

// entryItem is a ledger entry as stored.
type entryItem struct {
	Account       string `json:"account"`
	EntryID       string `json:"entryId"`
	Sequence      int64  `json:"sequence"`
	AmountCents   int64  `json:"amountCents"`
	Memo          string `json:"memo,omitempty"`
	BalanceCents  int64  `json:"balanceCents"`
	CreatedAtNano int64  `json:"createdAtNano,omitempty"`
}

func toEntryItem(e store.LedgerEntry) entryItem {
	return entryItem{
		Account: e.Account, EntryID: e.EntryID, Sequence: e.Sequence, AmountCents: e.AmountCents,
		Memo: e.Memo, BalanceCents: e.BalanceCents, CreatedAtNano: check.Nanos(e.CreatedAt),
	}
}

func (it entryItem) entry() store.LedgerEntry {
	return store.LedgerEntry{
		Account: it.Account, EntryID: it.EntryID, Sequence: it.Sequence, AmountCents: it.AmountCents,
		Memo: it.Memo, BalanceCents: it.BalanceCents, CreatedAt: check.FromNanos(it.CreatedAtNano),
	}
}

// lp returns uvarint(len(s)) followed by s and then suffix.
func lp(s string, suffix []byte) []byte {
	b := binary.AppendUvarint(make([]byte, 0, binary.MaxVarintLen64+len(s)+len(suffix)), uint64(len(s)))
	b = append(b, s...)
	return append(b, suffix...)
}

func seqKey(account string, seq int64) []byte {
	return lp(account, binary.BigEndian.AppendUint64(nil, uint64(seq)))
}

// getIdem reads and decodes a record; ok is false when absent. The returned
// Body is a fresh slice (json.Unmarshal allocates), never bbolt's mmap.
func getIdem(b *bbolt.Bucket, k []byte) (store.IdemRecord, bool, error) {
	v := b.Get(k)
	if v == nil {
		return store.IdemRecord{}, false, nil
	}
	var it idemItem
	if err := json.Unmarshal(v, &it); err != nil {
		return store.IdemRecord{}, false, fmt.Errorf("decode idempotency record: %w", err)
	}
	return it.record(), true, nil
}

func putJSON(b *bbolt.Bucket, k []byte, v any) error {
	data, err := json.Marshal(v)
	if err != nil {
		return err
	}
	return b.Put(k, data)
}

// GetIdem returns the live record for (scope, key), or ErrNotFound when there
// is none or it is no longer live at now.
func (s *Store) GetIdem(_ context.Context, scope, key string, now time.Time) (store.IdemRecord, error) {
	if err := check.IdemKey(scope, key); err != nil {
		return store.IdemRecord{}, fmt.Errorf("bolt: get idempotency: %w", err)
	}
	var rec store.IdemRecord
	var ok bool
	err := s.db.View(func(tx *bbolt.Tx) error {
		var err error
		rec, ok, err = getIdem(tx.Bucket([]byte(bucketIdem)), lp(scope, []byte(key)))
		return err
	})
	if err != nil {
		return store.IdemRecord{}, fmt.Errorf("bolt: get idempotency: %w", err)
	}
	if !ok || !rec.Live(now) {
		return store.IdemRecord{}, fmt.Errorf("bolt: get idempotency: %w", store.ErrNotFound)
	}
	return rec, nil
}

// ClaimIdem creates rec in progress unless a live record holds (scope, key),
// in which case it returns that record and ErrExists.
func (s *Store) ClaimIdem(_ context.Context, rec store.IdemRecord, now time.Time) (store.IdemRecord, error) {
	rec, err := check.Claim(rec, now)
	if err != nil {
		return store.IdemRecord{}, fmt.Errorf("bolt: claim idempotency: %w", err)
	}
	sweep := s.claims.Add(1)%sweepEvery == 0
	var old store.IdemRecord
	var exists bool
	err = s.db.Update(func(tx *bbolt.Tx) error {
		b := tx.Bucket([]byte(bucketIdem))
		k := lp(rec.Scope, []byte(rec.Key))
		prev, ok, err := getIdem(b, k)
		if err != nil {
			return err
		}
		if ok && prev.Live(now) {
			old, exists = prev, true
			return nil
		}
		if err := putJSON(b, k, toIdemItem(rec)); err != nil {
			return err
		}
		if sweep {
			return sweepIdem(b, now)
		}
		return nil
	})
	if err != nil {
		return store.IdemRecord{}, fmt.Errorf("bolt: claim idempotency: %w", err)
	}
	if exists {
		return old, fmt.Errorf("bolt: claim idempotency: %w", store.ErrExists)
	}
	return rec, nil
}

// sweepIdem deletes records past their expiry.
func sweepIdem(b *bbolt.Bucket, now time.Time) error {
	var dead [][]byte
	err := b.ForEach(func(k, v []byte) error {
		var it idemItem
		if err := json.Unmarshal(v, &it); err != nil {
			return fmt.Errorf("decode idempotency record: %w", err)
		}
		if !now.Before(check.FromNanos(it.ExpiresAtNano)) {
			dead = append(dead, bytes.Clone(k))
		}
		return nil
	})
	if err != nil {
		return err
	}
	for _, k := range dead {
		if err := b.Delete(k); err != nil {
			return err
		}
	}
	return nil
}

// errGone aborts a transaction whose conditional update did not apply.
var errGone = errors.New("gone")

// CompleteIdem stores the response of an in-progress record still held under
// requestHash; ErrNotFound when it is absent, completed or taken over.
func (s *Store) CompleteIdem(_ context.Context, scope, key, requestHash string, status int, body []byte) error {
	if err := check.IdemKey(scope, key); err != nil {
		return fmt.Errorf("bolt: complete idempotency: %w", err)
	}
	if err := check.Body(body); err != nil {
		return fmt.Errorf("bolt: complete idempotency: %w", err)
	}
	err := s.db.Update(func(tx *bbolt.Tx) error {
		b := tx.Bucket([]byte(bucketIdem))
		k := lp(scope, []byte(key))
		rec, ok, err := getIdem(b, k)
		if err != nil {
			return err
		}
		if !ok || rec.State != store.IdemInProgress || rec.RequestHash != requestHash {
			return errGone
		}
		rec.State, rec.Status, rec.Body = store.IdemCompleted, status, body
		return putJSON(b, k, toIdemItem(rec))
	})
	if errors.Is(err, errGone) {
		return fmt.Errorf("bolt: complete idempotency: %w", store.ErrNotFound)
	}
	if err != nil {
		return fmt.Errorf("bolt: complete idempotency: %w", err)
	}
	return nil
}

// DeleteIdem removes the record if it is still held under requestHash; a
// missing or re-claimed record is left alone and is not an error.
func (s *Store) DeleteIdem(_ context.Context, scope, key, requestHash string) error {
	if err := check.IdemKey(scope, key); err != nil {
		return fmt.Errorf("bolt: delete idempotency: %w", err)
	}
	err := s.db.Update(func(tx *bbolt.Tx) error {
		b := tx.Bucket([]byte(bucketIdem))
		k := lp(scope, []byte(key))
		rec, ok, err := getIdem(b, k)
		if err != nil || !ok || rec.RequestHash != requestHash {
			return err
		}
		return b.Delete(k)
	})
	if err != nil {
		return fmt.Errorf("bolt: delete idempotency: %w", err)
	}
	return nil
}

// AppendLedger appends e to its account with the next sequence and the new
// balance, in one fsync'd transaction. An EntryID already in the account
// returns the stored entry and ErrExists and changes nothing.
func (s *Store) AppendLedger(_ context.Context, e store.LedgerEntry) (store.LedgerEntry, error) {
	e, err := check.Entry(e)
	if err != nil {
		return store.LedgerEntry{}, fmt.Errorf("bolt: append ledger: %w", err)
	}
	var dup bool
	err = s.db.Update(func(tx *bbolt.Tx) error {
		ids, entries := tx.Bucket([]byte(bucketEntryID)), tx.Bucket([]byte(bucketEntry))
		if v := ids.Get(lp(e.Account, []byte(e.EntryID))); v != nil {
			stored, err := getEntry(entries, e.Account, int64(binary.BigEndian.Uint64(v)))
			if err != nil {
				return err
			}
			e, dup = stored, true
			return nil
		}
		acct, _, err := getAccount(tx.Bucket([]byte(bucketAccount)), e.Account)
		if err != nil {
			return err
		}
		acct.Entries++
		acct.BalanceCents += e.AmountCents
		e.Sequence, e.BalanceCents = acct.Entries, acct.BalanceCents
		if err := putJSON(tx.Bucket([]byte(bucketAccount)), []byte(e.Account), acct); err != nil {
			return err
		}
		if err := putJSON(entries, seqKey(e.Account, e.Sequence), toEntryItem(e)); err != nil {
			return err
		}
		return ids.Put(lp(e.Account, []byte(e.EntryID)), binary.BigEndian.AppendUint64(nil, uint64(e.Sequence)))
	})
	if err != nil {
		return store.LedgerEntry{}, fmt.Errorf("bolt: append ledger: %w", err)
	}
	if dup {
		return e, fmt.Errorf("bolt: append ledger: entry %q: %w", e.EntryID, store.ErrExists)
	}
	return e, nil
}

func getEntry(b *bbolt.Bucket, account string, seq int64) (store.LedgerEntry, error) {
	v := b.Get(seqKey(account, seq))
	if v == nil {
		return store.LedgerEntry{}, fmt.Errorf("entry %d of %q is missing", seq, account)
	}
	var it entryItem
	if err := json.Unmarshal(v, &it); err != nil {
		return store.LedgerEntry{}, fmt.Errorf("decode ledger entry: %w", err)
	}
	return it.entry(), nil
}

func getAccount(b *bbolt.Bucket, account string) (accountItem, bool, error) {
	var acct accountItem
	v := b.Get([]byte(account))
	if v == nil {
		return acct, false, nil
	}
	if err := json.Unmarshal(v, &acct); err != nil {
		return acct, false, fmt.Errorf("decode account: %w", err)
	}
	return acct, true, nil
}

// LedgerBalance returns the account's balance and entry count; ErrNotFound
// when it has no entries.
func (s *Store) LedgerBalance(_ context.Context, account string) (store.Balance, error) {
	if err := check.ID("account", account); err != nil {
		return store.Balance{}, fmt.Errorf("bolt: ledger balance: %w", err)
	}
	var acct accountItem
	var ok bool
	err := s.db.View(func(tx *bbolt.Tx) error {
		var err error
		acct, ok, err = getAccount(tx.Bucket([]byte(bucketAccount)), account)
		return err
	})
	if err != nil {
		return store.Balance{}, fmt.Errorf("bolt: ledger balance: %w", err)
	}
	if !ok {
		return store.Balance{}, fmt.Errorf("bolt: ledger balance: %w", store.ErrNotFound)
	}
	return store.Balance{Account: account, BalanceCents: acct.BalanceCents, Entries: acct.Entries}, nil
}

// ListLedger returns the account's entries in sequence order; an empty,
// non-nil slice when there are none.
func (s *Store) ListLedger(_ context.Context, account string) ([]store.LedgerEntry, error) {
	if err := check.ID("account", account); err != nil {
		return nil, fmt.Errorf("bolt: list ledger: %w", err)
	}
	out := []store.LedgerEntry{}
	prefix := lp(account, nil)
	err := s.db.View(func(tx *bbolt.Tx) error {
		c := tx.Bucket([]byte(bucketEntry)).Cursor()
		for k, v := c.Seek(prefix); k != nil && bytes.HasPrefix(k, prefix); k, v = c.Next() {
			var it entryItem
			if err := json.Unmarshal(v, &it); err != nil {
				return fmt.Errorf("decode ledger entry: %w", err)
			}
			out = append(out, it.entry())
		}
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("bolt: list ledger: %w", err)
	}
	return out, nil
}
