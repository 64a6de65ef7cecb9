package bolt

import (
	"testing"

	bbolt "go.etcd.io/bbolt"
)

// SweepEvery exposes the sweep interval to the external tests.
const SweepEvery = sweepEvery

// CountIdem counts stored idempotency records, live or not.
func CountIdem(t testing.TB, s *Store) int {
	t.Helper()
	var n int
	err := s.db.View(func(tx *bbolt.Tx) error {
		n = tx.Bucket([]byte(bucketIdem)).Stats().KeyN
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return n
}
