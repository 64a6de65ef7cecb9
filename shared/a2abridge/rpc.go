package a2abridge

import (
	"bytes"
	"encoding/json"
	"errors"

	"github.com/a2awire/a2awire/shared/strictjson"
)

// JSON-RPC 2.0 error codes, and A2A's own in the server range.
const (
	codeParseError          = -32700
	codeInvalidRequest      = -32600
	codeMethodNotFound      = -32601
	codeInvalidParams       = -32602
	codeInternalError       = -32603
	codeTaskNotFound        = -32001
	codeTaskNotCancelable   = -32002
	codeUnsupportedOp       = -32004
	codeVersionNotSupported = -32009
)

// reasons are A2A's names of the codes, carried in the error's ErrorInfo
// detail as a2a-go writes them.
var reasons = map[int]string{
	codeParseError:          "PARSE_ERROR",
	codeInvalidRequest:      "INVALID_REQUEST",
	codeMethodNotFound:      "METHOD_NOT_FOUND",
	codeInvalidParams:       "INVALID_PARAMS",
	codeInternalError:       "INTERNAL_ERROR",
	codeTaskNotFound:        "TASK_NOT_FOUND",
	codeTaskNotCancelable:   "TASK_NOT_CANCELABLE",
	codeUnsupportedOp:       "UNSUPPORTED_OPERATION",
	codeVersionNotSupported: "VERSION_NOT_SUPPORTED",
}

// rpcError is a JSON-RPC error object. Details, when set, travel as a
// google.protobuf.Struct entry of data, where A2A v1.0 clients (a2a-go's
// among them) read an error's details.
type rpcError struct {
	Code    int
	Message string
	Details map[string]any
}

func (e *rpcError) Error() string { return e.Message }

func newError(code int, msg string) *rpcError { return &rpcError{Code: code, Message: msg} }

// MarshalJSON writes {code, message, data}: data is A2A v1.0's list of
// typed details, an ErrorInfo naming the reason first.
func (e *rpcError) MarshalJSON() ([]byte, error) {
	data := []map[string]any{{
		"@type":  "type.googleapis.com/google.rpc.ErrorInfo",
		"reason": reasons[e.Code],
		"domain": "a2a-protocol.org",
	}}
	if len(e.Details) > 0 {
		d := map[string]any{"@type": "type.googleapis.com/google.protobuf.Struct"}
		for k, v := range e.Details {
			if k != "@type" {
				d[k] = v
			}
		}
		data = append(data, d)
	}
	return json.Marshal(struct {
		Code    int              `json:"code"`
		Message string           `json:"message"`
		Data    []map[string]any `json:"data"`
	}{e.Code, e.Message, data})
}

// rpcRequest is one decoded JSON-RPC request.
type rpcRequest struct {
	// ID is the request's id as sent (a string or a number), echoed in the
	// answer; "null" when it could not be read.
	ID json.RawMessage
	// Method names the A2A operation.
	Method string
	// Params is the params object ("{}" when absent).
	Params json.RawMessage
}

var nullID = json.RawMessage("null")

// decodeRequest reads one JSON-RPC 2.0 request. The body must be one
// strict JSON value (no duplicate key anywhere, valid UTF-8: a parse
// error); an object with exactly the members jsonrpc "2.0", id (a string or
// a number: A2A's methods all answer, so a notification is refused),
// method (a non-empty string) and optionally params (an object), else an
// invalid request. A batch (an array) is an invalid request too: A2A
// defines none. The id is returned whenever it could be read, so the error
// names the request it answers.
func decodeRequest(body []byte) (rpcRequest, *rpcError) {
	req := rpcRequest{ID: nullID, Params: json.RawMessage("{}")}
	if err := strictjson.Check(body); err != nil {
		var se *strictjson.Error
		msg := "the body is not JSON"
		if errors.As(err, &se) {
			msg = "the body is not strict JSON: " + se.Msg
		}
		return req, newError(codeParseError, msg)
	}
	trimmed := bytes.TrimSpace(body)
	if len(trimmed) == 0 || trimmed[0] != '{' {
		if len(trimmed) > 0 && trimmed[0] == '[' {
			return req, newError(codeInvalidRequest, "batches are not served: send one request object")
		}
		return req, newError(codeInvalidRequest, "the request must be a JSON object")
	}
	var members map[string]json.RawMessage
	if err := json.Unmarshal(trimmed, &members); err != nil {
		return req, newError(codeParseError, "the body is not JSON")
	}
	if id, ok := members["id"]; ok {
		if c := firstByte(id); c == '"' || c == '-' || (c >= '0' && c <= '9') {
			req.ID = id
		}
	}
	for k := range members {
		switch k {
		case "jsonrpc", "id", "method", "params":
		default:
			return req, newError(codeInvalidRequest, "unknown member "+quote(k)+": a request has jsonrpc, id, method and params")
		}
	}
	var version string
	if err := json.Unmarshal(members["jsonrpc"], &version); err != nil || version != "2.0" {
		return req, newError(codeInvalidRequest, `jsonrpc must be "2.0"`)
	}
	id, ok := members["id"]
	if !ok {
		return req, newError(codeInvalidRequest, "id is required: every A2A method answers, so notifications are not served")
	}
	if c := firstByte(id); c != '"' && c != '-' && (c < '0' || c > '9') {
		return req, newError(codeInvalidRequest, "id must be a string or a number")
	}
	if err := json.Unmarshal(members["method"], &req.Method); err != nil || req.Method == "" {
		return req, newError(codeInvalidRequest, "method must be a non-empty string")
	}
	if p, ok := members["params"]; ok {
		if firstByte(p) != '{' {
			return req, newError(codeInvalidParams, "params must be an object")
		}
		req.Params = p
	}
	return req, nil
}

func firstByte(b []byte) byte {
	b = bytes.TrimSpace(b)
	if len(b) == 0 {
		return 0
	}
	return b[0]
}

// quote is s as a JSON string, at most 64 bytes of it.
func quote(s string) string {
	if len(s) > 64 {
		s = s[:64] + "…"
	}
	b, _ := json.Marshal(s)
	return string(b)
}
