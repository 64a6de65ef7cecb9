package awn

import (
	"context"
	"fmt"
	"net"
	"net/http"
	"time"
)

// Serve runs handler (a Receiver, typically) on addr until ctx ends, then
// shuts it down, giving requests in flight up to 5 seconds. onListen, when
// set, is told the address it listens on (addr ":0" picks a free port).
// The server bounds slow clients: 10 s to send headers, 30 s to send a
// request or read an answer.
func Serve(ctx context.Context, addr string, handler http.Handler, onListen func(addr string)) error {
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return fmt.Errorf("listen on %s: %w", addr, err)
	}
	srv := &http.Server{Handler: handler, ReadHeaderTimeout: 10 * time.Second, ReadTimeout: 30 * time.Second, WriteTimeout: 30 * time.Second}
	if onListen != nil {
		onListen(ln.Addr().String())
	}
	served := make(chan error, 1)
	go func() { served <- srv.Serve(ln) }()
	select {
	case err := <-served:
		return fmt.Errorf("serve %s: %w", ln.Addr(), err)
	case <-ctx.Done():
	}
	shutdown, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	_ = srv.Shutdown(shutdown)
	return nil
}
