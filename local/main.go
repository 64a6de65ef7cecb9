// Command local runs every a2awire function in one process with no AWS: an
// in-process API Gateway over the shared route table, each function's Lambda
// entry, and their stream and schedule triggers (go run ./local, or make
// local).
//
// With -invoke FN -event FILE it instead runs one function's Lambda entry on
// a sample event (API Gateway v2 request, DynamoDB stream batch or
// EventBridge event) and prints the response, like `sam local invoke`.
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
	"os"
	"os/signal"
	"path/filepath"
	"runtime/debug"
	"slices"
	"strings"
	"syscall"
	"text/tabwriter"
	"time"

	bolterrors "go.etcd.io/bbolt/errors"

	"github.com/a2awire/a2awire/local/cloud"
	"github.com/a2awire/a2awire/local/harness"
	"github.com/a2awire/a2awire/shared/agentcard"
	"github.com/a2awire/a2awire/shared/dashboard"
	"github.com/a2awire/a2awire/shared/logging"
	"github.com/a2awire/a2awire/shared/routes"
	"github.com/a2awire/a2awire/shared/store"
	"github.com/a2awire/a2awire/shared/store/bolt"
	"github.com/a2awire/a2awire/shared/store/dynamo"
	"github.com/a2awire/a2awire/shared/store/dynamo/dynamostream"
	"github.com/a2awire/a2awire/shared/store/memory"
)

func main() {
	tuneGC(os.Getenv)
	if err := run(context.Background(), os.Args[1:], os.Stdout, os.Stderr); err != nil {
		fmt.Fprintln(os.Stderr, "local:", err)
		if errors.Is(err, errUsage) {
			os.Exit(2)
		}
		os.Exit(1)
	}
}

var errUsage = errors.New("usage")

// harnessGOGC is the collector's GOGC when the environment sets none.
// The harness keeps a live heap of a megabyte or two, so at Go's default of
// 100 the heap's goal sits at its 4 MB floor and the collector runs every
// hundred or so requests, each run costing much the same whatever the
// heap's size: a large share of the CPU a request took
// (docs/performance.md). At 400 the floor is 16 MB and collections are
// about five times rarer. Memory grows with it only where garbage outweighs
// what is live, and the server's limits (docs/local.md) hold; GOGC in the
// environment wins.
const harnessGOGC = 400

// tuneGC sets harnessGOGC unless getenv gives GOGC.
func tuneGC(getenv func(string) string) {
	if getenv("GOGC") == "" {
		debug.SetGCPercent(harnessGOGC)
	}
}

const description = "local runs every a2awire function in one process behind an in-process API Gateway, with their stream and schedule triggers, and no AWS."

type config struct {
	addr           string
	invoke         string
	event          string
	data           string
	dynamoEndpoint string
	table          string
	reset          bool
	networkKey     string
	baseURL        string
}

// extras are what tests add to a run: functions of their own and the
// server's limits.
type extras struct {
	functions []harness.Function
	server    cloud.ServerOptions
}

func run(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	return runWith(ctx, args, stdout, stderr, extras{})
}

func runWith(ctx context.Context, args []string, stdout, stderr io.Writer, x extras) error {
	var cfg config
	flags := flag.NewFlagSet("local", flag.ContinueOnError)
	flags.SetOutput(stderr)
	flags.StringVar(&cfg.addr, "addr", "127.0.0.1:8080", "listen address")
	flags.StringVar(&cfg.invoke, "invoke", "", "run this function's Lambda entry on -event and exit (folder or agent name, e.g. fixture-ledger or a2awire-ledger)")
	flags.StringVar(&cfg.event, "event", "", "event file for -invoke: API Gateway v2 request, DynamoDB stream batch or EventBridge event (see events/)")
	flags.StringVar(&cfg.data, "data", "", "keep data in a bbolt file in this directory (default: in memory)")
	flags.StringVar(&cfg.dynamoEndpoint, "dynamodb-endpoint", "", "use DynamoDB at this URL (e.g. DynamoDB Local, make dynamodb-local) instead of the embedded store")
	flags.StringVar(&cfg.table, "table", "a2awire", "DynamoDB table name, with -dynamodb-endpoint")
	flags.BoolVar(&cfg.reset, "reset", false, "wipe the stored data first")
	flags.StringVar(&cfg.baseURL, "base-url", "", "the public URL the Agent Cards name (default http://<the listen address>)")
	flags.StringVar(&cfg.networkKey, "network-key", "", "the network's key file, created if missing (default: DIR/network.key with -data, <user config dir>/a2awire/network.key with -dynamodb-endpoint, a key per run in memory)")
	flags.Usage = func() {
		w := flags.Output()
		fmt.Fprintf(w, "%s\n\nUsage:\n  go run ./local [flags]                      serve on -addr until SIGINT/SIGTERM\n  go run ./local -invoke FN -event FILE       run one function on one event and print its response\n\nFlags:\n", description)
		flags.PrintDefaults()
	}
	if err := flags.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return nil
		}
		return fmt.Errorf("%w: %v (see go run ./local -h)", errUsage, err)
	}
	if flags.NArg() > 0 {
		return fmt.Errorf("%w: unexpected argument %q (see go run ./local -h)", errUsage, flags.Arg(0))
	}
	if cfg.baseURL != "" {
		if _, err := agentcard.ParseBaseURL(cfg.baseURL); err != nil {
			return fmt.Errorf("%w: -base-url: %v", errUsage, err)
		}
	}
	if cfg.invoke != "" {
		return invoke(ctx, cfg, stdout, stderr, x)
	}

	// One access line per request: written in batches, not one write(2)
	// each.
	logOut := newBatchWriter(stderr, flushDelay)
	defer logOut.Close()
	log := logging.New(logOut, logging.Text, slog.LevelInfo)
	st, err := openStore(ctx, cfg, stdout, harness.StreamConsumers(x.functions))
	if err != nil {
		return err
	}
	defer st.close()
	keyPath, err := networkKeyPath(cfg)
	if err != nil {
		return err
	}
	networkKey, _, err := loadNetworkKey(keyPath)
	if err != nil {
		return err
	}
	ln, err := net.Listen("tcp", cfg.addr)
	if err != nil {
		// Most people start the harness through make, which takes the
		// address as ADDR=, not as the flag: the hint names both.
		return fmt.Errorf("listen on %s: %w (is another harness running? pick another address: make local ADDR=127.0.0.1:8081, or -addr 127.0.0.1:8081)", cfg.addr, err)
	}
	base := "http://" + ln.Addr().String()
	// The cards name the configured URL, as BASE_URL does in a deploy,
	// never a request's Host.
	cardBase := cfg.baseURL
	if cardBase == "" {
		cardBase = base
	}
	h, err := harness.New(harness.Options{Log: log, Store: st.store, Feed: st.feed,
		Getenv: os.Getenv, Extra: x.functions, NetworkKey: networkKey, BaseURL: cardBase})
	if err != nil {
		_ = ln.Close()
		return err
	}
	defer h.Close()
	// The dashboard at / (docs/dashboard.md), offering the network key as
	// the dev key to this machine; every other path is the API's.
	site, err := dashboard.Mount(h, dashboard.Options{DevKey: networkKey})
	if err != nil {
		_ = ln.Close()
		return err
	}
	srv := cloud.NewServer(site, log, x.server)
	seeded, err := seedFixtures(ctx, st.store, base, networkKey, keyPath)
	if err != nil {
		_ = ln.Close()
		return err
	}
	lobby, err := seedLobby(ctx, st.store, base, networkKey)
	if err != nil {
		_ = ln.Close()
		return err
	}
	printBanner(stdout, base, st.where, h.Triggers())
	fmt.Fprintf(stdout, "%s\n%s\n\n", seeded, lobby)
	fmt.Fprintf(stdout, "dashboard: %s/ (the harness's dev key for it: %s%s, this machine only)\n\n", base, base, dashboard.DevKeyPath)

	ctx, stop := signal.NotifyContext(ctx, os.Interrupt, syscall.SIGTERM)
	defer stop()
	trigCtx, stopTriggers := context.WithCancel(context.WithoutCancel(ctx))
	defer stopTriggers()
	trigDone := make(chan error, 1)
	go func() { trigDone <- h.Run(trigCtx) }()
	errc := make(chan error, 1)
	go func() { errc <- srv.Serve(ln) }()
	var runErr error
	select {
	case err := <-errc:
		runErr = fmt.Errorf("serve: %w", err)
	case err := <-trigDone:
		// Triggers stop early only when one cannot run.
		runErr = fmt.Errorf("triggers: %w", err)
		trigDone <- nil
	case <-ctx.Done():
	}
	log.Info("shutting down")
	shutdownCtx, cancel := context.WithTimeout(context.Background(), cloud.IntegrationTimeout+5*time.Second)
	defer cancel()
	if err := srv.Shutdown(shutdownCtx); err != nil && runErr == nil {
		runErr = fmt.Errorf("shutdown: %w", err)
	}
	stopTriggers()
	if err := <-trigDone; err != nil && runErr == nil {
		runErr = fmt.Errorf("triggers: %w", err)
	}
	return runErr
}

func printBanner(w io.Writer, base, where string, triggers []string) {
	fmt.Fprintf(w, "a2awire local harness listening on %s\nstore: %s\nOpenAPI 3.1 document of every route: %s/openapi.json\n\n", base, where, base)
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "METHOD\tPATH\tFUNCTION\tAUTH")
	for _, r := range routes.All() {
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\n", r.Method, r.Path, r.Function, r.Auth)
	}
	tw.Flush()
	if len(triggers) > 0 {
		fmt.Fprintln(w, "\ntriggers:")
		for _, t := range triggers {
			fmt.Fprintln(w, "  "+t)
		}
	}
	fmt.Fprintln(w)
}

// opened is the store picked by the flags, its change feed and how to
// close them.
type opened struct {
	store store.Store
	feed  store.Feed
	where string
	close func()
}

// openStore picks the store by flags: DynamoDB (creating the table if
// missing, its stream as the feed), a bbolt file under -data, or memory.
// The feed keeps records until every one of consumers (the stream-triggered
// functions) has committed them. With -reset it wipes the data first and
// says what it wiped on out.
func openStore(ctx context.Context, cfg config, out io.Writer, consumers []string) (opened, error) {
	switch {
	case cfg.dynamoEndpoint != "" && cfg.data != "":
		return opened{}, fmt.Errorf("%w: -data and -dynamodb-endpoint exclude each other", errUsage)
	case cfg.dynamoEndpoint != "":
		client := dynamo.LocalClient(cfg.dynamoEndpoint)
		if cfg.reset {
			if err := dynamo.DeleteTable(ctx, client, cfg.table); err != nil {
				return opened{}, fmt.Errorf("reset: %w", err)
			}
			fmt.Fprintf(out, "reset: deleted DynamoDB table %s at %s (it is created again empty)\n", cfg.table, cfg.dynamoEndpoint)
		}
		if err := dynamo.CreateTable(ctx, client, cfg.table); err != nil {
			return opened{}, fmt.Errorf("create table %s at %s: %w (is DynamoDB Local running there? make dynamodb-local starts it)", cfg.table, cfg.dynamoEndpoint, err)
		}
		feed, err := dynamostream.NewFeed(ctx, dynamostream.LocalClient(cfg.dynamoEndpoint), client, cfg.table, dynamostream.WithFeedConsumers(consumers...))
		if err != nil {
			return opened{}, err
		}
		return opened{store: dynamo.New(client, cfg.table), feed: feed, close: func() {},
			where: fmt.Sprintf("DynamoDB table %s at %s (triggers read its stream)", cfg.table, cfg.dynamoEndpoint)}, nil
	case cfg.data != "":
		path := filepath.Join(cfg.data, "a2awire.db")
		if cfg.reset {
			fi, err := os.Stat(path)
			switch {
			case errors.Is(err, fs.ErrNotExist):
				fmt.Fprintf(out, "reset: %s did not exist, nothing to wipe\n", path)
			case err != nil:
				return opened{}, fmt.Errorf("reset: %w", err)
			default:
				if err := os.Remove(path); err != nil {
					return opened{}, fmt.Errorf("reset: %w", err)
				}
				fmt.Fprintf(out, "reset: removed %s (%d bytes)\n", path, fi.Size())
			}
		}
		st, err := bolt.Open(path, bolt.WithFeedConsumers(consumers...))
		if errors.Is(err, bolterrors.ErrTimeout) {
			return opened{}, fmt.Errorf("another process (is `make local` already running?) holds %s: stop it, or use another -data directory", path)
		}
		if err != nil {
			return opened{}, err
		}
		return opened{store: st, feed: st, where: "bbolt file " + path, close: func() { _ = st.Close() }}, nil
	}
	if cfg.reset {
		fmt.Fprintln(out, "reset: nothing to wipe, the in-memory store starts empty anyway")
	}
	st := memory.New(memory.WithFeedConsumers(consumers...))
	return opened{store: st, feed: st, where: "in memory (lost at exit; use -data DIR to keep it)", close: func() { _ = st.Close() }}, nil
}

// resolveFunction accepts a function folder name (fixture-ledger) or the
// agent name its route serves (a2awire-ledger).
func resolveFunction(name string, functions []string) (string, error) {
	if slices.Contains(functions, name) {
		return name, nil
	}
	agents := agentNames()
	if fn, ok := agents[name]; ok {
		return fn, nil
	}
	var valid []string
	for _, fn := range functions {
		line := fn
		for agent, f := range agents {
			if f == fn {
				line = agent + " (" + fn + ")"
			}
		}
		valid = append(valid, line)
	}
	slices.Sort(valid)
	return "", fmt.Errorf("%w: no function %q; valid names: %s", errUsage, name, strings.Join(valid, ", "))
}

// agentNames maps agent names to functions, from the /agents/{name}/invoke
// routes of the route table.
func agentNames() map[string]string {
	out := map[string]string{}
	for _, r := range routes.All() {
		if rest, ok := strings.CutPrefix(r.Path, "/agents/"); ok {
			if agent, ok := strings.CutSuffix(rest, "/invoke"); ok && !strings.ContainsAny(agent, "/{") {
				out[agent] = r.Function
			}
		}
	}
	return out
}

// Event shapes -invoke recognizes.
const (
	shapeHTTP     = "API Gateway v2 HTTP request"
	shapeStream   = "DynamoDB stream batch"
	shapeSchedule = "EventBridge scheduled event"
)

// eventShape tells which of the three event kinds raw is.
func eventShape(raw []byte) (string, error) {
	var probe struct {
		Version    string `json:"version"`
		RouteKey   string `json:"routeKey"`
		DetailType string `json:"detail-type"`
		Source     string `json:"source"`
		Records    []struct {
			EventSource string `json:"eventSource"`
		} `json:"Records"`
	}
	if err := json.Unmarshal(raw, &probe); err != nil {
		return "", fmt.Errorf("not a JSON event: %w", err)
	}
	switch {
	case probe.Version == "2.0" && probe.RouteKey != "":
		return shapeHTTP, nil
	case len(probe.Records) > 0 && probe.Records[0].EventSource == "aws:dynamodb":
		return shapeStream, nil
	case probe.DetailType != "" && probe.Source != "":
		return shapeSchedule, nil
	}
	return "", errors.New("neither an API Gateway v2 request (version 2.0 with a routeKey), a DynamoDB stream batch (Records from aws:dynamodb) nor an EventBridge event (detail-type and source)")
}

// invoke runs one function's entry on one event file and prints the Lambda
// response JSON on stdout.
func invoke(ctx context.Context, cfg config, stdout, stderr io.Writer, x extras) error {
	if cfg.event == "" {
		return fmt.Errorf("%w: -invoke needs -event FILE (samples are in events/)", errUsage)
	}
	raw, err := os.ReadFile(cfg.event)
	if err != nil {
		return fmt.Errorf("read event: %w", err)
	}
	shape, err := eventShape(raw)
	if err != nil {
		return fmt.Errorf("event %s: %w", cfg.event, err)
	}
	log := logging.New(stderr, logging.JSON, slog.LevelInfo)
	h, err := harness.New(harness.Options{Log: log, Getenv: os.Getenv, Extra: x.functions})
	if err != nil {
		return err
	}
	defer h.Close()
	fn, err := resolveFunction(cfg.invoke, h.Functions())
	if err != nil {
		return err
	}
	if err := accepts(h, fn, shape); err != nil {
		return fmt.Errorf("event %s: %w", cfg.event, err)
	}
	out, err := h.Entry(fn).Invoke(ctx, raw)
	if err != nil {
		return fmt.Errorf("%s failed: %w", fn, err)
	}
	var v any
	if err := json.Unmarshal(out, &v); err != nil {
		_, err = fmt.Fprintf(stdout, "%s\n", out)
		return err
	}
	enc := json.NewEncoder(stdout)
	enc.SetIndent("", "  ")
	return enc.Encode(v)
}

// accepts checks that fn is wired for events of shape, as in AWS, where a
// function receives only what its routes and triggers send it.
func accepts(h *harness.Harness, fn, shape string) error {
	kind := map[string]routes.TriggerKind{shapeStream: routes.StreamTrigger, shapeSchedule: routes.ScheduleTrigger}[shape]
	if shape == shapeHTTP {
		if len(routes.ForFunction(fn)) == 0 {
			return fmt.Errorf("it is an %s, but %s serves no route", shape, fn)
		}
		return nil
	}
	if !slices.Contains(h.TriggerKinds(fn), kind) {
		return fmt.Errorf("it is a %s, but %s has no %s trigger", shape, fn, kind)
	}
	return nil
}
