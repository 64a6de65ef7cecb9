package main

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/a2awire/a2awire/functions/fixture-punctual/punctual"
	"github.com/a2awire/a2awire/local/cloud"
	"github.com/a2awire/a2awire/local/harness"
	"github.com/a2awire/a2awire/shared/logging"
)

const (
	pingPath = "/agents/a2awire-punctual/invoke"
	pingBody = `{"task":"ping","input":{"echo":"hi"}}`
)

// loadResult is what one load run saw.
type loadResult struct {
	requests  int
	errors    int
	elapsed   time.Duration
	latencies []time.Duration
	// cpu is the CPU time the whole process (load generator, server,
	// GC) used during the run.
	cpu time.Duration
}

// load sends punctual pings to url from conns keep-alive connections, each
// one request at a time (closed loop, as wrk does), until the duration has
// passed or, when total > 0, until total requests have been sent.
func load(ctx context.Context, url string, conns int, d time.Duration, total int64) loadResult {
	tr := &http.Transport{MaxIdleConnsPerHost: conns, MaxConnsPerHost: conns, DisableCompression: true}
	defer tr.CloseIdleConnections()
	client := &http.Client{Transport: tr, Timeout: 35 * time.Second}
	ctx, cancel := context.WithTimeout(ctx, d)
	defer cancel()
	var sent atomic.Int64
	var mu sync.Mutex
	res := loadResult{}
	var wg sync.WaitGroup
	cpu0 := processCPU()
	start := time.Now()
	for range conns {
		wg.Go(func() {
			lat := make([]time.Duration, 0, 1<<14)
			errs := 0
			body := []byte(pingBody)
			for ctx.Err() == nil {
				if total > 0 && sent.Add(1) > total {
					break
				}
				req, _ := http.NewRequestWithContext(ctx, http.MethodPost, url, bytes.NewReader(body))
				req.Header.Set("Content-Type", "application/json")
				t0 := time.Now()
				resp, err := client.Do(req)
				if err != nil {
					if ctx.Err() == nil {
						errs++
					}
					continue
				}
				_, _ = io.Copy(io.Discard, resp.Body)
				resp.Body.Close()
				if resp.StatusCode != http.StatusOK {
					errs++
					continue
				}
				lat = append(lat, time.Since(t0))
			}
			mu.Lock()
			res.latencies = append(res.latencies, lat...)
			res.errors += errs
			mu.Unlock()
		})
	}
	wg.Wait()
	res.elapsed = time.Since(start)
	res.cpu = processCPU() - cpu0
	res.requests = len(res.latencies)
	return res
}

// percentile returns the p-th percentile (0..100) of sorted latencies.
func percentile(sorted []time.Duration, p float64) time.Duration {
	if len(sorted) == 0 {
		return 0
	}
	i := int(float64(len(sorted)-1) * p / 100)
	return sorted[i]
}

// processCPU is the user and system CPU time this process has used; zero
// when the kernel will not say.
func processCPU() time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

func ms(d time.Duration) float64 { return float64(d.Microseconds()) / 1000 }

// serve runs h on a fresh loopback listener and returns its base URL and a
// stop function.
func serve(srv *http.Server) (string, func(), error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return "", nil, fmt.Errorf("listen: %w", err)
	}
	go func() { _ = srv.Serve(ln) }()
	return "http://" + ln.Addr().String(), func() { _ = srv.Close() }, nil
}

// harnessRow is row 1: punctual ping through the whole local path (the
// harness's server, gateway, v2 event as JSON, the function's Lambda entry
// and back) against the bare provider on net/http, same load generator,
// connections and duration, rounds interleaved.
func harnessRow(ctx context.Context, conns, rounds int, round time.Duration) Row {
	row := Row{ID: "1", Name: "harness path: punctual ping, requests/s harness ÷ bare net/http",
		Target: "≥ 0.70 (stretch 0.80)",
		Method: fmt.Sprintf("in-process Go load generator, %d keep-alive connections, %d interleaved rounds × %v per server (order alternating) after a 1 s warm-up each; "+
			"result = median of the rounds' harness ÷ bare rates (pooled = all requests ÷ all time); CPU/req = this process's CPU time ÷ requests during that server's rounds (load generator included); "+
			"harness = cloud.NewServer(harness.New) (HTTP → v2 event → JSON bytes → the function's entry, decoded as lambda.NewHandler decodes it → handler → JSON bytes → HTTP); "+
			"bare = http.Server{punctual.New}; logs discarded in both", conns, rounds, round)}
	log := logging.Discard()
	h, err := harness.New(harness.Options{Log: log})
	if err != nil {
		return failed(row, err)
	}
	defer h.Close()
	harnessURL, stopH, err := serve(cloud.NewServer(h, log, cloud.ServerOptions{}).Server)
	if err != nil {
		return failed(row, err)
	}
	defer stopH()
	bareURL, stopB, err := serve(&http.Server{Handler: punctual.New(log), ReadHeaderTimeout: 10 * time.Second})
	if err != nil {
		return failed(row, err)
	}
	defer stopB()
	targets := []struct {
		name string
		url  string
	}{{"bare", bareURL + pingPath}, {"harness", harnessURL + pingPath}}
	for _, t := range targets {
		if r := load(ctx, t.url, conns, time.Second, 0); r.requests == 0 || r.errors > 0 {
			return failed(row, fmt.Errorf("warm-up of %s: %d ok, %d errors", t.name, r.requests, r.errors))
		}
	}
	total := map[string]*loadResult{"bare": {}, "harness": {}}
	// Each round's ratio: the median is the headline figure, since a
	// neighbour's burst on a shared machine spoils a round or two, not
	// the pairing; min and max show how steady the machine was.
	var ratios []float64
	for i := range rounds {
		rps := map[string]float64{}
		order := targets
		if i%2 == 1 {
			order = []struct {
				name string
				url  string
			}{targets[1], targets[0]}
		}
		for _, t := range order {
			r := load(ctx, t.url, conns, round, 0)
			acc := total[t.name]
			acc.requests += r.requests
			acc.errors += r.errors
			acc.elapsed += r.elapsed
			acc.cpu += r.cpu
			acc.latencies = append(acc.latencies, r.latencies...)
			rps[t.name] = float64(r.requests) / r.elapsed.Seconds()
		}
		if rps["bare"] > 0 {
			ratios = append(ratios, rps["harness"]/rps["bare"])
		}
	}
	if len(ratios) == 0 {
		return failed(row, errors.New("no round completed"))
	}
	slices.Sort(ratios)
	lo, hi, median := ratios[0], ratios[len(ratios)-1], ratios[len(ratios)/2]
	if len(ratios)%2 == 0 {
		median = (ratios[len(ratios)/2-1] + ratios[len(ratios)/2]) / 2
	}
	vals := map[string]float64{}
	for name, r := range total {
		if r.errors > 0 {
			return failed(row, fmt.Errorf("%s: %d errors", name, r.errors))
		}
		slices.Sort(r.latencies)
		vals[name+"_rps"] = float64(r.requests) / r.elapsed.Seconds()
		vals[name+"_p50_ms"] = ms(percentile(r.latencies, 50))
		vals[name+"_p99_ms"] = ms(percentile(r.latencies, 99))
		vals[name+"_cpu_us_per_req"] = float64(r.cpu.Microseconds()) / float64(max(r.requests, 1))
	}
	pooled := vals["harness_rps"] / vals["bare_rps"]
	vals["ratio"], vals["pooled_ratio"], vals["round_ratio_min"], vals["round_ratio_max"] = median, pooled, lo, hi
	// CPU per request, bare ÷ harness: what the throughput ratio would be
	// if both were bound by this process's CPU alone, steadier than the
	// rates when other work shares the machine.
	vals["cpu_ratio"] = vals["bare_cpu_us_per_req"] / vals["harness_cpu_us_per_req"]
	row.Values = vals
	row.Status = within(median >= 0.7)
	row.Result = fmt.Sprintf("%.3f (median of %d rounds, %.2f–%.2f, pooled %.2f; harness %.0f req/s, p50 %.2f ms, p99 %.2f ms, %.0f µs CPU/req; bare %.0f req/s, p50 %.2f ms, p99 %.2f ms, %.0f µs CPU/req; CPU ratio %.2f)",
		median, len(ratios), lo, hi, pooled, vals["harness_rps"], vals["harness_p50_ms"], vals["harness_p99_ms"], vals["harness_cpu_us_per_req"],
		vals["bare_rps"], vals["bare_p50_ms"], vals["bare_p99_ms"], vals["bare_cpu_us_per_req"], vals["cpu_ratio"])
	return row
}

// memoryRows is row 6: the built local harness binary's resident memory
// idle and after n pings.
func memoryRows(ctx context.Context, bin string, conns int, n int64) []Row {
	idle := Row{ID: "6a", Name: "memory: RSS of the local harness (bin/a2awire-local), idle", Target: "reported (no written target)",
		Method: "VmRSS from /proc/PID/status 1 s after the harness answers its first request (in-memory store, logs to /dev/null)"}
	after := Row{ID: "6b", Name: fmt.Sprintf("memory: RSS of the local harness after %d pings", n), Target: "bounded by the harness's limits; reported",
		Method: fmt.Sprintf("same process, VmRSS right after %d punctual pings from %d connections, and peak VmHWM", n, conns)}
	fail := func(err error) []Row { return []Row{failed(idle, err), failed(after, err)} }
	addr, err := freeAddr()
	if err != nil {
		return fail(err)
	}
	cmd := exec.CommandContext(ctx, bin, "-addr", addr)
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	if err := cmd.Start(); err != nil {
		return fail(fmt.Errorf("start %s: %w", bin, err))
	}
	defer func() {
		_ = syscall.Kill(-cmd.Process.Pid, syscall.SIGTERM)
		_ = cmd.Wait()
	}()
	url := "http://" + addr + pingPath
	if err := waitFor(ctx, url, 60*time.Second); err != nil {
		return fail(err)
	}
	time.Sleep(time.Second)
	rssIdle, _, err := rss(cmd.Process.Pid)
	if err != nil {
		return fail(err)
	}
	r := load(ctx, url, conns, 5*time.Minute, n)
	if r.errors > 0 || int64(r.requests) < n {
		return fail(fmt.Errorf("load: %d ok, %d errors, want %d", r.requests, r.errors, n))
	}
	rssAfter, hwm, err := rss(cmd.Process.Pid)
	if err != nil {
		return fail(err)
	}
	idle.Status, after.Status = Info, Info
	idle.Result = fmt.Sprintf("%.1f MB", rssIdle/1e6)
	after.Result = fmt.Sprintf("%.1f MB (peak %.1f MB; %.0f req/s while loading)", rssAfter/1e6, hwm/1e6, float64(r.requests)/r.elapsed.Seconds())
	idle.Values = map[string]float64{"rss_bytes": rssIdle}
	after.Values = map[string]float64{"rss_bytes": rssAfter, "hwm_bytes": hwm, "requests": float64(r.requests)}
	return []Row{idle, after}
}

// waitFor polls url with a ping until it answers 200.
func waitFor(ctx context.Context, url string, limit time.Duration) error {
	deadline := time.Now().Add(limit)
	for {
		resp, err := http.Post(url, "application/json", strings.NewReader(pingBody))
		if err == nil {
			_, _ = io.Copy(io.Discard, resp.Body)
			resp.Body.Close()
			if resp.StatusCode == http.StatusOK {
				return nil
			}
		}
		if time.Now().After(deadline) || ctx.Err() != nil {
			return fmt.Errorf("%s did not answer within %v (last error %v)", url, limit, err)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// rss reads VmRSS and VmHWM (bytes) of pid.
func rss(pid int) (cur, peak float64, err error) {
	raw, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		return 0, 0, fmt.Errorf("read RSS: %w", err)
	}
	for line := range strings.SplitSeq(string(raw), "\n") {
		f := strings.Fields(line)
		if len(f) < 2 {
			continue
		}
		kb, _ := strconv.ParseFloat(f[1], 64)
		switch f[0] {
		case "VmRSS:":
			cur = kb * 1024
		case "VmHWM:":
			peak = kb * 1024
		}
	}
	if cur == 0 {
		return 0, 0, fmt.Errorf("no VmRSS for pid %d", pid)
	}
	return cur, peak, nil
}

// freeAddr returns a loopback address with a port free right now.
func freeAddr() (string, error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return "", err
	}
	defer ln.Close()
	return ln.Addr().String(), nil
}

func failed(r Row, err error) Row {
	r.Status = Failed
	r.Result = err.Error()
	return r
}
