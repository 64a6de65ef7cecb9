package main

import (
	"bytes"
	"encoding/json"
	"io"
	"math"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"
)

// TestLatencyRowFields: a latency row, written to results.json as make
// bench writes it, carries sequential_round_trips (an integer),
// proxy_ms, p50_ms, p99_ms and usd_per_million in its values, so a
// program reading the figures cannot silently lose them. The row is made
// from a sample, without running the bench.
func TestLatencyRowFields(t *testing.T) {
	r := latencyRoute{id: "7x", name: "sample", fn: "world-send", status: 201}
	s := latencySample{ms: []float64{12, 10, 11, 40}, depth: 2, calls: map[string]int{"TransactWriteItems": 4}, readUnits: 0, writeUnits: 8,
		store: []float64{6, 4, 5, 30}, own: []float64{1, 1.5, 0.5, 2},
		opStore: map[string][]float64{"TransactWriteItems": {6, 4, 5, 30}}}
	row := latencyRow(Row{ID: r.id, Name: r.name}, r, 5*time.Millisecond, s)
	var b bytes.Buffer
	if err := WriteJSON(&b, Report{Rows: []Row{row}}); err != nil {
		t.Fatal(err)
	}
	var got struct {
		Rows []struct {
			ID     string                     `json:"id"`
			Status string                     `json:"status"`
			Values map[string]json.RawMessage `json:"values"`
		} `json:"rows"`
	}
	if err := json.Unmarshal(b.Bytes(), &got); err != nil {
		t.Fatal(err)
	}
	if len(got.Rows) != 1 || got.Rows[0].Status != string(Met) {
		t.Fatalf("rows %+v", got.Rows)
	}
	v := got.Rows[0].Values
	num := func(name string) float64 {
		t.Helper()
		raw, ok := v[name]
		if !ok {
			t.Fatalf("results.json row has no %s: %s", name, b.String())
		}
		var f float64
		if err := json.Unmarshal(raw, &f); err != nil {
			t.Fatalf("%s is not a number: %s", name, raw)
		}
		return f
	}
	if n := num("sequential_round_trips"); n != 2 || n != math.Trunc(n) || bytes.ContainsAny(v["sequential_round_trips"], ".eE") {
		t.Errorf("sequential_round_trips %s, want the integer 2", v["sequential_round_trips"])
	}
	if got := num("proxy_ms"); got != 5 {
		t.Errorf("proxy_ms %v, want 5", got)
	}
	if p50, p99 := num("p50_ms"), num("p99_ms"); p50 != 12 || p99 != 40 {
		t.Errorf("p50 %v, p99 %v; want 12 and 40", p50, p99)
	}
	// The store's share: the p50 of 6, 4, 5, 30 is 6, of the harness's
	// times 1.5; each request less its store time is 6, 6, 6, 10.
	if got := num("store_ms"); got != 6 {
		t.Errorf("store_ms %v, want 6", got)
	}
	if got := num("harness_ms"); got != 1.5 {
		t.Errorf("harness_ms %v, want 1.5", got)
	}
	if l50, l99 := num("p50_less_store_ms"), num("p99_less_store_ms"); l50 != 6 || l99 != 10 {
		t.Errorf("p50_less_store_ms %v, p99_less_store_ms %v; want 6 and 10", l50, l99)
	}
	if !strings.Contains(row.Result, "TransactWriteItems 6.0") {
		t.Errorf("result %q does not give the transaction's p50 at the store", row.Result)
	}
	// 256 MB (world-send's memory): gateway 1.00 + Lambda request 0.20 +
	// 12 ms × 0.25 GB × 0.0000133334 × 1e6 + 2 write units × 0.625.
	want := 1.00 + 0.20 + 0.012*0.25*0.0000133334*1e6 + 2*0.625
	if got := num("usd_per_million"); math.Abs(got-want) > 1e-9 {
		t.Errorf("usd_per_million %v, want %v", got, want)
	}
	if got := num("memory_mb"); got != 256 {
		t.Errorf("memory_mb %v, want 256 (world-send in shared/routes)", got)
	}
}

// TestLatencyRowOverTwo: a route past 2 sequential round trips misses its
// target.
func TestLatencyRowOverTwo(t *testing.T) {
	row := latencyRow(Row{ID: "7y"}, latencyRoute{fn: "world-join"}, 5*time.Millisecond, latencySample{ms: []float64{30}, depth: 3, calls: map[string]int{}})
	if row.Status != Missed || row.Values["sequential_round_trips"] != 3 {
		t.Errorf("row %+v", row)
	}
}

// TestStoreTime: side-by-side calls count once, calls one after another
// add up, and the delay before forwarding is the store's only in
// inFlight.
func TestStoreTime(t *testing.T) {
	t0 := time.Unix(0, 0)
	at := func(ms float64) time.Time { return t0.Add(time.Duration(ms * float64(time.Millisecond))) }
	calls := []proxyCall{
		// Two side by side: in flight 0–9, at the store 5–9.
		{start: at(0), forwarded: at(5), done: at(8)},
		{start: at(1), forwarded: at(6), done: at(9)},
		// Then one alone: in flight 10–17, at the store 15–17.
		{start: at(10), forwarded: at(15), done: at(17)},
	}
	store, inFlight := storeTime(calls)
	if store != 6*time.Millisecond || inFlight != 16*time.Millisecond {
		t.Errorf("store %v, in flight %v; want 6ms and 16ms", store, inFlight)
	}
	if s, f := storeTime(nil); s != 0 || f != 0 {
		t.Errorf("no calls: %v, %v", s, f)
	}
}

// TestDelayProxy: the proxy forwards each call no sooner than its delay,
// records its operation from X-Amz-Target, and take empties the record.
func TestDelayProxy(t *testing.T) {
	upstream := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_, _ = io.WriteString(w, "{}")
	}))
	defer upstream.Close()
	const d = 2 * time.Millisecond
	px, err := newDelayProxy(upstream.URL, d)
	if err != nil {
		t.Fatal(err)
	}
	defer px.Close()
	req, _ := http.NewRequest("POST", px.URL, strings.NewReader("{}"))
	req.Header.Set("X-Amz-Target", "DynamoDB_20120810.TransactWriteItems")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	_, _ = io.ReadAll(resp.Body)
	resp.Body.Close()
	calls := px.take()
	if len(calls) != 1 {
		t.Fatalf("%d calls recorded, want 1", len(calls))
	}
	c := calls[0]
	if c.op != "TransactWriteItems" {
		t.Errorf("op %q", c.op)
	}
	if c.forwarded.Sub(c.start) < d || c.done.Before(c.forwarded) {
		t.Errorf("start %v, forwarded %v, done %v: forwarded before the delay", c.start, c.forwarded, c.done)
	}
	if n := len(px.take()); n != 0 {
		t.Errorf("take after take: %d calls", n)
	}
}
