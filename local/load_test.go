package main

import (
	"bufio"
	"bytes"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"
)

// TestLoad holds the harness's server to its limits (docs/local.md) under
// abuse, on loopback, in bounded time: 15,000 idle keep-alive connections and
// 500 slow-body clients while a steady ping client runs (its p99 must stay
// under 50 ms and the server under 200 MB), then 100 concurrent 10 MiB bodies
// (the server's peak under 1.5 GB). The server is the real binary (built
// without the race detector) in its own process, so its memory is measured
// alone.
func TestLoad(t *testing.T) {
	raiseFileLimit(t)
	srv := startServerProcess(t)
	t.Logf("server RSS at start: %d MB", srv.rss(t)>>20)

	ping := startPinger(t, srv.url)
	time.Sleep(300 * time.Millisecond) // warm up the ping connection

	// 15,000 idle keep-alive connections: each made one request and waits.
	const idle = 15000
	var idleConns []net.Conn
	var mu sync.Mutex
	var wg sync.WaitGroup
	var dialErrs atomic.Int32
	jobs := make(chan struct{})
	for range 64 {
		wg.Go(func() {
			for range jobs {
				c, err := keepAliveConn(srv.addr)
				if err != nil {
					dialErrs.Add(1)
					continue
				}
				mu.Lock()
				idleConns = append(idleConns, c)
				mu.Unlock()
			}
		})
	}
	start := time.Now()
	for range idle {
		jobs <- struct{}{}
	}
	close(jobs)
	wg.Wait()
	t.Cleanup(func() {
		for _, c := range idleConns {
			c.Close()
		}
	})
	t.Logf("%d idle connections open in %v (%d failed)", len(idleConns), time.Since(start).Round(time.Millisecond), dialErrs.Load())
	if len(idleConns) < idle*99/100 {
		t.Fatalf("only %d of %d idle connections opened", len(idleConns), idle)
	}

	// 500 slow-body clients: headers promising 1 MB, then a byte a second.
	const slow = 500
	stopSlow := make(chan struct{})
	var slowWG sync.WaitGroup
	for range slow {
		c, err := net.Dial("tcp", srv.addr)
		if err != nil {
			t.Fatal(err)
		}
		fmt.Fprintf(c, "POST /agents/a2awire-punctual/invoke HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\nContent-Length: 1000000\r\n\r\n{")
		slowWG.Go(func() {
			defer c.Close()
			tick := time.NewTicker(time.Second)
			defer tick.Stop()
			for {
				select {
				case <-stopSlow:
					return
				case <-tick.C:
					if _, err := c.Write([]byte(" ")); err != nil {
						return
					}
				}
			}
		})
	}

	ping.reset()
	time.Sleep(5 * time.Second)
	lat, failures := ping.results()
	rss := srv.rss(t)
	close(stopSlow)
	slowWG.Wait()
	p50, p99 := percentile(lat, 50), percentile(lat, 99)
	t.Logf("under %d idle + %d slow-body connections: %d pings, p50 %v, p99 %v, max %v, %d failed; server RSS %d MB",
		len(idleConns), slow, len(lat), p50, p99, slices.Max(lat), failures, rss>>20)
	if len(lat) < 100 || failures > 0 {
		t.Errorf("ping client: %d answers, %d failures", len(lat), failures)
	}
	if p99 > 50*time.Millisecond {
		t.Errorf("ping p99 %v, want < 50ms", p99)
	}
	if rss > 200<<20 {
		t.Errorf("server RSS %d MB under idle and slow clients, want < 200 MB", rss>>20)
	}
	ping.stop()
	for _, c := range idleConns {
		c.Close()
	}

	// 100 concurrent 10 MiB bodies of non-UTF-8 bytes, half announced
	// with Content-Length, half chunked (read until refused).
	body := bytes.Repeat([]byte{0xff, 0xfe, 0xfd, 0x80}, 10<<20/4)
	statuses := map[int]int{}
	var smu sync.Mutex
	var bwg sync.WaitGroup
	start = time.Now()
	for i := range 100 {
		bwg.Go(func() {
			var r io.Reader = bytes.NewReader(body)
			if i%2 == 1 {
				r = io.MultiReader(r) // hides the length: chunked
			}
			req, _ := http.NewRequest("POST", srv.url+"/agents/a2awire-punctual/invoke", r)
			req.Header.Set("Content-Type", "application/json")
			resp, err := (&http.Client{Timeout: 40 * time.Second, Transport: &http.Transport{}}).Do(req)
			status := -1
			if err == nil {
				status = resp.StatusCode
				_, _ = io.Copy(io.Discard, resp.Body)
				resp.Body.Close()
			}
			smu.Lock()
			statuses[status]++
			smu.Unlock()
		})
	}
	bwg.Wait()
	peak := srv.peak(t)
	t.Logf("100 concurrent 10 MiB bodies in %v: statuses %v; server peak RSS over the whole test %d MB", time.Since(start).Round(time.Millisecond), statuses, peak>>20)
	for status, n := range statuses {
		// A client may see its connection closed while still sending
		// (-1): the server refused the body and did not read the rest.
		if status != 413 && status != 503 && status != -1 {
			t.Errorf("%d bodies got %d, want 413 (or 503 while the body budget is spent)", n, status)
		}
	}
	if peak > 1536<<20 {
		t.Errorf("server peak RSS %d MB, want < 1.5 GB", peak>>20)
	}
}

// raiseFileLimit lifts the soft open-file limit to the hard one: the test
// holds some 15,600 client sockets.
func raiseFileLimit(t *testing.T) {
	var lim syscall.Rlimit
	if err := syscall.Getrlimit(syscall.RLIMIT_NOFILE, &lim); err != nil {
		t.Fatal(err)
	}
	lim.Cur = lim.Max
	if err := syscall.Setrlimit(syscall.RLIMIT_NOFILE, &lim); err != nil {
		t.Fatal(err)
	}
	if lim.Cur < 17000 {
		t.Fatalf("open-file limit %d: the load test needs 17,000 (raise the hard limit: ulimit -Hn)", lim.Cur)
	}
}

type serverProcess struct {
	cmd  *exec.Cmd
	url  string
	addr string
}

// startServerProcess builds ./local and runs it on a free loopback port,
// with the same raised file limit (inherited).
func startServerProcess(t *testing.T) *serverProcess {
	t.Helper()
	bin := filepath.Join(t.TempDir(), "local")
	if out, err := exec.Command("go", "build", "-o", bin, ".").CombinedOutput(); err != nil {
		t.Fatalf("go build: %v\n%s", err, out)
	}
	cmd := exec.Command(bin, "-addr", "127.0.0.1:0")
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	cmd.Stderr = io.Discard // one access line per request
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_ = cmd.Process.Signal(os.Interrupt)
		done := make(chan struct{})
		go func() { _ = cmd.Wait(); close(done) }()
		select {
		case <-done:
		case <-time.After(10 * time.Second):
			_ = cmd.Process.Kill()
		}
	})
	sc := bufio.NewScanner(stdout)
	s := &serverProcess{cmd: cmd}
	for sc.Scan() {
		if u, ok := strings.CutPrefix(sc.Text(), "a2awire local harness listening on "); ok {
			s.url, s.addr = u, strings.TrimPrefix(u, "http://")
			break
		}
	}
	if s.url == "" {
		t.Fatal("server did not start")
	}
	go func() { _, _ = io.Copy(io.Discard, stdout) }()
	return s
}

func (s *serverProcess) status(t *testing.T, field string) int64 {
	t.Helper()
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", s.cmd.Process.Pid))
	if err != nil {
		t.Fatal(err)
	}
	for line := range strings.SplitSeq(string(b), "\n") {
		if v, ok := strings.CutPrefix(line, field+":"); ok {
			kb, err := strconv.ParseInt(strings.TrimSuffix(strings.TrimSpace(v), " kB"), 10, 64)
			if err != nil {
				t.Fatal(err)
			}
			return kb << 10
		}
	}
	t.Fatalf("no %s in /proc status", field)
	return 0
}

func (s *serverProcess) rss(t *testing.T) int64  { return s.status(t, "VmRSS") }
func (s *serverProcess) peak(t *testing.T) int64 { return s.status(t, "VmHWM") }

// keepAliveConn makes one request on a new connection, reads the answer
// and leaves the connection open.
func keepAliveConn(addr string) (net.Conn, error) {
	c, err := net.Dial("tcp", addr)
	if err != nil {
		return nil, err
	}
	if _, err := io.WriteString(c, "GET /idle HTTP/1.1\r\nHost: x\r\n\r\n"); err != nil {
		c.Close()
		return nil, err
	}
	resp, err := http.ReadResponse(bufio.NewReader(c), nil)
	if err != nil {
		c.Close()
		return nil, err
	}
	_, _ = io.Copy(io.Discard, resp.Body)
	resp.Body.Close()
	return c, nil
}

// pinger posts a ping every 10 ms over one keep-alive connection and
// records each round trip.
type pinger struct {
	mu       sync.Mutex
	lat      []time.Duration
	failures int
	done     chan struct{}
	wg       sync.WaitGroup
}

func startPinger(t *testing.T, url string) *pinger {
	p := &pinger{done: make(chan struct{})}
	client := &http.Client{Timeout: 10 * time.Second, Transport: &http.Transport{MaxIdleConnsPerHost: 1}}
	p.wg.Go(func() {
		tick := time.NewTicker(10 * time.Millisecond)
		defer tick.Stop()
		for {
			select {
			case <-p.done:
				return
			case <-tick.C:
			}
			start := time.Now()
			resp, err := client.Post(url+"/agents/a2awire-punctual/invoke", "application/json", strings.NewReader(`{"task":"ping","input":{"echo":"hi"}}`))
			ok := err == nil
			if ok {
				b, _ := io.ReadAll(resp.Body)
				resp.Body.Close()
				ok = resp.StatusCode == 200 && bytes.Contains(b, []byte(`"pong":true`))
			}
			d := time.Since(start)
			p.mu.Lock()
			if ok {
				p.lat = append(p.lat, d)
			} else {
				p.failures++
			}
			p.mu.Unlock()
		}
	})
	t.Cleanup(p.stop)
	return p
}

func (p *pinger) reset() {
	p.mu.Lock()
	p.lat, p.failures = nil, 0
	p.mu.Unlock()
}

func (p *pinger) results() ([]time.Duration, int) {
	p.mu.Lock()
	defer p.mu.Unlock()
	return slices.Clone(p.lat), p.failures
}

func (p *pinger) stop() {
	select {
	case <-p.done:
	default:
		close(p.done)
	}
	p.wg.Wait()
}

func percentile(d []time.Duration, p int) time.Duration {
	if len(d) == 0 {
		return 0
	}
	s := slices.Clone(d)
	slices.Sort(s)
	return s[min(len(s)-1, len(s)*p/100)]
}
