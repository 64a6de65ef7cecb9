package ledger

import "time"

// SetRetries shrinks b's optimistic retry budget, so that a test can
// exhaust it quickly.
func SetRetries(b *Book, attempts int, backoff time.Duration) {
	b.maxAttempts, b.backoffBase, b.backoffMax = attempts, backoff, backoff
}
