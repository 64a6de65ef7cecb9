package store

import (
	"crypto/hmac"
	"crypto/rand"
	"crypto/sha256"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"strconv"
)

// Position is where a query page ended: the key of its last item, and for a
// query on gsi1 also that item's index keys (DynamoDB's LastEvaluatedKey).
type Position struct {
	PK     string `json:"p"`
	SK     string `json:"s"`
	GSI1PK string `json:"ip,omitempty"`
	GSI1SK string `json:"is,omitempty"`
}

// Cursors turns page positions into opaque cursors and back. A cursor is
// bound to its query (index, partition, sort condition, direction) and
// carries an HMAC, so a tampered cursor, or one from another query, is
// refused with ErrBadCursor instead of starting a read somewhere else.
//
// The HMAC key is secret: a cursor anyone could seal (a key in the source)
// would let a client start a read at any key of the partition its query
// names, skipping a filter the caller applies between pages. With a
// secret (the deploy's, or the harness's key file), the key is derived
// from it under cursorLabel, so it is never the secret itself and never
// the key of another use of the same secret (the registry's cursors have
// their own label). Without one, the key is random, this instance's own:
// its cursors are then good on this store value only, which is every use
// today (no route hands a store cursor to a client; the loops that page
// through a query run within one request).
type Cursors struct{ key []byte }

// cursorLabel separates the store's cursor key from any other key derived
// from the same secret.
const cursorLabel = "a2awire store cursor v1"

// NewCursors returns a codec keyed by secret, or by a random key when
// secret is empty. Engines serving the same table must share the secret
// for cursors to travel between them.
func NewCursors(secret []byte) Cursors {
	return Cursors{key: DeriveKey(secret, cursorLabel)}
}

// DeriveKey returns the 32-byte key that label names under secret:
// HMAC-SHA256(secret, label), a PRF keyed by the secret (HKDF's expand
// step for one block). An empty secret gives a random key instead, from
// crypto/rand, which never fails on the platforms Go supports.
func DeriveKey(secret []byte, label string) []byte {
	if len(secret) == 0 {
		k := make([]byte, sha256.Size)
		_, _ = rand.Read(k)
		return k
	}
	h := hmac.New(sha256.New, secret)
	h.Write([]byte(label))
	return h.Sum(nil)
}

// Encode returns the cursor continuing q after p.
func (c Cursors) Encode(q Query, p Position) string {
	payload, _ := json.Marshal(p) // strings only: cannot fail
	mac := c.mac(q, payload)
	return base64.RawURLEncoding.EncodeToString(append(payload, mac...))
}

// Decode returns the position of q's cursor (q.Cursor must be non-empty).
func (c Cursors) Decode(q Query) (Position, error) {
	raw, err := base64.RawURLEncoding.DecodeString(q.Cursor)
	if err != nil || len(raw) <= macLen {
		return Position{}, fmt.Errorf("cursor is malformed: %w", ErrBadCursor)
	}
	payload, mac := raw[:len(raw)-macLen], raw[len(raw)-macLen:]
	if !hmac.Equal(mac, c.mac(q, payload)) {
		return Position{}, fmt.Errorf("cursor does not belong to this query: %w", ErrBadCursor)
	}
	var p Position
	if err := json.Unmarshal(payload, &p); err != nil || p.PK == "" || p.SK == "" {
		return Position{}, fmt.Errorf("cursor is malformed: %w", ErrBadCursor)
	}
	if q.Index == IndexGSI1 && (p.GSI1PK != q.PK || p.GSI1SK == "") {
		return Position{}, fmt.Errorf("cursor is malformed: %w", ErrBadCursor)
	}
	if q.Index == "" && p.PK != q.PK {
		return Position{}, fmt.Errorf("cursor is malformed: %w", ErrBadCursor)
	}
	return p, nil
}

const macLen = 16

func (c Cursors) mac(q Query, payload []byte) []byte {
	h := hmac.New(sha256.New, c.key)
	// Length-prefixed fields: no two queries share a fingerprint.
	for _, f := range []string{q.Index, q.PK, strconv.Itoa(int(q.SK.Op)), q.SK.Value, q.SK.Value2, strconv.FormatBool(q.Backward)} {
		h.Write([]byte(strconv.Itoa(len(f)) + ":" + f))
	}
	h.Write(payload)
	return h.Sum(nil)[:macLen]
}

// PositionOf returns the position of item as the last of a page of q.
func PositionOf(q Query, item Item) Position {
	p := Position{PK: item.Str(AttrPK), SK: item.Str(AttrSK)}
	if q.Index == IndexGSI1 {
		p.GSI1PK, p.GSI1SK = item.Str(AttrGSI1PK), item.Str(AttrGSI1SK)
	}
	return p
}
