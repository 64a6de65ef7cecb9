package lambdahttp

import (
	"encoding/base64"
	"encoding/json"
	"net/http"
	"strings"
	"unicode/utf8"

	"github.com/aws/aws-lambda-go/events"

	"github.com/a2awire/a2awire/shared/jsonlen"
)

// MaxResponse is the most bytes a route's answer may take as the Lambda
// runtime sends it (ResponseSize). Lambda refuses a synchronous response
// over 6 MiB + 100 bytes, and API Gateway turns that into a 500 after the
// function has done its work: a route that consumes what it returns (an
// inbox read) would lose it. The 100 bytes are left as margin.
const MaxResponse = 6 << 20

// EscapedLen is how many bytes b takes inside a JSON string of the Lambda
// proxy response, without its quotes (jsonlen.Escaped).
func EscapedLen[B []byte | string](b B) int { return jsonlen.Escaped(b) }

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
