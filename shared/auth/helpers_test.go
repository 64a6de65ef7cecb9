package auth

import (
	"bytes"
	"context"
	"crypto/ed25519"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/a2awire/a2awire/shared/store/memory"
)

// t0 is the fixed clock of the tests (2026-01-01T00:00:00Z).
var t0 = time.Unix(1767225600, 0)

func testKey(seed byte) ed25519.PrivateKey {
	return ed25519.NewKeyFromSeed(bytes.Repeat([]byte{seed}, ed25519.SeedSize))
}

// counterNonces returns distinct valid nonces.
func counterNonces() func() (string, error) {
	var n atomic.Int64
	return func() (string, error) { return fmt.Sprintf("nonce-%016d", n.Add(1)), nil }
}

func newTestSigner(t testing.TB, key ed25519.PrivateKey, opts ...SignerOption) *Signer {
	t.Helper()
	opts = append([]SignerOption{WithClock(func() time.Time { return t0 }), WithNonces(counterNonces())}, opts...)
	s, err := NewSigner(key, opts...)
	if err != nil {
		t.Fatal(err)
	}
	return s
}

func newMemVerifier(t testing.TB, now time.Time) *Verifier {
	t.Helper()
	s := memory.New()
	t.Cleanup(func() { _ = s.Close() })
	return NewVerifier(NewNonces(s), func() time.Time { return now })
}

// signedRequest signs method url body with s and returns the request as a
// plain net/http server receives it.
func signedRequest(t testing.TB, s *Signer, method, url, body string) *http.Request {
	t.Helper()
	out, err := http.NewRequest(method, url, strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	if err := s.Sign(out); err != nil {
		t.Fatal(err)
	}
	in := httptest.NewRequest(method, url, strings.NewReader(body))
	for k, v := range out.Header {
		in.Header[k] = v
	}
	return in
}

// resign replaces the request's signature with one made by key over the
// Signature-Input given, so a test can state any parameters and still have
// a valid signature (the rule under test is then the only one broken).
func resign(t testing.TB, r *http.Request, key ed25519.PrivateKey, input string) {
	t.Helper()
	r.Header.Set("Signature-Input", input)
	d, err := parseDict(input)
	if err != nil {
		t.Fatalf("test input %q: %v", input, err)
	}
	var sigs dict
	for _, m := range d {
		base, err := signatureBase(m, message{
			method: r.Method, authority: strings.ToLower(r.Host), path: r.URL.EscapedPath(), query: r.URL.RawQuery,
			header: func(n string) (string, bool) { v := r.Header.Values(n); return strings.Join(v, ","), len(v) > 0 },
		})
		if err != nil {
			t.Fatalf("test input %q: %v", input, err)
		}
		sigs = append(sigs, member{key: m.key, val: bare{kind: sfBytes, b: ed25519.Sign(key, base)}})
	}
	r.Header.Set("Signature", sigs.serialize())
}

func readBody(t testing.TB, r *http.Request) []byte {
	t.Helper()
	var b bytes.Buffer
	if _, err := b.ReadFrom(r.Body); err != nil {
		t.Fatal(err)
	}
	return b.Bytes()
}

func keyOf(k ed25519.PrivateKey) ed25519.PublicKey { return k.Public().(ed25519.PublicKey) }

// staticKeys knows exactly the given keys.
func staticKeys(keys ...ed25519.PublicKey) KeyLookup {
	return func(_ context.Context, id string) (ed25519.PublicKey, error) {
		for _, k := range keys {
			if KeyID(k) == id {
				return k, nil
			}
		}
		return nil, ErrUnknownKey
	}
}
