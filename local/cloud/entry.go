// Package cloud stands in for the AWS services around the functions, as
// strictly as they behave in AWS: Lambda's invocation (the event serialized
// to JSON and back through the function's own lambda.Handler, its timeout,
// its 6 MB payload limits), API Gateway HTTP API's Lambda proxy integration
// (payload format 2.0, its size limits and 30 s integration timeout), a
// DynamoDB stream event source mapping over a store.Feed, and EventBridge
// schedules. The harness (local/harness) builds it over every function.
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
// serialized to JSON and decoded again as in Lambda.
//
// A lambda.Handler serves one invocation at a time (its output buffer is
// reused by the next call), as one Lambda execution environment does, so
// an Entry keeps a pool of them: one per concurrent invocation.
type Entry struct {
	name     string
	timeout  time.Duration
	handlers sync.Pool
}

// NewEntry returns the entry of function name, running fn (anything
// lambda.Start accepts) under timeout.
func NewEntry(name string, fn any, timeout time.Duration) *Entry {
	e := &Entry{name: name, timeout: timeout}
	e.handlers.New = func() any { return lambda.NewHandler(fn) }
	return e
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
	if len(payload) > MaxRequestPayload {
		return nil, fmt.Errorf("%s: %w (%d bytes)", e.name, ErrRequestTooLarge, len(payload))
	}
	parent := ctx
	ctx, cancel := context.WithTimeout(ctx, e.timeout)
	defer cancel()
	if _, ok := lambdacontext.FromContext(ctx); !ok {
		ctx = lambdacontext.NewContext(ctx, &lambdacontext.LambdaContext{
			AwsRequestID:       NewRequestID(),
			InvokedFunctionArn: FunctionARN(e.name),
		})
	}
	type result struct {
		out []byte
		err error
	}
	// Buffered, so a function that finishes after its deadline does not
	// leak a goroutine: its late result is dropped here.
	done := make(chan result, 1)
	go func() {
		h := e.handlers.Get().(lambda.Handler)
		var r result
		func() {
			defer func() {
				if v := recover(); v != nil {
					r = result{err: &PanicError{Value: v, Stack: debug.Stack()}}
				}
			}()
			out, err := h.Invoke(ctx, payload)
			// The handler reuses out's memory on its next call: copy
			// before the handler goes back to the pool.
			r = result{out: bytes.Clone(out), err: err}
		}()
		e.handlers.Put(h)
		done <- r
	}()
	select {
	case r := <-done:
		if r.err != nil {
			return nil, r.err
		}
		if len(r.out) > MaxResponsePayload {
			return nil, fmt.Errorf("%s: %w (%d bytes)", e.name, ErrResponseTooLarge, len(r.out))
		}
		return r.out, nil
	case <-ctx.Done():
		if parent.Err() != nil {
			return nil, parent.Err()
		}
		return nil, fmt.Errorf("%s: %w after %v", e.name, ErrTimeout, e.timeout)
	}
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
