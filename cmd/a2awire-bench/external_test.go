package main

import (
	"os"
	"strings"
	"testing"
)

// TestParseWrk reads the rate, the request count and every failed
// response from wrk's summary, and refuses output without a rate.
func TestParseWrk(t *testing.T) {
	out := `Running 10s test @ http://127.0.0.1:18080/agents/a2awire-punctual/invoke
  2 threads and 16 connections
  Thread Stats   Avg      Stdev     Max   +/- Stdev
    Latency     1.02ms    1.31ms  33.62ms   93.58%
    Req/Sec     8.71k     1.06k   11.43k    70.50%
  173397 requests in 10.00s, 50.77MB read
  Socket errors: connect 0, read 2, write 1, timeout 4
  Non-2xx or 3xx responses: 5
Requests/sec:  17336.42
Transfer/sec:      5.08MB
`
	r, err := parseWrk([]byte(out))
	if err != nil {
		t.Fatal(err)
	}
	if r.requests != 173397 || r.rps != 17336.42 || r.bad != 12 {
		t.Errorf("parsed %+v, want 173397 requests, 17336.42 req/s, 12 bad (5 non-2xx + 7 socket errors)", r)
	}
	if _, err := parseWrk([]byte(strings.Split(out, "Requests/sec")[0])); err == nil {
		t.Error("output without Requests/sec parsed without an error")
	}
}

// TestStatTicks adds utime and stime, counting fields from after the
// command name, which may hold spaces and parentheses.
func TestStatTicks(t *testing.T) {
	line := "4242 (a2awire (x) y) S 1 4242 4242 0 -1 4194560 1234 0 0 0 731 209 0 0 20 0 9 0 123 0 0\n"
	n, err := statTicks([]byte(line))
	if err != nil || n != 731+209 {
		t.Errorf("statTicks = %d, %v; want 940", n, err)
	}
	if _, err := statTicks([]byte("4242 (x) S 1 2")); err == nil {
		t.Error("a short line parsed without an error")
	}
	if _, err := processTicks(os.Getpid()); err != nil {
		t.Errorf("this process's own stat: %v", err)
	}
}
