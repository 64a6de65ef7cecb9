package auth

import (
	"context"
	"crypto/ed25519"
	"net/http"
	"strings"
	"testing"
	"time"
)

// acceptAll is a NonceGuard that remembers nothing, to time the checks
// without a store.
type acceptAll struct{}

func (acceptAll) Claim(context.Context, string, string, time.Time, time.Time) error { return nil }

// benchRequests signs n distinct requests (distinct nonces).
func benchRequests(b *testing.B, n int) (ed25519.PrivateKey, []*http.Request) {
	key := testKey(1)
	s := newTestSigner(b, key, WithSignatureAgent("https://net.example/api/v1/keys/"+KeyID(keyOf(key))))
	reqs := make([]*http.Request, n)
	for i := range reqs {
		reqs[i] = signedRequest(b, s, "POST", url1, body1)
	}
	return key, reqs
}

// BenchmarkVerify is the whole verifier: parse, rules, digest, base,
// Ed25519, and the nonce claimed in the memory store.
func BenchmarkVerify(b *testing.B) {
	key, reqs := benchRequests(b, b.N)
	v := newMemVerifier(b, t0)
	keys := BodyKey(keyOf(key))
	body := []byte(body1)
	b.ReportAllocs()
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		if _, err := v.Verify(context.Background(), reqs[i], body, keys); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkVerifyNoStore is the verifier without the nonce write.
func BenchmarkVerifyNoStore(b *testing.B) {
	key, reqs := benchRequests(b, 1)
	v := NewVerifier(acceptAll{}, func() time.Time { return t0 })
	keys := BodyKey(keyOf(key))
	body := []byte(body1)
	b.ReportAllocs()
	for b.Loop() {
		if _, err := v.Verify(context.Background(), reqs[0], body, keys); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkEd25519Verify is the bare signature check over the same base:
// the floor the verifier's overhead is measured against.
func BenchmarkEd25519Verify(b *testing.B) {
	key, reqs := benchRequests(b, 1)
	r := reqs[0]
	d, err := parseDict(r.Header.Get("Signature-Input"))
	if err != nil {
		b.Fatal(err)
	}
	base, err := signatureBase(d[0], message{method: r.Method, authority: r.Host, path: r.URL.EscapedPath(), query: r.URL.RawQuery,
		header: func(n string) (string, bool) { v := r.Header.Values(n); return strings.Join(v, ","), len(v) > 0 }})
	if err != nil {
		b.Fatal(err)
	}
	sd, _ := parseDict(r.Header.Get("Signature"))
	sig, pub := sd[0].val.b, keyOf(key)
	if !ed25519.Verify(pub, base, sig) {
		b.Fatal("base does not verify")
	}
	b.ReportAllocs()
	for b.Loop() {
		if !ed25519.Verify(pub, base, sig) {
			b.Fatal("no")
		}
	}
}
