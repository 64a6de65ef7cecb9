package auth

import (
	"bytes"
	"context"
	"crypto/ed25519"
	"crypto/sha512"
	"encoding/base64"
	"errors"
	"strings"
	"testing"
	"time"

	"filippo.io/edwards25519"
)

// identityKey is the repro of the issue: 0x01 and 31 zero bytes, the
// encoding of the curve's identity point (order 1).
var identityKey = ed25519.PublicKey(append([]byte{1}, make([]byte, 31)...))

// forgery is R = the identity, S = 0: with identityKey it satisfies
// [S]B = R + [k]A for every message.
var forgery = append(append([]byte{1}, make([]byte, 31)...), make([]byte, 32)...)

// smallOrderPoints are the canonical encodings of the eight points of
// order 1, 2, 4 and 8 (the torsion subgroup), computed rather than copied:
// the identity, and [L]P for a point P of full order 8L reached by
// decoding candidates until one has a torsion component that generates it.
func smallOrderPoints(t *testing.T) [][]byte {
	t.Helper()
	// A point of order 8: any y whose point has [L]P of order 8. [L]P is
	// computed as [L-1]P + P, since scalars are taken mod L.
	lMinus1, err := new(edwards25519.Scalar).SetCanonicalBytes(append([]byte{0xec, 0xd3, 0xf5, 0x5c, 0x1a, 0x63, 0x12, 0x58,
		0xd6, 0x9c, 0xf7, 0xa2, 0xde, 0xf9, 0xde, 0x14}, append(make([]byte, 15), 0x10)...))
	if err != nil {
		t.Fatal(err)
	}
	id := edwards25519.NewIdentityPoint()
	for y := byte(2); y < 255; y++ {
		enc := make([]byte, 32)
		enc[0] = y
		p, err := new(edwards25519.Point).SetBytes(enc)
		if err != nil {
			continue
		}
		tor := new(edwards25519.Point).Add(new(edwards25519.Point).ScalarMult(lMinus1, p), p)
		four := new(edwards25519.Point).Add(tor, tor)
		four.Add(four, four)
		if four.Equal(id) == 1 {
			continue // order at most 4: try another
		}
		var out [][]byte
		q := edwards25519.NewIdentityPoint()
		for range 8 {
			out = append(out, q.Bytes())
			q = new(edwards25519.Point).Add(q, tor)
		}
		return out
	}
	t.Fatal("no point of order 8L found")
	return nil
}

// TestIdentityKeyForgesUnderStdlib is why the checks exist: Go's
// ed25519.Verify accepts the forgery under the identity key for any
// message. If it ever stops, the checks are still right, but this test
// says the library changed.
func TestIdentityKeyForgesUnderStdlib(t *testing.T) {
	for _, msg := range []string{"", "anything", "PUT /v0/worlds/w"} {
		if !ed25519.Verify(identityKey, []byte(msg), forgery) {
			t.Fatalf("stdlib refuses the forgery of %q", msg)
		}
	}
}

func TestCheckPublicKeyRefusesSmallOrderKeys(t *testing.T) {
	pts := smallOrderPoints(t)
	if !bytes.Equal(pts[0], identityKey) {
		t.Fatalf("first torsion point %x is not the identity", pts[0])
	}
	for _, p := range pts {
		if err := CheckPublicKey(p); !errors.Is(err, ErrUnsafeKey) || !strings.Contains(err.Error(), "small order") {
			t.Errorf("%x: %v, want a small-order ErrUnsafeKey", p, err)
		}
		if _, err := DecodePublicKey(base64.StdEncoding.EncodeToString(p)); !errors.Is(err, ErrUnsafeKey) {
			t.Errorf("DecodePublicKey %x: %v", p, err)
		}
		j := PublicJWK(p)
		if _, err := j.PublicKey(); !errors.Is(err, ErrUnsafeKey) {
			t.Errorf("JWK %x: %v", p, err)
		}
	}
	for seed := byte(0); seed < 8; seed++ {
		if err := CheckPublicKey(keyOf(testKey(seed))); err != nil {
			t.Errorf("a real key (seed %d) refused: %v", seed, err)
		}
	}
}

// TestCheckPublicKeyRefusesNonCanonicalKeys: y ≥ p spells a point that
// already has a canonical encoding (y − p), so one holder would have two
// keyids and awnIds.
func TestCheckPublicKeyRefusesNonCanonicalKeys(t *testing.T) {
	found := 0
	for y := range byte(19) {
		// y + p, little-endian: p = 2^255 − 19.
		enc := bytes.Repeat([]byte{0xff}, 32)
		enc[0], enc[31] = 0xed+y, 0x7f
		p, err := new(edwards25519.Point).SetBytes(enc)
		if err != nil {
			continue // not on the curve
		}
		if new(edwards25519.Point).MultByCofactor(p).Equal(edwards25519.NewIdentityPoint()) == 1 {
			continue // small order: refused for that reason too
		}
		found++
		if err := CheckPublicKey(enc); !errors.Is(err, ErrUnsafeKey) || !strings.Contains(err.Error(), "canonical") {
			t.Errorf("y = p + %d: %v, want a non-canonical ErrUnsafeKey", y, err)
		}
		if err := CheckPublicKey(p.Bytes()); err != nil {
			t.Errorf("canonical spelling of y = %d refused: %v", y, err)
		}
	}
	if found == 0 {
		t.Fatal("no non-canonical encoding of a full-order point found")
	}
	if err := CheckPublicKey(make([]byte, 31)); !errors.Is(err, ErrUnsafeKey) {
		t.Errorf("31 bytes: %v", err)
	}
}

// TestVerifySignatureRefusesIdentityForgery is the repro: the forgery
// under the identity key, refused whatever the message.
func TestVerifySignatureRefusesIdentityForgery(t *testing.T) {
	for _, msg := range []string{"", "anything"} {
		if VerifySignature(identityKey, []byte(msg), forgery) {
			t.Errorf("forgery of %q verified", msg)
		}
	}
}

// TestVerifySignatureRefusesNonCanonicalS: S + L spells the same scalar as
// S. crypto/ed25519 refuses it too (this test guards VerifySignature's own
// check only against a library that would not).
func TestVerifySignatureRefusesNonCanonicalS(t *testing.T) {
	key := testKey(3)
	msg := []byte("m")
	sig := ed25519.Sign(key, msg)
	if !VerifySignature(keyOf(key), msg, sig) {
		t.Fatal("a real signature refused")
	}
	// S + L, little-endian addition (S < L < 2^253, so no carry out).
	l := []byte{0xed, 0xd3, 0xf5, 0x5c, 0x1a, 0x63, 0x12, 0x58, 0xd6, 0x9c, 0xf7, 0xa2, 0xde, 0xf9, 0xde, 0x14,
		0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0x10}
	bad := append([]byte(nil), sig...)
	carry := 0
	for i := range 32 {
		v := int(bad[32+i]) + int(l[i]) + carry
		bad[32+i], carry = byte(v), v>>8
	}
	if VerifySignature(keyOf(key), msg, bad) {
		t.Error("S + L verified")
	}
}

// TestVerifySignatureRefusesSmallOrderR: the holder of a real key can
// choose R = the identity and S = k·a; crypto/ed25519 accepts that
// signature, VerifySignature does not (R must not be of small order).
func TestVerifySignatureRefusesSmallOrderR(t *testing.T) {
	key := testKey(4)
	pub := keyOf(key)
	msg := []byte("small-order R")
	h := sha512.Sum512(key.Seed())
	a, err := new(edwards25519.Scalar).SetBytesWithClamping(h[:32])
	if err != nil {
		t.Fatal(err)
	}
	r := identityKey
	kh := sha512.New()
	kh.Write(r)
	kh.Write(pub)
	kh.Write(msg)
	k, err := new(edwards25519.Scalar).SetUniformBytes(kh.Sum(nil))
	if err != nil {
		t.Fatal(err)
	}
	sig := append(append([]byte(nil), r...), new(edwards25519.Scalar).Multiply(k, a).Bytes()...)
	if !ed25519.Verify(pub, msg, sig) {
		t.Fatal("the crafted signature does not satisfy crypto/ed25519: the test is wrong")
	}
	if VerifySignature(pub, msg, sig) {
		t.Error("a signature with R of small order verified")
	}
}

// TestVerifierRefusesIdentityKey: a request signed with the forgery under
// the identity key, whether the key comes from the body (join, world PUT,
// registry POST) or from a stored registration, is 401.
func TestVerifierRefusesIdentityKey(t *testing.T) {
	for name, keys := range map[string]KeyLookup{
		"body":   BodyKey(identityKey),
		"stored": staticKeys(identityKey),
	} {
		r := signedRequest(t, newTestSigner(t, testKey(1)), "POST", url1, body1)
		r.Header.Set("Signature-Input", "sig1="+comps+good(KeyID(identityKey)))
		r.Header.Set("Signature", "sig1=:"+base64.StdEncoding.EncodeToString(forgery)+":")
		v := newMemVerifier(t, t0.Add(10*time.Second))
		_, err := v.Verify(context.Background(), r, readBody(t, r), keys)
		var ae *Error
		if !errors.As(err, &ae) || ae.Kind != Unauthorized {
			t.Errorf("%s key: %v, want Unauthorized", name, err)
		}
	}
}
