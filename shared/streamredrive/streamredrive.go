// Package streamredrive re-drives the batches a DynamoDB stream event
// source mapping gave up on. After its retries (or once a record is older
// than its maximum age) Lambda sends the batch's metadata — never its
// records — to the mapping's on-failure destination, an SQS queue: the
// shard, the first and last sequence number, how many records. The stream
// still holds those records for 24 hours from their commit, so a re-drive
// reads them back (GetShardIterator AT_SEQUENCE_NUMBER, GetRecords up to the
// last one) and invokes the function with them again, in batches of the
// trigger's size, through the same Lambda entry. What it cannot read back
// (trimmed from the stream, a shard it cannot find) or the function still
// refuses is reported and its message left in the queue.
//
// The local harness's stream driver writes the same failure record to its
// own queue (local/cloud), so the path is tested without AWS;
// cmd/a2awire-redrive is the operator's command.
package streamredrive

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/aws/aws-lambda-go/events"

	"github.com/a2awire/a2awire/shared/queue"
)

// Failure is the record a stream event source mapping sends to its
// on-failure destination (Lambda's invocation record for stream sources).
type Failure struct {
	RequestContext  RequestContext   `json:"requestContext"`
	ResponseContext *ResponseContext `json:"responseContext,omitempty"`
	Version         string           `json:"version"`
	Timestamp       string           `json:"timestamp"`
	Batch           BatchInfo        `json:"DDBStreamBatchInfo"`
}

// RequestContext says which function gave up and why.
type RequestContext struct {
	RequestID              string `json:"requestId"`
	FunctionArn            string `json:"functionArn"`
	Condition              string `json:"condition"`
	ApproximateInvokeCount int    `json:"approximateInvokeCount"`
}

// ResponseContext is the last invocation's outcome.
type ResponseContext struct {
	StatusCode      int    `json:"statusCode"`
	ExecutedVersion string `json:"executedVersion"`
	FunctionError   string `json:"functionError"`
}

// BatchInfo locates the given-up records in the stream.
type BatchInfo struct {
	ShardID                         string `json:"shardId"`
	StartSequenceNumber             string `json:"startSequenceNumber"`
	EndSequenceNumber               string `json:"endSequenceNumber"`
	ApproximateArrivalOfFirstRecord string `json:"approximateArrivalOfFirstRecord"`
	ApproximateArrivalOfLastRecord  string `json:"approximateArrivalOfLastRecord"`
	BatchSize                       int    `json:"batchSize"`
	StreamArn                       string `json:"streamArn"`
}

// Conditions of a Failure.
const (
	RetriesExhausted  = "RetryAttemptsExhausted"
	RecordAgeExceeded = "RecordAgeExceeded"
)

// ParseFailure reads a failure record (a message body of the on-failure
// queue). Unknown fields are allowed: Lambda may add some.
func ParseFailure(body string) (Failure, error) {
	var f Failure
	if err := json.Unmarshal([]byte(body), &f); err != nil {
		return Failure{}, fmt.Errorf("streamredrive: not a stream failure record: %w", err)
	}
	b := f.Batch
	if b.StartSequenceNumber == "" || b.EndSequenceNumber == "" {
		return Failure{}, errors.New("streamredrive: the failure record has no DDBStreamBatchInfo sequence range")
	}
	if !digits(b.StartSequenceNumber) || !digits(b.EndSequenceNumber) || SeqLess(b.EndSequenceNumber, b.StartSequenceNumber) {
		return Failure{}, fmt.Errorf("streamredrive: bad sequence range %q..%q", b.StartSequenceNumber, b.EndSequenceNumber)
	}
	return f, nil
}

// NewFailure is the record of a batch given up on: recs are the batch,
// oldest first, arn the function's. The harness's stream driver sends it.
func NewFailure(shardID, functionArn, condition string, invokes int, recs []events.DynamoDBEventRecord, now time.Time) Failure {
	first, last := recs[0], recs[len(recs)-1]
	arrival := func(r events.DynamoDBEventRecord) string {
		return r.Change.ApproximateCreationDateTime.UTC().Format(time.RFC3339)
	}
	return Failure{
		RequestContext:  RequestContext{RequestID: fmt.Sprintf("redrive-%d", now.UnixNano()), FunctionArn: functionArn, Condition: condition, ApproximateInvokeCount: invokes},
		ResponseContext: &ResponseContext{StatusCode: 200, ExecutedVersion: "$LATEST", FunctionError: "Unhandled"},
		Version:         "1.0",
		Timestamp:       now.UTC().Format(time.RFC3339Nano),
		Batch: BatchInfo{
			ShardID: shardID, StartSequenceNumber: first.Change.SequenceNumber, EndSequenceNumber: last.Change.SequenceNumber,
			ApproximateArrivalOfFirstRecord: arrival(first), ApproximateArrivalOfLastRecord: arrival(last),
			BatchSize: len(recs), StreamArn: first.EventSourceArn,
		},
	}
}

// SeqLess compares two stream sequence numbers (decimal strings of any
// length) as numbers.
func SeqLess(a, b string) bool {
	a, b = strings.TrimLeft(a, "0"), strings.TrimLeft(b, "0")
	if len(a) != len(b) {
		return len(a) < len(b)
	}
	return a < b
}

func digits(s string) bool {
	for i := 0; i < len(s); i++ {
		if s[i] < '0' || s[i] > '9' {
			return false
		}
	}
	return len(s) > 0
}

// ErrGone is what a Reader returns when the stream no longer holds the
// batch's records (older than the 24 hours, or a shard that is gone).
var ErrGone = errors.New("streamredrive: the stream no longer holds these records")

// Reader reads a batch's records back from the stream: every record of its
// shard from the start sequence number through the end one, oldest first.
// package dynamostream's RangeReader is the DynamoDB Streams one.
type Reader interface {
	ReadRange(ctx context.Context, b BatchInfo) ([]events.DynamoDBEventRecord, error)
}

// Invoker invokes the stream's function with a Lambda payload (an
// events.DynamoDBEvent as JSON) and returns its response: lambda.Handler's
// Invoke, or the harness's entry.
type Invoker interface {
	Invoke(ctx context.Context, payload []byte) ([]byte, error)
}

// Redriver empties an on-failure queue into its function.
type Redriver struct {
	// Failures is the on-failure queue.
	Failures queue.Queue
	// Stream reads the records back.
	Stream Reader
	// Function is invoked with them.
	Function Invoker
	// BatchSize is the most records per invocation (the trigger's).
	BatchSize int
}

// Report says what a Run did.
type Report struct {
	// Batches is how many failure records were read; Recovered how many of
	// them were re-driven whole (their messages deleted).
	Batches, Recovered int
	// Records counts the records handed to the function and acknowledged.
	Records int
	// Lost are the batches (or parts) not recovered, with why; their
	// messages stay in the queue.
	Lost []Loss
}

// Loss is a batch, or the part of one, a re-drive could not recover.
type Loss struct {
	Batch BatchInfo
	// Records is how many of its records are concerned (0: unknown).
	Records int
	Why     string
}

// Run re-drives every failure record the queue holds now and returns what
// it did. A record re-driven whole is deleted; one not (its records gone
// from the stream, refused again by the function) stays, invisible for
// the queue's visibility timeout, and is in Report.Lost. err is a failure
// to use the queue itself.
func (r *Redriver) Run(ctx context.Context) (Report, error) {
	var rep Report
	size := r.BatchSize
	if size <= 0 {
		size = 100
	}
	for {
		msgs, err := r.Failures.Receive(ctx, queue.MaxBatch, 0)
		if err != nil {
			return rep, fmt.Errorf("streamredrive: receive: %w", err)
		}
		if len(msgs) == 0 {
			return rep, nil
		}
		for _, m := range msgs {
			rep.Batches++
			f, err := ParseFailure(m.Body)
			if err != nil {
				rep.Lost = append(rep.Lost, Loss{Why: err.Error()})
				continue
			}
			n, loss := r.redrive(ctx, f.Batch, size)
			rep.Records += n
			if loss != nil {
				rep.Lost = append(rep.Lost, *loss)
				continue
			}
			if err := r.Failures.Delete(ctx, m.Receipt); err != nil {
				return rep, fmt.Errorf("streamredrive: delete a re-driven record: %w", err)
			}
			rep.Recovered++
		}
	}
}

// redrive reads one batch back and invokes the function on it; it returns
// how many records were acknowledged and, when not all were, the loss.
func (r *Redriver) redrive(ctx context.Context, b BatchInfo, size int) (int, *Loss) {
	recs, err := r.Stream.ReadRange(ctx, b)
	if err != nil {
		return 0, &Loss{Batch: b, Records: b.BatchSize, Why: err.Error()}
	}
	if len(recs) == 0 || recs[0].Change.SequenceNumber != b.StartSequenceNumber || recs[len(recs)-1].Change.SequenceNumber != b.EndSequenceNumber {
		// The range's ends are records of the batch: without both, some
		// of it is gone.
		return 0, &Loss{Batch: b, Records: b.BatchSize, Why: fmt.Sprintf("read back %d records, not the range's first and last", len(recs))}
	}
	done := 0
	for len(recs) > 0 {
		n := min(size, len(recs))
		acked, err := invoke(ctx, r.Function, recs[:n])
		done += acked
		if err != nil {
			return done, &Loss{Batch: b, Records: len(recs) - acked, Why: fmt.Sprintf("the function failed again from %s: %v", recs[acked].Change.SequenceNumber, err)}
		}
		recs = recs[n:]
	}
	return done, nil
}

// invoke hands one batch to the function and returns how many of its first
// records it acknowledged (all, or those before the lowest failure).
func invoke(ctx context.Context, fn Invoker, recs []events.DynamoDBEventRecord) (int, error) {
	payload, err := json.Marshal(events.DynamoDBEvent{Records: recs})
	if err != nil {
		return 0, err
	}
	out, err := fn.Invoke(ctx, payload)
	if err != nil {
		return 0, err
	}
	var resp events.DynamoDBEventResponse
	if len(out) > 0 && string(out) != "null" {
		if err := json.Unmarshal(out, &resp); err != nil {
			return 0, fmt.Errorf("unreadable response: %w", err)
		}
	}
	first := len(recs)
	for _, f := range resp.BatchItemFailures {
		i := -1
		for j, rec := range recs {
			if rec.Change.SequenceNumber == f.ItemIdentifier {
				i = j
			}
		}
		if i < 0 {
			return 0, fmt.Errorf("batchItemFailures names %q, not a record of the batch", f.ItemIdentifier)
		}
		first = min(first, i)
	}
	if first < len(recs) {
		return first, fmt.Errorf("record %s failed", recs[first].Change.SequenceNumber)
	}
	return len(recs), nil
}
