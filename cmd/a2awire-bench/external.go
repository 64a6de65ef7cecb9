package main

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/a2awire/a2awire/functions/fixture-punctual/punctual"
	"github.com/a2awire/a2awire/shared/logging"
)

// externalConfig is the -external mode's: the harness as a user runs it
// (the built ./local binary, access log on) against the bare provider on
// net/http, both in their own processes, loaded by wrk.
type externalConfig struct {
	out              string
	rounds, conns    int
	threads          int
	duration, warmup time.Duration
	harness          string    // a built harness binary; empty builds ./local
	also             namedList // more harness binaries, interleaved with the rest
	env              namedList // NAME=KEY=VALUE: an environment variable for one server
}

// namedList is a repeatable flag of NAME=VALUE entries.
type namedList []string

func (l *namedList) String() string { return strings.Join(*l, ",") }

func (l *namedList) Set(v string) error {
	if name, _, ok := strings.Cut(v, "="); !ok || name == "" {
		return fmt.Errorf("%q is not NAME=VALUE", v)
	}
	*l = append(*l, v)
	return nil
}

func (c *externalConfig) flags(fs *flag.FlagSet) {
	fs.IntVar(&c.rounds, "external-rounds", 5, "-external: interleaved rounds per server")
	fs.DurationVar(&c.duration, "external-round", 10*time.Second, "-external: length of one wrk run")
	fs.DurationVar(&c.warmup, "external-warmup", 2*time.Second, "-external: wrk warm-up of each server before the rounds")
	fs.IntVar(&c.conns, "external-conns", 16, "-external: wrk connections (-c)")
	fs.IntVar(&c.threads, "external-threads", 2, "-external: wrk threads (-t)")
	fs.StringVar(&c.harness, "external-harness", "", "-external: the harness binary to measure (default: go build ./local into -out)")
	fs.Var(&c.also, "external-also", "-external: NAME=BINARY, another harness build to interleave with the others (repeatable), e.g. an older commit's")
	fs.Var(&c.env, "external-env", "-external: NAME=KEY=VALUE, an environment variable for server NAME (harness, bare or an -external-also name; repeatable)")
}

// server is one process under load.
type server struct {
	name string
	cmd  *exec.Cmd
	url  string
	log  string // its stderr: the access log
	// per round
	rps, cpuPerReq []float64
	requests, bad  int
}

// externalRatio measures harness ÷ bare throughput from outside: each
// server in its own process, stderr to a file (the harness's access log on,
// as `make local` runs it), a warm-up, then rounds with the servers'
// order rotated each round, wrk on each in turn. The headline is the median
// over rounds of harness ÷ bare of the same round; server CPU per request
// (utime + stime from /proc/PID/stat over the round ÷ requests) is steadier
// on a shared machine than the rates.
func externalRatio(ctx context.Context, c externalConfig, stdout, stderr io.Writer) error {
	wrk, err := exec.LookPath("wrk")
	if err != nil {
		return errors.New("wrk not found on PATH: install Debian's wrk package (make bench-external does)")
	}
	dir, err := filepath.Abs(filepath.Join(c.out, "external"))
	if err != nil {
		return err
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return err
	}
	progress := func(format string, a ...any) { fmt.Fprintf(stderr, "bench: "+format+"\n", a...) }
	harnessBin := c.harness
	if harnessBin == "" {
		harnessBin = filepath.Join(dir, "a2awire-local")
		progress("building ./local into %s...", harnessBin)
		build := exec.CommandContext(ctx, "go", "build", "-o", harnessBin, "./local")
		build.Stdout, build.Stderr = stderr, stderr
		if err := build.Run(); err != nil {
			return fmt.Errorf("go build ./local: %w", err)
		}
	}
	self, err := os.Executable()
	if err != nil {
		return err
	}
	script := filepath.Join(dir, "post.lua")
	lua := fmt.Sprintf("wrk.method = \"POST\"\nwrk.body = '%s'\nwrk.headers[\"Content-Type\"] = \"application/json\"\n", externalBody)
	if err := os.WriteFile(script, []byte(lua), 0o644); err != nil {
		return err
	}

	type spec struct{ name, bin string }
	specs := []spec{{"harness", harnessBin}}
	for _, a := range c.also {
		name, bin, _ := strings.Cut(a, "=")
		specs = append(specs, spec{name, bin})
	}
	specs = append(specs, spec{"bare", self})
	var servers []*server
	defer func() {
		for _, s := range servers {
			_ = syscall.Kill(-s.cmd.Process.Pid, syscall.SIGTERM)
			_ = s.cmd.Wait()
		}
	}()
	for _, sp := range specs {
		addr, err := freeAddr()
		if err != nil {
			return err
		}
		args := []string{"-addr", addr}
		if sp.name == "bare" {
			args = []string{"-serve-bare", addr}
		}
		cmd := exec.CommandContext(ctx, sp.bin, args...)
		cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
		cmd.Env = os.Environ()
		for _, e := range c.env {
			name, kv, _ := strings.Cut(e, "=")
			if name == sp.name {
				cmd.Env = append(cmd.Env, kv)
			}
		}
		logPath := filepath.Join(dir, sp.name+".stderr")
		logFile, err := os.Create(logPath)
		if err != nil {
			return err
		}
		cmd.Stderr = logFile
		err = cmd.Start()
		logFile.Close()
		if err != nil {
			return fmt.Errorf("start %s: %w", sp.name, err)
		}
		s := &server{name: sp.name, cmd: cmd, url: "http://" + addr + pingPath, log: logPath}
		servers = append(servers, s)
		if err := waitFor(ctx, s.url, 2*time.Minute); err != nil {
			return fmt.Errorf("%s: %w (its stderr: %s)", s.name, err, logPath)
		}
	}
	runWrk := func(s *server, d time.Duration) (wrkResult, error) {
		out, err := exec.CommandContext(ctx, wrk, "-t"+strconv.Itoa(c.threads), "-c"+strconv.Itoa(c.conns),
			"-d"+strconv.Itoa(max(1, int(d.Seconds())))+"s", "-s", script, s.url).Output()
		if err != nil {
			return wrkResult{}, fmt.Errorf("wrk on %s: %w", s.name, err)
		}
		return parseWrk(out)
	}
	for _, s := range servers {
		if _, err := runWrk(s, c.warmup); err != nil {
			return err
		}
	}
	progress("external: %d rounds × %v per server (%s), wrk -t%d -c%d...", c.rounds, c.duration, names(servers), c.threads, c.conns)
	var loads []string
	for r := range c.rounds {
		for k := range servers {
			s := servers[(k+r)%len(servers)]
			cpu0, err := processTicks(s.cmd.Process.Pid)
			if err != nil {
				return err
			}
			res, err := runWrk(s, c.duration)
			if err != nil {
				return err
			}
			cpu1, err := processTicks(s.cmd.Process.Pid)
			if err != nil {
				return err
			}
			s.rps = append(s.rps, res.rps)
			s.cpuPerReq = append(s.cpuPerReq, float64(cpu1-cpu0)*1e6/clockTicks/float64(max(res.requests, 1)))
			s.requests += res.requests
			s.bad += res.bad
			load := loadAverage()
			loads = append(loads, load)
			progress("round %d %-10s %8.0f req/s  %6.1f µs CPU/req  load %s", r+1, s.name, res.rps, s.cpuPerReq[len(s.cpuPerReq)-1], load)
		}
	}
	return externalReport(stdout, dir, c, servers, loads)
}

// externalTarget is issue 28's: the harness from outside at least this
// fraction of the bare server's throughput.
const externalTarget = 0.55

// externalBody is the request every server answers: a punctual ping.
const externalBody = `{"task":"ping","input":{}}`

func names(servers []*server) string {
	var n []string
	for _, s := range servers {
		n = append(n, s.name)
	}
	return strings.Join(n, ", ")
}

// externalReport prints each server's rounds and its median ratio to bare,
// and writes the same as external.json.
func externalReport(w io.Writer, dir string, c externalConfig, servers []*server, loads []string) error {
	bare := servers[len(servers)-1]
	type summary struct {
		Name           string    `json:"name"`
		RPS            []float64 `json:"rps"`
		CPUPerReqUS    []float64 `json:"cpu_us_per_req"`
		Ratios         []float64 `json:"ratios_to_bare,omitempty"`
		MedianRatio    float64   `json:"median_ratio_to_bare,omitempty"`
		MedianCPUUS    float64   `json:"median_cpu_us_per_req"`
		Requests       int       `json:"requests"`
		NotOKResponses int       `json:"not_ok_responses"`
	}
	var all []summary
	fmt.Fprintf(w, "harness ÷ bare net/http from outside: wrk -t%d -c%d, %d rounds × %v, %s\nload average over the rounds: %s\n\n",
		c.threads, c.conns, c.rounds, c.duration, machine(), strings.Join(loads, " "))
	for _, s := range servers {
		sum := summary{Name: s.name, RPS: s.rps, CPUPerReqUS: s.cpuPerReq, MedianCPUUS: median(s.cpuPerReq), Requests: s.requests, NotOKResponses: s.bad}
		line := fmt.Sprintf("%-10s req/s %s; CPU/req %s µs (median %.1f)", s.name, floats(s.rps, "%.0f"), floats(s.cpuPerReq, "%.1f"), sum.MedianCPUUS)
		if s != bare {
			for i := range s.rps {
				sum.Ratios = append(sum.Ratios, s.rps[i]/bare.rps[i])
			}
			sum.MedianRatio = median(sum.Ratios)
			line += fmt.Sprintf("; ÷ bare %s → median %.2f", floats(sum.Ratios, "%.2f"), sum.MedianRatio)
			if s.name == "harness" {
				line += fmt.Sprintf(" (target ≥ %.2f: %s)", externalTarget, within(sum.MedianRatio >= externalTarget))
			}
		}
		if s.bad > 0 {
			line += fmt.Sprintf("; %d responses not 2xx or socket errors", s.bad)
		}
		fmt.Fprintln(w, line)
		all = append(all, sum)
	}
	raw, err := json.MarshalIndent(map[string]any{"machine": machine(), "loads": loads, "servers": all}, "", "  ")
	if err != nil {
		return err
	}
	if err := os.WriteFile(filepath.Join(dir, "external.json"), raw, 0o644); err != nil {
		return err
	}
	fmt.Fprintf(w, "\nwritten: %s\n", filepath.Join(dir, "external.json"))
	for _, s := range servers {
		if s.bad > 0 {
			return fmt.Errorf("%s answered %d requests with other than 2xx", s.name, s.bad)
		}
	}
	return nil
}

func floats(v []float64, format string) string {
	var out []string
	for _, f := range v {
		out = append(out, fmt.Sprintf(format, f))
	}
	return strings.Join(out, " ")
}

// wrkResult is what one wrk run reported.
type wrkResult struct {
	rps      float64
	requests int
	bad      int // non-2xx/3xx responses and socket errors
}

// parseWrk reads wrk's summary: "N requests in …", "Requests/sec: R",
// "Non-2xx or 3xx responses: N" and "Socket errors: connect a, read b,
// write c, timeout d".
func parseWrk(out []byte) (wrkResult, error) {
	var r wrkResult
	var sawRate bool
	sc := bufio.NewScanner(bytes.NewReader(out))
	for sc.Scan() {
		line := strings.TrimSpace(sc.Text())
		f := strings.Fields(line)
		switch {
		case strings.Contains(line, "requests in") && len(f) > 0:
			r.requests, _ = strconv.Atoi(f[0])
		case strings.HasPrefix(line, "Requests/sec:") && len(f) == 2:
			v, err := strconv.ParseFloat(f[1], 64)
			if err != nil {
				return r, fmt.Errorf("wrk: %q: %w", line, err)
			}
			r.rps, sawRate = v, true
		case strings.HasPrefix(line, "Non-2xx or 3xx responses:") && len(f) > 0:
			n, _ := strconv.Atoi(f[len(f)-1])
			r.bad += n
		case strings.HasPrefix(line, "Socket errors:"):
			for _, part := range strings.Split(strings.TrimPrefix(line, "Socket errors:"), ",") {
				if pf := strings.Fields(part); len(pf) == 2 {
					n, _ := strconv.Atoi(pf[1])
					r.bad += n
				}
			}
		}
	}
	if !sawRate || r.requests == 0 {
		return r, fmt.Errorf("wrk printed no rate: %s", out)
	}
	return r, nil
}

// clockTicks is USER_HZ, the unit of /proc/PID/stat's times: 100 on every
// Linux architecture Go runs on.
const clockTicks = 100

// processTicks is a process's utime + stime, all its threads, in clock ticks.
func processTicks(pid int) (int64, error) {
	raw, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return 0, fmt.Errorf("server CPU: %w", err)
	}
	n, err := statTicks(raw)
	if err != nil {
		return 0, fmt.Errorf("server CPU: /proc/%d/stat: %w", pid, err)
	}
	return n, nil
}

// statTicks is utime + stime (fields 14 and 15) of a /proc/PID/stat line.
func statTicks(raw []byte) (int64, error) {
	// The command name (field 2, in parentheses) may hold spaces and
	// parentheses; count from after its last ')'.
	i := bytes.LastIndexByte(raw, ')')
	if i < 0 {
		return 0, errors.New("no command name")
	}
	f := strings.Fields(string(raw[i+1:]))
	// f[0] is field 3 (state), so fields 14 and 15 are f[11] and f[12].
	if len(f) < 13 {
		return 0, errors.New("too few fields")
	}
	ut, err1 := strconv.ParseInt(f[11], 10, 64)
	st, err2 := strconv.ParseInt(f[12], 10, 64)
	if err := errors.Join(err1, err2); err != nil {
		return 0, err
	}
	return ut + st, nil
}

// loadAverage is the one-minute load average, as /proc/loadavg says.
func loadAverage() string {
	raw, err := os.ReadFile("/proc/loadavg")
	if err != nil {
		return "?"
	}
	f := strings.Fields(string(raw))
	if len(f) == 0 {
		return "?"
	}
	return f[0]
}

// serveBare is the bare server of -external: the punctual fixture's
// provider in a plain http.Server, no log, as a program using the provider
// without the harness would run it.
func serveBare(addr string) error {
	srv := &http.Server{Addr: addr, Handler: punctual.New(logging.Discard()), ReadHeaderTimeout: 10 * time.Second}
	return srv.ListenAndServe()
}
