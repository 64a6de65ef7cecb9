package protocol_test

import (
	"bytes"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"testing"

	"github.com/a2awire/a2awire/shared/protocol"
)

// FuzzDecodeRequest checks that any body either decodes into a usable
// invocation or is refused with a 422 that locates the problem, and that the
// provider never panics or answers outside the protocol's statuses.
func FuzzDecodeRequest(f *testing.F) {
	for _, s := range []string{
		`{"task":"echo","input":{"n":1}}`, `{"task":"echo"}`, `{"task":"echo","input":null}`,
		`{]`, ``, `null`, `[]`, `"x"`, `{"task":5}`, `{"task":""}`, `{"task":"echo","input":[1]}`,
		`{"task":"echo"}{}`, "{\"task\":\"\xff\"}", `{"task":"echo","input":{"n":"x"}}`,
		`{"task":"nope","task":"echo"}`, `{"task":"echo","input":{"n":1,"N":2}}`, `{"task":"echo","input":{"a":{"b":1,"b":2}}}`,
		`{"task":"echo","input":{"s":"\ud800"}}`, `{"TASK":"echo"}`,
		`{"task":"echo","input":{"s":"<a>&\u2028"}}`, `{"task":"echo","input":{"n":1e999999}}`,
		"{\"task\":\"echo\",\"input\":{\"\xff\":1}}", "{\"task\":\"echo\",\"input\":{\"s\":\"\u2039\"}}",
	} {
		f.Add([]byte(s))
	}
	p := newTestProvider()
	f.Fuzz(func(t *testing.T, body []byte) {
		req, perr := protocol.DecodeRequest(body)
		if perr != nil {
			if perr.Code != protocol.InvalidRequest || perr.Status() != 422 || len(perr.Details) == 0 {
				t.Fatalf("decode error %+v is not a located 422", perr)
			}
		} else {
			if err := protocol.CheckJSON(body); err != nil {
				t.Fatalf("accepted a body that is not strict JSON: %v", err)
			}
			if req.Task == "" {
				t.Fatal("accepted an empty task")
			}
			var obj map[string]json.RawMessage
			if err := json.Unmarshal(req.Input, &obj); err != nil || obj == nil {
				t.Fatalf("accepted input %q that is not an object", req.Input)
			}
		}

		r := httptest.NewRequest(http.MethodPost, "/", bytes.NewReader(body))
		r.Header.Set("Content-Type", "application/json")
		w := httptest.NewRecorder()
		p.ServeHTTP(w, r)
		switch w.Code {
		case 200, 400, 422, 500:
		default:
			t.Fatalf("status %d for body %q", w.Code, body)
		}
		if err := protocol.Verify(w.Code, w.Header(), w.Body.Bytes(), protocol.Expect{}); err != nil {
			t.Fatalf("response breaks the protocol: %v\nbody %q\nresponse %s", err, body, w.Body)
		}
	})
}

// FuzzVerify feeds arbitrary provider responses to the buyer-side decoders
// (Verify and Metadata's UnmarshalJSON): a hostile provider must get a
// verdict, never a panic, and a response Verify accepts must decode.
func FuzzVerify(f *testing.F) {
	for _, s := range []string{
		`{"output":{"x":1},"metadata":{"agent":"a","capability":"c","duration_ms":3}}`,
		`{"output":{"error":"x"},"metadata":{"agent":"a","capability":"c","duration_ms":3}}`,
		`{"error":"invalid_input","message":"m","details":[{"loc":["body"],"msg":"x"}]}`,
		`{"metadata":{"duration_ms":1e309,"tokens_used":-1}}`, `[]`, `null`, `{`, ``,
		`{"output":{"x":1},"metadata":{"agent":"a","capability":"c","duration_ms":3}}trailing`,
		`{"output":{"x":1},"metadata":{"agent":"a","capability":"c","duration_ms":3}} {"output":{}}`,
		`{"error":"invalid_input","message":null}`,
	} {
		f.Add(200, []byte(s))
		f.Add(400, []byte(s))
	}
	hdr := http.Header{"Content-Type": {"application/json"}}
	f.Fuzz(func(t *testing.T, status int, body []byte) {
		err := protocol.Verify(status, hdr, body, protocol.Expect{Agent: "a", Capability: "c"})
		var resp protocol.Response
		uerr := json.Unmarshal(body, &resp)
		if err == nil && protocol.CheckJSON(body) != nil {
			t.Fatalf("Verify accepted %q, which is not one strict JSON value", body)
		}
		if err == nil && status == 200 && uerr != nil {
			t.Fatalf("Verify accepted %q but it does not decode: %v", body, uerr)
		}
		if err == nil && status == 200 && (resp.Metadata.Agent != "a" || resp.Metadata.Capability != "c" || resp.Metadata.DurationMS < 0) {
			t.Fatalf("Verify accepted %q with metadata %+v", body, resp.Metadata)
		}
	})
}

// FuzzNumberOutOfRange: NumberOutOfRange finds a number exactly when
// encoding/json cannot decode the value into any for one.
func FuzzNumberOutOfRange(f *testing.F) {
	for _, s := range []string{`{"n":1e999999}`, `[1,-2e308]`, `1e-999999`, `{"a":{"b":[0,1.7e308]}}`, `"1e999"`, `{`} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		if !json.Valid(data) {
			if _, ok := protocol.NumberOutOfRange(data); ok {
				t.Fatalf("NumberOutOfRange(%q) found a number in what is not JSON", data)
			}
			return
		}
		var v any
		err := json.Unmarshal(data, &v)
		_, ok := protocol.NumberOutOfRange(data)
		if ok != (err != nil) {
			t.Fatalf("NumberOutOfRange(%q) = %v, json.Unmarshal into any: %v", data, ok, err)
		}
	})
}
