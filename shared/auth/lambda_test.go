package auth_test

import (
	"context"
	"errors"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-lambda-go/events"
	"github.com/awslabs/aws-lambda-go-api-proxy/httpadapter"

	"github.com/a2awire/a2awire/shared/auth"
	"github.com/a2awire/a2awire/shared/lambdahttp"
	"github.com/a2awire/a2awire/shared/store/memory"
)

// toEvent turns a signed client request into the API Gateway v2 event the
// gateway would deliver: lower-case header names, one value each, the Host
// the client addressed in the headers and the gateway's own domain in the
// request context.
func toEvent(t *testing.T, r *http.Request, body string) events.APIGatewayV2HTTPRequest {
	t.Helper()
	h := map[string]string{"host": r.URL.Host}
	for k, v := range r.Header {
		h[strings.ToLower(k)] = strings.Join(v, ",")
	}
	return events.APIGatewayV2HTTPRequest{
		Version: "2.0", RouteKey: "POST /api/v1/agents", RawPath: r.URL.EscapedPath(), RawQueryString: r.URL.RawQuery,
		Headers: h, Body: body,
		RequestContext: events.APIGatewayV2HTTPRequestContext{
			DomainName: "abc123.execute-api.us-east-1.amazonaws.com",
			HTTP:       events.APIGatewayV2HTTPRequestContextHTTPDescription{Method: r.Method, Path: r.URL.Path},
		},
	}
}

// verifying is a handler answering 204 when the request verifies, else 401
// with the rule in the body. It hands the verifier the raw header values
// (lambdahttp.RawHeader), as the route middleware in access does.
func verifying(v *auth.Verifier, pub []byte) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		req := auth.HTTPRequest(r)
		req.Header = func(name string) (string, bool) { return lambdahttp.RawHeader(r, name) }
		if _, err := v.VerifyRequest(r.Context(), req, body, auth.BodyKey(pub)); err != nil {
			var ae *auth.Error
			errors.As(err, &ae)
			http.Error(w, ae.Message, http.StatusUnauthorized)
			return
		}
		w.WriteHeader(http.StatusNoContent)
	})
}

// TestVerifyThroughTheLambdaAdapter signs with a nonce and a Signature-Agent
// holding ", " — what httpadapter splits — sends the request as an API
// Gateway event and verifies behind lambdahttp.Entry. Behind the bare
// adapter the same request fails: that is why the verifier takes raw values.
func TestVerifyThroughTheLambdaAdapter(t *testing.T) {
	key := interopKey()
	n := 0
	s, err := auth.NewSigner(key,
		auth.WithSignatureAgent("https://net.example/api/v1/keys/a,b"),
		auth.WithNonces(func() (string, error) { n++; return "nonce, with, commas-" + strings.Repeat("x", n), nil }))
	if err != nil {
		t.Fatal(err)
	}
	body := `{"name":"alpha","capabilities":["a","b"]}`
	sign := func() events.APIGatewayV2HTTPRequest {
		out, _ := http.NewRequest("POST", "https://api.example.com/api/v1/agents?x=1,2", strings.NewReader(body))
		if err := s.Sign(out); err != nil {
			t.Fatal(err)
		}
		// A second, unrelated signature ahead of ours: Signature-Input
		// and Signature are then dictionaries with ", " between members.
		out.Header.Set("Signature-Input", `other=("@method");created=1;tag="x", `+out.Header.Get("Signature-Input"))
		out.Header.Set("Signature", `other=:AAAA:, `+out.Header.Get("Signature"))
		return toEvent(t, out, body)
	}
	st := memory.New()
	t.Cleanup(func() { _ = st.Close() })
	v := auth.NewVerifier(auth.NewNonces(st), time.Now)

	entry := lambdahttp.Entry(verifying(v, keyOf(key)))
	ev := sign()
	resp, err := entry(context.Background(), ev)
	if err != nil || resp.StatusCode != http.StatusNoContent {
		t.Fatalf("behind Entry: %d %q %v", resp.StatusCode, resp.Body, err)
	}
	// The same event again is a replay.
	resp, err = entry(context.Background(), ev)
	if err != nil || resp.StatusCode != http.StatusUnauthorized || !strings.Contains(resp.Body, "nonce already used") {
		t.Fatalf("replay behind Entry: %d %q %v", resp.StatusCode, resp.Body, err)
	}

	bare := httpadapter.NewV2(verifying(v, keyOf(key))).ProxyWithContext
	resp, err = bare(context.Background(), sign())
	if err != nil || resp.StatusCode != http.StatusUnauthorized {
		t.Fatalf("behind the bare adapter the split headers verified: %d %q %v", resp.StatusCode, resp.Body, err)
	}
	t.Logf("bare adapter: %s", strings.TrimSpace(resp.Body))
}
