package protocol_test

import (
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
)

// BenchmarkInvoke measures the provider kit's overhead (decode, route,
// time, render) against a baseline handler that writes a fixed response
// for the same request, in the same run.
func BenchmarkInvoke(b *testing.B) {
	const body = `{"task":"echo","input":{"n":7}}`
	fixed := []byte(`{"output":{"n":7},"metadata":{"agent":"test-agent","capability":"echo","duration_ms":0}}`)
	baseline := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		_, _ = w.Write(fixed)
	})
	for _, bc := range []struct {
		name string
		h    http.Handler
	}{{"baseline", baseline}, {"kit", newTestProvider()}} {
		b.Run(bc.name, func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				r := httptest.NewRequest(http.MethodPost, "/", strings.NewReader(body))
				r.Header.Set("Content-Type", "application/json")
				w := httptest.NewRecorder()
				bc.h.ServeHTTP(w, r)
				if w.Code != 200 {
					b.Fatalf("status %d", w.Code)
				}
			}
		})
	}
}
