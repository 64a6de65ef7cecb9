// Package signature signs and verifies webhook deliveries as Standard
// Webhooks does: the signed content is "<id>.<unix ts>.<body>",
// the symmetric signature "v1,<base64 HMAC-SHA256>" keyed by the decoded
// "whsec_" secret, and the asymmetric one "v1a,<base64 Ed25519>" made with
// the network's key, both in one space-separated webhook-signature header.
// v1 lets a receiver check a delivery with its secret and any Standard
// Webhooks library; v1a lets anyone check it came from the network, with the
// key the network publishes at /.well-known/http-message-signatures-directory.
package signature

import (
	"crypto/ed25519"
	"crypto/hmac"
	"crypto/rand"
	"crypto/sha256"
	"encoding/base64"
	"errors"
	"fmt"
	"net/http"
	"strconv"
	"strings"
	"time"

	"github.com/a2awire/a2awire/shared/apierror"
)

// Header names of Standard Webhooks and of the network.
const (
	HeaderID        = "webhook-id"
	HeaderTimestamp = "webhook-timestamp"
	HeaderSignature = "webhook-signature"
	HeaderWorldID   = "X-AWN-World-Id"
	HeaderEventID   = "X-AWN-Event-Id"
)

// SecretPrefix starts every webhook secret.
const SecretPrefix = "whsec_"

// SecretBytes is the size of the key NewSecret draws.
const SecretBytes = 32

// DefaultTolerance is how far a delivery's timestamp may be from the
// verifier's clock, either way (Standard Webhooks' 5 minutes).
const DefaultTolerance = 5 * time.Minute

// Standard Webhooks allows keys of 24 to 64 bytes; anything outside is
// not a secret this network made.
const (
	minSecretBytes = 24
	maxSecretBytes = 64
)

// Sentinels carried (as *apierror.Error's cause) by verification failures,
// so a receiver can tell them apart with errors.Is.
var (
	ErrMissingHeaders = errors.New("missing webhook headers")
	ErrBadTimestamp   = errors.New("malformed webhook-timestamp")
	ErrTooOld         = errors.New("webhook timestamp too old")
	ErrTooNew         = errors.New("webhook timestamp too new")
	ErrNoMatch        = errors.New("no matching signature")
)

// NewSecret returns a fresh secret: "whsec_" and the standard base64 of 32
// random bytes.
func NewSecret() (string, error) {
	b := make([]byte, SecretBytes)
	if _, err := rand.Read(b); err != nil {
		return "", fmt.Errorf("signature: new secret: %w", err)
	}
	return SecretPrefix + base64.StdEncoding.EncodeToString(b), nil
}

// ParseSecret returns the HMAC key of a "whsec_" secret: its decoded bytes.
// The prefix is required (a bare base64 string is more likely a mistake
// than a secret) and the key must be 24 to 64 bytes.
func ParseSecret(secret string) ([]byte, error) {
	enc, ok := strings.CutPrefix(secret, SecretPrefix)
	if !ok {
		return nil, errors.New("signature: secret does not start with " + SecretPrefix)
	}
	key, err := base64.StdEncoding.DecodeString(enc)
	if err != nil {
		return nil, fmt.Errorf("signature: secret is not standard base64: %w", err)
	}
	if len(key) < minSecretBytes || len(key) > maxSecretBytes {
		return nil, fmt.Errorf("signature: secret key is %d bytes, want %d to %d", len(key), minSecretBytes, maxSecretBytes)
	}
	return key, nil
}

// content is what both schemes sign.
func content(id string, ts int64, body []byte) []byte {
	b := make([]byte, 0, len(id)+len(body)+22)
	b = append(b, id...)
	b = append(b, '.')
	b = strconv.AppendInt(b, ts, 10)
	b = append(b, '.')
	return append(b, body...)
}

func mac(key []byte, msg []byte) []byte {
	h := hmac.New(sha256.New, key)
	h.Write(msg)
	return h.Sum(nil)
}

// Sign returns the webhook-signature header value for a delivery:
// "v1,<HMAC>" with secret, then " v1a,<Ed25519>" with networkKey when it is
// not nil. ts is truncated to the second, as the timestamp header carries it.
func Sign(id string, ts time.Time, body []byte, secret string, networkKey ed25519.PrivateKey) (string, error) {
	key, err := ParseSecret(secret)
	if err != nil {
		return "", err
	}
	if id == "" || strings.ContainsAny(id, ". \t\r\n") {
		// A dot would make "id.ts.body" ambiguous; whitespace cannot go in a header.
		return "", fmt.Errorf("signature: webhook id %q is empty or has a dot or whitespace", id)
	}
	msg := content(id, ts.Unix(), body)
	header := "v1," + base64.StdEncoding.EncodeToString(mac(key, msg))
	if networkKey != nil {
		if len(networkKey) != ed25519.PrivateKeySize {
			return "", errors.New("signature: network key is not an Ed25519 private key")
		}
		header += " v1a," + base64.StdEncoding.EncodeToString(ed25519.Sign(networkKey, msg))
	}
	return header, nil
}

// Headers returns the three Standard Webhooks headers of a delivery
// (webhook-id, webhook-timestamp, webhook-signature); the caller adds
// X-AWN-World-Id, X-AWN-Event-Id and Content-Type.
func Headers(id string, ts time.Time, body []byte, secret string, networkKey ed25519.PrivateKey) (http.Header, error) {
	sig, err := Sign(id, ts, body, secret, networkKey)
	if err != nil {
		return nil, err
	}
	h := http.Header{}
	h.Set(HeaderID, id)
	h.Set(HeaderTimestamp, strconv.FormatInt(ts.Unix(), 10))
	h.Set(HeaderSignature, sig)
	return h, nil
}

// VerifyV1 checks the delivery's v1 (HMAC) signature with secret, its
// timestamp within tolerance of now (DefaultTolerance when tolerance ≤ 0).
// Errors are Unauthorized *apierror.Error wrapping one of the Err sentinels
// (or the secret's parse error).
func VerifyV1(headers http.Header, body []byte, secret string, tolerance time.Duration) error {
	return VerifyV1At(headers, body, secret, tolerance, time.Now())
}

// VerifyV1At is VerifyV1 with the verifier's clock given.
func VerifyV1At(headers http.Header, body []byte, secret string, tolerance time.Duration, now time.Time) error {
	key, err := ParseSecret(secret)
	if err != nil {
		return &apierror.Error{Kind: apierror.Internal, Message: "bad webhook secret", Err: err}
	}
	return verify(headers, body, tolerance, now, "v1", func(msg, sig []byte) bool {
		return hmac.Equal(sig, mac(key, msg))
	})
}

// VerifyV1a checks the delivery's v1a (Ed25519) signature with the
// network's public key pub, its timestamp within tolerance of now
// (DefaultTolerance when tolerance ≤ 0). Errors as VerifyV1's.
func VerifyV1a(headers http.Header, body []byte, pub ed25519.PublicKey, tolerance time.Duration) error {
	return VerifyV1aAt(headers, body, pub, tolerance, time.Now())
}

// VerifyV1aAt is VerifyV1a with the verifier's clock given.
func VerifyV1aAt(headers http.Header, body []byte, pub ed25519.PublicKey, tolerance time.Duration, now time.Time) error {
	if len(pub) != ed25519.PublicKeySize {
		return &apierror.Error{Kind: apierror.Internal, Message: "bad network key", Err: errors.New("signature: public key is not 32 bytes")}
	}
	return verify(headers, body, tolerance, now, "v1a", func(msg, sig []byte) bool {
		return len(sig) == ed25519.SignatureSize && ed25519.Verify(pub, msg, sig)
	})
}

func unauthorized(msg string, cause error) error {
	return &apierror.Error{Kind: apierror.Unauthorized, Message: msg, Err: cause}
}

// verify checks the headers and timestamp, then tries every signature of
// the given version; check compares in constant time.
func verify(headers http.Header, body []byte, tolerance time.Duration, now time.Time, version string, check func(msg, sig []byte) bool) error {
	id, tsText, sigs := headers.Get(HeaderID), headers.Get(HeaderTimestamp), headers.Get(HeaderSignature)
	if id == "" || tsText == "" || sigs == "" {
		return unauthorized("missing webhook-id, webhook-timestamp or webhook-signature", ErrMissingHeaders)
	}
	ts, err := strconv.ParseInt(tsText, 10, 64)
	if err != nil {
		return unauthorized("malformed webhook-timestamp", ErrBadTimestamp)
	}
	if tolerance <= 0 {
		tolerance = DefaultTolerance
	}
	t := time.Unix(ts, 0)
	if now.Sub(t) > tolerance {
		return unauthorized("webhook timestamp too old", ErrTooOld)
	}
	if t.Sub(now) > tolerance {
		return unauthorized("webhook timestamp too new", ErrTooNew)
	}
	msg := content(id, ts, body)
	for _, s := range strings.Fields(sigs) {
		v, enc, ok := strings.Cut(s, ",")
		if !ok || v != version {
			continue
		}
		sig, err := base64.StdEncoding.DecodeString(enc)
		if err != nil {
			continue
		}
		if check(msg, sig) {
			return nil
		}
	}
	return unauthorized("no matching "+version+" signature", ErrNoMatch)
}
