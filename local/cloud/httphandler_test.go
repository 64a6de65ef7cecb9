package cloud

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"testing"
	"time"

	"github.com/a2awire/a2awire/shared/routes"
	"github.com/aws/aws-lambda-go/events"
	"github.com/aws/aws-lambda-go/lambda"
)

// mirror answers with everything it was given, so that comparing two
// entries' outputs compares the events they decoded as well as the
// responses they encoded.
func mirror(_ context.Context, e events.APIGatewayV2HTTPRequest) (events.APIGatewayV2HTTPResponse, error) {
	if e.Body == "fail" {
		return events.APIGatewayV2HTTPResponse{}, errors.New("function failed")
	}
	all, err := json.Marshal(e)
	if err != nil {
		return events.APIGatewayV2HTTPResponse{}, err
	}
	resp := events.APIGatewayV2HTTPResponse{StatusCode: 200 + len(e.Cookies), Headers: e.Headers, Body: string(all) + e.Body,
		Cookies: e.Cookies, IsBase64Encoded: e.IsBase64Encoded}
	if e.QueryStringParameters != nil {
		resp.MultiValueHeaders = map[string][]string{}
		for k, v := range e.QueryStringParameters {
			resp.MultiValueHeaders[k] = []string{v, e.RawPath}
		}
		resp.MultiValueHeaders["nil"] = nil
	}
	return resp, nil
}

// sameAsLambda fails when httpHandler and lambda.NewHandler answer payload
// differently: other bytes, or an error on one side only or with another
// message.
func sameAsLambda(t *testing.T, payload []byte) {
	t.Helper()
	want, wantErr := lambda.NewHandler(mirror).Invoke(context.Background(), payload)
	got, gotErr := newHandler(HTTPHandler(mirror)).Invoke(context.Background(), payload)
	if (wantErr == nil) != (gotErr == nil) || (wantErr != nil && wantErr.Error() != gotErr.Error()) {
		t.Fatalf("payload %q: error %v, lambda.NewHandler's %v", payload, gotErr, wantErr)
	}
	if !bytes.Equal(got, want) {
		t.Fatalf("payload %q:\n got %s\nwant %s", payload, got, want)
	}
}

// TestHTTPHandlerIsLambdaNewHandler: for the gateway's events and for
// payloads no gateway sends, the reflection-free entry gives the output
// lambda.NewHandler gives.
func TestHTTPHandlerIsLambdaNewHandler(t *testing.T) {
	if _, ok := newHandler(mirror).(*httpHandler); !ok {
		t.Fatal("an HTTP API entry is not driven by httpHandler")
	}
	route := routes.Route{Method: "POST", Path: "/x/{name}", Function: "f"}
	now := time.Date(2026, 12, 1, 20, 0, 0, 0, time.UTC)
	var payloads [][]byte
	for _, r := range requests(t) {
		body, _ := readAll(r)
		e := BuildEvent(r, route, map[string]string{"name": "<é>"}, body, now)
		b, err := AppendEvent(nil, &e)
		if err != nil {
			t.Fatal(err)
		}
		payloads = append(payloads, b)
	}
	for _, s := range tricky {
		e := events.APIGatewayV2HTTPRequest{Body: s, Cookies: []string{s}, Headers: map[string]string{s: s},
			QueryStringParameters: map[string]string{s: s}, RawPath: s}
		b, _ := json.Marshal(e)
		payloads = append(payloads, b)
	}
	for _, s := range []string{
		`{"body":"fail"}`, `null`, ``, `   `, `{"body":"x"} trailing`, `{"body":"x"}{"body":"y"}`, `[1]`, `{"Body":"case"}`,
		`{"body":"a","body":"b"}`, `{"headers":{"a":"1"},"headers":{"b":"2"}}`, `{"unknown":{"deep":[1,2,{"x":null}]}}`,
		`{"requestContext":{"authorizer":{"lambda":{"user":"u","n":1.5},"jwt":{"claims":{"sub":"x"},"scopes":["a"]}}}}`,
		`{"requestContext":{"http":{"method":"GET"},"http":{"path":"/p"}}}`, `{"requestContext":null,"headers":null,"cookies":null}`,
		`{"requestContext":{"timeEpoch":1.5}}`, `{"requestContext":{"timeEpoch":1e3}}`, `{"requestContext":{"timeEpoch":-1700000000000}}`,
		`{"isBase64Encoded":"yes"}`, `{"cookies":["a",null]}`, `{"body":"\ud83c\udf89 \ud800"}`, "{\"body\":\"\xff\"}", `{"body":"\u003c\u2028"}`,
		`{"requestContext":{"authentication":{"clientCert":{"validity":{"notAfter":"x"},"subjectDN":"CN=a"}}}}`,
	} {
		payloads = append(payloads, []byte(s))
	}
	for _, p := range payloads {
		sameAsLambda(t, p)
	}
}

// FuzzHTTPHandler: on any payload, the reflection-free entry answers as
// lambda.NewHandler does.
func FuzzHTTPHandler(f *testing.F) {
	f.Add([]byte(`{"version":"2.0","routeKey":"POST /x","rawPath":"/x","rawQueryString":"a=1","cookies":["c=1"],"headers":{"content-type":"application/json"},"queryStringParameters":{"a":"1"},"requestContext":{"routeKey":"POST /x","accountId":"000000000000","stage":"$default","requestId":"r","apiId":"local","domainName":"h","domainPrefix":"h","time":"01/Dec/2026:20:00:00 +0000","timeEpoch":1,"http":{"method":"POST","path":"/x","protocol":"HTTP/1.1","sourceIp":"127.0.0.1","userAgent":"u"},"authentication":{"clientCert":{"clientCertPem":"","issuerDN":"","serialNumber":"","subjectDN":"","validity":{"notAfter":"","notBefore":""}}}},"body":"{\"a\":\"<b>\"}","isBase64Encoded":false}`))
	f.Add([]byte(`{"requestContext":{"authorizer":{"lambda":{"k":"v"}}},"body":"fail"}`))
	f.Add([]byte(`{"headers":{"a":"1"},"headers":{"b":"2"}} x`))
	// A text-typed body that is not UTF-8, as the gateway sends it: base64.
	f.Add([]byte(`{"headers":{"content-type":"application/json"},"body":"eyJ4Ijoi/ygifQ==","isBase64Encoded":true}`))
	f.Fuzz(func(t *testing.T, payload []byte) { sameAsLambda(t, payload) })
}
