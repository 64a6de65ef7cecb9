package cloud_test

import (
	"bufio"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/a2awire/a2awire/local/cloud"
	"github.com/a2awire/a2awire/shared/logging"
)

// startServer serves h on a free loopback port with o.
func startServer(t *testing.T, h http.Handler, o cloud.ServerOptions) (*cloud.Server, string) {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	srv := cloud.NewServer(h, logging.Discard(), o)
	go func() { _ = srv.Serve(ln) }()
	t.Cleanup(func() { _ = srv.Close() })
	return srv, ln.Addr().String()
}

// closedWithin reports whether the server closes c within d (reading and
// discarding whatever it sends first).
func closedWithin(c net.Conn, d time.Duration) bool {
	_ = c.SetReadDeadline(time.Now().Add(d))
	_, err := io.Copy(io.Discard, c)
	var ne net.Error
	return !(errors.As(err, &ne) && ne.Timeout())
}

// TestServerTimeouts: a client that never finishes its headers or its
// body, or leaves its keep-alive connection idle, is closed by the
// server's sub-second timeouts. The test waits up to closeBound for each
// close: a bound that only has to exceed the timeouts on a loaded machine
// (without them the connection stays open for good).
func TestServerTimeouts(t *testing.T) {
	const closeBound = 15 * time.Second
	h := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_, _ = io.Copy(io.Discard, r.Body)
		w.WriteHeader(204)
	})
	_, addr := startServer(t, h, cloud.ServerOptions{ReadHeaderTimeout: 200 * time.Millisecond, ReadTimeout: 500 * time.Millisecond, IdleTimeout: 300 * time.Millisecond})
	dial := func() net.Conn {
		c, err := net.Dial("tcp", addr)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { c.Close() })
		return c
	}

	slowHeaders := dial()
	fmt.Fprint(slowHeaders, "POST / HTTP/1.1\r\nHost: x\r\n")
	if !closedWithin(slowHeaders, closeBound) {
		t.Error("a client that never finishes its headers is held")
	}

	slowBody := dial()
	fmt.Fprint(slowBody, "POST / HTTP/1.1\r\nHost: x\r\nContent-Length: 100\r\n\r\nabc")
	if !closedWithin(slowBody, closeBound) {
		t.Error("a client that never finishes its body is held")
	}

	idle := dial()
	fmt.Fprint(idle, "GET / HTTP/1.1\r\nHost: x\r\n\r\n")
	resp, err := http.ReadResponse(bufio.NewReader(idle), nil)
	if err != nil || resp.StatusCode != 204 {
		t.Fatalf("request on the idle connection: %v %v", resp, err)
	}
	if !closedWithin(idle, closeBound) {
		t.Error("an idle keep-alive connection is held")
	}
}

// TestServerHeaderLimit: a 900 KB header of commas is refused 431 before
// anything parses it (the handler is never called, and the answer is
// quick). It runs on the default timeouts: on a loaded machine, sending
// 900 KB can outlast TestServerTimeouts' 200 ms header timeout, which
// would close the connection before the limit is reached.
func TestServerHeaderLimit(t *testing.T) {
	var calls atomic.Int32
	h := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		calls.Add(1)
		w.WriteHeader(204)
	})
	_, addr := startServer(t, h, cloud.ServerOptions{})
	big, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	defer big.Close()
	start := time.Now()
	fmt.Fprintf(big, "GET / HTTP/1.1\r\nHost: x\r\nX-A2AWire-Task-Id: t%s\r\n\r\n", strings.Repeat(",a", 450<<10))
	resp, err := http.ReadResponse(bufio.NewReader(big), nil)
	if err != nil || resp.StatusCode != 431 {
		t.Errorf("900 KB header: %v %v", resp, err)
	}
	// Parsing the task ids of 900 KB of commas would take far longer than
	// this bound, which only a loaded machine's scheduling has to meet.
	if d := time.Since(start); d > 10*time.Second || calls.Load() != 0 {
		t.Errorf("900 KB header answered in %v, handler calls %d", d, calls.Load())
	}
}

// TestServerConnectionCap: over the cap, the longest-idle connection makes
// room; when every connection is busy, a new one is refused.
func TestServerConnectionCap(t *testing.T) {
	release := make(chan struct{})
	entered := make(chan struct{}, 3)
	h := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == "/block" {
			entered <- struct{}{}
			<-release
		}
		w.WriteHeader(204)
	})
	srv, addr := startServer(t, h, cloud.ServerOptions{MaxConns: 3})
	request := func(c net.Conn, path string) error {
		fmt.Fprintf(c, "GET %s HTTP/1.1\r\nHost: x\r\n\r\n", path)
		resp, err := http.ReadResponse(bufio.NewReader(c), nil)
		if err == nil {
			resp.Body.Close()
		}
		return err
	}
	// The server marks a connection idle just after writing its answer, so
	// the client may read it first: wait for the mark, so that the order in
	// which they went idle is the order they were opened.
	waitIdle := func(n int) {
		t.Helper()
		for deadline := time.Now().Add(5 * time.Second); srv.IdleConns() != n; time.Sleep(time.Millisecond) {
			if time.Now().After(deadline) {
				t.Fatalf("%d idle connections, want %d", srv.IdleConns(), n)
			}
		}
	}
	var conns []net.Conn
	for i := range 3 {
		c, err := net.Dial("tcp", addr)
		if err != nil {
			t.Fatal(err)
		}
		defer c.Close()
		if err := request(c, "/"); err != nil {
			t.Fatal(err)
		}
		waitIdle(i + 1)
		conns = append(conns, c)
	}
	fourth, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	defer fourth.Close()
	if err := request(fourth, "/"); err != nil {
		t.Fatalf("fourth connection: %v", err)
	}
	if !closedWithin(conns[0], 2*time.Second) {
		t.Error("the longest-idle connection was not closed to make room")
	}
	if err := request(conns[1], "/"); err != nil {
		t.Errorf("a younger idle connection was closed: %v", err)
	}
	if n := srv.OpenConns(); n != 3 {
		t.Errorf("%d open connections, want 3", n)
	}

	// Every connection busy: a new one is refused.
	blocked := make(chan error, 3)
	for _, c := range []net.Conn{conns[1], conns[2], fourth} {
		go func() { blocked <- request(c, "/block") }()
	}
	for range 3 {
		<-entered // each of the three is in its handler: none is idle
	}
	waitIdle(0)
	fifth, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	defer fifth.Close()
	if err := request(fifth, "/"); err == nil {
		t.Error("a connection over the cap was served while every other was busy")
	}
	close(release)
	for range 3 {
		if err := <-blocked; err != nil {
			t.Errorf("busy connection: %v", err)
		}
	}
}
