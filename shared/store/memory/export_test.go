package memory

// SweepEvery exposes the sweep interval to the external tests.
const SweepEvery = sweepEvery

// CountIdem counts stored idempotency records, live or not.
func CountIdem(s *Store) int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return len(s.idem)
}
