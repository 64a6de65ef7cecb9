package cloud_test

import (
	"bytes"
	"encoding/base64"
	"net/http"
	"net/http/httptest"
	"slices"
	"testing"
	"time"

	"github.com/a2awire/a2awire/local/cloud"
	"github.com/a2awire/a2awire/shared/routes"
	"github.com/aws/aws-lambda-go/events"
)

func TestBuildEvent(t *testing.T) {
	body := []byte{0xff, 0xfe, 0x00, 'x'}
	r := httptest.NewRequest(http.MethodPost, "http://127.0.0.1:8080/a/b%20c?x=1&x=2&y=3", bytes.NewReader(body))
	r.Header.Add("X-Multi", "one")
	r.Header.Add("X-Multi", "two")
	r.Header.Set("Cookie", "a=1; b=2")
	r.Header.Set("Content-Type", "application/octet-stream")
	r.RemoteAddr = "127.0.0.9:5555"
	route := routes.Route{Method: "POST", Path: "/a/{name}", Function: "f"}
	now := time.Unix(1700000000, 0)
	e := cloud.BuildEvent(r, route, map[string]string{"name": "b c"}, body, now)

	if e.Version != "2.0" || e.RouteKey != "POST /a/{name}" || e.RequestContext.RouteKey != e.RouteKey {
		t.Errorf("version/routeKey = %q %q", e.Version, e.RouteKey)
	}
	if e.RawPath != "/a/b%20c" || e.RawQueryString != "x=1&x=2&y=3" {
		t.Errorf("rawPath %q rawQueryString %q", e.RawPath, e.RawQueryString)
	}
	if e.Headers["x-multi"] != "one,two" || e.Headers["cookie"] != "" || e.Headers["x-forwarded-proto"] != "https" || e.Headers["x-forwarded-for"] != "127.0.0.9" {
		t.Errorf("headers = %v", e.Headers)
	}
	if !slices.Equal(e.Cookies, []string{"a=1", "b=2"}) {
		t.Errorf("cookies = %q", e.Cookies)
	}
	if e.QueryStringParameters["x"] != "1,2" || e.QueryStringParameters["y"] != "3" {
		t.Errorf("query = %v", e.QueryStringParameters)
	}
	if e.PathParameters["name"] != "b c" {
		t.Errorf("path params = %v", e.PathParameters)
	}
	h := e.RequestContext.HTTP
	if h.Method != "POST" || h.Path != "/a/b c" || h.SourceIP != "127.0.0.9" {
		t.Errorf("requestContext.http = %+v", h)
	}
	if e.RequestContext.RequestID == "" || e.RequestContext.TimeEpoch != now.UnixMilli() || e.RequestContext.Stage != "$default" {
		t.Errorf("requestContext = %+v", e.RequestContext)
	}
	if !e.IsBase64Encoded || e.Body != base64.StdEncoding.EncodeToString(body) {
		t.Errorf("binary body not base64: %v %q", e.IsBase64Encoded, e.Body)
	}

	text := httptest.NewRequest("POST", "/", nil)
	text.Header.Set("Content-Type", "application/json")
	if e := cloud.BuildEvent(text, route, nil, []byte(`{"a":"é"}`), now); e.IsBase64Encoded || e.Body != `{"a":"é"}` {
		t.Errorf("JSON body = %v %q", e.IsBase64Encoded, e.Body)
	}
	// UTF-8 is not what decides: API Gateway base64-encodes a text body
	// sent without a text content type.
	if e := cloud.BuildEvent(httptest.NewRequest("POST", "/", nil), route, nil, []byte(`{"a":1}`), now); !e.IsBase64Encoded {
		t.Errorf("body without content type not base64: %q", e.Body)
	}
}

func TestWriteResponse(t *testing.T) {
	w := httptest.NewRecorder()
	err := cloud.WriteResponse(w, events.APIGatewayV2HTTPResponse{
		StatusCode:        201,
		Headers:           map[string]string{"X-One": "1"},
		MultiValueHeaders: map[string][]string{"X-Many": {"a", "b"}},
		Cookies:           []string{"s=1; Path=/"},
		Body:              base64.StdEncoding.EncodeToString([]byte{0, 1, 2}),
		IsBase64Encoded:   true,
	})
	if err != nil {
		t.Fatal(err)
	}
	if w.Code != 201 || w.Header().Get("X-One") != "1" || !slices.Equal(w.Header()["X-Many"], []string{"a", "b"}) ||
		w.Header().Get("Set-Cookie") != "s=1; Path=/" || !bytes.Equal(w.Body.Bytes(), []byte{0, 1, 2}) {
		t.Errorf("written: %d %v %q", w.Code, w.Header(), w.Body.Bytes())
	}
	bad := httptest.NewRecorder()
	if err := cloud.WriteResponse(bad, events.APIGatewayV2HTTPResponse{Body: "!", IsBase64Encoded: true}); err == nil {
		t.Error("bad base64 accepted")
	}
	if bad.Body.Len() != 0 || len(bad.Header()) != 0 {
		t.Error("a refused response was partly written")
	}
}

// TestBuildEventInvalidUTF8IsBase64: a body sent with a text content type
// that is not valid UTF-8 reaches the function base64-encoded, byte for
// byte, as API Gateway hands over any binary payload; as a string its
// invalid bytes would have become U+FFFD. Valid UTF-8 with a text type
// stays text.
func TestBuildEventInvalidUTF8IsBase64(t *testing.T) {
	route := routes.Route{Method: "POST", Path: "/", Function: "f"}
	now := time.Unix(1700000000, 0)
	for _, body := range []string{"{\"echo\":{\"x\":\"\xff(\"}}", "{\"\xff\":1}", "\xed\xa0\x80", "{\"a\":\"\xc3\"}"} {
		for _, ct := range []string{"application/json", "application/json; charset=utf-8", "text/plain"} {
			r := httptest.NewRequest("POST", "/", nil)
			r.Header.Set("Content-Type", ct)
			e := cloud.BuildEvent(r, route, nil, []byte(body), now)
			got, err := base64.StdEncoding.DecodeString(e.Body)
			if !e.IsBase64Encoded || err != nil || string(got) != body {
				t.Errorf("%s %q: isBase64Encoded %v, body %q", ct, body, e.IsBase64Encoded, e.Body)
			}
		}
	}
	r := httptest.NewRequest("POST", "/", nil)
	r.Header.Set("Content-Type", "application/json")
	if e := cloud.BuildEvent(r, route, nil, []byte(`{"a":"‹é🎉"}`), now); e.IsBase64Encoded || e.Body != `{"a":"‹é🎉"}` {
		t.Errorf("valid UTF-8 JSON: %v %q", e.IsBase64Encoded, e.Body)
	}
}
