package cloud

import (
	"log/slog"
	"net"
	"net/http"
	"sync"
	"time"
)

// ServerOptions tune NewServer; zero values take the defaults.
type ServerOptions struct {
	ReadHeaderTimeout time.Duration // default 10 s
	ReadTimeout       time.Duration // whole request, body included; default 30 s
	WriteTimeout      time.Duration // default ReadTimeout + IntegrationTimeout + 5 s
	IdleTimeout       time.Duration // keep-alive; default 30 s
	// MaxConns caps open connections (default 4096). A new connection
	// over the cap closes the longest-idle one; when none is idle, the new
	// one is refused (closed at once).
	MaxConns int
}

// Server is the HTTP server in front of a gateway, with the timeouts, the
// header limit and the connection cap that keep memory bounded under slow
// or idle clients: a client cannot hold a connection, a goroutine and its
// buffers (some 20 KB each) longer or in larger numbers than these allow.
type Server struct {
	*http.Server
	conns *connLimiter
}

// NewServer returns the server for h.
func NewServer(h http.Handler, log *slog.Logger, o ServerOptions) *Server {
	read := orDefault(o.ReadTimeout, 30*time.Second)
	l := &connLimiter{max: orDefault(o.MaxConns, 4096), conns: map[net.Conn]*connEntry{}}
	l.idle.prev, l.idle.next = &l.idle, &l.idle
	return &Server{
		conns: l,
		Server: &http.Server{
			Handler:           h,
			ReadHeaderTimeout: orDefault(o.ReadHeaderTimeout, 10*time.Second),
			ReadTimeout:       read,
			WriteTimeout:      orDefault(o.WriteTimeout, read+IntegrationTimeout+5*time.Second),
			IdleTimeout:       orDefault(o.IdleTimeout, 30*time.Second),
			// net/http adds 4 KiB of slack; the gateway answers 431 for
			// anything over API Gateway's 10,240 bytes that gets this far.
			MaxHeaderBytes: MaxRequestLineAndHeaders,
			ConnState:      l.connState,
			ErrorLog:       slog.NewLogLogger(log.Handler(), slog.LevelWarn),
		},
	}
}

// Serve accepts connections on ln under the connection cap.
func (s *Server) Serve(ln net.Listener) error {
	return s.Server.Serve(&limitedListener{Listener: ln, l: s.conns})
}

// OpenConns is the number of connections the server holds open.
func (s *Server) OpenConns() int {
	s.conns.mu.Lock()
	defer s.conns.mu.Unlock()
	return len(s.conns.conns)
}

// IdleConns is the number of open connections between requests (or not yet
// sent one): those a new connection over the cap may close.
func (s *Server) IdleConns() int {
	s.conns.mu.Lock()
	defer s.conns.mu.Unlock()
	n := 0
	for e := s.conns.idle.next; e != &s.conns.idle; e = e.next {
		n++
	}
	return n
}

// connLimiter tracks every open connection and which are idle (between
// requests, or not yet sent one), oldest idle first.
type connLimiter struct {
	max   int
	mu    sync.Mutex
	conns map[net.Conn]*connEntry
	// idle is the sentinel of a ring of the idle connections, oldest
	// first: linked through the entries themselves, so a connection
	// going idle and busy again between requests allocates nothing.
	idle connEntry
}

type connEntry struct {
	conn       net.Conn
	prev, next *connEntry // nil while a request is in progress
}

// pushIdle appends e to the idle ring (e is not in it).
func (l *connLimiter) pushIdle(e *connEntry) {
	last := l.idle.prev
	e.prev, e.next = last, &l.idle
	last.next, l.idle.prev = e, e
}

// dropIdle takes e out of the idle ring, if it is there.
func (l *connLimiter) dropIdle(e *connEntry) {
	if e.next == nil {
		return
	}
	e.prev.next, e.next.prev = e.next, e.prev
	e.prev, e.next = nil, nil
}

type limitedListener struct {
	net.Listener
	l *connLimiter
}

func (ll *limitedListener) Accept() (net.Conn, error) {
	for {
		c, err := ll.Listener.Accept()
		if err != nil {
			return nil, err
		}
		if ll.l.admit(c) {
			return c, nil
		}
		_ = c.Close()
	}
}

// admit registers c, making room by closing the longest-idle connection
// when at the cap; it reports false when every connection is busy.
func (l *connLimiter) admit(c net.Conn) bool {
	l.mu.Lock()
	var victim net.Conn
	if len(l.conns) >= l.max {
		oldest := l.idle.next
		if oldest == &l.idle {
			l.mu.Unlock()
			return false
		}
		victim = oldest.conn
		l.dropIdle(oldest)
		delete(l.conns, victim)
	}
	e := &connEntry{conn: c}
	l.pushIdle(e)
	l.conns[c] = e
	l.mu.Unlock()
	if victim != nil {
		_ = victim.Close()
	}
	return true
}

func (l *connLimiter) connState(c net.Conn, st http.ConnState) {
	l.mu.Lock()
	defer l.mu.Unlock()
	e := l.conns[c]
	if e == nil {
		return // evicted, or never admitted
	}
	switch st {
	case http.StateActive:
		l.dropIdle(e)
	case http.StateIdle:
		l.dropIdle(e)
		l.pushIdle(e)
	case http.StateClosed, http.StateHijacked:
		l.dropIdle(e)
		delete(l.conns, c)
	}
}
