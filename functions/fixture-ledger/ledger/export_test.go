package ledger

import "time"

// SetRetries shrinks b's optimistic retry budget, so that a test can
// exhaust it quickly.
func SetRetries(b *Book, attempts int, backoff time.Duration) {
	b.maxAttempts, b.backoffBase, b.backoffMax = attempts, backoff, backoff
}

// SetFenceTimeout bounds b's settling of an unknown outcome, so that a test
// of a fence that never lands does not wait out the real bound, and returns
// the bound it replaced.
func SetFenceTimeout(b *Book, d time.Duration) (was time.Duration) {
	was, b.fenceTimeout = b.fenceTimeout, d
	return was
}
