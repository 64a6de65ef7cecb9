package cloud

import (
	"testing"
	"time"
)

// TestRequestTimeIsFormat: the hand-written requestContext.time is what
// time.Format writes with the layout, at zone offsets other than UTC's, at
// the edges of months, days and years, and outside four-digit years.
func TestRequestTimeIsFormat(t *testing.T) {
	east := time.FixedZone("east", 5*3600+30*60)
	for _, tm := range []time.Time{
		time.Date(2026, 12, 2, 1, 4, 5, 999, time.UTC),
		time.Date(2026, 1, 1, 0, 0, 0, 0, east), // the previous year in UTC
		time.Date(1999, 12, 31, 23, 59, 59, 0, time.UTC),
		time.Date(2024, 2, 29, 12, 7, 9, 0, time.UTC),
		time.Date(1000, 1, 1, 0, 0, 0, 0, time.UTC),
		time.Date(9999, 12, 31, 23, 59, 59, 0, time.UTC),
		time.Date(999, 5, 6, 7, 8, 9, 0, time.UTC),
		time.Date(10000, 1, 1, 0, 0, 0, 0, time.UTC),
		time.Unix(0, 0),
	} {
		if got, want := requestTime(tm), tm.UTC().Format(requestTimeLayout); got != want {
			t.Errorf("requestTime(%v) = %q, want %q", tm, got, want)
		}
	}
}

// FuzzRequestTime: on any instant, requestTime agrees with time.Format.
func FuzzRequestTime(f *testing.F) {
	f.Add(int64(1764637445), int64(0))
	f.Add(int64(-62135596800), int64(1))
	f.Add(int64(253402300799), int64(999999999))
	f.Fuzz(func(t *testing.T, sec, nsec int64) {
		tm := time.Unix(sec, nsec)
		if got, want := requestTime(tm), tm.UTC().Format(requestTimeLayout); got != want {
			t.Fatalf("requestTime(%v) = %q, want %q", tm, got, want)
		}
	})
}
