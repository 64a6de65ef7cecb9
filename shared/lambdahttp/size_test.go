package lambdahttp_test

import (
	"bytes"
	"context"
	"encoding/json"
	"net/http"
	"strings"
	"testing"

	"github.com/aws/aws-lambda-go/lambda"

	"github.com/a2awire/a2awire/shared/lambdahttp"
)

// escapedByEncoder is b inside a JSON string as the Lambda runtime's
// encoder writes it (HTML escaping off), without the quotes.
func escapedByEncoder(t testing.TB, b []byte) int {
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(string(b)); err != nil {
		t.Fatal(err)
	}
	return buf.Len() - len(`""`+"\n")
}

// sizeSamples are the bytes whose escaping differs: quotes, backslashes,
// the short and the \u00XX controls, DEL, HTML characters (not escaped
// here), U+2028/U+2029, multi-byte runes, bytes that are not UTF-8, a
// truncated sequence.
var sizeSamples = []string{
	"", "plain", `"`, `\`, strings.Repeat(`\`, 65534), "\b\f\n\r\t", "\x00\x01\x1f", "\x7f", "<>&",
	"\u2028\u2029", "é€😀", "\xff\xfe", "\xe2\x82", "a\xe2\x82\xacb\xed\xa0\x80", `{"a":"\u003c"}`,
}

// TestEscapedLenMatchesEncoder: EscapedLen agrees with encoding/json's
// real output, byte for byte, on every kind of byte it escapes.
func TestEscapedLenMatchesEncoder(t *testing.T) {
	for _, s := range sizeSamples {
		if got, want := lambdahttp.EscapedLen(s), escapedByEncoder(t, []byte(s)); got != want {
			t.Errorf("EscapedLen(%.40q) = %d, encoder wrote %d", s, got, want)
		}
		if got, want := lambdahttp.EscapedLen([]byte(s)), lambdahttp.EscapedLen(s); got != want {
			t.Errorf("EscapedLen of bytes %.40q = %d, of the string %d", s, got, want)
		}
	}
}

func FuzzEscapedLen(f *testing.F) {
	for _, s := range sizeSamples {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		if got, want := lambdahttp.EscapedLen(b), escapedByEncoder(t, b); got != want {
			t.Fatalf("EscapedLen(%q) = %d, encoder wrote %d", b, got, want)
		}
	})
}

// TestResponseSizeIsTheRuntimesPayload: ResponseSize is the length of
// what the Lambda runtime (lambda.NewHandler over Entry) returns for a
// handler's answer — bodies that escape, a body that is not UTF-8
// (base64), repeated header lines, cookies.
func TestResponseSizeIsTheRuntimesPayload(t *testing.T) {
	for _, s := range sizeSamples {
		for _, cookies := range [][]string{nil, {"a=1", "b=\"2\""}} {
			header := http.Header{"Content-Type": {"application/json"}, "X-Many": {"a", `b"\`}, "Set-Cookie": cookies}
			if cookies == nil {
				delete(header, "Set-Cookie")
			}
			h := http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
				for k, v := range header {
					w.Header()[k] = v
				}
				w.WriteHeader(http.StatusTeapot)
				_, _ = w.Write([]byte(s))
			})
			req, err := json.Marshal(event("GET", "", nil))
			if err != nil {
				t.Fatal(err)
			}
			out, err := lambda.NewHandler(lambdahttp.Entry(h)).Invoke(context.Background(), req)
			if err != nil {
				t.Fatal(err)
			}
			if got := lambdahttp.ResponseSize(http.StatusTeapot, header, []byte(s)); got != len(out) {
				t.Errorf("ResponseSize(body %.40q, cookies %v) = %d, the runtime answered %d bytes: %.200s", s, cookies, got, len(out), out)
			}
		}
	}
}
