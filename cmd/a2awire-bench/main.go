// Command a2awire-bench is `make bench`'s driver: it measures the harness
// path, cold starts, DynamoDB cost per operation, memory and webhook
// fan-out, against baselines measured in the same run where there is one;
// reads the Go benchmarks' output (the
// protocol kit and signing rows, which `make bench` runs first so they do
// not compete with the load generator), prints one table and writes
// bench/results.json (and results.md, the same table for docs/performance.md).
//
// It is a measurement tool, not a test: `make test` runs only its unit
// tests, which measure nothing.
package main

import (
	"bytes"
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"runtime/pprof"
	"slices"
	"strings"
	"time"

	"github.com/a2awire/a2awire/shared/routes"
	"github.com/a2awire/a2awire/shared/store/dynamo"
	"github.com/a2awire/a2awire/shared/store/dynamo/dynamolocal"
	"github.com/a2awire/a2awire/shared/worldhttp/streamtest"
)

func main() {
	if err := run(context.Background(), os.Args[1:], os.Stdout, os.Stderr); err != nil {
		fmt.Fprintln(os.Stderr, "a2awire-bench:", err)
		os.Exit(1)
	}
}

type config struct {
	out, gobench, rie, local string
	conns, rounds, cold      int
	fanoutEvents             int
	round                    time.Duration
	requests                 int64
	only, cpuprofile         string
	latencyProfile           string
	external                 bool
	proxy                    time.Duration
	latencyN                 int
	ext                      externalConfig
}

func run(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	var c config
	fs := flag.NewFlagSet("a2awire-bench", flag.ContinueOnError)
	fs.SetOutput(stderr)
	fs.StringVar(&c.out, "out", "bench", "directory for results.json, results.md and the cold-start builds")
	fs.StringVar(&c.gobench, "gobench", "bench/gobench.txt", "output of go test -bench -benchmem for rows 2 and 5")
	fs.StringVar(&c.rie, "rie", ".tools/aws-lambda-rie", "the Lambda runtime interface emulator (make tools)")
	fs.StringVar(&c.local, "local", "bin/a2awire-local", "the built local harness (make local-bin), for the memory row")
	fs.IntVar(&c.conns, "conns", 16, "connections of the load generator")
	fs.IntVar(&c.rounds, "rounds", 12, "interleaved rounds per server in the harness row")
	fs.DurationVar(&c.round, "round", time.Second, "duration of one round")
	// 9, not 5: on a 2-core machine a single slow start moves a median of
	// 5 by the whole of INIT's 1.5× margin (one of three runs failed
	// functions whose true ratio is 1.25×); 9 held seven runs to ≤ 1.44×.
	fs.IntVar(&c.cold, "cold", 9, "cold starts per function, after a warm-up round")
	fs.IntVar(&c.fanoutEvents, "fanout-events", 5, "events in the webhook fan-out row, each delivered to 100 receivers")
	fs.Int64Var(&c.requests, "requests", 100_000, "requests before the second memory reading")
	fs.StringVar(&c.cpuprofile, "cpuprofile", "", "write a CPU profile of the harness row (load generator and both servers) to this file")
	fs.DurationVar(&c.proxy, "proxy-latency", 5*time.Millisecond, "latency the latency rows' proxy adds to every DynamoDB call")
	fs.StringVar(&c.latencyProfile, "latency-cpuprofile", "", "write a CPU profile of the latency rows (the bench's client, the harness and the proxy, not DynamoDB Local) to this file")
	fs.IntVar(&c.latencyN, "latency-requests", 60, "requests per route in the latency rows")
	fs.StringVar(&c.only, "only", "", "comma-separated sections to run (harness,go,cold,cost,memory,fanout,latency,batch,stream); default all")
	fs.BoolVar(&c.external, "external", false, "instead of the table: harness ÷ bare net/http measured from outside with wrk (make bench-external; the -external-* flags tune it)")
	c.ext.flags(fs)
	serveBareAddr := fs.String("serve-bare", "", "serve the bare provider on this address (what -external starts as its baseline)")
	if err := fs.Parse(args); err != nil {
		return err
	}
	if *serveBareAddr != "" {
		return serveBare(*serveBareAddr)
	}
	if c.external {
		c.ext.out = c.out
		return externalRatio(ctx, c.ext, stdout, stderr)
	}
	want := func(s string) bool { return c.only == "" || slices.Contains(strings.Split(c.only, ","), s) }
	started := time.Now()
	progress := func(format string, a ...any) { fmt.Fprintf(stderr, "bench: "+format+"\n", a...) }
	if err := os.MkdirAll(c.out, 0o755); err != nil {
		return err
	}
	var rows []Row
	if want("harness") {
		progress("1/6 harness path vs bare net/http (%d × %v interleaved rounds each)...", c.rounds, c.round)
		stop, err := startProfile(c.cpuprofile)
		if err != nil {
			return err
		}
		rows = append(rows, harnessRow(ctx, c.conns, c.rounds, c.round))
		stop()
	}
	if want("go") {
		progress("2/6 reading the Go benchmarks from %s...", c.gobench)
		raw, err := os.ReadFile(c.gobench)
		if err != nil {
			rows = append(rows, failed(Row{ID: "2", Name: "Go benchmarks"}, fmt.Errorf("%w (make bench runs them first)", err)))
		} else {
			stats, err := parseGoBench(bytes.NewReader(raw))
			if err != nil {
				return err
			}
			rows = append(rows, benchRows(stats, c.gobench)...)
		}
	}
	var server *dynamolocal.Server
	const table = "a2awire-bench"
	if want("cold") || want("cost") || want("latency") || want("stream") || want("batch") {
		progress("starting DynamoDB Local...")
		s, err := dynamolocal.Start()
		if err != nil {
			return fmt.Errorf("DynamoDB Local: %w", err)
		}
		defer s.Stop()
		server = s
		if err := dynamo.CreateTable(ctx, dynamo.LocalClient(s.Endpoint()), table); err != nil {
			return fmt.Errorf("create table: %w", err)
		}
	}
	if want("cold") {
		rie, err := filepath.Abs(c.rie)
		if err != nil {
			return err
		}
		functions, err := functionFolders()
		if err != nil {
			return err
		}
		progress("3/6 cold starts: %d functions and the two trivial Lambdas, %d each under the emulator...", len(functions), c.cold)
		env := []string{"TABLE_NAME=" + table, "BASE_URL=http://127.0.0.1:8080", "AWS_ENDPOINT_URL_DYNAMODB=" + server.Endpoint(),
			"AWS_ACCESS_KEY_ID=" + dynamo.LocalKey(), "AWS_SECRET_ACCESS_KEY=local"}
		// Every queue at a loopback URL where nothing listens, as the
		// deploy sets QUEUE_URL_* (the functions that use a queue build
		// their SQS clients at start; no first invocation sends).
		for _, q := range routes.Queues() {
			env = append(env, routes.QueueURLEnv(q.Name)+"=http://127.0.0.1:9/"+q.Name)
		}
		out, err := filepath.Abs(filepath.Join(c.out, "cold"))
		if err != nil {
			return err
		}
		rows = append(rows, coldRows(ctx, ".", rie, out, functions, env, c.cold)...)
	}
	if want("cost") {
		progress("4/6 DynamoDB cost per operation on DynamoDB Local...")
		rows = append(rows, costRows(ctx, server, table)...)
	}
	if want("latency") {
		progress("latency rows: each signed world route over a %v DynamoDB proxy, %d requests each...", c.proxy, c.latencyN)
		stop, err := startProfile(c.latencyProfile)
		if err != nil {
			return err
		}
		rows = append(rows, latencyRows(ctx, server, table, c.proxy, c.latencyN)...)
		stop()
	}
	if want("batch") {
		progress("batched actions: %d actions of one world committed one transaction each, then batched, over a %v DynamoDB proxy...", batchActions, c.proxy)
		rows = append(rows, batchRow(ctx, server, table, c.proxy))
	}
	if want("stream") {
		progress("event stream: %d events while a reader's stream is cut 3 times, on memory then %d times on DynamoDB Local...", streamtest.Events, streamRuns)
		// Its own DynamoDB Local: the rows before it leave the shared
		// one's JVM slower (row 8's p99 read 2–3 s after rows 7a–7zn,
		// about 0.1 s on a fresh one; docs/events.md).
		s, err := dynamolocal.Start()
		if err != nil {
			return fmt.Errorf("DynamoDB Local for the stream row: %w", err)
		}
		rows = append(rows, streamRow(ctx, s))
		s.Stop()
	}
	if want("memory") {
		progress("5/6 memory of %s idle and after %d requests...", c.local, c.requests)
		rows = append(rows, memoryRows(ctx, c.local, c.conns, c.requests)...)
	}
	if want("fanout") {
		progress("6/6 webhook fan-out: 100 loopback receivers in one world, %d events...", c.fanoutEvents)
		rows = append(rows, fanoutRow(ctx, c.fanoutEvents))
		progress("6/6 webhook fan-out: one event to 10,000 loopback webhooks (one listener)...")
		rows = append(rows, fanoutWideRow(ctx))
	}

	rep := Report{Machine: machine(), Started: started.UTC().Format(time.RFC3339), Elapsed: time.Since(started).Round(time.Second).String(), Rows: rows}
	if err := WriteTable(stdout, rep); err != nil {
		return err
	}
	for name, write := range map[string]func(io.Writer, Report) error{"results.json": WriteJSON, "results.md": WriteMarkdown} {
		var b bytes.Buffer
		if err := write(&b, rep); err != nil {
			return err
		}
		if err := os.WriteFile(filepath.Join(c.out, name), b.Bytes(), 0o644); err != nil {
			return err
		}
	}
	fmt.Fprintf(stdout, "\nwritten: %s, %s\n", filepath.Join(c.out, "results.json"), filepath.Join(c.out, "results.md"))
	return verdict(rows)
}

// verdict is the run's exit: an error naming the rows that missed their
// target or could not be measured, so make bench fails when one did.
func verdict(rows []Row) error {
	var missed, failed []string
	for _, r := range rows {
		switch r.Status {
		case Missed:
			missed = append(missed, r.ID)
		case Failed:
			failed = append(failed, r.ID)
		}
	}
	var errs []string
	if len(missed) > 0 {
		errs = append(errs, fmt.Sprintf("rows %s missed their targets", strings.Join(missed, ", ")))
	}
	if len(failed) > 0 {
		errs = append(errs, fmt.Sprintf("rows %s could not be measured", strings.Join(failed, ", ")))
	}
	if len(errs) > 0 {
		return errors.New(strings.Join(errs, "; "))
	}
	return nil
}

// startProfile starts a CPU profile into path (none when path is empty);
// the returned function stops it.
func startProfile(path string) (func(), error) {
	if path == "" {
		return func() {}, nil
	}
	f, err := os.Create(path)
	if err != nil {
		return nil, err
	}
	if err := pprof.StartCPUProfile(f); err != nil {
		f.Close()
		return nil, err
	}
	return func() { pprof.StopCPUProfile(); f.Close() }, nil
}

// functionFolders lists functions/* (the Lambdas make build builds).
func functionFolders() ([]string, error) {
	entries, err := os.ReadDir("functions")
	if err != nil {
		return nil, fmt.Errorf("run from the repository root: %w", err)
	}
	var out []string
	for _, e := range entries {
		if e.IsDir() {
			out = append(out, e.Name())
		}
	}
	if len(out) == 0 {
		return nil, errors.New("no functions/* folders")
	}
	return out, nil
}

// machine names the CPU, core count, OS and Go version the figures belong to.
func machine() string {
	cpu := "unknown CPU"
	if raw, err := os.ReadFile("/proc/cpuinfo"); err == nil {
		for line := range strings.SplitSeq(string(raw), "\n") {
			if k, v, ok := strings.Cut(line, ":"); ok && strings.TrimSpace(k) == "model name" {
				cpu = strings.TrimSpace(v)
				break
			}
		}
	}
	kernel := ""
	if out, err := exec.Command("uname", "-r").Output(); err == nil {
		kernel = " " + strings.TrimSpace(string(out))
	}
	return fmt.Sprintf("%s, %d cores, %s/%s%s, %s", cpu, runtime.NumCPU(), runtime.GOOS, runtime.GOARCH, kernel, runtime.Version())
}
