package store_test

import (
	"crypto/hmac"
	"crypto/sha256"
	"encoding/base64"
	"encoding/json"
	"errors"
	"strconv"
	"testing"

	"github.com/a2awire/a2awire/shared/store"
)

// sealWith seals p for q as Cursors does, under a key the test chooses:
// what a client that knows the key can forge.
func sealWith(key []byte, q store.Query, p store.Position) string {
	payload, _ := json.Marshal(p)
	h := hmac.New(sha256.New, key)
	for _, f := range []string{q.Index, q.PK, strconv.Itoa(int(q.SK.Op)), q.SK.Value, q.SK.Value2, strconv.FormatBool(q.Backward)} {
		h.Write([]byte(strconv.Itoa(len(f)) + ":" + f))
	}
	h.Write(payload)
	return base64.RawURLEncoding.EncodeToString(append(payload, h.Sum(nil)[:16]...))
}

// TestCursorsNotSealedWithPublicConstant is the repro: cursors were sealed
// under "a2awire store cursor v1", a key in the source, so anyone could
// forge one. A forged cursor is refused by a codec with no secret (a
// random key) and by one with a secret (the key derived from it is
// neither the constant nor the secret itself).
func TestCursorsNotSealedWithPublicConstant(t *testing.T) {
	q := store.Query{PK: "p", SK: store.SKPrefix("a"), Limit: 3}
	at := store.Position{PK: "p", SK: "a9"}
	secret := []byte("deploy secret")
	for name, key := range map[string][]byte{"the old constant": []byte("a2awire store cursor v1"), "the raw secret": secret} {
		forged := q
		forged.Cursor = sealWith(key, q, at)
		for cname, c := range map[string]store.Cursors{"no secret": store.NewCursors(nil), "a secret": store.NewCursors(secret)} {
			if _, err := c.Decode(forged); !errors.Is(err, store.ErrBadCursor) {
				t.Errorf("cursor sealed with %s, codec with %s: %v, want ErrBadCursor", name, cname, err)
			}
		}
	}
}

// TestCursorsTravelUnderOneSecret: codecs built from the same secret (two
// Lambda instances, a restarted harness) accept each other's cursors;
// codecs of another secret, or of none, refuse them.
func TestCursorsTravelUnderOneSecret(t *testing.T) {
	q := store.Query{PK: "p", Limit: 3}
	at := store.Position{PK: "p", SK: "s1"}
	a, b := store.NewCursors([]byte("one")), store.NewCursors([]byte("one"))
	q.Cursor = a.Encode(q, at)
	if p, err := b.Decode(q); err != nil || p != at {
		t.Fatalf("same secret: %+v, %v", p, err)
	}
	for name, c := range map[string]store.Cursors{"other secret": store.NewCursors([]byte("two")), "no secret": store.NewCursors(nil)} {
		if _, err := c.Decode(q); !errors.Is(err, store.ErrBadCursor) {
			t.Errorf("%s: %v, want ErrBadCursor", name, err)
		}
	}
	n1, n2 := store.NewCursors(nil), store.NewCursors(nil)
	q.Cursor = n1.Encode(q, at)
	if _, err := n1.Decode(q); err != nil {
		t.Errorf("no secret, same codec: %v", err)
	}
	if _, err := n2.Decode(q); !errors.Is(err, store.ErrBadCursor) {
		t.Errorf("no secret, another codec: %v, want ErrBadCursor", err)
	}
	if k1, k2 := store.DeriveKey([]byte("s"), "a"), store.DeriveKey([]byte("s"), "b"); hmac.Equal(k1, k2) || len(k1) != 32 {
		t.Errorf("labels do not separate keys: %x %x", k1, k2)
	}
}
