package signature_test

import (
	"crypto/ed25519"
	"encoding/base64"
	"errors"
	"net/http"
	"strings"
	"testing"
	"time"

	standardwebhooks "github.com/standard-webhooks/standard-webhooks/libraries/go"

	"github.com/a2awire/a2awire/shared/apierror"
	"github.com/a2awire/a2awire/shared/webhook/signature"
)

func networkKey(seed byte) ed25519.PrivateKey {
	return ed25519.NewKeyFromSeed([]byte(strings.Repeat(string(rune('a'+seed)), ed25519.SeedSize)))
}

func TestNewSecretShape(t *testing.T) {
	s, err := signature.NewSecret()
	if err != nil {
		t.Fatal(err)
	}
	if !strings.HasPrefix(s, "whsec_") {
		t.Fatalf("secret %q has no whsec_ prefix", s)
	}
	raw, err := base64.StdEncoding.DecodeString(strings.TrimPrefix(s, "whsec_"))
	if err != nil || len(raw) != 32 {
		t.Fatalf("secret is not base64 of 32 bytes: %d %v", len(raw), err)
	}
	key, err := signature.ParseSecret(s)
	if err != nil || string(key) != string(raw) {
		t.Fatalf("ParseSecret: %x %v", key, err)
	}
	if s2, _ := signature.NewSecret(); s2 == s {
		t.Fatal("two secrets are equal")
	}
}

func TestParseSecretRefuses(t *testing.T) {
	for _, s := range []string{
		"",
		base64.StdEncoding.EncodeToString(make([]byte, 32)), // no prefix
		"whsec_not base64!", // not base64
		"whsec_" + base64.StdEncoding.EncodeToString(make([]byte, 8)), // too short
		"whsec_" + base64.StdEncoding.EncodeToString(make([]byte, 65)),
	} {
		if _, err := signature.ParseSecret(s); err == nil {
			t.Errorf("ParseSecret(%q) accepted", s)
		}
	}
}

// TestOfficialLibraryVerifies: the Standard Webhooks Go library verifies
// what Sign made with the secret, and its own v1 equals ours byte for byte.
func TestOfficialLibraryVerifies(t *testing.T) {
	secret, _ := signature.NewSecret()
	body := []byte(`{"worldId":"lobby","eventId":"01JZ0000000000000000000000","event":"agent.joined","payload":{"slot":1},"timestamp":"2026-12-01T12:00:00Z"}`)
	now := time.Now()
	h, err := signature.Headers("01JZ0000000000000000000000", now, body, secret, networkKey(1))
	if err != nil {
		t.Fatal(err)
	}
	wh, err := standardwebhooks.NewWebhook(secret)
	if err != nil {
		t.Fatal(err)
	}
	if err := wh.Verify(body, h); err != nil {
		t.Fatalf("official library refused our delivery: %v (headers %v)", err, h)
	}
	want, _ := wh.Sign("01JZ0000000000000000000000", now, body)
	if first := strings.Fields(h.Get("webhook-signature"))[0]; first != want {
		t.Errorf("v1 %q, official library signs %q", first, want)
	}
	// and refuses a tampered body, so the check above can fail.
	if err := wh.Verify(append([]byte(" "), body...), h); err == nil {
		t.Error("official library accepted a tampered body")
	}
	other, _ := signature.NewSecret()
	wo, _ := standardwebhooks.NewWebhook(other)
	if err := wo.Verify(body, h); err == nil {
		t.Error("official library accepted another secret")
	}
}

func TestSignHeaderForm(t *testing.T) {
	secret, _ := signature.NewSecret()
	ts := time.Unix(1767225600, 999)
	sig, err := signature.Sign("msg_1", ts, []byte("{}"), secret, nil)
	if err != nil {
		t.Fatal(err)
	}
	if !strings.HasPrefix(sig, "v1,") || strings.Contains(sig, " ") {
		t.Fatalf("without a network key want v1 only, got %q", sig)
	}
	sig, _ = signature.Sign("msg_1", ts, []byte("{}"), secret, networkKey(2))
	parts := strings.Fields(sig)
	if len(parts) != 2 || !strings.HasPrefix(parts[0], "v1,") || !strings.HasPrefix(parts[1], "v1a,") {
		t.Fatalf("want v1 and v1a, got %q", sig)
	}
	raw, err := base64.StdEncoding.DecodeString(strings.TrimPrefix(parts[1], "v1a,"))
	if err != nil || len(raw) != ed25519.SignatureSize {
		t.Fatalf("v1a is not base64 of an Ed25519 signature: %v", err)
	}
	if !ed25519.Verify(networkKey(2).Public().(ed25519.PublicKey), []byte("msg_1.1767225600.{}"), raw) {
		t.Error("v1a does not sign id.ts.body")
	}
	for _, id := range []string{"", "a.b", "a b"} {
		if _, err := signature.Sign(id, ts, nil, secret, nil); err == nil {
			t.Errorf("Sign accepted id %q", id)
		}
	}
	if _, err := signature.Sign("x", ts, nil, "whsec_bad", nil); err == nil {
		t.Error("Sign accepted a bad secret")
	}
}

func TestVerify(t *testing.T) {
	secret, _ := signature.NewSecret()
	key := networkKey(3)
	pub := key.Public().(ed25519.PublicKey)
	body := []byte(`{"a":1}`)
	now := time.Unix(1767225600, 0)
	h, err := signature.Headers("evt_1", now, body, secret, key)
	if err != nil {
		t.Fatal(err)
	}
	if err := signature.VerifyV1At(h, body, secret, 0, now.Add(time.Minute)); err != nil {
		t.Fatalf("v1: %v", err)
	}
	if err := signature.VerifyV1aAt(h, body, pub, 0, now.Add(-time.Minute)); err != nil {
		t.Fatalf("v1a: %v", err)
	}
	otherSecret, _ := signature.NewSecret()
	clone := func(f func(http.Header)) http.Header { c := h.Clone(); f(c); return c }
	cases := []struct {
		name string
		err  error
		got  error
	}{
		{"tampered body v1", signature.ErrNoMatch, signature.VerifyV1At(h, []byte(`{"a":2}`), secret, 0, now)},
		{"tampered body v1a", signature.ErrNoMatch, signature.VerifyV1aAt(h, []byte(`{"a":2}`), pub, 0, now)},
		{"other secret", signature.ErrNoMatch, signature.VerifyV1At(h, body, otherSecret, 0, now)},
		{"other key", signature.ErrNoMatch, signature.VerifyV1aAt(h, body, networkKey(4).Public().(ed25519.PublicKey), 0, now)},
		{"other id", signature.ErrNoMatch, signature.VerifyV1At(clone(func(c http.Header) { c.Set("webhook-id", "evt_2") }), body, secret, 0, now)},
		{"too old", signature.ErrTooOld, signature.VerifyV1At(h, body, secret, 0, now.Add(5*time.Minute+time.Second))},
		{"too new", signature.ErrTooNew, signature.VerifyV1aAt(h, body, pub, 0, now.Add(-5*time.Minute-time.Second))},
		{"tolerance given", signature.ErrTooOld, signature.VerifyV1At(h, body, secret, 10*time.Second, now.Add(11*time.Second))},
		{"missing id", signature.ErrMissingHeaders, signature.VerifyV1At(clone(func(c http.Header) { c.Del("webhook-id") }), body, secret, 0, now)},
		{"bad timestamp", signature.ErrBadTimestamp, signature.VerifyV1At(clone(func(c http.Header) { c.Set("webhook-timestamp", "12x") }), body, secret, 0, now)},
		// A v1a-only header must not satisfy v1, nor v1 satisfy v1a.
		{"v1a only for v1", signature.ErrNoMatch, signature.VerifyV1At(clone(func(c http.Header) {
			c.Set("webhook-signature", strings.Fields(h.Get("webhook-signature"))[1])
		}), body, secret, 0, now)},
		{"v1 only for v1a", signature.ErrNoMatch, signature.VerifyV1aAt(clone(func(c http.Header) {
			c.Set("webhook-signature", strings.Fields(h.Get("webhook-signature"))[0])
		}), body, pub, 0, now)},
	}
	for _, c := range cases {
		if !errors.Is(c.got, c.err) {
			t.Errorf("%s: got %v, want %v", c.name, c.got, c.err)
			continue
		}
		if apierror.KindOf(c.got) != apierror.Unauthorized {
			t.Errorf("%s: kind %v", c.name, apierror.KindOf(c.got))
		}
	}
	// Several signatures (a rotated secret): any v1 that matches is enough.
	multi := h.Clone()
	multi.Set("webhook-signature", "v1,AAAA v1,notbase64! "+h.Get("webhook-signature"))
	if err := signature.VerifyV1At(multi, body, secret, 0, now); err != nil {
		t.Errorf("one good v1 among several: %v", err)
	}
}
