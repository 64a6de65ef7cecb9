package harness_test

import (
	"net/http"
	"net/http/httptest"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/a2awire/a2awire/functions/fixture-punctual/punctual"
	"github.com/a2awire/a2awire/local/harness"
	"github.com/a2awire/a2awire/shared/logging"
)

// BenchmarkGateway measures what the in-process API Gateway adds (event
// building, the httpadapter round trip, response writing) over calling the
// punctual handler directly, in the same run. Besides ns/op it reports
// cpu-ns/op, the process's CPU time (user and system, GC included) per
// request: on a machine shared with other work, wall time per op swings
// with the neighbours' load, CPU time much less.
func BenchmarkGateway(b *testing.B) {
	const body = `{"task":"ping","input":{"echo":"hi"}}`
	gw, err := harness.New(harness.Options{Log: logging.Discard()})
	if err == nil {
		defer gw.Close()
	}
	if err != nil {
		b.Fatal(err)
	}
	for _, bc := range []struct {
		name string
		h    http.Handler
	}{{"direct", punctual.New(logging.Discard())}, {"gateway", gw}} {
		b.Run(bc.name, func(b *testing.B) {
			b.ReportAllocs()
			cpu0 := cpuTime(b)
			for b.Loop() {
				r := httptest.NewRequest(http.MethodPost, "/agents/a2awire-punctual/invoke", strings.NewReader(body))
				r.Header.Set("Content-Type", "application/json")
				w := httptest.NewRecorder()
				bc.h.ServeHTTP(w, r)
				if w.Code != 200 {
					b.Fatalf("status %d", w.Code)
				}
			}
			b.ReportMetric(float64(cpuTime(b)-cpu0)/float64(b.N), "cpu-ns/op")
		})
	}
}

// cpuTime is the CPU time the process has used so far.
func cpuTime(b *testing.B) time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		b.Fatal(err)
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}
