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
	"io/fs"
	"log/slog"
	"net"
	"net/http"
	"os"
	"os/signal"
	"path/filepath"
	"syscall"
	"text/tabwriter"
	"time"

	"github.com/a2awire/a2awire/functions/fixture-translator/translator"
	"github.com/a2awire/a2awire/local/harness"
	"github.com/a2awire/a2awire/shared/logging"
	"github.com/a2awire/a2awire/shared/routes"
	"github.com/a2awire/a2awire/shared/store/bolt"
	"github.com/a2awire/a2awire/shared/store/dynamo"
	"github.com/a2awire/a2awire/shared/store/memory"
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
	addr           string
	invoke         string
	event          string
	data           string
	dynamoEndpoint string
	table          string
	reset          bool
}

func run(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	var cfg config
	flags := flag.NewFlagSet("local", flag.ContinueOnError)
	flags.SetOutput(stderr)
	flags.StringVar(&cfg.addr, "addr", "127.0.0.1:8080", "listen address")
	flags.StringVar(&cfg.invoke, "invoke", "", "run this function's Lambda entry on -event and exit")
	flags.StringVar(&cfg.event, "event", "", "API Gateway v2 event file for -invoke")
	flags.StringVar(&cfg.data, "data", "", "keep data in a bbolt file in this directory (default: in memory)")
	flags.StringVar(&cfg.dynamoEndpoint, "dynamodb-endpoint", "", "use DynamoDB at this URL (e.g. DynamoDB Local) instead of the embedded store")
	flags.StringVar(&cfg.table, "table", "a2awire", "DynamoDB table name, with -dynamodb-endpoint")
	flags.BoolVar(&cfg.reset, "reset", false, "wipe the stored data first")
	if err := flags.Parse(args); err != nil {
		return fmt.Errorf("%w: %v", errUsage, err)
	}
	if cfg.invoke != "" {
		return invoke(ctx, cfg, stdout, stderr)
	}

	log := logging.New(stderr, logging.Text, slog.LevelInfo)
	st, where, err := openStore(ctx, cfg)
	if err != nil {
		return err
	}
	defer st.Close()
	gw, err := harness.New(harness.Options{Log: log, Store: st, TranslatorLLM: translator.EnvConfig(os.Getenv)})
	if err != nil {
		return err
	}
	ln, err := net.Listen("tcp", cfg.addr)
	if err != nil {
		return fmt.Errorf("listen: %w", err)
	}
	printRoutes(stdout, "http://"+ln.Addr().String(), where)

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

func printRoutes(w io.Writer, base, where string) {
	fmt.Fprintf(w, "a2awire local harness listening on %s\nstore: %s\n\n", base, where)
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "METHOD\tPATH\tFUNCTION\tAUTH")
	for _, r := range routes.All() {
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\n", r.Method, r.Path, r.Function, r.Auth)
	}
	tw.Flush()
	fmt.Fprintln(w)
}

// store is what the harness needs of storage, plus closing it.
type store interface {
	harness.Store
	Close() error
}

// openStore picks the store by flags: DynamoDB (creating the table if
// missing), a bbolt file under -data, or memory. It also says which, for
// the start-up banner.
func openStore(ctx context.Context, cfg config) (store, string, error) {
	switch {
	case cfg.dynamoEndpoint != "" && cfg.data != "":
		return nil, "", fmt.Errorf("%w: -data and -dynamodb-endpoint exclude each other", errUsage)
	case cfg.dynamoEndpoint != "":
		client := dynamo.LocalClient(cfg.dynamoEndpoint)
		if cfg.reset {
			if err := dynamo.DeleteTable(ctx, client, cfg.table); err != nil {
				return nil, "", fmt.Errorf("reset: %w", err)
			}
		}
		if err := dynamo.CreateTable(ctx, client, cfg.table); err != nil {
			return nil, "", fmt.Errorf("create table: %w", err)
		}
		return dynamo.New(client, cfg.table), fmt.Sprintf("DynamoDB table %s at %s", cfg.table, cfg.dynamoEndpoint), nil
	case cfg.data != "":
		if err := os.MkdirAll(cfg.data, 0o755); err != nil {
			return nil, "", fmt.Errorf("data dir: %w", err)
		}
		path := filepath.Join(cfg.data, "a2awire.db")
		if cfg.reset {
			if err := os.Remove(path); err != nil && !errors.Is(err, fs.ErrNotExist) {
				return nil, "", fmt.Errorf("reset: %w", err)
			}
		}
		st, err := bolt.Open(path)
		if err != nil {
			return nil, "", err
		}
		return st, "bbolt file " + path, nil
	}
	return memory.New(), "in memory (lost at exit; use -data DIR to keep it)", nil
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
	gw, err := harness.New(harness.Options{Log: log, TranslatorLLM: translator.EnvConfig(os.Getenv)})
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
