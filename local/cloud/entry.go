// Package cloud stands in for the AWS services around the functions, as
// strictly as they behave in AWS: Lambda's invocation (the event serialized
// to JSON bytes and parsed back by the function's entry as lambda.NewHandler
// parses it, its timeout, its 6 MB payload limits), API Gateway HTTP API's
// Lambda proxy integration (payload format 2.0, its size limits and 30 s
// integration timeout), a DynamoDB stream event source mapping over a
// store.Feed, and EventBridge schedules. The harness (local/harness) builds it over every function.
package cloud

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"runtime/debug"
	"sync"
	"time"

	"github.com/aws/aws-lambda-go/events"
	"github.com/aws/aws-lambda-go/lambda"
	"github.com/aws/aws-lambda-go/lambdacontext"
)

// Lambda's limits on a synchronous invocation: 6 MiB for the request event
// and 6 MiB + 100 bytes for the response, as measured on AWS.
const (
	MaxRequestPayload  = 6 << 20
	MaxResponsePayload = 6<<20 + 100
)

// Invocation errors. The gateway maps each to API Gateway's answer.
var (
	// ErrTimeout means the function ran past its timeout; its result, if
	// it ever comes, is discarded.
	ErrTimeout = errors.New("task timed out")
	// ErrRequestTooLarge means the event exceeded MaxRequestPayload; the
	// function was not called.
	ErrRequestTooLarge = errors.New("request payload exceeds Lambda's 6 MB limit")
	// ErrResponseTooLarge means the function answered more than
	// MaxResponsePayload bytes.
	ErrResponseTooLarge = errors.New("response payload exceeds Lambda's 6 MB limit")
)

// PanicError is a function that panicked. Lambda reports it as a failed
// invocation (and restarts the execution environment); here it is one
// failed invocation and the process lives on.
type PanicError struct {
	Value any
	Stack []byte
}

func (e *PanicError) Error() string { return fmt.Sprintf("panic: %v", e.Value) }

// Entry is one function's Lambda entry: the very function its main passes
// to lambda.Start, driven as lambda.NewHandler drives it so that every
// event is serialized to JSON and decoded again as in Lambda (an HTTP API
// function's by httpHandler, which does the same without reflection).
//
// A lambda.Handler serves one invocation at a time (its output buffer is
// reused by the next call), as one Lambda execution environment does, so
// an Entry keeps a set of workers, each a goroutine with its own handler:
// one per concurrent invocation, kept warm between invocations. The
// invoking goroutine waits for its worker or for the deadline, whichever
// comes first, so a function that overruns is answered at its timeout; a
// goroutine started per invocation would do the same but pay for its
// creation and for growing its stack to the handler's depth every time.
type Entry struct {
	name    string
	arn     string // FunctionARN(name), built once
	timeout time.Duration
	fn      any
	now     func() time.Time

	mu   sync.Mutex
	idle []*worker // most recently used last
}

// An idle worker is stopped when another is released after it has waited
// longer than workerIdle, and idle ones beyond maxIdleWorkers are stopped
// at once: the set follows the recent peak of concurrent invocations.
const (
	workerIdle     = time.Minute
	maxIdleWorkers = 256
)

// worker runs one invocation at a time on its own handler.
type worker struct {
	jobs chan job    // closed when the worker is to stop
	done chan result // buffered: a result nobody waits for any more is dropped
	// idleSince is when the worker was last released (guarded by Entry.mu).
	idleSince time.Time
}

type job struct {
	ctx     context.Context
	payload []byte
}

type result struct {
	out string
	err error
}

// NewEntry returns the entry of function name, running fn (anything
// lambda.Start accepts) under timeout.
func NewEntry(name string, fn any, timeout time.Duration) *Entry {
	return &Entry{name: name, arn: FunctionARN(name), timeout: timeout, fn: fn, now: time.Now}
}

// Name is the function's name.
func (e *Entry) Name() string { return e.name }

// Timeout is the function's configured timeout.
func (e *Entry) Timeout() time.Duration { return e.timeout }

// Invoke runs the function on a JSON event as Lambda's runtime does: with a
// deadline at the function's timeout and a lambdacontext carrying the
// request id (taken from ctx when the caller put one there). It returns the
// function's JSON response, or ErrTimeout, ErrRequestTooLarge,
// ErrResponseTooLarge, a *PanicError, the function's own error, or ctx's
// error when the caller gave up first.
func (e *Entry) Invoke(ctx context.Context, payload []byte) ([]byte, error) {
	out, err := e.invoke(ctx, payload)
	if err != nil {
		return nil, err
	}
	return []byte(out), nil
}

// invoke is Invoke with the response as a string: the one copy taken of
// the handler's reused output buffer, which the gateway parses without
// copying it again.
func (e *Entry) invoke(ctx context.Context, payload []byte) (string, error) {
	if len(payload) > MaxRequestPayload {
		return "", fmt.Errorf("%s: %w (%d bytes)", e.name, ErrRequestTooLarge, len(payload))
	}
	parent := ctx
	ctx, cancel := context.WithTimeout(ctx, e.timeout)
	defer cancel()
	if _, ok := lambdacontext.FromContext(ctx); !ok {
		ctx = lambdacontext.NewContext(ctx, &lambdacontext.LambdaContext{
			AwsRequestID:       NewRequestID(),
			InvokedFunctionArn: e.arn,
		})
	}
	w := e.acquire()
	w.jobs <- job{ctx: ctx, payload: payload}
	select {
	case r := <-w.done:
		e.release(w)
		if r.err != nil {
			return "", r.err
		}
		if len(r.out) > MaxResponsePayload {
			return "", fmt.Errorf("%s: %w (%d bytes)", e.name, ErrResponseTooLarge, len(r.out))
		}
		return r.out, nil
	case <-ctx.Done():
		// The function is still running, or its result lost the race
		// with the deadline: either way it is discarded, and the worker
		// stops once the function returns instead of serving again.
		close(w.jobs)
		if parent.Err() != nil {
			return "", parent.Err()
		}
		return "", fmt.Errorf("%s: %w after %v", e.name, ErrTimeout, e.timeout)
	}
}

// acquire takes the most recently used idle worker, or starts one.
func (e *Entry) acquire() *worker {
	e.mu.Lock()
	if n := len(e.idle); n > 0 {
		w := e.idle[n-1]
		e.idle[n-1] = nil
		e.idle = e.idle[:n-1]
		e.mu.Unlock()
		return w
	}
	e.mu.Unlock()
	w := &worker{jobs: make(chan job), done: make(chan result, 1)}
	go w.run(e.fn)
	return w
}

// release returns w to the idle set and stops the workers that have not
// been needed for a while.
func (e *Entry) release(w *worker) {
	now := e.now()
	w.idleSince = now
	e.mu.Lock()
	e.idle = append(e.idle, w)
	var stale []*worker
	for len(e.idle) > 0 && (len(e.idle) > maxIdleWorkers || now.Sub(e.idle[0].idleSince) > workerIdle) {
		stale = append(stale, e.idle[0])
		e.idle[0] = nil
		e.idle = e.idle[1:]
	}
	e.mu.Unlock()
	for _, s := range stale {
		close(s.jobs)
	}
}

// run serves jobs until jobs is closed.
func (w *worker) run(fn any) {
	h := newHandler(fn)
	for j := range w.jobs {
		r, panicked := invokeHandler(h, j)
		if panicked {
			// Lambda replaces an execution environment whose function
			// panicked; a fresh handler is the nearest thing here.
			h = newHandler(fn)
		}
		w.done <- r
	}
}

// HTTPHandler is the signature of an HTTP API function's entry (what
// shared/lambdahttp.Entry returns).
type HTTPHandler = func(context.Context, events.APIGatewayV2HTTPRequest) (events.APIGatewayV2HTTPResponse, error)

// newHandler is lambda.NewHandler(fn), except for an HTTPHandler: that one
// is driven by httpHandler, which does what lambda.NewHandler's reflection
// does for that signature with the same bytes in and out.
func newHandler(fn any) lambda.Handler {
	if f, ok := fn.(HTTPHandler); ok {
		return &httpHandler{fn: f}
	}
	return lambda.NewHandler(fn)
}

// httpHandler runs an HTTPHandler as lambda.NewHandler does — the event
// decoded as by json.Decoder.Decode, the response encoded as by a
// json.Encoder without HTML escaping and its newline dropped — but with
// parseEvent and AppendResponse instead of reflection (encoding/json
// decides every event parseEvent does not take). The tests hold the two
// to the same output for the same payload.
type httpHandler struct {
	fn  HTTPHandler
	out []byte // reused by the next invocation, as lambda.NewHandler's buffer is
}

func (h *httpHandler) Invoke(ctx context.Context, payload []byte) ([]byte, error) {
	ev, ok := parseEvent(payload)
	if !ok {
		// Decoded into a variable of its own, which escapes to the heap
		// on this path only.
		var slow events.APIGatewayV2HTTPRequest
		if err := json.NewDecoder(bytes.NewReader(payload)).Decode(&slow); err != nil {
			return nil, err
		}
		ev = slow
	}
	resp, err := h.fn(ctx, ev)
	if err != nil {
		return nil, err
	}
	h.out = AppendResponse(h.out[:0], &resp)
	return h.out, nil
}

// invokeHandler runs one invocation, turning a panic into a *PanicError.
func invokeHandler(h lambda.Handler, j job) (r result, panicked bool) {
	defer func() {
		if v := recover(); v != nil {
			r, panicked = result{err: &PanicError{Value: v, Stack: debug.Stack()}}, true
		}
	}()
	out, err := h.Invoke(j.ctx, j.payload)
	// The handler reuses out's memory on its next call.
	return result{out: string(out), err: err}, false
}

// FunctionARN is the local stand-in for a function's ARN.
func FunctionARN(name string) string {
	return "arn:aws:lambda:local:000000000000:function:" + name
}

// NewRequestID returns a random request id (32 hex digits).
func NewRequestID() string {
	var b [16]byte
	_, _ = rand.Read(b[:])
	return hex.EncodeToString(b[:])
}
