package auth

import (
	"bytes"
	"crypto/ed25519"
	"crypto/rand"
	"crypto/sha256"
	"encoding/base64"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strings"
	"time"
)

// Constants of the AWN-Ed25519 profile (docs/registry.md).
const (
	// Tag is the tag of a Web Bot Auth signature.
	Tag = "web-bot-auth"
	// Alg is the only algorithm accepted.
	Alg = "ed25519"
	// DefaultLabel labels the signatures Signer makes.
	DefaultLabel = "sig1"
	// MaxValidity is the longest expires − created the verifier accepts.
	MaxValidity = 300 * time.Second
	// MaxCreatedSkew is how far in the future created may be.
	MaxCreatedSkew = 60 * time.Second
	// MinNonce and MaxNonce bound the nonce's length in characters.
	MinNonce, MaxNonce = 16, 256
)

// Signer signs outgoing requests with one Ed25519 key. It is safe for
// concurrent use.
type Signer struct {
	key      ed25519.PrivateKey
	keyID    string
	agent    string
	label    string
	now      func() time.Time
	nonce    func() (string, error)
	validity time.Duration
}

// SignerOption configures a Signer.
type SignerOption func(*Signer)

// WithSignatureAgent sends Signature-Agent: <label>="<agentURL>" (the key
// directory of the signing key) and covers that dictionary member as
// "signature-agent";key="<label>" (RFC 9421 §2.1.2). Verifier
// accepts that form and the whole-field "signature-agent"; a verifier
// without the key parameter (httpsig-go v1.2.0) cannot check the former.
func WithSignatureAgent(agentURL string) SignerOption {
	return func(s *Signer) { s.agent = agentURL }
}

// WithClock sets the signer's clock (created and expires).
func WithClock(now func() time.Time) SignerOption { return func(s *Signer) { s.now = now } }

// WithNonces sets the nonce source; the default is 32 random bytes,
// base64url (43 characters).
func WithNonces(nonce func() (string, error)) SignerOption {
	return func(s *Signer) { s.nonce = nonce }
}

// WithValidity sets expires − created; the default and maximum is
// MaxValidity.
func WithValidity(d time.Duration) SignerOption { return func(s *Signer) { s.validity = d } }

// WithLabel sets the signature label (default DefaultLabel).
func WithLabel(label string) SignerOption { return func(s *Signer) { s.label = label } }

// NewSigner returns a signer for key.
func NewSigner(key ed25519.PrivateKey, opts ...SignerOption) (*Signer, error) {
	if len(key) != ed25519.PrivateKeySize {
		return nil, errors.New("auth: signing key is not an Ed25519 private key")
	}
	s := &Signer{key: key, label: DefaultLabel, now: time.Now, nonce: RandomNonce, validity: MaxValidity}
	for _, o := range opts {
		o(s)
	}
	s.keyID = KeyID(key.Public().(ed25519.PublicKey))
	if s.validity <= 0 || s.validity > MaxValidity || s.validity%time.Second != 0 {
		return nil, fmt.Errorf("auth: validity %v is not whole seconds in (0, %v]", s.validity, MaxValidity)
	}
	if _, err := parseDict(s.label + "=1"); err != nil || strings.ContainsAny(s.label, "=,; ") {
		return nil, fmt.Errorf("auth: label %q is not a structured-field key", s.label)
	}
	if !printableASCII(s.agent) {
		return nil, errors.New("auth: Signature-Agent URL must be printable ASCII")
	}
	return s, nil
}

// KeyID returns the keyid of the signer's key.
func (s *Signer) KeyID() string { return s.keyID }

// RandomNonce returns 32 random bytes, base64url without padding.
func RandomNonce() (string, error) {
	var b [32]byte
	if _, err := rand.Read(b[:]); err != nil {
		return "", err
	}
	return base64.RawURLEncoding.EncodeToString(b[:]), nil
}

func printableASCII(s string) bool {
	for i := 0; i < len(s); i++ {
		if s[i] < 0x20 || s[i] > 0x7e {
			return false
		}
	}
	return true
}

// ContentDigest returns the Content-Digest value of body (RFC 9530,
// sha-256).
func ContentDigest(body []byte) string {
	sum := sha256.Sum256(body)
	return "sha-256=:" + base64.StdEncoding.EncodeToString(sum[:]) + ":"
}

// Headers returns the signature headers of a request: Content-Digest,
// Signature-Agent (when configured), Signature-Input and Signature. host is
// the Host the client addresses (u.Host when empty).
func (s *Signer) Headers(method string, u *url.URL, host string, body []byte) (http.Header, error) {
	if host == "" {
		host = u.Host
	}
	if method == "" {
		method = http.MethodGet
	}
	path := u.EscapedPath()
	if path == "" {
		path = "/"
	}
	h := http.Header{}
	h.Set("Content-Digest", ContentDigest(body))
	components := []item{str("@method"), str("@authority"), str("@path"), str("@query"), str("content-digest")}
	if s.agent != "" {
		agent := dict{{key: s.label, val: bare{kind: sfString, s: s.agent}}}
		h.Set("Signature-Agent", agent.serialize())
		components = append(components, item{val: bare{kind: sfString, s: "signature-agent"},
			params: params{{key: "key", val: bare{kind: sfString, s: s.label}}}})
	}
	nonce, err := s.nonce()
	if err != nil {
		return nil, fmt.Errorf("auth: nonce: %w", err)
	}
	if len(nonce) < MinNonce || len(nonce) > MaxNonce || !printableASCII(nonce) {
		return nil, errors.New("auth: nonce source returned an invalid nonce")
	}
	created := s.now().Unix()
	sig := member{key: s.label, inner: true, list: components, params: params{
		{"created", bare{kind: sfInteger, i: created}},
		{"expires", bare{kind: sfInteger, i: created + int64(s.validity/time.Second)}},
		{"nonce", bare{kind: sfString, s: nonce}},
		{"keyid", bare{kind: sfString, s: s.keyID}},
		{"alg", bare{kind: sfString, s: Alg}},
		{"tag", bare{kind: sfString, s: Tag}},
	}}
	base, err := signatureBase(sig, message{
		method:    method,
		authority: strings.ToLower(host),
		path:      path,
		query:     u.RawQuery,
		header: func(name string) (string, bool) {
			v := h.Values(name)
			return strings.Join(v, ", "), len(v) > 0
		},
	})
	if err != nil {
		return nil, fmt.Errorf("auth: signature base: %w", err)
	}
	h.Set("Signature-Input", dict{sig}.serialize())
	h.Set("Signature", dict{{key: s.label, val: bare{kind: sfBytes, b: ed25519.Sign(s.key, base)}}}.serialize())
	return h, nil
}

func str(s string) item { return item{val: bare{kind: sfString, s: s}} }

// Sign reads req's body (leaving it readable again) and sets the signature
// headers on req. The authority is req.Host, or req.URL.Host when empty —
// the Host header net/http sends.
func (s *Signer) Sign(req *http.Request) error {
	var body []byte
	if req.Body != nil && req.Body != http.NoBody {
		b, err := io.ReadAll(req.Body)
		closeErr := req.Body.Close()
		if err != nil {
			return fmt.Errorf("auth: reading body to sign: %w", err)
		}
		if closeErr != nil {
			return fmt.Errorf("auth: closing body to sign: %w", closeErr)
		}
		body = b
		req.Body = io.NopCloser(bytes.NewReader(b))
		req.GetBody = func() (io.ReadCloser, error) { return io.NopCloser(bytes.NewReader(b)), nil }
		req.ContentLength = int64(len(b))
	}
	h, err := s.Headers(req.Method, req.URL, req.Host, body)
	if err != nil {
		return err
	}
	for k, v := range h {
		req.Header[k] = v
	}
	return nil
}

// Transport is an http.RoundTripper that signs every request with Signer
// before Base (http.DefaultTransport when nil) sends it. Each attempt gets
// a fresh nonce, so a retried request is never a replay.
type Transport struct {
	Signer *Signer
	Base   http.RoundTripper
}

// RoundTrip signs a copy of req and sends it; req itself is not modified.
func (t *Transport) RoundTrip(req *http.Request) (*http.Response, error) {
	clone := req.Clone(req.Context())
	if err := t.Signer.Sign(clone); err != nil {
		if req.Body != nil {
			_ = req.Body.Close()
		}
		return nil, err
	}
	base := t.Base
	if base == nil {
		base = http.DefaultTransport
	}
	return base.RoundTrip(clone)
}
