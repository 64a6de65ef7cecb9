package main

import (
	"bytes"
	"encoding/json"
	"strings"
	"testing"
	"unicode/utf8"
)

func sampleReport() Report {
	return Report{Machine: "test CPU, 2 cores", Started: "2026-12-01T00:00:00Z", Elapsed: "1m0s", Rows: []Row{
		{ID: "1", Name: "harness path", Result: "0.75 (a | b)", Target: "≥ 0.70", Status: Met, Method: "load generator", Values: map[string]float64{"ratio": 0.75}},
		{ID: "3a", Name: "cold start: a", Result: "INIT 2 ms", Target: "baseline", Status: Info, Method: "emulator"},
		{ID: "3b", Name: "cold start: b", Result: "INIT 4 ms", Target: "INIT ≤ 3 ms", Status: Missed, Method: "emulator"},
		{ID: "7", Name: "webhook fan-out", Result: "—", Target: "issue 12", Status: NotBuilt},
	}}
}

// TestWriteTable: one row per measure with its target and status next to
// the result, then each method once with the ids of the rows it measured.
func TestWriteTable(t *testing.T) {
	var b bytes.Buffer
	if err := WriteTable(&b, sampleReport()); err != nil {
		t.Fatal(err)
	}
	out := b.String()
	lines := strings.Split(out, "\n")
	find := func(prefix string) string {
		for _, l := range lines {
			if strings.HasPrefix(l, prefix) {
				return l
			}
		}
		t.Fatalf("no line starting %q in\n%s", prefix, out)
		return ""
	}
	for _, want := range [][]string{{"1 ", "harness path", "0.75 (a | b)", "≥ 0.70", "ok"}, {"3b ", "INIT 4 ms", "INIT ≤ 3 ms", "MISSED"}, {"7 ", "—", "not built yet"}} {
		l := find(want[0])
		for _, w := range want[1:] {
			if !strings.Contains(l, w) {
				t.Errorf("row %q lacks %q: %q", want[0], w, l)
			}
		}
	}
	// Columns line up: every status starts at the header's STATUS column.
	// (in characters: ≥ is three bytes).
	at := func(l, s string) int { return utf8.RuneCountInString(l[:strings.Index(l, s)]) }
	col := at(find("#"), "STATUS")
	if l := find("3b "); at(l, "MISSED") != col {
		t.Errorf("STATUS column at %d, MISSED at %d:\n%s", col, at(l, "MISSED"), out)
	}
	if !strings.Contains(out, "  3a, 3b: emulator\n") || !strings.Contains(out, "  1: load generator\n") {
		t.Errorf("methods not listed once with their rows:\n%s", out)
	}
	if !strings.Contains(out, "test CPU, 2 cores") {
		t.Errorf("machine missing:\n%s", out)
	}
}

// TestWriteJSON: results.json round-trips to the same report.
func TestWriteJSON(t *testing.T) {
	var b bytes.Buffer
	if err := WriteJSON(&b, sampleReport()); err != nil {
		t.Fatal(err)
	}
	var got Report
	if err := json.Unmarshal(b.Bytes(), &got); err != nil {
		t.Fatal(err)
	}
	if len(got.Rows) != 4 || got.Rows[0].Values["ratio"] != 0.75 || got.Rows[2].Status != Missed || got.Machine != "test CPU, 2 cores" {
		t.Errorf("round trip: %+v", got)
	}
}

// TestWriteMarkdown: a pipe in a cell is escaped so the row keeps its
// five columns; methods follow the table.
func TestWriteMarkdown(t *testing.T) {
	var b bytes.Buffer
	if err := WriteMarkdown(&b, sampleReport()); err != nil {
		t.Fatal(err)
	}
	for _, l := range strings.Split(b.String(), "\n") {
		if !strings.HasPrefix(l, "|") {
			continue
		}
		if n := strings.Count(strings.ReplaceAll(l, `\|`, ""), "|"); n != 6 {
			t.Errorf("%d pipes in %q", n, l)
		}
	}
	if !strings.Contains(b.String(), "- 3a, 3b: emulator\n") {
		t.Errorf("methods missing:\n%s", b.String())
	}
	if !strings.Contains(b.String(), `0.75 (a \| b)`) {
		t.Errorf("pipe not escaped:\n%s", b.String())
	}
}

// TestParseGoBench: medians per benchmark across -count runs, the
// GOMAXPROCS suffix dropped, other lines ignored.
func TestParseGoBench(t *testing.T) {
	in := `goos: linux
BenchmarkInvoke/kit-2   	  100	     3000 ns/op	  500 B/op	  10 allocs/op
BenchmarkInvoke/kit-2   	  100	     1000 ns/op	  400 B/op	  10 allocs/op
BenchmarkInvoke/kit-2   	  100	     2000 ns/op	  450 B/op	  10 allocs/op
BenchmarkInvoke/baseline-2   	  100	     500 ns/op	  100 B/op	  2 allocs/op
BenchmarkEd25519Verify   	  100	     50 ns/op	  0 B/op	  0 allocs/op
BenchmarkGateway/gateway-2   	  100	     9000 ns/op	  12000 cpu-ns/op	  900 B/op	  30 allocs/op
BenchmarkGateway/direct-2   	  100	     3000 ns/op	  4000 cpu-ns/op	  300 B/op	  10 allocs/op
PASS
`
	got, err := parseGoBench(strings.NewReader(in))
	if err != nil {
		t.Fatal(err)
	}
	if k := got["BenchmarkInvoke/kit"]; k.NsOp != 2000 || k.BytesOp != 450 || k.AllocsOp != 10 || k.Runs != 3 {
		t.Errorf("kit: %+v", k)
	}
	if e, ok := got["BenchmarkEd25519Verify"]; !ok || e.NsOp != 50 {
		t.Errorf("ed25519: %+v %v", e, ok)
	}
	if len(got) != 5 {
		t.Errorf("%d benchmarks, want 5: %v", len(got), got)
	}
	rows := benchRows(got, "x.txt")
	if rows[0].Status != Info || rows[0].Values["ratio"] != 4 || rows[0].Values["allocs_op"] != 10 {
		t.Errorf("row 2a: %+v", rows[0])
	}
	if !strings.Contains(rows[0].Result, "(4.0×; +1.50 µs per request)") {
		t.Errorf("row 2a result %q", rows[0].Result)
	}
	if got := signed(-5031); got != "−5.03 µs" {
		t.Errorf("signed(-5031) = %q", got)
	}
	if rows[0].Values["cpu_ns_op"] != 0 || strings.Contains(rows[0].Result, "CPU") {
		t.Errorf("row 2a shows a CPU figure its benchmark did not report: %q", rows[0].Result)
	}
	if !strings.Contains(rows[1].Result, "; CPU 12.00 µs vs 4.00 µs per op (3.0×)") || rows[1].Values["cpu_ns_op"] != 12000 {
		t.Errorf("row 2b result %q, values %v", rows[1].Result, rows[1].Values)
	}
	if rows[2].Status != Failed {
		t.Errorf("row 5a without its benchmarks: %+v, want FAILED", rows[2])
	}
}

// TestWriteTableFitsATerminal: rows whose result, target and method run
// to hundreds of characters wrap within Width columns, every word kept,
// each row's id and status on its first line.
func TestWriteTableFitsATerminal(t *testing.T) {
	long := strings.Repeat("0.736 (median of 12 rounds, 0.64–0.79, pooled 0.73; harness 30842 req/s, p50 0.42 ms) ", 8)
	rep := sampleReport()
	rep.Rows = append(rep.Rows,
		Row{ID: "9", Name: "harness path: punctual ping, requests/s harness ÷ bare net/http", Result: long, Target: "≥ 0.70 (stretch 0.80) and " + long[:200], Status: Missed, Method: long},
		Row{ID: "10", Name: "one-word", Result: strings.Repeat("x", 250), Target: "t", Status: Met})
	var b bytes.Buffer
	if err := WriteTable(&b, rep); err != nil {
		t.Fatal(err)
	}
	out := b.String()
	for i, l := range strings.Split(out, "\n") {
		if n := utf8.RuneCountInString(l); n > Width {
			t.Errorf("line %d is %d columns: %q", i+1, n, l)
		}
	}
	joined := strings.Join(strings.Fields(out), " ")
	for _, word := range strings.Fields(long) {
		if !strings.Contains(joined, word) {
			t.Fatalf("word %q of the result lost", word)
		}
	}
	xs := 0
	for _, f := range strings.Fields(out) {
		if strings.Trim(f, "x") == "" {
			xs += len(f)
		}
	}
	if xs != 250 {
		t.Errorf("the 250-character word shows %d of its characters", xs)
	}
	var first string
	for _, l := range strings.Split(out, "\n") {
		if strings.HasPrefix(l, "9 ") {
			first = l
			break
		}
	}
	if !strings.HasSuffix(first, "MISSED") {
		t.Errorf("row 9's first line does not end with its status: %q", first)
	}
}

// TestSummaryNamesWhatMissed: the summary line counts each status and
// names the rows that missed or failed; it is in the table's output.
func TestSummaryNamesWhatMissed(t *testing.T) {
	rows := append(sampleReport().Rows, Row{ID: "8", Status: Failed})
	got := Summary(rows)
	want := "summary: 5 rows: 1 ok, 1 MISSED (3b), 1 FAILED (8), 1 info, 1 not built yet"
	if got != want {
		t.Fatalf("Summary = %q, want %q", got, want)
	}
	if got := Summary(sampleReport().Rows[:1]); got != "summary: 1 rows: 1 ok, 0 missed, 0 failed" {
		t.Fatalf("all met: %q", got)
	}
	var b bytes.Buffer
	if err := WriteTable(&b, sampleReport()); err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(b.String(), "\nsummary: 4 rows: 1 ok, 1 MISSED (3b), 0 failed, 1 info, 1 not built yet\n") {
		t.Errorf("no summary line in the table:\n%s", b.String())
	}
}

// TestVerdictFailsOnAMissedRow: make bench exits non-zero (run returns an
// error) when a row missed its target or failed, naming it; met, info and
// not-built rows pass.
func TestVerdictFailsOnAMissedRow(t *testing.T) {
	if err := verdict(sampleReport().Rows); err == nil || err.Error() != "rows 3b missed their targets" {
		t.Fatalf("a MISSED row: %v", err)
	}
	rows := append(sampleReport().Rows, Row{ID: "8", Status: Failed})
	if err := verdict(rows); err == nil || !strings.Contains(err.Error(), "rows 8 could not be measured") {
		t.Fatalf("a FAILED row: %v", err)
	}
	ok := sampleReport().Rows
	ok = append(ok[:2:2], ok[3])
	if err := verdict(ok); err != nil {
		t.Fatalf("no row missed: %v", err)
	}
}
