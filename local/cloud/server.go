package cloud

import (
	"log/slog"
	"net/http"
	"time"
)

// ServerOptions tune NewServer; zero values take the defaults.
type ServerOptions struct {
	ReadHeaderTimeout time.Duration // default 10 s
	ReadTimeout       time.Duration // whole request, body included; default 30 s
	WriteTimeout      time.Duration // default ReadTimeout + IntegrationTimeout + 5 s
	IdleTimeout       time.Duration // keep-alive; default 30 s
}

// NewServer returns the HTTP server in front of a gateway, with the
// timeouts and header limit that keep memory bounded under slow or idle
// clients: a client cannot hold a connection, a goroutine and its buffers
// longer than these allow.
func NewServer(h http.Handler, log *slog.Logger, o ServerOptions) *http.Server {
	read := cmp(o.ReadTimeout, 30*time.Second)
	return &http.Server{
		Handler:           h,
		ReadHeaderTimeout: cmp(o.ReadHeaderTimeout, 10*time.Second),
		ReadTimeout:       read,
		WriteTimeout:      cmp(o.WriteTimeout, read+IntegrationTimeout+5*time.Second),
		IdleTimeout:       cmp(o.IdleTimeout, 30*time.Second),
		// net/http adds 4 KiB of slack; the gateway answers 431 for
		// anything over API Gateway's 10,240 bytes that gets this far.
		MaxHeaderBytes: MaxRequestLineAndHeaders,
		ErrorLog:       slog.NewLogLogger(log.Handler(), slog.LevelWarn),
	}
}
