package a2abridge

import (
	"encoding/json"
	"testing"
	"unicode/utf8"
)

// FuzzDecodeRequest: whatever the body, decodeRequest never panics, a
// request it accepts has a method, an id that is a JSON string or number
// and params that are a JSON object, and every error it returns encodes
// as valid UTF-8 JSON with a JSON-RPC code.
func FuzzDecodeRequest(f *testing.F) {
	for _, s := range []string{
		`{"jsonrpc":"2.0","id":"1","method":"SendMessage","params":{"message":{"messageId":"m","role":"ROLE_USER","parts":[{"text":"hi"}]}}}`,
		`{"jsonrpc":"2.0","id":1,"method":"GetTask","params":{"id":"t"}}`,
		`{"jsonrpc":"2.0","id":1,"id":2,"method":"GetTask"}`,
		`[{"jsonrpc":"2.0","id":1,"method":"GetTask"}]`,
		`{"jsonrpc":"2.0","method":"GetTask"}`,
		`{"jsonrpc":"2.0","id":null,"method":"x","params":[]}`,
		"{\"jsonrpc\":\"2.0\",\"id\":\"\xff\",\"method\":\"x\"}",
		`{`, ``, `null`,
	} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, body []byte) {
		req, rerr := decodeRequest(body)
		if rerr != nil {
			out, err := json.Marshal(response{JSONRPC: "2.0", ID: req.ID, Error: rerr})
			if err != nil || !utf8.Valid(out) || reasons[rerr.Code] == "" {
				t.Fatalf("error %+v encodes as %s, %v", rerr, out, err)
			}
			return
		}
		if req.Method == "" || !json.Valid(req.ID) || (req.ID[0] != '"' && req.ID[0] != '-' && (req.ID[0] < '0' || req.ID[0] > '9')) {
			t.Fatalf("accepted %q: %+v", body, req)
		}
		var p map[string]json.RawMessage
		if err := json.Unmarshal(req.Params, &p); err != nil {
			t.Fatalf("params %s are not an object: %v", req.Params, err)
		}
	})
}
