package auth

import (
	"crypto/ed25519"
	"crypto/subtle"
	"errors"
	"fmt"

	"filippo.io/edwards25519"
)

// ErrUnsafeKey is what CheckPublicKey returns (wrapped, with the reason)
// for 32 bytes that are not a key anyone can be held to: a small-order
// point or a non-canonical encoding.
//
// Why: crypto/ed25519 follows RFC 8032's cofactorless equation and accepts
// any point as a key. With A of small order (the identity, 0x01 and 31
// zero bytes, is one of eight), R the identity and S = 0, the equation
// [S]B = R + [k]A holds for every message, so "the holder of A signed this"
// proves nothing and anyone can act as A. A non-canonical encoding (y ≥ p)
// names the same point as a canonical one, so one identity would have two
// keyids and two awnIds. Both are refused wherever a key enters: the body
// of join, world PUT and registry POST (DecodePublicKey), a key directory
// (JWK.PublicKey), and every signature check (VerifySignature).
var ErrUnsafeKey = errors.New("auth: unsafe Ed25519 public key")

// CheckPublicKey reports whether pub is a public key that only its
// holder's private key signs for: 32 bytes, the canonical encoding of a
// point of the curve, not of small order (order 1, 2, 4 or 8: the point
// times the cofactor 8 is the identity). Cost: one point decompression and
// three doublings, a small part of a signature verification.
func CheckPublicKey(pub []byte) error {
	if len(pub) != ed25519.PublicKeySize {
		return fmt.Errorf("%w: %d bytes, want %d", ErrUnsafeKey, len(pub), ed25519.PublicKeySize)
	}
	return checkPoint(pub, "key")
}

// checkPoint refuses an encoding that is not a point, not canonical, or of
// small order; what names it in the error.
func checkPoint(enc []byte, what string) error {
	p, err := new(edwards25519.Point).SetBytes(enc)
	if err != nil {
		return fmt.Errorf("%w: the %s is not a point of the curve", ErrUnsafeKey, what)
	}
	// SetBytes accepts y ≥ p (as most implementations do); re-encoding
	// gives the canonical form, so a difference means a second spelling.
	if subtle.ConstantTimeCompare(p.Bytes(), enc) != 1 {
		return fmt.Errorf("%w: the %s is not canonically encoded", ErrUnsafeKey, what)
	}
	if new(edwards25519.Point).MultByCofactor(p).Equal(edwards25519.NewIdentityPoint()) == 1 {
		return fmt.Errorf("%w: the %s is a point of small order", ErrUnsafeKey, what)
	}
	return nil
}

// VerifySignature is ed25519.Verify with the checks RFC 8032 leaves to the
// verifier: pub passes CheckPublicKey, the signature's R is a canonical
// point not of small order, and its S is a canonical scalar (S < L).
// crypto/ed25519 already refuses S ≥ L and compares R by its canonical
// bytes; the checks are repeated here so that the rule does not rest on
// one library's choices. Every signature the a2awire verifier accepts goes
// through it.
func VerifySignature(pub ed25519.PublicKey, msg, sig []byte) bool {
	if len(sig) != ed25519.SignatureSize || CheckPublicKey(pub) != nil {
		return false
	}
	if checkPoint(sig[:32], "signature's R") != nil {
		return false
	}
	if _, err := new(edwards25519.Scalar).SetCanonicalBytes(sig[32:]); err != nil {
		return false
	}
	return ed25519.Verify(pub, msg, sig)
}
