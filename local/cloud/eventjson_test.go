package cloud

import (
	"bytes"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/a2awire/a2awire/shared/routes"
	"github.com/aws/aws-lambda-go/events"
)

// tricky holds the strings where an encoder can go wrong: every class of
// byte encoding/json escapes, multi-byte and invalid UTF-8, the JavaScript
// line separators.
var tricky = []string{
	"", "plain", `quote " and \ backslash`, "<script>&amp;</script>", "tab\tnl\nr\rbs\bff\f",
	"\x00\x01\x1f\x7f", "é ü 日本 🎉", "\u2028 and \u2029", "bad \xff\xfe utf8 \xc3", "\xed\xa0\x80 surrogate",
	strings.Repeat("x", 5000), "a,b, c", "/path/with%20escapes?x=1", "\u00a0\ufeff",
	// A long string dense with escapes of every kind.
	strings.Repeat("\"q\\/\n\t\x01é<\u2028", 20),
}

// requests is the wide table of HTTP requests whose events are compared.
func requests(t *testing.T) []*http.Request {
	t.Helper()
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
	add("PATCH", "/x", "", []byte("no content type"), "Authorization", "Bearer abc.def.ghi", "Signature-Input", `sig1=("@method");created=1`)
	for i, s := range tricky {
		add("POST", "/t", "application/json", []byte(s), "X-Tricky", s, "X-N", strings.Repeat("n", i))
	}
	// Many headers: more keys than the encoder's on-stack key list.
	many := httptest.NewRequest("GET", "/many", nil)
	for i := range 50 {
		many.Header.Set("X-H-"+strings.Repeat("k", i%7)+string(rune('a'+i%26))+string(rune('a'+i/26)), "v")
	}
	rs = append(rs, many)
	host := httptest.NewRequest("GET", "/host", nil)
	host.Host = "api.example.com:8443"
	host.RemoteAddr = "[::1]:5555"
	rs = append(rs, host, httptest.NewRequest("GET", "/nohost", nil))
	rs[len(rs)-1].Host = ""
	return rs
}

// TestAppendEventIsJSONMarshal pins the direct encoder to encoding/json:
// whatever request comes in, the entry receives the bytes json.Marshal
// would have produced for the same event.
func TestAppendEventIsJSONMarshal(t *testing.T) {
	route := routes.Route{Method: "POST", Path: "/x/{name}", Function: "f"}
	now := time.Date(2026, 12, 1, 20, 0, 0, 123e6, time.UTC)
	var evs []events.APIGatewayV2HTTPRequest
	for _, r := range requests(t) {
		var body []byte
		if r.Body != nil {
			body, _ = readAll(r)
		}
		evs = append(evs, BuildEvent(r, route, map[string]string{"name": "b c", "<": "&"}, body, now))
		evs = append(evs, BuildEvent(r, route, nil, body, now))
	}
	for _, s := range tricky {
		evs = append(evs, events.APIGatewayV2HTTPRequest{
			Version: s, RouteKey: s, RawPath: s, RawQueryString: s, Cookies: []string{s, s},
			Headers: map[string]string{s: s, "k": s}, QueryStringParameters: map[string]string{s: s},
			PathParameters: map[string]string{s: s}, StageVariables: map[string]string{s: s}, Body: s, IsBase64Encoded: s == "",
			RequestContext: events.APIGatewayV2HTTPRequestContext{
				RouteKey: s, AccountID: s, Stage: s, RequestID: s, APIID: s, DomainName: s, DomainPrefix: s, Time: s, TimeEpoch: -int64(len(s)),
				HTTP: events.APIGatewayV2HTTPRequestContextHTTPDescription{Method: s, Path: s, Protocol: s, SourceIP: s, UserAgent: s},
				Authentication: events.APIGatewayV2HTTPRequestContextAuthentication{ClientCert: events.APIGatewayV2HTTPRequestContextAuthenticationClientCert{
					ClientCertPem: s, IssuerDN: s, SerialNumber: s, SubjectDN: s,
					Validity: events.APIGatewayV2HTTPRequestContextAuthenticationClientCertValidity{NotAfter: s, NotBefore: s}}},
			},
		})
	}
	evs = append(evs,
		events.APIGatewayV2HTTPRequest{},
		events.APIGatewayV2HTTPRequest{Headers: map[string]string{}, Cookies: []string{}, QueryStringParameters: map[string]string{}},
		events.APIGatewayV2HTTPRequest{RequestContext: events.APIGatewayV2HTTPRequestContext{
			Authorizer: &events.APIGatewayV2HTTPRequestContextAuthorizerDescription{Lambda: map[string]any{"n": 1.5, "s": []any{"x"}}}}},
	)
	for i, e := range evs {
		want, err := json.Marshal(e)
		if err != nil {
			t.Fatal(err)
		}
		prefix := []byte("kept")
		got, err := AppendEvent(prefix, &e)
		if err != nil {
			t.Fatalf("event %d: %v", i, err)
		}
		if !bytes.HasPrefix(got, prefix) || !bytes.Equal(got[len(prefix):], want) {
			t.Errorf("event %d:\n got %s\nwant %s", i, got[len(prefix):], want)
		}
	}
}

func readAll(r *http.Request) ([]byte, error) {
	var b bytes.Buffer
	_, err := b.ReadFrom(r.Body)
	return b.Bytes(), err
}

// FuzzAppendEvent compares the direct encoder with json.Marshal on
// arbitrary strings in every kind of position.
func FuzzAppendEvent(f *testing.F) {
	for _, s := range tricky {
		f.Add(s, "content-type", s, s, int64(len(s)), len(s)%2 == 0)
	}
	f.Fuzz(func(t *testing.T, s, key, value, body string, epoch int64, b64 bool) {
		e := events.APIGatewayV2HTTPRequest{
			Version: "2.0", RouteKey: s, RawPath: s, RawQueryString: value, Cookies: []string{s, value},
			Headers: map[string]string{key: value, s: body, "host": s}, QueryStringParameters: map[string]string{key: s},
			PathParameters: map[string]string{value: key}, Body: body, IsBase64Encoded: b64,
			RequestContext: events.APIGatewayV2HTTPRequestContext{RouteKey: s, RequestID: key, DomainName: value, Time: body, TimeEpoch: epoch,
				HTTP: events.APIGatewayV2HTTPRequestContextHTTPDescription{Method: key, Path: s, UserAgent: value}},
		}
		if len(s)%3 == 0 {
			e.Cookies, e.Headers, e.PathParameters = nil, nil, map[string]string{}
		}
		want, err := json.Marshal(e)
		if err != nil {
			t.Fatal(err)
		}
		got, err := AppendEvent(nil, &e)
		if err != nil || !bytes.Equal(got, want) {
			t.Fatalf("AppendEvent = %s, %v\n json.Marshal = %s", got, err, want)
		}
	})
}

// TestParseResponseIsJSONUnmarshal: the direct parser takes what functions
// answer and gives what json.Unmarshal gives; everything else it leaves to
// json.Unmarshal.
func TestParseResponseIsJSONUnmarshal(t *testing.T) {
	taken := []string{
		`{"statusCode":200,"headers":{"Content-Type":"application/json"},"multiValueHeaders":{"X":["a","b"],"Y":null,"Z":[]},"body":"{\"ok\":true}","cookies":null}`,
		`{"statusCode":201,"headers":null,"multiValueHeaders":null,"body":"","isBase64Encoded":true,"cookies":["a=1; Path=/","b=2"]}`,
		` { "statusCode" : 404 , "body" : "esc \" \\ \/ \b \f \n \r \t \u00e9 \u2028 \u0000" , "cookies" : [ ] } `,
		`{}`, `{"body":null,"statusCode":null,"isBase64Encoded":null,"headers":{}}`, `{"isBase64Encoded":false,"statusCode":-0}`,
		`{"body":"日本 🎉 raw UTF-8","headers":{"é":"ü","k":"1","k":"2"}}`,
	}
	for _, s := range append(taken, tricky...) {
		if b, err := json.Marshal(events.APIGatewayV2HTTPResponse{StatusCode: 200, Body: s, Headers: map[string]string{s: s}, Cookies: []string{s}}); err == nil {
			taken = append(taken, string(b))
		}
	}
	for _, s := range taken {
		got, ok := parseResponse(s, nil)
		if !ok {
			t.Errorf("not taken: %s", s)
			continue
		}
		var want events.APIGatewayV2HTTPResponse
		if err := json.Unmarshal([]byte(s), &want); err != nil {
			t.Fatalf("%s: json.Unmarshal: %v", s, err)
		}
		if !reflect.DeepEqual(got, want) {
			t.Errorf("%s:\n got %#v\nwant %#v", s, got, want)
		}
	}
	left := []string{
		``, `null`, `[]`, `{"statusCode":200`, `{"statusCode":200}x`, `{"StatusCode":200}`, `{"statuscode":200}`,
		`{"statusCode":2e2}`, `{"statusCode":200.0}`, `{"statusCode":0200}`, `{"statusCode":"200"}`, `{"statusCode":99999999999999999999}`,
		`{"body":1}`, `{"body":"a","body":"b"}`, `{"headers":{"a":1}}`, `{"headers":{"a":null}}`, `{"cookies":["a",null]}`,
		`{"body":"\ud83c\udf89"}`, `{"body":"\x"}`, "{\"body\":\"raw\nnewline\"}", "{\"body\":\"\xff\"}", `{"extra":1}`,
		`{"body":"x",}`, `{,}`, `{"isBase64Encoded":"true"}`, `{"multiValueHeaders":{"a":"b"}}`, `{"b\u006fdy":"x"}`,
		`{"statusCodes":200}`, `{"statusCod":200}`, `{"statusCode`, `{"statusCode"`, `{"body":"x\`, `{"body":"\`, `{"body":"\u12`,
		`{"body":"\u12"}`, `{"body":"\u12g4"}`, `{"body":"\u+123"}`, "{\"body\":\"a\\\"\x01\"}",
		"{\"body\":\"\xe4\\b\"}", "{\"body\":\"\xe4\\\"\xa4\"}", // invalid UTF-8 before an escape
	}
	for _, s := range left {
		if got, ok := parseResponse(s, nil); ok {
			t.Errorf("taken: %s → %#v", s, got)
		}
	}
}

// FuzzParseResponse: whatever the parser takes, json.Unmarshal accepts and
// decodes to the same response.
func FuzzParseResponse(f *testing.F) {
	f.Add([]byte(`{"statusCode":200,"headers":{"Content-Type":"application/json"},"multiValueHeaders":null,"body":"{\"ok\":true}","cookies":null}`))
	f.Add([]byte(`{"statusCode":201,"isBase64Encoded":true,"body":"AAEC","cookies":["a=1"],"multiValueHeaders":{"X":["a","b"]}}`))
	f.Add([]byte(`{"body":"\u00e9\n\"","headers":{}}`))
	f.Add([]byte(`{"statusCode":2e2}`))
	f.Fuzz(func(t *testing.T, data []byte) {
		got, ok := parseResponse(string(data), nil)
		if !ok {
			return
		}
		var want events.APIGatewayV2HTTPResponse
		if err := json.Unmarshal(data, &want); err != nil {
			t.Fatalf("taken %q, which json.Unmarshal refuses: %v", data, err)
		}
		if !reflect.DeepEqual(got, want) {
			t.Fatalf("%q:\n got %#v\nwant %#v", data, got, want)
		}
	})
}

// FuzzParseString puts arbitrary bytes between the quotes of JSON strings,
// where str and escaped alone decide them: whatever the parser takes,
// json.Unmarshal decodes to the same response.
func FuzzParseString(f *testing.F) {
	for _, s := range tricky {
		f.Add(s)
		if b, err := json.Marshal(s); err == nil {
			f.Add(string(b[1 : len(b)-1]))
		}
	}
	f.Add("\xe4\\b")
	f.Fuzz(func(t *testing.T, s string) {
		data := `{"body":"` + s + `","headers":{"k":"` + s + `"}}`
		got, ok := parseResponse(data, nil)
		if !ok {
			return
		}
		var want events.APIGatewayV2HTTPResponse
		if err := json.Unmarshal([]byte(data), &want); err != nil {
			t.Fatalf("taken %q, which json.Unmarshal refuses: %v", data, err)
		}
		if !reflect.DeepEqual(got, want) {
			t.Fatalf("%q:\n got %#v\nwant %#v", data, got, want)
		}
	})
}
