package auth

import (
	"crypto/ed25519"
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"errors"
	"fmt"

	"github.com/a2awire/a2awire/shared/ident"
)

// DirectoryMediaType is the media type of a Web Bot Auth key directory
// (GET /api/v1/keys/{keyid}).
const DirectoryMediaType = "application/http-message-signatures-directory+json"

// AWNIDPrefix starts every awnId.
const AWNIDPrefix = "aw:sha256:"

// KeyID returns the keyid of pub: the RFC 7638 SHA-256 thumbprint of its
// RFC 8037 JWK, base64url without padding.
func KeyID(pub ed25519.PublicKey) string {
	// RFC 7638 §3.2: the required members only, in lexicographic order, no
	// whitespace. The base64url alphabet needs no JSON escaping.
	canon := `{"crv":"Ed25519","kty":"OKP","x":"` + base64.RawURLEncoding.EncodeToString(pub) + `"}`
	sum := sha256.Sum256([]byte(canon))
	return base64.RawURLEncoding.EncodeToString(sum[:])
}

// keyIDShape is every keyid KeyID returns: ^[A-Za-z0-9_-]{43}$, 43
// base64url characters (package ident: no regular expression compiled at a
// cold start; the tests hold it to that expression).
var keyIDShape = ident.KeyID

// ValidKeyID reports whether keyID has the shape of a keyid, so that a
// malformed one is answered without a store call (and never reaches the
// store as an oversized key).
func ValidKeyID(keyID string) bool { return keyIDShape.Match(keyID) }

// AWNID returns the awnId of pub: "aw:sha256:" and the lowercase hex SHA-256
// of the raw 32-byte key.
func AWNID(pub ed25519.PublicKey) string {
	sum := sha256.Sum256(pub)
	return AWNIDPrefix + hex.EncodeToString(sum[:])
}

// JWK is the public JWK of an Ed25519 key (RFC 8037) as a key directory
// serves it, with its keyid as "kid".
type JWK struct {
	Kty string `json:"kty"`
	Crv string `json:"crv"`
	X   string `json:"x"`
	Kid string `json:"kid"`
}

// PublicJWK returns the JWK of pub with kid = KeyID(pub).
func PublicJWK(pub ed25519.PublicKey) JWK {
	return JWK{Kty: "OKP", Crv: "Ed25519", X: base64.RawURLEncoding.EncodeToString(pub), Kid: KeyID(pub)}
}

// PublicKey decodes the JWK's key, refusing anything but an Ed25519 OKP key
// of 32 bytes that passes CheckPublicKey.
func (j JWK) PublicKey() (ed25519.PublicKey, error) {
	if j.Kty != "OKP" || j.Crv != "Ed25519" {
		return nil, errors.New("auth: JWK is not an Ed25519 key")
	}
	b, err := base64.RawURLEncoding.DecodeString(j.X)
	if err != nil || len(b) != ed25519.PublicKeySize {
		return nil, errors.New("auth: JWK x is not a base64url 32-byte key")
	}
	if err := CheckPublicKey(b); err != nil {
		return nil, err
	}
	return ed25519.PublicKey(b), nil
}

// Directory is a Web Bot Auth key directory document: {"keys": [...]},
// served as DirectoryMediaType.
type Directory struct {
	Keys []JWK `json:"keys"`
}

// NewDirectory returns the directory serving keys.
func NewDirectory(keys ...ed25519.PublicKey) Directory {
	d := Directory{Keys: make([]JWK, 0, len(keys))}
	for _, k := range keys {
		d.Keys = append(d.Keys, PublicJWK(k))
	}
	return d
}

// DecodePublicKey decodes the "public_key"/"publicKey" of a request body:
// standard base64 (padding required) of exactly 32 bytes that pass
// CheckPublicKey (the error wraps ErrUnsafeKey when they do not).
func DecodePublicKey(s string) (ed25519.PublicKey, error) {
	b, err := base64.StdEncoding.Strict().DecodeString(s)
	if err != nil {
		return nil, fmt.Errorf("auth: public key is not standard base64")
	}
	if len(b) != ed25519.PublicKeySize {
		return nil, fmt.Errorf("auth: public key is %d bytes, want %d", len(b), ed25519.PublicKeySize)
	}
	if err := CheckPublicKey(b); err != nil {
		return nil, err
	}
	return ed25519.PublicKey(b), nil
}
