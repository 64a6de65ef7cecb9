package embedded

import (
	"context"
	"fmt"
	"sync"
	"time"

	"github.com/aws/aws-lambda-go/events"

	"github.com/a2awire/a2awire/shared/store"
)

// ErrClosed is returned by a feed Read that the engine's Close interrupted.
var ErrClosed = fmt.Errorf("store closed: %w", store.ErrUnavailable)

// Notifier wakes feed readers when records are appended. A reader takes
// Wait's channel before looking for records, then waits on it: a record
// appended in between closes that very channel, so no wake-up is lost.
type Notifier struct {
	mu sync.Mutex
	ch chan struct{}
}

// Wait returns a channel closed by the next Notify.
func (n *Notifier) Wait() <-chan struct{} {
	n.mu.Lock()
	defer n.mu.Unlock()
	if n.ch == nil {
		n.ch = make(chan struct{})
	}
	return n.ch
}

// Notify wakes every reader waiting on an earlier Wait channel.
func (n *Notifier) Notify() {
	n.mu.Lock()
	defer n.mu.Unlock()
	if n.ch != nil {
		close(n.ch)
		n.ch = nil
	}
}

// ReadArgs checks a feed Read's arguments.
func ReadArgs(consumer string, max int) error {
	if consumer == "" {
		return fmt.Errorf("feed consumer is empty: %w", store.ErrInvalid)
	}
	if max <= 0 {
		return fmt.Errorf("feed read of %d records: %w", max, store.ErrInvalid)
	}
	return nil
}

// CommitArgs checks a feed Commit's arguments and returns the sequence.
func CommitArgs(consumer, seq string) (uint64, error) {
	if consumer == "" {
		return 0, fmt.Errorf("feed consumer is empty: %w", store.ErrInvalid)
	}
	n, err := store.ParseSequenceNumber(seq)
	if err != nil {
		return 0, fmt.Errorf("sequence number %q: %w", seq, store.ErrInvalid)
	}
	return n, nil
}

// WaitRead returns the first non-empty result of try, trying again each
// time n signals new records, until ctx ends or closed is closed.
func WaitRead(ctx context.Context, n *Notifier, closed <-chan struct{}, try func() ([]events.DynamoDBEventRecord, error)) ([]events.DynamoDBEventRecord, error) {
	for {
		wake := n.Wait()
		recs, err := try()
		if err != nil || len(recs) > 0 {
			return recs, err
		}
		select {
		case <-wake:
		case <-closed:
			return nil, ErrClosed
		case <-ctx.Done():
			return nil, ctx.Err()
		}
	}
}

// SweepEvery calls sweep every interval until closed is closed, as
// DynamoDB's TTL deletes expired items in the background. A failed sweep (a
// disk error) is retried at the next tick; expired items stay readable
// meanwhile, as on DynamoDB. done is called when it returns.
func SweepEvery(every time.Duration, closed <-chan struct{}, sweep func() (int, error), done func()) {
	defer done()
	t := time.NewTicker(every)
	defer t.Stop()
	for {
		select {
		case <-closed:
			return
		case <-t.C:
			_, _ = sweep()
		}
	}
}
