package auth

import (
	"context"
	"crypto/ed25519"
	"crypto/sha256"
	"crypto/subtle"
	"errors"
	"net/http"
	"strings"
	"time"
)

// KeyLookup returns the public key of keyID, or an error wrapping
// ErrUnknownKey when it knows none. An error that is (or wraps) an *Error
// is returned as it is (a member lookup's NotJoined); any other is reported
// as Internal (or Unavailable when it wraps store.ErrUnavailable).
type KeyLookup func(ctx context.Context, keyID string) (ed25519.PublicKey, error)

// BodyKey is the lookup of the routes whose body carries the signing key
// (join, PUT /v0/worlds/{world}, registry POST): it returns pub whatever
// the keyid, and the verifier then requires keyid to be pub's thumbprint.
func BodyKey(pub ed25519.PublicKey) KeyLookup {
	return func(context.Context, string) (ed25519.PublicKey, error) {
		if CheckPublicKey(pub) != nil {
			return nil, ErrUnknownKey
		}
		return pub, nil
	}
}

// NonceGuard remembers (keyid, nonce) pairs until they expire. Claim fails
// with an Unauthorized *Error "nonce already used" when the pair is live.
type NonceGuard interface {
	Claim(ctx context.Context, keyID, nonce string, expires, now time.Time) error
}

// Verified describes a request whose signature passed every rule.
type Verified struct {
	KeyID     string
	AWNID     string
	PublicKey ed25519.PublicKey
	Label     string
	Nonce     string
	Created   time.Time
	Expires   time.Time
	// SignatureAgent is the Signature-Agent header as sent, if any.
	SignatureAgent string
}

// Verifier checks signed requests against the AWN-Ed25519 profile
// (docs/registry.md). It is safe for
// concurrent use.
type Verifier struct {
	nonces NonceGuard
	now    func() time.Time
}

// NewVerifier returns a verifier recording nonces in nonces; now is its
// clock (time.Now when nil).
func NewVerifier(nonces NonceGuard, now func() time.Time) *Verifier {
	if now == nil {
		now = time.Now
	}
	return &Verifier{nonces: nonces, now: now}
}

// requiredComponents are covered by every accepted signature, as plain
// identifiers.
var requiredComponents = []string{"@method", "@authority", "@path", "@query", "content-digest"}

// Request is a received request as the verifier reads it: Header returns
// a header's value as the client sent it (one string, commas and all), so
// whatever carried the request — net/http, the API Gateway event — only has
// to hand over its raw header values.
type Request struct {
	// Method is the request's method.
	Method string
	// Host is the authority to use when no Host header was sent.
	Host string
	// Path is the escaped path; empty means "/".
	Path string
	// Query is the raw query, without "?".
	Query string
	// Header returns a header's value as sent and whether it was sent;
	// names are matched case-insensitively.
	Header func(name string) (string, bool)
}

// HTTPRequest is r as the verifier reads it, its headers read from
// r.Header (several values joined with ","), which is how net/http
// received them. A request that came through the Lambda adapter, which
// splits values on commas, must use the raw values instead
// (access builds its Request with lambdahttp.RawHeader).
func HTTPRequest(r *http.Request) Request {
	return Request{Method: r.Method, Host: r.Host, Path: r.URL.EscapedPath(), Query: r.URL.RawQuery,
		Header: func(name string) (string, bool) {
			vals := r.Header.Values(name)
			if len(vals) == 0 {
				return "", false
			}
			return strings.Join(vals, ","), true
		}}
}

// Verify checks the web-bot-auth signature of r, a request net/http
// received (HTTPRequest); VerifyRequest does the work.
func (v *Verifier) Verify(ctx context.Context, r *http.Request, body []byte, keys KeyLookup) (*Verified, error) {
	return v.VerifyRequest(ctx, HTTPRequest(r), body, keys)
}

// VerifyRequest checks the request's web-bot-auth signature: body is the
// full request body, keys the lookup of the route. The nonce is claimed
// last, so a request failing any other rule leaves no trace. Every error
// is an *Error.
func (v *Verifier) VerifyRequest(ctx context.Context, r Request, body []byte, keys KeyLookup) (*Verified, error) {
	header := r.Header
	rawInput, ok := header("Signature-Input")
	if !ok || strings.TrimSpace(rawInput) == "" {
		return nil, unauthorized("missing Signature-Input header")
	}
	rawSig, ok := header("Signature")
	if !ok || strings.TrimSpace(rawSig) == "" {
		return nil, unauthorized("missing Signature header")
	}
	inputs, err := parseDict(rawInput)
	if err != nil {
		return nil, unauthorized("malformed Signature-Input header")
	}
	sigs, err := parseDict(rawSig)
	if err != nil {
		return nil, unauthorized("malformed Signature header")
	}

	sig, err := pickWebBotAuth(inputs)
	if err != nil {
		return nil, err
	}
	sigValue, ok := sigs.get(sig.key)
	if !ok || sigValue.inner || sigValue.val.kind != sfBytes {
		return nil, unauthorized("malformed Signature header")
	}
	if len(sigValue.val.b) != ed25519.SignatureSize {
		return nil, unauthorized("malformed Signature header")
	}

	// Covered components.
	covered := make(map[string]bool, len(sig.list))
	agentCovered := false
	for _, id := range sig.list {
		if id.val.kind != sfString {
			return nil, unauthorized("malformed Signature-Input header")
		}
		if len(id.params) == 0 {
			covered[id.val.s] = true
		}
		if id.val.s == "signature-agent" {
			agentCovered = true
		}
	}
	for _, c := range requiredComponents {
		if !covered[c] {
			return nil, unauthorized("signature does not cover " + c)
		}
	}
	agent, agentSent := header("Signature-Agent")
	if agentSent && !agentCovered {
		return nil, unauthorized("signature does not cover signature-agent")
	}

	// Parameters.
	created, err := intParam(sig.params, "created")
	if err != nil {
		return nil, err
	}
	expires, err := intParam(sig.params, "expires")
	if err != nil {
		return nil, err
	}
	nonce, err := strParam(sig.params, "nonce")
	if err != nil {
		return nil, err
	}
	if len(nonce) < MinNonce || len(nonce) > MaxNonce {
		return nil, unauthorized("nonce must be 16 to 256 characters")
	}
	keyID, err := strParam(sig.params, "keyid")
	if err != nil {
		return nil, err
	}
	if alg, ok := sig.params.get("alg"); ok && (alg.kind != sfString || alg.s != Alg) {
		return nil, unauthorized("alg must be ed25519")
	}

	// Time.
	now := v.now()
	switch {
	case created > now.Add(MaxCreatedSkew).Unix():
		return nil, unauthorized("signature created in the future")
	case expires < created:
		return nil, unauthorized("signature expires before it was created")
	case expires-created > int64(MaxValidity/time.Second):
		return nil, unauthorized("signature validity exceeds 300 seconds")
	case expires <= now.Unix():
		return nil, unauthorized("signature expired")
	}

	// Body.
	if err := checkDigest(header, body); err != nil {
		return nil, err
	}

	// Signature base.
	path := r.Path
	if path == "" {
		path = "/"
	}
	authority, ok := header("Host")
	if !ok || authority == "" {
		authority = r.Host
	}
	base, err := signatureBase(sig, message{
		method:    r.Method,
		authority: strings.ToLower(strings.TrimSpace(authority)),
		path:      path,
		query:     r.Query,
		header:    header,
	})
	if err != nil {
		var ce componentError
		if errors.As(err, &ce) {
			return nil, unauthorized(ce.Error())
		}
		return nil, unauthorized("malformed Signature-Input header")
	}

	// Key.
	pub, err := keys(ctx, keyID)
	if err != nil {
		if errors.Is(err, ErrUnknownKey) {
			return nil, unauthorized("unknown key")
		}
		var verdict *Error
		if errors.As(err, &verdict) {
			// The lookup's own verdict (a world's NotJoined, a busy
			// store's Unavailable) stands as it is.
			return nil, err
		}
		return nil, storeError("key lookup failed", err)
	}
	if len(pub) != ed25519.PublicKeySize {
		return nil, unauthorized("unknown key")
	}
	if CheckPublicKey(pub) != nil {
		// A key stored before the check, or a lookup that skipped it.
		return nil, unauthorized("unsafe key: a small-order or non-canonical Ed25519 key")
	}
	if subtle.ConstantTimeCompare([]byte(KeyID(pub)), []byte(keyID)) != 1 {
		return nil, unauthorized("keyid does not match the key")
	}
	if !VerifySignature(pub, base, sigValue.val.b) {
		return nil, unauthorized("signature does not verify")
	}

	// Single use.
	exp := time.Unix(expires, 0)
	if err := v.nonces.Claim(ctx, keyID, nonce, exp, now); err != nil {
		return nil, err
	}
	return &Verified{
		KeyID:          keyID,
		AWNID:          AWNID(pub),
		PublicKey:      pub,
		Label:          sig.key,
		Nonce:          nonce,
		Created:        time.Unix(created, 0),
		Expires:        exp,
		SignatureAgent: agent,
	}, nil
}

// pickWebBotAuth returns the first Signature-Input member tagged
// web-bot-auth, whatever its label.
func pickWebBotAuth(inputs dict) (member, error) {
	for _, m := range inputs {
		if !m.inner {
			return member{}, unauthorized("malformed Signature-Input header")
		}
	}
	for _, m := range inputs {
		if t, ok := m.params.get("tag"); ok && t.kind == sfString && t.s == Tag {
			return m, nil
		}
	}
	return member{}, unauthorized("no signature has tag web-bot-auth")
}

func intParam(ps params, name string) (int64, error) {
	v, ok := ps.get(name)
	if !ok {
		return 0, unauthorized("missing " + name + " parameter")
	}
	if v.kind != sfInteger {
		return 0, unauthorized(name + " parameter is not an integer")
	}
	return v.i, nil
}

func strParam(ps params, name string) (string, error) {
	v, ok := ps.get(name)
	if !ok {
		return "", unauthorized("missing " + name + " parameter")
	}
	if v.kind != sfString {
		return "", unauthorized(name + " parameter is not a string")
	}
	return v.s, nil
}

// checkDigest requires Content-Digest's sha-256 to be the body's.
func checkDigest(header func(string) (string, bool), body []byte) error {
	raw, ok := header("Content-Digest")
	if !ok || strings.TrimSpace(raw) == "" {
		return unauthorized("missing Content-Digest header")
	}
	d, err := parseDict(raw)
	if err != nil {
		return unauthorized("malformed Content-Digest header")
	}
	m, ok := d.get("sha-256")
	if !ok {
		return unauthorized("content-digest has no sha-256 value")
	}
	if m.inner || m.val.kind != sfBytes {
		return unauthorized("malformed Content-Digest header")
	}
	sum := sha256.Sum256(body)
	if subtle.ConstantTimeCompare(sum[:], m.val.b) != 1 {
		return unauthorized("content-digest does not match the body")
	}
	return nil
}
