package auth

import (
	"context"
	"crypto/ed25519"
	"errors"
	"fmt"
	"net/http"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/a2awire/a2awire/shared/store"
)

const (
	url1  = "https://api.example.com/api/v1/agents?x=1,2&y=a%20b"
	body1 = `{"name":"alpha","capabilities":["a","b"]}`
	comps = `("@method" "@authority" "@path" "@query" "content-digest")`
)

// good is a valid parameter list for key, in the profile's order.
func good(key string) string {
	return fmt.Sprintf(`;created=%d;expires=%d;nonce="0123456789abcdef";keyid="%s";alg="ed25519";tag="web-bot-auth"`,
		t0.Unix(), t0.Unix()+300, key)
}

func TestVerifyAcceptsOwnSignature(t *testing.T) {
	key := testKey(1)
	for _, agent := range []string{"", "https://net.example/api/v1/keys/" + KeyID(keyOf(key))} {
		s := newTestSigner(t, key, WithSignatureAgent(agent))
		for _, method := range []string{"GET", "POST", "PUT"} {
			for _, u := range []string{url1, "https://API.example.com", "http://127.0.0.1:8080/v0/worlds/w%2F1/join"} {
				body := body1
				if method == "GET" {
					body = ""
				}
				r := signedRequest(t, s, method, u, body)
				v := newMemVerifier(t, t0.Add(10*time.Second))
				got, err := v.Verify(context.Background(), r, readBody(t, r), staticKeys(keyOf(key)))
				if err != nil {
					t.Fatalf("%s %s agent=%q: %v\nSignature-Input: %s", method, u, agent, err, r.Header.Get("Signature-Input"))
				}
				if got.KeyID != KeyID(keyOf(key)) || got.AWNID != AWNID(keyOf(key)) || got.Label != "sig1" ||
					!got.Created.Equal(t0) || !got.Expires.Equal(t0.Add(300*time.Second)) || got.SignatureAgent != r.Header.Get("Signature-Agent") {
					t.Fatalf("verified %+v", got)
				}
			}
		}
	}
}

func TestSignerHeaders(t *testing.T) {
	key := testKey(1)
	kid := KeyID(keyOf(key))
	s := newTestSigner(t, key, WithSignatureAgent("https://net.example/api/v1/keys/"+kid))
	r := signedRequest(t, s, "POST", url1, "")
	if got, want := r.Header.Get("Content-Digest"), "sha-256=:47DEQpj8HBSa+/TImW+5JCeuQeRkm5NMpJWZG3hSuFU=:"; got != want {
		t.Errorf("Content-Digest of empty body = %s, want %s", got, want)
	}
	want := `sig1=("@method" "@authority" "@path" "@query" "content-digest" "signature-agent";key="sig1");created=1767225600;expires=1767225900;nonce="nonce-0000000000000001";keyid="` + kid + `";alg="ed25519";tag="web-bot-auth"`
	if got := r.Header.Get("Signature-Input"); got != want {
		t.Errorf("Signature-Input\n%s\nwant\n%s", got, want)
	}
	if got := r.Header.Get("Signature-Agent"); got != `sig1="https://net.example/api/v1/keys/`+kid+`"` {
		t.Errorf("Signature-Agent %s", got)
	}
	if _, err := NewSigner(key, WithValidity(301*time.Second)); err == nil {
		t.Error("validity over 300 s accepted")
	}
	if _, err := NewSigner(key, WithLabel("a,b")); err == nil {
		t.Error("label a,b accepted")
	}
	if _, err := NewSigner(key[:10]); err == nil {
		t.Error("short key accepted")
	}
	n, err := RandomNonce()
	if err != nil || len(n) != 43 {
		t.Errorf("RandomNonce %q %v", n, err)
	}
}

func TestVerifyRejections(t *testing.T) {
	key, other := testKey(1), testKey(2)
	kid := KeyID(keyOf(key))
	type tc struct {
		name   string
		mutate func(t testing.TB, r *http.Request) // on a request signed at t0 with a valid signature
		now    time.Time                           // zero: t0
		keys   KeyLookup                           // nil: the signing key
		body   string                              // "": the signed body
		want   string
	}
	re := func(input string) func(testing.TB, *http.Request) {
		return func(t testing.TB, r *http.Request) { resign(t, r, key, input) }
	}
	cases := []tc{
		{name: "no Signature-Input", mutate: func(t testing.TB, r *http.Request) { r.Header.Del("Signature-Input") }, want: "missing Signature-Input header"},
		{name: "empty Signature-Input", mutate: func(t testing.TB, r *http.Request) { r.Header.Set("Signature-Input", " ") }, want: "missing Signature-Input header"},
		{name: "no Signature", mutate: func(t testing.TB, r *http.Request) { r.Header.Del("Signature") }, want: "missing Signature header"},
		{name: "malformed Signature-Input", mutate: func(t testing.TB, r *http.Request) { r.Header.Set("Signature-Input", `sig1=("@method"`) }, want: "malformed Signature-Input header"},
		{name: "Signature-Input not an inner list", mutate: func(t testing.TB, r *http.Request) { r.Header.Set("Signature-Input", `sig1="x";tag="web-bot-auth"`) }, want: "malformed Signature-Input header"},
		{name: "malformed Signature", mutate: func(t testing.TB, r *http.Request) { r.Header.Set("Signature", `sig1=:not base64!:`) }, want: "malformed Signature header"},
		{name: "Signature under another label", mutate: func(t testing.TB, r *http.Request) {
			r.Header.Set("Signature", strings.Replace(r.Header.Get("Signature"), "sig1=", "sig2=", 1))
		}, want: "malformed Signature header"},
		{name: "Signature not bytes", mutate: func(t testing.TB, r *http.Request) { r.Header.Set("Signature", `sig1="abc"`) }, want: "malformed Signature header"},
		{name: "Signature short", mutate: func(t testing.TB, r *http.Request) { r.Header.Set("Signature", `sig1=:AAAA:`) }, want: "malformed Signature header"},
		{name: "no Content-Digest", mutate: func(t testing.TB, r *http.Request) { r.Header.Del("Content-Digest") }, want: "missing Content-Digest header"},
		{name: "malformed Content-Digest", mutate: func(t testing.TB, r *http.Request) { r.Header.Set("Content-Digest", "sha-256=abc def") }, want: "malformed Content-Digest header"},
		{name: "Content-Digest without sha-256", mutate: func(t testing.TB, r *http.Request) {
			r.Header.Set("Content-Digest", "sha-512=:AAAA:")
			resign(t, r, key, "sig1="+comps+good(kid))
		}, want: "content-digest has no sha-256 value"},
		{name: "wrong digest", body: `{"name":"mallory"}`, want: "content-digest does not match the body"},
		{name: "created in the future", now: t0.Add(-61 * time.Second), want: "signature created in the future"},
		{name: "expired", now: t0.Add(300 * time.Second), want: "signature expired"},
		{name: "window over 300 s", mutate: re(fmt.Sprintf(`sig1=%s;created=%d;expires=%d;nonce="0123456789abcdef";keyid="%s";tag="web-bot-auth"`, comps, t0.Unix(), t0.Unix()+301, kid)), want: "signature validity exceeds 300 seconds"},
		{name: "expires before created", mutate: re(fmt.Sprintf(`sig1=%s;created=%d;expires=%d;nonce="0123456789abcdef";keyid="%s";tag="web-bot-auth"`, comps, t0.Unix(), t0.Unix()-1, kid)), want: "signature expires before it was created"},
		{name: "missing created", mutate: re(fmt.Sprintf(`sig1=%s;expires=%d;nonce="0123456789abcdef";keyid="%s";tag="web-bot-auth"`, comps, t0.Unix()+60, kid)), want: "missing created parameter"},
		{name: "created not integer", mutate: re(fmt.Sprintf(`sig1=%s;created="%d";expires=%d;nonce="0123456789abcdef";keyid="%s";tag="web-bot-auth"`, comps, t0.Unix(), t0.Unix()+60, kid)), want: "created parameter is not an integer"},
		{name: "missing expires", mutate: re(fmt.Sprintf(`sig1=%s;created=%d;nonce="0123456789abcdef";keyid="%s";tag="web-bot-auth"`, comps, t0.Unix(), kid)), want: "missing expires parameter"},
		{name: "missing nonce", mutate: re(fmt.Sprintf(`sig1=%s;created=%d;expires=%d;keyid="%s";tag="web-bot-auth"`, comps, t0.Unix(), t0.Unix()+60, kid)), want: "missing nonce parameter"},
		{name: "nonce 15 chars", mutate: re(fmt.Sprintf(`sig1=%s;created=%d;expires=%d;nonce="%s";keyid="%s";tag="web-bot-auth"`, comps, t0.Unix(), t0.Unix()+60, strings.Repeat("n", 15), kid)), want: "nonce must be 16 to 256 characters"},
		{name: "nonce 257 chars", mutate: re(fmt.Sprintf(`sig1=%s;created=%d;expires=%d;nonce="%s";keyid="%s";tag="web-bot-auth"`, comps, t0.Unix(), t0.Unix()+60, strings.Repeat("n", 257), kid)), want: "nonce must be 16 to 256 characters"},
		{name: "nonce a token", mutate: re(fmt.Sprintf(`sig1=%s;created=%d;expires=%d;nonce=abcdefghijklmnopq;keyid="%s";tag="web-bot-auth"`, comps, t0.Unix(), t0.Unix()+60, kid)), want: "nonce parameter is not a string"},
		{name: "missing keyid", mutate: re(fmt.Sprintf(`sig1=%s;created=%d;expires=%d;nonce="0123456789abcdef";tag="web-bot-auth"`, comps, t0.Unix(), t0.Unix()+60)), want: "missing keyid parameter"},
		{name: "wrong alg", mutate: re(fmt.Sprintf(`sig1=%s;created=%d;expires=%d;nonce="0123456789abcdef";keyid="%s";alg="rsa-pss-sha512";tag="web-bot-auth"`, comps, t0.Unix(), t0.Unix()+60, kid)), want: "alg must be ed25519"},
		{name: "wrong tag", mutate: re(fmt.Sprintf(`sig1=%s;created=%d;expires=%d;nonce="0123456789abcdef";keyid="%s";tag="web-bot-auth-x"`, comps, t0.Unix(), t0.Unix()+60, kid)), want: "no signature has tag web-bot-auth"},
		{name: "no tag", mutate: re(fmt.Sprintf(`sig1=%s;created=%d;expires=%d;nonce="0123456789abcdef";keyid="%s"`, comps, t0.Unix(), t0.Unix()+60, kid)), want: "no signature has tag web-bot-auth"},
		{name: "@method not covered", mutate: re(`sig1=("@authority" "@path" "@query" "content-digest")` + good(kid)), want: "signature does not cover @method"},
		{name: "@authority not covered", mutate: re(`sig1=("@method" "@path" "@query" "content-digest")` + good(kid)), want: "signature does not cover @authority"},
		{name: "@path not covered", mutate: re(`sig1=("@method" "@authority" "@query" "content-digest")` + good(kid)), want: "signature does not cover @path"},
		{name: "@query not covered", mutate: re(`sig1=("@method" "@authority" "@path" "content-digest")` + good(kid)), want: "signature does not cover @query"},
		{name: "content-digest not covered", mutate: re(`sig1=("@method" "@authority" "@path" "@query")` + good(kid)), want: "signature does not cover content-digest"},
		{name: "signature-agent not covered", mutate: func(t testing.TB, r *http.Request) {
			r.Header.Set("Signature-Agent", `sig1="https://evil.example/keys"`)
		}, want: "signature does not cover signature-agent"},
		{name: "covered header missing", mutate: func(t testing.TB, r *http.Request) {
			r.Header.Set("Signature-Input", `sig1=("@method" "@authority" "@path" "@query" "content-digest" "x-extra")`+good(kid))
		}, want: "covered header x-extra is missing"},
		{name: "unsupported derived component", mutate: func(t testing.TB, r *http.Request) {
			r.Header.Set("Signature-Input", `sig1=("@method" "@authority" "@path" "@query" "content-digest" "@scheme")`+good(kid))
		}, want: "unsupported component @scheme"},
		{name: "component covered twice", mutate: func(t testing.TB, r *http.Request) {
			r.Header.Set("Signature-Input", `sig1=("@method" "@authority" "@path" "@query" "content-digest" "@path")`+good(kid))
		}, want: `component "@path" covered twice`},
		{name: "unknown key", keys: staticKeys(keyOf(other)), want: "unknown key"},
		{name: "keyid not matching the body key", keys: BodyKey(keyOf(other)), want: "keyid does not match the key"},
		{name: "bad signature", mutate: func(t testing.TB, r *http.Request) {
			d, _ := parseDict(r.Header.Get("Signature"))
			d[0].val.b[5] ^= 1
			r.Header.Set("Signature", d.serialize())
		}, want: "signature does not verify"},
		{name: "signed by another key", mutate: func(t testing.TB, r *http.Request) {
			resign(t, r, other, "sig1="+comps+good(kid))
		}, want: "signature does not verify"},
		{name: "path changed", mutate: func(t testing.TB, r *http.Request) { r.URL.Path = "/api/v1/agents/other" }, want: "signature does not verify"},
		{name: "query changed", mutate: func(t testing.TB, r *http.Request) { r.URL.RawQuery = "x=2" }, want: "signature does not verify"},
		{name: "method changed", mutate: func(t testing.TB, r *http.Request) { r.Method = "PUT" }, want: "signature does not verify"},
		{name: "host changed", mutate: func(t testing.TB, r *http.Request) { r.Host = "other.example.com" }, want: "signature does not verify"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			r := signedRequest(t, newTestSigner(t, key), "POST", url1, body1)
			if c.mutate != nil {
				c.mutate(t, r)
			}
			now := c.now
			if now.IsZero() {
				now = t0
			}
			keys := c.keys
			if keys == nil {
				keys = BodyKey(keyOf(key))
			}
			body := body1
			if c.body != "" {
				body = c.body
			}
			_, err := newMemVerifier(t, now).Verify(context.Background(), r, []byte(body), keys)
			var ae *Error
			if !errors.As(err, &ae) {
				t.Fatalf("err = %v, want *Error %q", err, c.want)
			}
			if ae.Kind != Unauthorized || ae.Message != c.want || ae.Err != nil {
				t.Fatalf("got %v %q (%v), want unauthorized %q", ae.Kind, ae.Message, ae.Err, c.want)
			}
		})
	}
}

func TestVerifyBoundaries(t *testing.T) {
	key := testKey(1)
	kid := KeyID(keyOf(key))
	ok := []struct {
		name  string
		input string
		now   time.Time
	}{
		{"created exactly 60 s ahead", "sig1=" + comps + good(kid), t0.Add(-60 * time.Second)},
		{"one second before expiry", "sig1=" + comps + good(kid), t0.Add(299 * time.Second)},
		{"nonce of 16", "sig1=" + comps + good(kid), t0},
		{"nonce of 256", fmt.Sprintf(`sig1=%s;created=%d;expires=%d;nonce="%s";keyid="%s";tag="web-bot-auth"`, comps, t0.Unix(), t0.Unix()+300, strings.Repeat("n", 256), kid), t0},
		{"no alg", fmt.Sprintf(`sig1=%s;created=%d;expires=%d;nonce="0123456789abcdef";keyid="%s";tag="web-bot-auth"`, comps, t0.Unix(), t0.Unix()+300, kid), t0},
		{"any parameter order", fmt.Sprintf(`sig1=%s;tag="web-bot-auth";keyid="%s";nonce="0123456789abcdef";alg="ed25519";expires=%d;created=%d;extra=?1`, comps, kid, t0.Unix()+300, t0.Unix()), t0},
		{"any component order, plus extras", `sig1=("content-digest" "@query" "content-type" "@path" "@request-target" "@authority" "@method")` + good(kid), t0},
		{"label a", "a=" + comps + good(kid), t0},
		{"label web-bot-auth-2.x*", "web-bot-auth-2.x*=" + comps + good(kid), t0},
		{"label *x", "*x=" + comps + good(kid), t0},
		{"second signature of several", "other=(\"@method\");created=1;tag=\"x\", wba=" + comps + good(kid), t0},
		{"whitespace variants", "  wba=( \"@method\"  \"@authority\" \"@path\" \"@query\" \"content-digest\" )" + good(kid) + "  ", t0},
	}
	for _, c := range ok {
		t.Run(c.name, func(t *testing.T) {
			r := signedRequest(t, newTestSigner(t, key), "POST", url1, body1)
			r.Header.Set("Content-Type", "application/json")
			resign(t, r, key, c.input)
			if _, err := newMemVerifier(t, c.now).Verify(context.Background(), r, []byte(body1), BodyKey(keyOf(key))); err != nil {
				t.Fatalf("%s: %v", c.input, err)
			}
		})
	}
	t.Run("plain signature-agent covered", func(t *testing.T) {
		r := signedRequest(t, newTestSigner(t, key), "POST", url1, body1)
		r.Header.Set("Signature-Agent", `"https://net.example/keys"`)
		resign(t, r, key, `sig1=("@method" "@authority" "@path" "@query" "content-digest" "signature-agent")`+good(kid))
		if _, err := newMemVerifier(t, t0).Verify(context.Background(), r, []byte(body1), BodyKey(keyOf(key))); err != nil {
			t.Fatal(err)
		}
	})
}

func TestVerifyReplay(t *testing.T) {
	key := testKey(1)
	s := newTestSigner(t, key)
	v := newMemVerifier(t, t0)
	r := signedRequest(t, s, "POST", url1, body1)

	// A failed attempt with the same nonce does not burn it.
	bad := r.Clone(context.Background())
	bad.Header = r.Header.Clone()
	bad.URL.Path = "/elsewhere"
	if _, err := v.Verify(context.Background(), bad, []byte(body1), BodyKey(keyOf(key))); err == nil {
		t.Fatal("tampered request verified")
	}
	if _, err := v.Verify(context.Background(), r, []byte(body1), BodyKey(keyOf(key))); err != nil {
		t.Fatalf("first use: %v", err)
	}
	_, err := v.Verify(context.Background(), r, []byte(body1), BodyKey(keyOf(key)))
	var ae *Error
	if !errors.As(err, &ae) || ae.Kind != Unauthorized || ae.Message != "nonce already used" {
		t.Fatalf("replay: %v", err)
	}
	// The same nonce under another key is another pair.
	other := testKey(3)
	r2 := signedRequest(t, newTestSigner(t, other), "POST", url1, body1)
	if _, err := v.Verify(context.Background(), r2, []byte(body1), BodyKey(keyOf(other))); err != nil {
		t.Fatalf("same nonce, other key: %v", err)
	}
}

func TestVerifyConcurrentReplayOneWins(t *testing.T) {
	key := testKey(1)
	r := signedRequest(t, newTestSigner(t, key), "POST", url1, body1)
	v := newMemVerifier(t, t0)
	var wins, replays atomic.Int32
	var wg sync.WaitGroup
	for range 32 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			c := r.Clone(context.Background())
			_, err := v.Verify(context.Background(), c, []byte(body1), BodyKey(keyOf(key)))
			var ae *Error
			switch {
			case err == nil:
				wins.Add(1)
			case errors.As(err, &ae) && ae.Message == "nonce already used":
				replays.Add(1)
			default:
				t.Error(err)
			}
		}()
	}
	wg.Wait()
	if wins.Load() != 1 || replays.Load() != 31 {
		t.Fatalf("wins %d replays %d", wins.Load(), replays.Load())
	}
}

func TestVerifyDependencyErrors(t *testing.T) {
	key := testKey(1)
	boom := errors.New("disk on fire")
	for _, c := range []struct {
		name string
		keys KeyLookup
		kind Kind
	}{
		{"lookup fails", func(context.Context, string) (ed25519.PublicKey, error) { return nil, boom }, Internal},
		{"lookup unavailable", func(context.Context, string) (ed25519.PublicKey, error) {
			return nil, fmt.Errorf("get: %w", store.ErrUnavailable)
		}, Unavailable},
	} {
		t.Run(c.name, func(t *testing.T) {
			r := signedRequest(t, newTestSigner(t, key), "POST", url1, body1)
			_, err := newMemVerifier(t, t0).Verify(context.Background(), r, []byte(body1), c.keys)
			var ae *Error
			if !errors.As(err, &ae) || ae.Kind != c.kind {
				t.Fatalf("err %v, want kind %v", err, c.kind)
			}
			if strings.Contains(ae.Message, "fire") {
				t.Fatalf("message leaks the cause: %q", ae.Message)
			}
		})
	}
}
