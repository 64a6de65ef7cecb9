package inbox_test

import (
	"bytes"
	"encoding/json"
	"testing"
	"unicode/utf8"

	"github.com/a2awire/a2awire/shared/inbox"
	lambdaevents "github.com/aws/aws-lambda-go/events"
)

// responseGrowth is how many bytes content adds to a Lambda response whose
// body is the world's JSON answer holding it: the answer is written with
// encoding/json (as worldhttp does), the response as aws-lambda-go writes
// it.
func responseGrowth(t *testing.T, content []byte) int {
	t.Helper()
	size := func(c json.RawMessage) int {
		answer, err := json.Marshal(map[string]any{"content": c})
		if err != nil {
			t.Fatal(err)
		}
		resp, err := json.Marshal(lambdaevents.APIGatewayV2HTTPResponse{StatusCode: 200, Body: string(answer)})
		if err != nil {
			t.Fatal(err)
		}
		return len(resp)
	}
	return size(content) - size(json.RawMessage("0")) + 1
}

// TestResponseBytesMatchesEncoding: ResponseBytes is exactly what a
// message's content adds to the Lambda response of a read, escapes of both
// encodings included, so the read budget holds.
func TestResponseBytesMatchesEncoding(t *testing.T) {
	for _, c := range []string{`"<a>&b"`, `"\u2028\u2029"`, "\"\u2028\u2029 é ‹ 🎉\"", `{"q":"\"\\"}`, `[1,2,{"x":null}]`, `0`} {
		if got, want := inbox.ResponseBytes([]byte(c)), responseGrowth(t, []byte(c)); got != want {
			t.Errorf("%s: ResponseBytes %d, the encodings add %d", c, got, want)
		}
	}
}

// FuzzResponseBytes: for any JSON value stored as the inbox stores it
// (compacted, nothing escaped), ResponseBytes is what the encodings add.
func FuzzResponseBytes(f *testing.F) {
	for _, s := range []string{`"<>&"`, `"\u2028"`, "\"\u2028\"", `{"a":"\"\\"}`, `[]`, "\"\xe2\x80\"<"} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, c []byte) {
		if !utf8.Valid(c) || !json.Valid(c) {
			return
		}
		var stored bytes.Buffer
		if err := json.Compact(&stored, c); err != nil {
			t.Fatal(err)
		}
		if got, want := inbox.ResponseBytes(stored.Bytes()), responseGrowth(t, stored.Bytes()); got != want {
			t.Fatalf("%q: ResponseBytes %d, the encodings add %d", stored.Bytes(), got, want)
		}
	})
}
