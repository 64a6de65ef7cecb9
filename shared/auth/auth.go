// Package auth signs and verifies a2awire requests with HTTP Message
// Signatures (RFC 9421) as the IETF Web Bot Auth drafts profile them, plus
// the two rules of the AWN-Ed25519 profile that make every request
// single-use: a required nonce, remembered until the signature expires, and
// the body covered by its Content-Digest.
//
// Identity: an agent is an Ed25519 key. Its keyid is the RFC 7638 thumbprint
// of its RFC 8037 JWK (KeyID) and its awnId the SHA-256 of the raw key
// (AWNID). Signer adds Content-Digest, Signature-Input and Signature to an
// outgoing request (Transport does it for an http.Client). Verifier checks a
// received request against every rule of §7; route middleware calls it with
// the key lookup the route needs (the key in the body for join and register,
// a stored registration elsewhere).
//
// The verifier reads every signature header as the client sent it
// (Request.Header): behind API Gateway the Lambda adapter splits header
// values on commas, and Signature-Input is full of them, so the caller
// hands over the raw values; auth knows nothing of Lambda.
package auth

import (
	"errors"

	"github.com/a2awire/a2awire/shared/apierror"
)

// Error is the one domain error type, apierror.Error: a verification
// failure carries a kind (Unauthorized, Unavailable, Internal) that the
// HTTP layer's one kind → status table maps like any other, so nothing
// translates it. Message names the rule that failed ("signature expired",
// "nonce already used") and never an expected value, so it is safe to send
// to the client; Err is the cause, for logs.
type Error = apierror.Error

// Kind is the kind of an Error (apierror.Kind).
type Kind = apierror.Kind

// The kinds a verification fails with.
const (
	// Unauthorized: the request breaks a rule of the signature profile.
	// The message names the rule and may be shown to the client.
	Unauthorized = apierror.Unauthorized
	// Unavailable: the nonce store is overloaded; the client may retry.
	Unavailable = apierror.Unavailable
	// Internal: the nonce store or the key lookup failed. The message is
	// generic; the cause is in Err, for logs only.
	Internal = apierror.Internal
)

// unauthorized builds the 401 error of a failed rule.
func unauthorized(msg string) *Error { return &Error{Kind: Unauthorized, Message: msg} }

// ErrUnknownKey is what a KeyLookup returns (possibly wrapped) when it knows
// no key for the keyid; the verifier reports it as "unknown key".
var ErrUnknownKey = errors.New("auth: unknown key")
