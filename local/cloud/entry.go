// Package cloud stands in for the AWS services around the functions, as
// strictly as they behave in AWS: Lambda's invocation (the event serialized
// to JSON bytes with encoding/json and decoded by lambda.NewHandler, its
// timeout, its 6 MB payload limits), API Gateway HTTP API's
// Lambda proxy integration (payload format 2.0, its size limits and 30 s
// integration timeout), a DynamoDB stream event source mapping over a
// store.Feed, and EventBridge schedules. The harness (local/harness) builds it over every function.
package cloud

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"runtime/debug"
	"sync"
	"time"

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
// to lambda.Start, driven through lambda.NewHandler so that every event is
// serialized to JSON and decoded again with encoding/json, and every
// response encoded with it, as in Lambda.
//
// A lambda.Handler serves one invocation at a time (its output buffer is
// reused by the next call), as one Lambda execution environment does, so
// an Entry keeps a set of handlers: one per concurrent invocation, kept
// between invocations and dropped when not needed for a while. The gateway
// runs each invocation on its request's own goroutine, a watch at the
// deadline answering for a function that overruns, which spares every
// request a hand-off to another goroutine and back. Invoke, for everything
// else, waits on its own goroutine for the function or the deadline.
type Entry struct {
	name    string
	arn     string // FunctionARN(name), built once
	timeout time.Duration
	fn      any
	now     func() time.Time

	mu   sync.Mutex
	idle []idleHandler // most recently used last

	running sync.WaitGroup // Invoke's function goroutines, for Drain
}

// An idle handler is dropped when another is released after it has waited
// longer than handlerIdle, and idle ones beyond maxIdleHandlers are
// dropped at once: the set follows the recent peak of concurrent
// invocations, and so does the memory their output buffers hold.
const (
	handlerIdle     = time.Minute
	maxIdleHandlers = 256
)

type idleHandler struct {
	h     lambda.Handler
	since time.Time // when it was last released
}

type result struct {
	out []byte // the function's response, a copy of its own
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
// error when the caller gave up first. A function that overruns is
// answered for at its deadline and left to finish on its own.
func (e *Entry) Invoke(ctx context.Context, payload []byte) ([]byte, error) {
	fctx, cancel, err := e.begin(ctx, payload)
	if err != nil {
		return nil, err
	}
	defer cancel()
	done := make(chan result, 1) // buffered: a late result nobody waits for is dropped
	e.running.Go(func() { done <- e.run(fctx, payload) })
	select {
	case r := <-done:
		return e.checked(r)
	case <-fctx.Done():
		return nil, e.expired(ctx)
	}
}

// Drain waits for the functions Invoke left running past their caller: a
// trigger stopping on a cancelled context answers at once, as Lambda's
// poller does, while the function may still be writing. Whoever closes
// what the functions use (a store) drains first.
func (e *Entry) Drain() { e.running.Wait() }

// invokeHere is Invoke run on the calling goroutine. When the deadline passes first, expired is called on another
// goroutine with the error Invoke would return, at the deadline; invokeHere
// itself returns that same error once the function is done, its result
// discarded.
func (e *Entry) invokeHere(ctx context.Context, payload []byte, expired func(error)) ([]byte, error) {
	fctx, cancel, err := e.begin(ctx, payload)
	if err != nil {
		return nil, err
	}
	defer cancel()
	stop := context.AfterFunc(fctx, func() { expired(e.expired(ctx)) })
	r := e.run(fctx, payload)
	if !stop() {
		// The deadline came first, even if only just: Lambda discards
		// a result that comes after it.
		return nil, e.expired(ctx)
	}
	return e.checked(r)
}

// begin checks the event's size and returns the invocation's context: the
// function's deadline and a lambdacontext.
func (e *Entry) begin(ctx context.Context, payload []byte) (context.Context, context.CancelFunc, error) {
	if len(payload) > MaxRequestPayload {
		return nil, nil, fmt.Errorf("%s: %w (%d bytes)", e.name, ErrRequestTooLarge, len(payload))
	}
	fctx, cancel := context.WithTimeout(ctx, e.timeout)
	if _, ok := lambdacontext.FromContext(fctx); !ok {
		fctx = lambdacontext.NewContext(fctx, &lambdacontext.LambdaContext{
			AwsRequestID:       NewRequestID(),
			InvokedFunctionArn: e.arn,
		})
	}
	return fctx, cancel, nil
}

// expired is the error of an invocation whose context ended before the
// function returned: the caller's own when it gave up first.
func (e *Entry) expired(parent context.Context) error {
	if err := parent.Err(); err != nil {
		return err
	}
	return fmt.Errorf("%s: %w after %v", e.name, ErrTimeout, e.timeout)
}

// checked applies Lambda's response limit to a result.
func (e *Entry) checked(r result) ([]byte, error) {
	if r.err != nil {
		return nil, r.err
	}
	if len(r.out) > MaxResponsePayload {
		return nil, fmt.Errorf("%s: %w (%d bytes)", e.name, ErrResponseTooLarge, len(r.out))
	}
	return r.out, nil
}

// run invokes the function on the calling goroutine with a handler of its
// own. A handler whose function panicked or overran its deadline is not
// used again: Lambda replaces such an execution environment.
func (e *Entry) run(ctx context.Context, payload []byte) result {
	h := e.acquire()
	r, panicked := invokeHandler(ctx, h, payload)
	if !panicked && ctx.Err() == nil {
		e.release(h)
	}
	return r
}

// acquire takes the most recently used idle handler, or makes one.
func (e *Entry) acquire() lambda.Handler {
	e.mu.Lock()
	if n := len(e.idle); n > 0 {
		h := e.idle[n-1].h
		e.idle[n-1] = idleHandler{}
		e.idle = e.idle[:n-1]
		e.mu.Unlock()
		return h
	}
	e.mu.Unlock()
	return lambda.NewHandler(e.fn)
}

// release returns h to the idle set and drops the handlers that have not
// been needed for a while.
func (e *Entry) release(h lambda.Handler) {
	now := e.now()
	e.mu.Lock()
	defer e.mu.Unlock()
	e.idle = append(e.idle, idleHandler{h: h, since: now})
	drop := 0
	for drop < len(e.idle) && (len(e.idle)-drop > maxIdleHandlers || now.Sub(e.idle[drop].since) > handlerIdle) {
		drop++
	}
	if drop > 0 {
		n := copy(e.idle, e.idle[drop:])
		clear(e.idle[n:])
		e.idle = e.idle[:n]
	}
}

// invokeHandler runs one invocation, turning a panic into a *PanicError.
func invokeHandler(ctx context.Context, h lambda.Handler, payload []byte) (r result, panicked bool) {
	defer func() {
		if v := recover(); v != nil {
			r, panicked = result{err: &PanicError{Value: v, Stack: debug.Stack()}}, true
		}
	}()
	out, err := h.Invoke(ctx, payload)
	// The handler reuses out's memory on its next call.
	return result{out: bytes.Clone(out), err: err}, false
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
