package dynamo

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	mrand "math/rand/v2"
	"sync/atomic"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/aws/retry"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
	"github.com/aws/smithy-go"

	"github.com/a2awire/a2awire/shared/store"
)

// ErrOutcomeUnknown marks a write whose request may or may not have been
// applied: the connection failed or timed out after sending it, DynamoDB
// answered with an internal error, or the caller's context ended while it
// was in flight. It is store.ErrOutcomeUnknown, so domains test for it
// without knowing the engine; it does not wrap store.ErrUnavailable (which
// promises that nothing was written): the caller must treat the write as
// possibly done and resolve it (re-read, or retry a write that is safe to repeat).
var ErrOutcomeUnknown = store.ErrOutcomeUnknown

// Default retry bounds. Throttling and transaction conflicts are DynamoDB's
// way of saying "not now": jittered exponential backoff spreads the racers
// out, and after the bound the write fails with store.ErrUnavailable (a 503
// with Retry-After) rather than holding a Lambda for seconds.
const (
	defaultAttempts = 10
	defaultBase     = 5 * time.Millisecond
	defaultMax      = 500 * time.Millisecond
	defaultInFlight = 16
)

// noSDKRetry is applied to every call: this package owns the retry loop,
// because only it knows whether a failed attempt may have been applied
// (the SDK's standard retryer would resend an UpdateItem that ADDs after a
// lost response, and its client-side retry quota replaces a throttling
// error with one that hides whether the request ran at all).
func noSDKRetry(o *dynamodb.Options) { o.Retryer = aws.NopRetryer{} }

// class is what a failed attempt says about the request.
type class int

const (
	// final: DynamoDB decided (a failed condition, an invalid request, a
	// missing table); retrying gives the same answer.
	final class = iota
	// notApplied: DynamoDB refused the request before applying anything
	// (throttled, or a transaction conflict); it may be retried.
	notApplied
	// unknown: the request may have been applied (network failure,
	// internal error, timeout, a transaction with this token in progress).
	unknown
)

// throttleCodes are DynamoDB's "slow down" errors; each rejects the request
// before it runs.
var throttleCodes = map[string]bool{
	"ProvisionedThroughputExceededException": true,
	"ThrottlingException":                    true,
	"RequestLimitExceeded":                   true,
	"TransactionConflictException":           true,
}

// retryableReasons are the cancellation reasons of TransactWriteItems that
// mean "not now" rather than "no".
var retryableReasons = map[string]bool{
	"None":                          true,
	"TransactionConflict":           true,
	"ThrottlingError":               true,
	"ProvisionedThroughputExceeded": true,
}

func classify(err error) class {
	var tce *types.TransactionCanceledException
	if errors.As(err, &tce) {
		any := false
		for _, r := range tce.CancellationReasons {
			code := aws.ToString(r.Code)
			if !retryableReasons[code] {
				return final
			}
			any = any || code != "None"
		}
		if any {
			return notApplied
		}
		return final
	}
	var api smithy.APIError
	if errors.As(err, &api) {
		switch code := api.ErrorCode(); {
		case throttleCodes[code]:
			return notApplied
		case code == "TransactionInProgressException":
			return unknown
		}
	}
	if retry.IsErrorRetryables(retry.DefaultRetryables).IsErrorRetryable(err) == aws.TrueTernary {
		// 5xx, connection reset, timeouts: the request may have run.
		return unknown
	}
	return final
}

// policy is a Store's retry bound, clock and admission limit.
type policy struct {
	attempts  int
	base, max time.Duration
	sleep     func(context.Context, time.Duration) error
	// slots bounds the requests in flight (nil: no bound). A request that
	// cannot get a slot before its context ends was never sent.
	slots chan struct{}
	// latency is a moving average of request round trips, shared by the
	// Store's calls (see run).
	latency *ewma
}

// ewma is an exponentially weighted moving average of durations that
// forgets itself when no sample came for staleAfter: requests the guard
// holds back produce no samples, so a stale average (from a burst that
// has passed) must not keep refusing them.
type ewma struct{ v, at atomic.Int64 }

const staleAfter = time.Second

func (e *ewma) get() time.Duration {
	if time.Since(time.Unix(0, e.at.Load())) > staleAfter {
		return 0
	}
	return time.Duration(e.v.Load())
}

// add folds d in with weight 1/8; racing updates may lose one sample,
// which an average can afford.
func (e *ewma) add(d time.Duration) {
	old := e.get()
	if old == 0 {
		e.v.Store(int64(d))
	} else {
		e.v.Store(int64(old) + (int64(d)-int64(old))/8)
	}
	e.at.Store(time.Now().UnixNano())
}

// admit waits for a request slot.
func (p policy) admit(ctx context.Context) (release func(), err error) {
	if p.slots == nil {
		return func() {}, nil
	}
	select {
	case p.slots <- struct{}{}:
		return func() { <-p.slots }, nil
	case <-ctx.Done():
		return nil, ctx.Err()
	}
}

// backoff is full jitter over an exponential ceiling.
func (p policy) backoff(attempt int) time.Duration {
	ceil := p.max
	if attempt < 30 {
		ceil = min(p.max, p.base<<attempt)
	}
	if ceil <= 0 {
		return 0
	}
	return mrand.N(ceil) + 1
}

// kind of request for the retry loop.
type reqKind int

const (
	readReq   reqKind = iota // writes nothing: safe to resend
	singleReq                // PutItem / UpdateItem / DeleteItem: a resend may apply twice
	txReq                    // TransactWriteItems with a client request token
)

// run calls call until it succeeds, fails for good, or the bound is spent.
// How the outcome is decided:
//
//   - A final error is returned as it is (the caller maps it).
//   - notApplied attempts are retried; when the bound or the context runs
//     out and every attempt was notApplied, the error wraps
//     store.ErrUnavailable: nothing was written.
//   - An unknown attempt of a single-item write stops at once with
//     ErrOutcomeUnknown: resending could apply it twice, and claiming
//     nothing was written could be false.
//   - A transaction resends with the same client request token after an
//     unknown attempt, which DynamoDB deduplicates for 10 minutes
//     (a resend with it applies nothing twice): a success or a
//     final answer then settles the outcome. When the bound runs out first,
//     the outcome stays unknown (ErrOutcomeUnknown). After notApplied
//     attempts only, a fresh token is used, so a conflict is never replayed
//     from DynamoDB's record of the token.
//   - Reads retry notApplied and unknown alike and end in
//     store.ErrUnavailable.
//
// call gets keepToken = true when an earlier attempt's outcome is unknown
// (a transaction must then resend its token).
func (p policy) run(ctx context.Context, kind reqKind, call func(ctx context.Context, keepToken bool) error) error {
	uncertain := false
	var last error // the previous attempt's error
	if err := ctx.Err(); err != nil {
		return fmt.Errorf("not sent: %w", err) // the caller gave up first
	}
	for attempt := 0; ; attempt++ {
		release, err := p.admit(ctx)
		if err != nil {
			// Not sent: only earlier attempts can have been applied.
			if last != nil {
				err = fmt.Errorf("%w (last error: %w)", err, last)
			}
			if kind == readReq {
				return fmt.Errorf("%w: waiting for a request slot: %w", store.ErrUnavailable, err)
			}
			return p.exhausted(uncertain, attempt, fmt.Errorf("waiting for a request slot: %w", err))
		}
		if dl, ok := ctx.Deadline(); ok && p.latency != nil && time.Until(dl) < p.latency.get() {
			// Too little time left for a round trip as they go now: a
			// request sent anyway would likely end with its outcome
			// unknown. Not sending it keeps the answer exact.
			release()
			err := fmt.Errorf("%v left, round trips take about %v", time.Until(dl).Round(time.Millisecond), p.latency.get().Round(time.Millisecond))
			if last != nil {
				err = fmt.Errorf("%w (last error: %w)", err, last)
			}
			if kind == readReq {
				return fmt.Errorf("%w: %w", store.ErrUnavailable, err)
			}
			return p.exhausted(uncertain, attempt, err)
		}
		sent := time.Now()
		err = call(ctx, uncertain)
		release()
		if p.latency != nil && ctx.Err() == nil {
			p.latency.add(time.Since(sent))
		}
		last = err
		if err == nil {
			return nil
		}
		if ctx.Err() != nil {
			if kind == readReq {
				return err
			}
			// The request was in flight when the context ended.
			return fmt.Errorf("%w: %w", ErrOutcomeUnknown, err)
		}
		switch classify(err) {
		case final:
			return err
		case unknown:
			switch kind {
			case singleReq:
				return fmt.Errorf("%w: %w", ErrOutcomeUnknown, err)
			case txReq:
				uncertain = true
			}
		}
		if attempt+1 >= p.attempts {
			return p.exhausted(uncertain, attempt+1, err)
		}
		if serr := p.sleep(ctx, p.backoff(attempt)); serr != nil {
			return p.exhausted(uncertain, attempt+1, fmt.Errorf("%w (last error: %w)", serr, err))
		}
	}
}

func (p policy) exhausted(uncertain bool, n int, err error) error {
	if uncertain {
		return fmt.Errorf("%w after %d attempts: %w", ErrOutcomeUnknown, n, err)
	}
	return fmt.Errorf("%w after %d attempts: %w", store.ErrUnavailable, n, err)
}

// sleep waits d or until ctx ends.
func sleep(ctx context.Context, d time.Duration) error {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return ctx.Err()
	case <-t.C:
		return nil
	}
}

// newToken returns a TransactWriteItems client request token (at most 36
// characters).
func newToken() string {
	var b [16]byte
	_, _ = rand.Read(b[:]) // crypto/rand.Read never fails
	return hex.EncodeToString(b[:])
}
