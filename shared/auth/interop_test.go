package auth_test

import (
	"context"
	"crypto/ed25519"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/remitly-oss/httpsig-go"

	"github.com/a2awire/a2awire/shared/auth"
	"github.com/a2awire/a2awire/shared/store/memory"
)

// Interop with remitly-oss/httpsig-go, an independent RFC 9421
// implementation (the one Cloudflare's Web Bot Auth example uses). It takes
// the wall clock, so these tests sign and verify at time.Now.

type fetcher struct{ pub ed25519.PublicKey }

func (f fetcher) FetchByKeyID(_ context.Context, _ http.Header, keyID string) (httpsig.KeySpecer, error) {
	if keyID != auth.KeyID(f.pub) {
		return nil, httpsig.KeyError{Message: "unknown key"}
	}
	return httpsig.KeySpec{KeyID: keyID, Algo: httpsig.Algo_ED25519, PubKey: f.pub}, nil
}

func (f fetcher) Fetch(context.Context, http.Header, httpsig.MetadataProvider) (httpsig.KeySpecer, error) {
	return nil, httpsig.KeyError{Message: "keyid required"}
}

func interopKey() ed25519.PrivateKey {
	return ed25519.NewKeyFromSeed([]byte("a2awire interop test key 32 byte"))
}

// serverRequest is the request as a net/http server receives it.
func serverRequest(out *http.Request, body string) *http.Request {
	in := httptest.NewRequest(out.Method, out.URL.String(), strings.NewReader(body))
	in.Host = out.Host
	if in.Host == "" {
		in.Host = out.URL.Host
	}
	for k, v := range out.Header {
		in.Header[k] = v
	}
	return in
}

func TestInteropTheyVerifyOurs(t *testing.T) {
	key := interopKey()
	s, err := auth.NewSigner(key)
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct{ method, url, body string }{
		{"POST", "https://api.example.com/api/v1/agents?a=1,2&b=x", `{"name":"alpha"}`},
		{"GET", "https://api.example.com/api/v1/agents", ""},
		{"PUT", "http://127.0.0.1:8080/v0/worlds/w1/join", `{"publicKey":"x"}`},
	} {
		out, _ := http.NewRequest(c.method, c.url, strings.NewReader(c.body))
		if err := s.Sign(out); err != nil {
			t.Fatal(err)
		}
		profile := httpsig.VerifyProfile{
			SignatureLabel:    auth.DefaultLabel,
			RequiredFields:    httpsig.Fields("@method", "@authority", "@path", "@query", "content-digest"),
			RequiredMetadata:  []httpsig.Metadata{httpsig.MetaCreated, httpsig.MetaExpires, httpsig.MetaNonce, httpsig.MetaKeyID, httpsig.MetaAlgorithm, httpsig.MetaTag},
			AllowedAlgorithms: []httpsig.Algorithm{httpsig.Algo_ED25519},
		}
		res, err := httpsig.Verify(serverRequest(out, c.body), fetcher{keyOf(key)}, profile)
		if err != nil || !res.Verified {
			t.Fatalf("%s %s: httpsig-go rejects our signature: %v\nSignature-Input: %s", c.method, c.url, err, out.Header.Get("Signature-Input"))
		}
		if tag, _ := res.Tag(); tag != auth.Tag {
			t.Fatalf("tag %q", tag)
		}
		// And it notices tampering: the check can fail.
		bad := serverRequest(out, c.body)
		bad.Method = "DELETE"
		if _, err := httpsig.Verify(bad, fetcher{keyOf(key)}, profile); err == nil {
			t.Fatal("httpsig-go accepts a tampered request")
		}
	}
}

func TestInteropWeVerifyTheirs(t *testing.T) {
	key := interopKey()
	kid := auth.KeyID(keyOf(key))
	for _, c := range []struct {
		name, label, agent string
		fields             []string
	}{
		{"our components", "sig1", "", []string{"@method", "@authority", "@path", "@query", "content-digest"}},
		{"other label and order", "wba", "", []string{"content-digest", "@query", "@path", "@authority", "@method"}},
		{"with signature-agent", "sig2", `"https://net.example/api/v1/keys/` + kid + `"`, []string{"@method", "@authority", "@path", "@query", "content-digest", "signature-agent"}},
	} {
		t.Run(c.name, func(t *testing.T) {
			body := `{"text":"a, b"}`
			out, _ := http.NewRequest("POST", "https://api.example.com/v0/worlds/w1/events?since=1,2", strings.NewReader(body))
			if c.agent != "" {
				out.Header.Set("Signature-Agent", c.agent)
			}
			err := httpsig.Sign(out, httpsig.SigningProfile{
				Algorithm:       httpsig.Algo_ED25519,
				Digest:          httpsig.DigestSHA256,
				Fields:          httpsig.Fields(c.fields...),
				Metadata:        []httpsig.Metadata{httpsig.MetaCreated, httpsig.MetaExpires, httpsig.MetaNonce, httpsig.MetaKeyID, httpsig.MetaAlgorithm, httpsig.MetaTag},
				Label:           c.label,
				ExpiresDuration: 300 * time.Second,
			}, httpsig.SigningKey{Key: key, MetaKeyID: kid, MetaTag: auth.Tag})
			if err != nil {
				t.Fatal(err)
			}
			st := memory.New()
			t.Cleanup(func() { _ = st.Close() })
			v := auth.NewVerifier(auth.NewNonces(st), nil)
			in := serverRequest(out, body)
			got, err := v.Verify(context.Background(), in, []byte(body), auth.BodyKey(keyOf(key)))
			if err != nil {
				t.Fatalf("we reject httpsig-go's signature: %v\nSignature-Input: %s", err, out.Header.Get("Signature-Input"))
			}
			if got.Label != c.label || got.KeyID != kid {
				t.Fatalf("verified %+v", got)
			}
			// Its body changed, the same signature fails on our side too.
			in2 := serverRequest(out, body)
			if _, err := v.Verify(context.Background(), in2, []byte(`{"text":"a, c"}`), auth.BodyKey(keyOf(key))); err == nil {
				t.Fatal("accepted another body")
			}
		})
	}
}

func keyOf(k ed25519.PrivateKey) ed25519.PublicKey { return k.Public().(ed25519.PublicKey) }
