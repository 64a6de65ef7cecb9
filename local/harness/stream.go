package harness

import (
	"fmt"
	"net/http"
	"time"

	"github.com/a2awire/a2awire/shared/routes"
)

// The streaming functions (routes.Function.Streaming) are served here, on
// the harness's own port, rather than by the gateway: in AWS their routes
// are a Lambda function URL's in RESPONSE_STREAM mode, not API Gateway's,
// and the handler their main gives lambdaurl is the http.Handler the
// harness calls directly. Every Write reaches the client at once (the
// writer is flushed after each), as lambdaurl's pipe sends each Write to
// the runtime API.

// ServeHTTP serves a streaming function's route itself and hands every
// other request to the gateway.
func (h *Harness) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if rt, _, ok := routes.Match(r.Method, r.URL.Path); ok {
		if sh, ok := h.streaming[rt.Function]; ok {
			h.serveStream(sh, rt.Function, w, r)
			return
		}
	}
	h.Gateway.ServeHTTP(w, r)
}

// serveStream runs a streaming handler for as long as its function's
// timeout allows, lifting the server's read and write deadlines (sized for
// API Gateway's 30 s) for this response alone: a Lambda function URL
// streams up to the function's timeout.
func (h *Harness) serveStream(sh streamFunction, name string, w http.ResponseWriter, r *http.Request) {
	rc := http.NewResponseController(w)
	// A read deadline that passes while the handler runs would cancel the
	// request's context (net/http's background read), ending the stream.
	_ = rc.SetReadDeadline(time.Time{})
	_ = rc.SetWriteDeadline(time.Now().Add(sh.timeout + 5*time.Second))
	if h.log != nil {
		h.log.Info("stream", "function", name, "method", r.Method, "path", r.URL.Path)
	}
	sh.handler.ServeHTTP(flushing{w, rc}, r)
}

// streamFunction is a streaming function as the harness runs it.
type streamFunction struct {
	handler http.Handler
	timeout time.Duration
}

// flushing flushes after every Write: no byte of a stream waits in the
// server's buffer.
type flushing struct {
	http.ResponseWriter
	rc *http.ResponseController
}

func (f flushing) Write(p []byte) (int, error) {
	n, err := f.ResponseWriter.Write(p)
	if err != nil {
		return n, err
	}
	return n, f.rc.Flush()
}

func (f flushing) Flush() { _ = f.rc.Flush() }

// Unwrap lets http.ResponseController reach the server's writer.
func (f flushing) Unwrap() http.ResponseWriter { return f.ResponseWriter }

// streamHandler is the http.Handler a streaming function's builder made,
// or one answering 500 when the builder failed (what a function URL
// answers for a function whose init failed).
func streamHandler(name string, built any) http.Handler {
	if sh, ok := built.(http.Handler); ok {
		return sh
	}
	return http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		http.Error(w, fmt.Sprintf("Internal Server Error (%s did not start)", name), http.StatusInternalServerError)
	})
}
