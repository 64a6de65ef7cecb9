package cloud

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
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

// sameAsLambda fails when an Entry and lambda.NewHandler answer payload
// differently: other bytes, or an error on one side only or with another
// message.
func sameAsLambda(t *testing.T, payload []byte) {
	t.Helper()
	want, wantErr := lambda.NewHandler(mirror).Invoke(context.Background(), payload)
	got, gotErr := NewEntry("f", mirror, time.Minute).Invoke(context.Background(), payload)
	if (wantErr == nil) != (gotErr == nil) || (wantErr != nil && wantErr.Error() != gotErr.Error()) {
		t.Fatalf("payload %q: error %v, lambda.NewHandler's %v", payload, gotErr, wantErr)
	}
	if !bytes.Equal(got, want) {
		t.Fatalf("payload %q:\n got %s\nwant %s", payload, got, want)
	}
}

// tricky holds the strings where an encoder can go wrong: every class of
// byte encoding/json escapes, multi-byte and invalid UTF-8, the JavaScript
// line separators.
var tricky = []string{
	"", "plain", `quote " and \ backslash`, "<script>&amp;</script>", "tab\tnl\nr\rbs\bff\f",
	"\x00\x01\x1f\x7f", "é ü 日本 🎉", "\u2028 and \u2029", "bad \xff\xfe utf8 \xc3", "\xed\xa0\x80 surrogate",
	strings.Repeat("x", 5000), "a,b, c", "/path/with%20escapes?x=1", "\u00a0\ufeff",
	strings.Repeat("\"q\\/\n\t\x01é<\u2028", 20),
}

// requests is a table of HTTP requests of every shape the gateway turns
// into events.
func requests() []*http.Request {
	var rs []*http.Request
	add := func(method, target, contentType string, body []byte, headers ...string) {
		r := httptest.NewRequest(method, target, bytes.NewReader(body))
		if contentType != "" {
			r.Header.Set("Content-Type", contentType)
		}
		for i := 0; i+1 < len(headers); i += 2 {
			r.Header.Add(headers[i], headers[i+1])
		}
		rs = append(rs, r)
	}
	add("POST", "/agents/a2awire-punctual/invoke", "application/json", []byte(`{"task":"ping","input":{"echo":"hi"}}`))
	add("GET", "/agents?limit=10&cursor=abc%3D%3D&x=1&x=2", "", nil, "Accept", "application/json")
	add("POST", "/a/b%20c/%E2%9C%93?q=%3Cscript%3E", "application/octet-stream", []byte{0, 1, 2, 0xff, 0xfe})
	add("PUT", "/x", "text/plain; charset=utf-8", []byte("text with \"quotes\" <html> & \u2028 \xff"))
	add("DELETE", "/x?empty=&=novalue&a=%zz", "", nil, "Cookie", "a=1; b=2;; c=\"x y\"", "Cookie", "d=4")
	add("POST", "/x", "application/vnd.api+json", []byte(`{"a":"é"}`), "X-Forwarded-For", "203.0.113.7",
		"X-Multi", "one", "X-Multi", "two, three", "User-Agent", "curl/8.0 <&>")
	for i, s := range tricky {
		add("POST", "/t", "application/json", []byte(s), "X-Tricky", s, "X-N", strings.Repeat("n", i))
	}
	return rs
}

// TestEntryIsLambdaNewHandler: for the gateway's events, written by
// json.Marshal as the gateway writes them, and for payloads no gateway
// sends, an HTTP API function's Entry gives the output lambda.NewHandler
// gives.
func TestEntryIsLambdaNewHandler(t *testing.T) {
	route := routes.Route{Method: "POST", Path: "/x/{name}", Function: "f"}
	now := time.Date(2026, 12, 1, 20, 0, 0, 0, time.UTC)
	var payloads [][]byte
	for _, r := range requests() {
		body, err := io.ReadAll(r.Body)
		if err != nil {
			t.Fatal(err)
		}
		b, err := json.Marshal(BuildEvent(r, route, map[string]string{"name": "<é>"}, body, now))
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
		`{"requestContext":{"timeEpoch":1.5}}`, `{"isBase64Encoded":"yes"}`, `{"cookies":["a",null]}`,
		`{"body":"\ud83c\udf89 \ud800"}`, "{\"body\":\"\xff\"}", `{"body":"\u003c\u2028"}`,
	} {
		payloads = append(payloads, []byte(s))
	}
	for _, p := range payloads {
		sameAsLambda(t, p)
	}
}

// FuzzHTTPHandler: on any payload, an HTTP API function's Entry answers as
// lambda.NewHandler does.
func FuzzHTTPHandler(f *testing.F) {
	f.Add([]byte(`{"version":"2.0","routeKey":"POST /x","rawPath":"/x","rawQueryString":"a=1","cookies":["c=1"],"headers":{"content-type":"application/json"},"queryStringParameters":{"a":"1"},"requestContext":{"routeKey":"POST /x","accountId":"000000000000","stage":"$default","requestId":"r","apiId":"local","domainName":"h","domainPrefix":"h","time":"01/Dec/2026:20:00:00 +0000","timeEpoch":1,"http":{"method":"POST","path":"/x","protocol":"HTTP/1.1","sourceIp":"127.0.0.1","userAgent":"u"},"authentication":{"clientCert":{"clientCertPem":"","issuerDN":"","serialNumber":"","subjectDN":"","validity":{"notAfter":"","notBefore":""}}}},"body":"{\"a\":\"<b>\"}","isBase64Encoded":false}`))
	f.Add([]byte(`{"requestContext":{"authorizer":{"lambda":{"k":"v"}}},"body":"fail"}`))
	f.Add([]byte(`{"headers":{"a":"1"},"headers":{"b":"2"}} x`))
	// A text-typed body that is not UTF-8, as the gateway sends it: base64.
	f.Add([]byte(`{"headers":{"content-type":"application/json"},"body":"eyJ4Ijoi/ygifQ==","isBase64Encoded":true}`))
	f.Fuzz(func(t *testing.T, payload []byte) { sameAsLambda(t, payload) })
}
