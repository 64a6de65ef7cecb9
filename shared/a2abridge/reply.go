package a2abridge

import (
	"encoding/json"
	"net/http"
)

// replier writes the answer to one JSON-RPC request: one JSON response, or,
// for SendStreamingMessage, Server-Sent Events each carrying one JSON-RPC
// response with the request's id (an error included: a streaming client
// reads every answer from the stream).
type replier struct {
	w         http.ResponseWriter
	id        json.RawMessage
	streaming bool
	// status is the HTTP status of a plain answer: 200 but for a request
	// that names no agent (404) or is not JSON (415), which are answered
	// plainly even to a streaming method.
	status  int
	started bool
}

type response struct {
	JSONRPC string          `json:"jsonrpc"`
	ID      json.RawMessage `json:"id"`
	Result  any             `json:"result,omitempty"`
	Error   *rpcError       `json:"error,omitempty"`
}

func (o *replier) result(v any) { o.write(response{JSONRPC: "2.0", ID: o.id, Result: v}) }

func (o *replier) fail(e *rpcError) { o.write(response{JSONRPC: "2.0", ID: o.id, Error: e}) }

// event writes one streamed result.
func (o *replier) event(v any) { o.result(v) }

func (o *replier) write(r response) {
	body, err := json.Marshal(r)
	if err != nil {
		body, _ = json.Marshal(response{JSONRPC: "2.0", ID: o.id, Error: newError(codeInternalError, "internal error; try again later")})
	}
	if !o.streaming || o.status != 0 {
		h := o.w.Header()
		h.Set("Content-Type", "application/json")
		h.Set("Cache-Control", "no-store")
		status := o.status
		if status == 0 {
			status = http.StatusOK
		}
		o.w.WriteHeader(status)
		_, _ = o.w.Write(append(body, '\n'))
		return
	}
	if !o.started {
		h := o.w.Header()
		h.Set("Content-Type", "text/event-stream")
		h.Set("Cache-Control", "no-store")
		o.w.WriteHeader(http.StatusOK)
		o.started = true
	}
	// json.Marshal writes no newline, so the event is one data line.
	_, _ = o.w.Write([]byte("data: "))
	_, _ = o.w.Write(body)
	_, _ = o.w.Write([]byte("\n\n"))
	_ = http.NewResponseController(o.w).Flush()
}
