package dynamo

import (
	"fmt"
	"math"
	"strconv"
	"time"

	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"

	"github.com/a2awire/a2awire/shared/store"
	"github.com/a2awire/a2awire/shared/store/internal/check"
)

// Attribute names. Items are built and read by hand, attribute by attribute,
// so the stored shape is exactly what this file says (no struct-tag
// reflection, no surprise on a renamed Go field).
const (
	attrPK   = "pk"
	attrSK   = "sk"
	attrType = "type" // entity type, for humans reading the table and stream consumers

	attrScope           = "scope"
	attrKey             = "key"
	attrState           = "state"
	attrRequestHash     = "requestHash"
	attrStatus          = "status"
	attrBody            = "body"
	attrExpiresAt       = "expiresAt" // epoch seconds, the table's TTL attribute
	attrExpiresAtNano   = "expiresAtNano"
	attrInProgressUntil = "inProgressUntilNano"

	attrAccount      = "account"
	attrEntryID      = "entryId"
	attrSequence     = "sequence"
	attrAmountCents  = "amountCents"
	attrMemo         = "memo"
	attrBalanceCents = "balanceCents"
	attrEntries      = "entries"
	attrCreatedAt    = "createdAtNano"
)

// Entity types (attribute "type").
const (
	typeIdem         = "idem"
	typeAccount      = "ledger-account"
	typeEntry        = "ledger-entry"
	typeEntryIDGuard = "ledger-entry-id"
)

// Key patterns; see the package comment.
func idemPK(scope string) string     { return "IDEM#" + scope }
func idemSK(key string) string       { return "KEY#" + key }
func ledgerPK(account string) string { return "LEDGER#" + account }

const (
	accountSK     = "ACCOUNT"
	seqSKPrefix   = "SEQ#"
	entryIDPrefix = "ENTRYID#"
)

// seqSK zero-pads so that string order is sequence order (int64 has at most
// 19 digits).
func seqSK(seq int64) string              { return fmt.Sprintf("%s%020d", seqSKPrefix, seq) }
func entryIDSK(id string) string          { return entryIDPrefix + id }
func strAV(v string) types.AttributeValue { return &types.AttributeValueMemberS{Value: v} }
func numAV(v int64) types.AttributeValue {
	return &types.AttributeValueMemberN{Value: strconv.FormatInt(v, 10)}
}

func keyOf(pk, sk string) map[string]types.AttributeValue {
	return map[string]types.AttributeValue{attrPK: strAV(pk), attrSK: strAV(sk)}
}

// ttlSeconds rounds up, so DynamoDB's TTL never deletes a record before
// readers (who compare nanoseconds) consider it expired.
func ttlSeconds(t time.Time) int64 {
	sec := t.Unix()
	if t.Nanosecond() > 0 {
		sec++
	}
	return sec
}

func idemItem(r store.IdemRecord) map[string]types.AttributeValue {
	it := keyOf(idemPK(r.Scope), idemSK(r.Key))
	it[attrType] = strAV(typeIdem)
	it[attrScope] = strAV(r.Scope)
	it[attrKey] = strAV(r.Key)
	it[attrState] = strAV(string(r.State))
	it[attrRequestHash] = strAV(r.RequestHash)
	it[attrExpiresAt] = numAV(ttlSeconds(r.ExpiresAt))
	it[attrExpiresAtNano] = numAV(check.Nanos(r.ExpiresAt))
	it[attrInProgressUntil] = numAV(check.Nanos(r.InProgressUntil))
	if r.State == store.IdemCompleted {
		it[attrStatus] = numAV(int64(r.Status))
		it[attrBody] = &types.AttributeValueMemberB{Value: r.Body}
	}
	return it
}

func decodeIdem(it map[string]types.AttributeValue) (store.IdemRecord, error) {
	d := decoder{item: it}
	r := store.IdemRecord{
		Scope:           d.str(attrScope),
		Key:             d.str(attrKey),
		State:           store.IdemState(d.str(attrState)),
		RequestHash:     d.str(attrRequestHash),
		ExpiresAt:       check.FromNanos(d.num(attrExpiresAtNano)),
		InProgressUntil: check.FromNanos(d.num(attrInProgressUntil)),
	}
	if _, ok := it[attrStatus]; ok {
		st := d.num(attrStatus)
		if st < math.MinInt32 || st > math.MaxInt32 {
			d.fail(attrStatus, "out of range")
		}
		r.Status = int(st)
		r.Body = d.bin(attrBody)
	}
	if d.err != nil {
		return store.IdemRecord{}, fmt.Errorf("decode idempotency record: %w", d.err)
	}
	return r, nil
}

// entryItem is the ledger entry item. The entry-id guard item carries the
// same attributes, so a duplicate append can return the stored entry from
// the guard's ALL_OLD image without another read.
func entryItem(e store.LedgerEntry, sk, typ string) map[string]types.AttributeValue {
	it := keyOf(ledgerPK(e.Account), sk)
	it[attrType] = strAV(typ)
	it[attrAccount] = strAV(e.Account)
	it[attrEntryID] = strAV(e.EntryID)
	it[attrSequence] = numAV(e.Sequence)
	it[attrAmountCents] = numAV(e.AmountCents)
	it[attrBalanceCents] = numAV(e.BalanceCents)
	it[attrMemo] = strAV(e.Memo)
	if !e.CreatedAt.IsZero() {
		it[attrCreatedAt] = numAV(check.Nanos(e.CreatedAt))
	}
	return it
}

func decodeEntry(it map[string]types.AttributeValue) (store.LedgerEntry, error) {
	d := decoder{item: it}
	e := store.LedgerEntry{
		Account:      d.str(attrAccount),
		EntryID:      d.str(attrEntryID),
		Sequence:     d.num(attrSequence),
		AmountCents:  d.num(attrAmountCents),
		BalanceCents: d.num(attrBalanceCents),
		Memo:         d.str(attrMemo),
	}
	if _, ok := it[attrCreatedAt]; ok {
		e.CreatedAt = check.FromNanos(d.num(attrCreatedAt))
	}
	if d.err != nil {
		return store.LedgerEntry{}, fmt.Errorf("decode ledger entry: %w", d.err)
	}
	return e, nil
}

// decodeAccount reads the account item; an absent item (nil) is an account
// with no entries.
func decodeAccount(it map[string]types.AttributeValue) (entries, balance int64, err error) {
	if it == nil {
		return 0, 0, nil
	}
	d := decoder{item: it}
	entries, balance = d.num(attrEntries), d.num(attrBalanceCents)
	if d.err != nil {
		return 0, 0, fmt.Errorf("decode ledger account: %w", d.err)
	}
	return entries, balance, nil
}

// decoder reads typed attributes and keeps the first error, so decoding an
// item reads as a list of fields.
type decoder struct {
	item map[string]types.AttributeValue
	err  error
}

func (d *decoder) fail(name, msg string) {
	if d.err == nil {
		d.err = fmt.Errorf("attribute %q: %s", name, msg)
	}
}

func (d *decoder) str(name string) string {
	switch v := d.item[name].(type) {
	case *types.AttributeValueMemberS:
		return v.Value
	case nil:
		d.fail(name, "missing")
	default:
		d.fail(name, fmt.Sprintf("type %T, want S", v))
	}
	return ""
}

func (d *decoder) num(name string) int64 {
	switch v := d.item[name].(type) {
	case *types.AttributeValueMemberN:
		x, err := strconv.ParseInt(v.Value, 10, 64)
		if err != nil {
			d.fail(name, err.Error())
		}
		return x
	case nil:
		d.fail(name, "missing")
	default:
		d.fail(name, fmt.Sprintf("type %T, want N", v))
	}
	return 0
}

func (d *decoder) bin(name string) []byte {
	switch v := d.item[name].(type) {
	case *types.AttributeValueMemberB:
		// The SDK decodes a fresh slice per response; clone anyway so a
		// caller can never alias anything the SDK keeps.
		return append([]byte{}, v.Value...)
	case nil:
		d.fail(name, "missing")
	default:
		d.fail(name, fmt.Sprintf("type %T, want B", v))
	}
	return nil
}
