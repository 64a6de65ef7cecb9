package main

import (
	"bytes"
	"encoding/json"
	"math"
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
	s := latencySample{ms: []float64{12, 10, 11, 40}, depth: 2, calls: map[string]int{"TransactWriteItems": 4}, readUnits: 0, writeUnits: 8}
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
