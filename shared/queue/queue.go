// Package queue is a message queue with the semantics of an Amazon SQS
// standard queue that a2awire's webhook delivery relies on, and nothing
// more:
//
//   - Send: a message becomes visible after its delay (at most MaxDelay).
//   - Receive: up to a batch of visible messages, long-polling up to a
//     wait; each received message is invisible for the queue's visibility
//     timeout and carries a fresh receipt and its receive count.
//   - Delete acknowledges a received message by its receipt;
//     ChangeVisibility sets how long until a received message is visible
//     again (how a failed delivery's early retry waits in the queue).
//   - Redrive: a message received MaxReceiveCount times without being
//     deleted moves to the queue's dead-letter queue on its next receive.
//
// Delivery is at least once and unordered, as with SQS standard queues.
// Partial batch failure is the consumer's: delete what succeeded, leave
// the rest to come back (local/cloud's queue driver does it as Lambda's
// event source mapping does).
//
// Memory (this package) is the in-process queue the local harness runs;
// package sqsqueue is Amazon SQS through aws-sdk-go-v2; package queuetest
// is the conformance suite both pass.
package queue

import (
	"context"
	"errors"
	"time"
)

// MaxDelay is the longest delay SQS accepts on a message, and MaxVisibility
// the longest visibility timeout.
const (
	MaxDelay      = 15 * time.Minute
	MaxVisibility = 12 * time.Hour
	// MaxBatch is the most messages one Receive returns (and SQS takes per
	// SendMessageBatch).
	MaxBatch = 10
	// MaxBody is the largest message body SQS accepts.
	MaxBody = 256 * 1024
)

// ErrReceiptInvalid is returned by Delete and ChangeVisibility for a
// receipt that does not name a message this queue holds received (SQS's
// ReceiptHandleIsInvalid), e.g. one already deleted.
var ErrReceiptInvalid = errors.New("queue: receipt does not name a received message")

// Message is one message to send.
type Message struct {
	Body string
	// Delay is how long the message stays invisible after it is sent
	// (0..MaxDelay; SQS counts whole seconds, rounding up).
	Delay time.Duration
}

// Received is a received message.
type Received struct {
	ID      string
	Body    string
	Receipt string
	// ReceiveCount is how many times the message has been received,
	// this time included.
	ReceiveCount int
	SentAt       time.Time
}

// Queue is a message queue (see the package doc).
type Queue interface {
	// Send enqueues msgs; all or an error.
	Send(ctx context.Context, msgs ...Message) error
	// Receive returns up to max (1..MaxBatch) visible messages, waiting up
	// to wait for the first one; none and no error when wait passes.
	Receive(ctx context.Context, max int, wait time.Duration) ([]Received, error)
	// Delete removes a received message.
	Delete(ctx context.Context, receipt string) error
	// ChangeVisibility makes a received message visible again after d
	// (0..MaxVisibility) from now.
	ChangeVisibility(ctx context.Context, receipt string, d time.Duration) error
}

// Config are a queue's settings, as the deploy gives the SQS queue.
type Config struct {
	// VisibilityTimeout is how long a received message stays invisible
	// unless deleted or changed.
	VisibilityTimeout time.Duration
	// MaxReceiveCount is the receives after which a message moves to DLQ
	// (0: never).
	MaxReceiveCount int
}
