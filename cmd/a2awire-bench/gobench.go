package main

import (
	"bufio"
	"fmt"
	"io"
	"slices"
	"strconv"
	"strings"
)

// benchStat is the median of one Go benchmark's runs (-count N).
type benchStat struct {
	NsOp, BytesOp, AllocsOp float64
	// CPUNsOp is the benchmark's own cpu-ns/op metric (process CPU time
	// per op), zero when it reports none.
	CPUNsOp float64
	Runs    int
}

// parseGoBench reads `go test -bench -benchmem` output and returns each
// benchmark's median figures, keyed by name without the -GOMAXPROCS suffix
// (BenchmarkInvoke/kit).
func parseGoBench(r io.Reader) (map[string]benchStat, error) {
	type samples struct{ ns, b, allocs, cpu []float64 }
	all := map[string]*samples{}
	sc := bufio.NewScanner(r)
	for sc.Scan() {
		f := strings.Fields(sc.Text())
		if len(f) < 4 || !strings.HasPrefix(f[0], "Benchmark") {
			continue
		}
		name := f[0]
		if i := strings.LastIndexByte(name, '-'); i > 0 {
			if _, err := strconv.Atoi(name[i+1:]); err == nil {
				name = name[:i]
			}
		}
		s := all[name]
		if s == nil {
			s = &samples{}
			all[name] = s
		}
		for i := 2; i+1 < len(f); i += 2 {
			v, err := strconv.ParseFloat(f[i], 64)
			if err != nil {
				continue
			}
			switch f[i+1] {
			case "ns/op":
				s.ns = append(s.ns, v)
			case "B/op":
				s.b = append(s.b, v)
			case "allocs/op":
				s.allocs = append(s.allocs, v)
			case "cpu-ns/op":
				s.cpu = append(s.cpu, v)
			}
		}
	}
	if err := sc.Err(); err != nil {
		return nil, fmt.Errorf("read benchmark output: %w", err)
	}
	out := map[string]benchStat{}
	for name, s := range all {
		out[name] = benchStat{NsOp: median(s.ns), BytesOp: median(s.b), AllocsOp: median(s.allocs), CPUNsOp: median(s.cpu), Runs: len(s.ns)}
	}
	return out, nil
}

// median is the middle of v (the upper middle of an even count), 0 for none.
func median(v []float64) float64 {
	if len(v) == 0 {
		return 0
	}
	v = slices.Clone(v)
	slices.Sort(v)
	return v[len(v)/2]
}

// benchRows are rows 2 and 5, from the Go benchmarks' output.
func benchRows(stats map[string]benchStat, file string) []Row {
	how := func(pkg, names string) string {
		return fmt.Sprintf("go test -bench -benchmem -count N %s (%s), median of the runs; raw benchstat-ready output in %s", pkg, names, file)
	}
	pair := func(id, name, target, method, subject, base string) Row {
		row := Row{ID: id, Name: name, Target: target, Method: method}
		s, ok1 := stats[subject]
		b, ok2 := stats[base]
		if !ok1 || !ok2 {
			return failed(row, fmt.Errorf("no %s or %s in %s", subject, base, file))
		}
		row.Status = Info
		row.Result = fmt.Sprintf("%s, %.0f allocs/op, %.0f B/op vs %s, %.0f allocs/op (%.1f×; %s per request)",
			nsString(s.NsOp), s.AllocsOp, s.BytesOp, nsString(b.NsOp), b.AllocsOp, s.NsOp/b.NsOp, signed(s.NsOp-b.NsOp))
		row.Values = map[string]float64{"ns_op": s.NsOp, "allocs_op": s.AllocsOp, "bytes_op": s.BytesOp,
			"baseline_ns_op": b.NsOp, "baseline_allocs_op": b.AllocsOp, "ratio": s.NsOp / b.NsOp}
		if s.CPUNsOp > 0 && b.CPUNsOp > 0 {
			// CPU time per op varies less than wall time on a shared machine.
			row.Result += fmt.Sprintf("; CPU %s vs %s per op (%.1f×)", nsString(s.CPUNsOp), nsString(b.CPUNsOp), s.CPUNsOp/b.CPUNsOp)
			row.Values["cpu_ns_op"], row.Values["baseline_cpu_ns_op"] = s.CPUNsOp, b.CPUNsOp
		}
		return row
	}
	return []Row{
		pair("2a", "protocol kit: decode + dispatch + encode vs a bare handler", "reported against the baseline (no written target)",
			how("./shared/protocol", "BenchmarkInvoke/kit vs /baseline, httptest request and recorder in both"), "BenchmarkInvoke/kit", "BenchmarkInvoke/baseline"),
		pair("2b", "in-process gateway (event → JSON → Lambda entry → JSON) vs the punctual handler called directly", "reported (row 1 is the throughput target)",
			how("./local/harness", "BenchmarkGateway/gateway vs /direct"), "BenchmarkGateway/gateway", "BenchmarkGateway/direct"),
		pair("5a", "signing: whole verification per request (no store) vs bare ed25519.Verify of the same base", "reported against the baseline (no written target)",
			how("./shared/auth", "BenchmarkVerifyNoStore vs BenchmarkEd25519Verify"), "BenchmarkVerifyNoStore", "BenchmarkEd25519Verify"),
		pair("5b", "signing: verification with the nonce claimed in the memory store vs bare ed25519.Verify", "reported (the nonce is 1 conditional PutItem on DynamoDB)",
			how("./shared/auth", "BenchmarkVerify vs BenchmarkEd25519Verify"), "BenchmarkVerify", "BenchmarkEd25519Verify"),
	}
}

// signed renders a difference with its sign: "+7.83 µs", "−5.03 µs" (a
// negative overhead means the machine was too noisy to tell them apart).
func signed(ns float64) string {
	if ns < 0 {
		return "−" + nsString(-ns)
	}
	return "+" + nsString(ns)
}

func nsString(ns float64) string {
	switch {
	case ns >= 1e6:
		return fmt.Sprintf("%.2f ms", ns/1e6)
	case ns >= 1e3:
		return fmt.Sprintf("%.2f µs", ns/1e3)
	}
	return fmt.Sprintf("%.0f ns", ns)
}
