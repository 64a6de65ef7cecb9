// Command local runs the whole a2awire system in one process with no AWS: an
// in-process API Gateway over every function, mounted from the shared route
// table (go run ./local, or make local).
//
// With -invoke FN -event FILE it instead runs one function's Lambda entry on
// a sample event and prints the response, like `sam local invoke`.
package main

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"os"
	"os/signal"
	"syscall"
	"text/tabwriter"
	"time"

	"github.com/a2awire/a2awire/local/harness"
	"github.com/a2awire/a2awire/shared/logging"
	"github.com/a2awire/a2awire/shared/routes"
	"github.com/aws/aws-lambda-go/events"
)

func main() {
	if err := run(context.Background(), os.Args[1:], os.Stdout, os.Stderr); err != nil {
		fmt.Fprintln(os.Stderr, "local:", err)
		if errors.Is(err, errUsage) {
			os.Exit(2)
		}
		os.Exit(1)
	}
}

var errUsage = errors.New("usage")

type config struct {
	addr   string
	invoke string
	event  string
}

func run(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	var cfg config
	fs := flag.NewFlagSet("local", flag.ContinueOnError)
	fs.SetOutput(stderr)
	fs.StringVar(&cfg.addr, "addr", "127.0.0.1:8080", "listen address")
	fs.StringVar(&cfg.invoke, "invoke", "", "run this function's Lambda entry on -event and exit")
	fs.StringVar(&cfg.event, "event", "", "API Gateway v2 event file for -invoke")
	if err := fs.Parse(args); err != nil {
		return fmt.Errorf("%w: %v", errUsage, err)
	}
	if cfg.invoke != "" {
		return invoke(ctx, cfg, stdout, stderr)
	}

	log := logging.New(stderr, logging.Text, slog.LevelInfo)
	gw, err := harness.New(harness.Options{Log: log})
	if err != nil {
		return err
	}
	ln, err := net.Listen("tcp", cfg.addr)
	if err != nil {
		return fmt.Errorf("listen: %w", err)
	}
	printRoutes(stdout, "http://"+ln.Addr().String())

	srv := &http.Server{Handler: gw, ReadHeaderTimeout: 10 * time.Second}
	ctx, stop := signal.NotifyContext(ctx, os.Interrupt, syscall.SIGTERM)
	defer stop()
	errc := make(chan error, 1)
	go func() { errc <- srv.Serve(ln) }()
	select {
	case err := <-errc:
		return fmt.Errorf("serve: %w", err)
	case <-ctx.Done():
	}
	log.Info("shutting down")
	shutdownCtx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := srv.Shutdown(shutdownCtx); err != nil {
		return fmt.Errorf("shutdown: %w", err)
	}
	return nil
}

func printRoutes(w io.Writer, base string) {
	fmt.Fprintf(w, "a2awire local harness listening on %s\n\n", base)
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "METHOD\tPATH\tFUNCTION\tAUTH")
	for _, r := range routes.All() {
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\n", r.Method, r.Path, r.Function, r.Auth)
	}
	tw.Flush()
	fmt.Fprintln(w)
}

// invoke runs one function's entry on one event file and prints the Lambda
// response JSON on stdout.
func invoke(ctx context.Context, cfg config, stdout, stderr io.Writer) error {
	if cfg.event == "" {
		return fmt.Errorf("%w: -invoke needs -event FILE", errUsage)
	}
	raw, err := os.ReadFile(cfg.event)
	if err != nil {
		return fmt.Errorf("read event: %w", err)
	}
	var event events.APIGatewayV2HTTPRequest
	if err := json.Unmarshal(raw, &event); err != nil {
		return fmt.Errorf("decode event %s: %w", cfg.event, err)
	}
	log := logging.New(stderr, logging.JSON, slog.LevelInfo)
	gw, err := harness.New(harness.Options{Log: log})
	if err != nil {
		return err
	}
	timeout := time.Duration(routes.Config(cfg.invoke).TimeoutSeconds) * time.Second
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	resp, err := gw.Invoke(ctx, cfg.invoke, event)
	if err != nil {
		return err
	}
	enc := json.NewEncoder(stdout)
	enc.SetIndent("", "  ")
	return enc.Encode(resp)
}
