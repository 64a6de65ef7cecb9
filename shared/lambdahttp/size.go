package lambdahttp

import (
	"encoding/base64"
	"encoding/json"
	"net/http"
	"strings"
	"unicode/utf8"

	"github.com/aws/aws-lambda-go/events"
)

// MaxResponse is the most bytes a route's answer may take as the Lambda
// runtime sends it (ResponseSize). Lambda refuses a synchronous response
// over 6 MiB + 100 bytes, and API Gateway turns that into a 500 after the
// function has done its work: a route that consumes what it returns (an
// inbox read) would lose it. The 100 bytes are left as margin.
const MaxResponse = 6 << 20

// EscapedLen is how many bytes b takes inside a JSON string of the Lambda
// proxy response (without its quotes): the runtime encodes the response
// with encoding/json, HTML escaping off, so '"' and '\' take 2 bytes, \b
// \f \n \r \t 2, other control bytes 6 (\u00XX), U+2028 and U+2029 6, a
// byte that is not UTF-8 6 (\ufffd), and everything else itself. A JSON
// body of stored text can grow up to seven times here (a '<' that the
// body's encoder wrote as \u003c becomes \\u003c), which is why a budget
// on stored bytes is not a budget on the response.
func EscapedLen[B []byte | string](b B) int {
	n := 0
	for i := 0; i < len(b); {
		c := b[i]
		if c < utf8.RuneSelf {
			switch {
			case c == '"' || c == '\\' || c == '\b' || c == '\f' || c == '\n' || c == '\r' || c == '\t':
				n += 2
			case c < 0x20:
				n += 6
			default:
				n++
			}
			i++
			continue
		}
		r, size := utf8.DecodeRuneInString(string(b[i:min(len(b), i+utf8.UTFMax)]))
		switch {
		case r == utf8.RuneError && size == 1:
			n += 6
		case r == '\u2028' || r == '\u2029':
			n += 6
		default:
			n += size
		}
		i += size
	}
	return n
}

// ResponseSize is how many bytes the Lambda runtime sends for an answer of
// status, header and body through Entry: the APIGatewayV2HTTPResponse the
// adapter builds (header lines joined with ",", Set-Cookie lines as
// cookies, a body that is not UTF-8 in base64), encoded as the runtime
// encodes it (no HTML escaping; the encoder's final newline is cut before
// sending). It is exact; the tests hold it to the runtime's own output.
func ResponseSize(status int, header http.Header, body []byte) int {
	return EnvelopeSize(status, header) + BodySize(body)
}

// EnvelopeSize is ResponseSize of an empty body: what an answer costs
// before its body. A route that budgets its body item by item adds
// EscapedLen of each piece to it.
func EnvelopeSize(status int, header http.Header) int {
	resp := events.APIGatewayV2HTTPResponse{StatusCode: status, Headers: map[string]string{}, Cookies: []string{}}
	for k, v := range header {
		if strings.EqualFold(k, "Set-Cookie") {
			resp.Cookies = append(resp.Cookies, v...)
			continue
		}
		resp.Headers[k] = strings.Join(v, ",")
	}
	var b strings.Builder
	enc := json.NewEncoder(&b)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(resp); err != nil {
		// Strings, ints and maps of strings always encode.
		panic("lambdahttp: encode a response: " + err.Error())
	}
	return b.Len() - len("\n")
}

// BodySize is what body adds to EnvelopeSize: its escaped length, or its
// base64 length when it is not UTF-8 (the adapter then sends it so, and
// sets isBase64Encoded, 23 bytes more).
func BodySize(body []byte) int {
	if utf8.Valid(body) {
		return EscapedLen(body)
	}
	return base64.StdEncoding.EncodedLen(len(body)) + len(`,"isBase64Encoded":true`)
}
