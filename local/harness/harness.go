// Package harness is the whole system in one process, behind
// `go run ./local`: every function's Lambda entry (the very handler its main
// passes to lambda.Start) behind the in-process API Gateway of package
// cloud, mounted from the shared route table, with each function's stream
// schedule and queue triggers driven as AWS drives them.
package harness

import (
	"context"
	"crypto/ed25519"
	"crypto/rand"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"sync"
	"time"

	"github.com/a2awire/a2awire/local/cloud"
	"github.com/a2awire/a2awire/shared/egress"
	"github.com/a2awire/a2awire/shared/function"
	"github.com/a2awire/a2awire/shared/queue"
	"github.com/a2awire/a2awire/shared/routes"
	"github.com/a2awire/a2awire/shared/store"
	"github.com/a2awire/a2awire/shared/store/memory"
)

// Options are the dependencies the harness hands to the functions, the
// local stand-ins for what each Lambda main builds from its environment,
// and the knobs of the stand-in AWS services.
type Options struct {
	Log *slog.Logger
	// Store backs the stateful functions. Nil means a fresh in-memory
	// store, so a harness built without one still serves every route.
	Store store.Store
	// Feed is the table's change feed for stream triggers. Nil means the
	// Store's own, when it keeps one (memory and bolt do).
	Feed store.Feed
	// Getenv is the functions' environment (their settings, such as
	// TRANSLATOR_LLM_URL or RATE_LIMIT_SEND); nil reads nothing, so every
	// function runs on its defaults. `go run ./local` passes os.Getenv.
	Getenv func(string) string
	// Extra adds functions beyond the route table's (tests use it for a
	// stream- or schedule-triggered function of their own).
	Extra []Function
	// Gateway tunes the API Gateway stand-in.
	Gateway cloud.GatewayOptions
	// NewTicker drives schedules; nil means real time.
	NewTicker func(time.Duration) cloud.Ticker
	// Backoff is the stream triggers' retry wait; zero means the default.
	Backoff cloud.Backoff
	// NetworkKey is the network's own signing key; the registry serves its
	// public half at /.well-known/http-message-signatures-directory. New
	// generates one when nil.
	NetworkKey ed25519.PrivateKey
	// BaseURL is the public URL the Agent Cards name (the network's and
	// each world's), as BASE_URL is in a deploy: the harness's listen
	// address. Empty means DefaultBaseURL. It is never taken from a
	// request's Host.
	BaseURL string
	// Now is the clock the functions' domains run on (Env.Now); nil means
	// time.Now.
	Now func() time.Time
	// Queues are the route table's queues by name; nil means fresh
	// in-process ones (NewQueues).
	Queues map[string]*queue.Memory
	// ReservedConcurrency reserves concurrency for functions by name, as
	// the deploy's reservedConcurrency context value does: a function at
	// its reservation is refused as Lambda refuses it (the gateway answers
	// 500, a stream or queue trigger retries). Unset: no limit.
	ReservedConcurrency map[string]int
}

// NewQueues returns an in-process queue for each of the route table's
// queues, with its visibility timeout, maxReceiveCount and dead-letter
// queue, on the clock now (nil: time.Now).
func NewQueues(now func() time.Time) map[string]*queue.Memory {
	out := map[string]*queue.Memory{}
	var open func(q routes.Queue) *queue.Memory
	open = func(q routes.Queue) *queue.Memory {
		if m, ok := out[q.Name]; ok {
			return m
		}
		var opts []queue.MemoryOption
		if now != nil {
			opts = append(opts, queue.WithClock(now))
		}
		if q.DeadLetter != "" {
			dl, _ := routes.QueueConfig(q.DeadLetter)
			opts = append(opts, queue.WithDeadLetter(open(dl)))
		}
		m := queue.NewMemory(queue.Config{VisibilityTimeout: time.Duration(q.VisibilityTimeoutSeconds) * time.Second, MaxReceiveCount: q.MaxReceiveCount}, opts...)
		out[q.Name] = m
		return m
	}
	for _, q := range routes.Queues() {
		open(q)
	}
	return out
}

// DefaultBaseURL is the Agent Cards' base URL when Options.BaseURL is
// empty: the harness's default listen address.
const DefaultBaseURL = "http://127.0.0.1:8080"

// Function is one function as the harness runs it.
type Function struct {
	// Name is the function's folder name under functions/.
	Name string
	// Handler is what the function's main passes to lambda.Start.
	Handler any
	// Config holds its timeout and triggers (routes.Config for the
	// functions of the route table).
	Config routes.Function
}

// Handlers returns what each function's Lambda main passes to lambda.Start,
// built by the builder the route table names (the one its main calls) from
// the harness's Env instead of the environment, keyed by function folder
// name. A function whose builder fails answers every invocation with the
// error, as a Lambda whose init failed.
func Handlers(o Options, st store.Store) map[string]any {
	if o.Queues == nil {
		o.Queues = NewQueues(o.Now)
	}
	if o.BaseURL == "" {
		o.BaseURL = DefaultBaseURL
	}
	out := map[string]any{}
	for name, build := range builders() {
		h, err := build(env(o, st, name))
		if err != nil {
			h = initFailed(name, err)
		}
		out[name] = h
	}
	return out
}

// env is the Env the harness gives function name: the harness's store,
// clock and network key, the functions' environment with BASE_URL from
// Options, and an egress policy that allows http and loopback, where the
// local receivers and providers run.
func env(o Options, st store.Store, name string) function.Env {
	getenv := func(k string) string {
		if k == "BASE_URL" && o.BaseURL != "" {
			return o.BaseURL
		}
		if o.Getenv == nil {
			return ""
		}
		return o.Getenv(k)
	}
	e := function.Env{
		Name:       name,
		Log:        o.Log,
		Store:      st,
		Getenv:     getenv,
		Now:        o.Now,
		Egress:     egress.Options{AllowLoopback: true, AllowHTTP: true},
		NetworkKey: o.NetworkKey,
		Queues: func(name string) (queue.Queue, error) {
			q, ok := o.Queues[name]
			if !ok {
				return nil, fmt.Errorf("harness: no queue %q", name)
			}
			return q, nil
		},
	}
	if o.NetworkKey != nil {
		e.NetworkPublicKey, _ = o.NetworkKey.Public().(ed25519.PublicKey)
	}
	return e
}

// initFailed is the entry of a function whose builder failed: every
// invocation returns the error, for whichever event the function takes.
func initFailed(name string, err error) any {
	err = fmt.Errorf("%s: init: %w", name, err)
	return func(context.Context, json.RawMessage) (json.RawMessage, error) { return nil, err }
}

// StreamConsumers returns the names of the functions with a stream trigger,
// those of the route table's function table and extra: the consumers an
// engine's feed must keep records for (WithFeedConsumers).
func StreamConsumers(extra []Function) []string {
	var names []string
	add := func(f routes.Function) {
		for _, t := range f.Triggers {
			if t.Kind == routes.StreamTrigger && !slices.Contains(names, f.Name) {
				names = append(names, f.Name)
			}
		}
	}
	for _, name := range routes.Functions() {
		add(routes.Config(name))
	}
	for _, f := range extra {
		add(f.Config)
	}
	slices.Sort(names)
	return names
}

// Harness is every function behind the gateway, plus their triggers.
type Harness struct {
	*cloud.Gateway
	entries map[string]*cloud.Entry
	// streaming holds the streaming functions, served by ServeHTTP itself.
	streaming map[string]streamFunction
	streams   []*cloud.Stream
	schedule  []*cloud.Schedule
	mappings  []*cloud.QueueMapping
	queues    map[string]*queue.Memory
	failures  map[string]*queue.Memory // each stream trigger's on-failure queue
	kinds     map[string][]routes.TriggerKind
	closers   []func() error
	log       *slog.Logger
	// networkKey is the network's signing key (Options.NetworkKey).
	networkKey ed25519.PrivateKey
}

// NetworkKey returns the network's signing key: the one given in Options
// or the one New generated.
func (h *Harness) NetworkKey() ed25519.PrivateKey { return h.networkKey }

// Close releases what New made itself (the in-memory store when Options
// had none).
func (h *Harness) Close() error {
	var errs []error
	for _, c := range h.closers {
		errs = append(errs, c())
	}
	return errors.Join(errs...)
}

// Queue returns the named queue of the route table's queue table, or nil.
func (h *Harness) Queue(name string) *queue.Memory { return h.queues[name] }

// StreamFailures returns the on-failure queue of the named function's
// stream trigger, or nil.
func (h *Harness) StreamFailures(name string) *queue.Memory { return h.failures[name] }

// TriggerKinds returns the kinds of the named function's triggers.
func (h *Harness) TriggerKinds(name string) []routes.TriggerKind { return slices.Clone(h.kinds[name]) }

// New builds every function's entry, the gateway over the route table and
// the functions' triggers. Call Run to drive the triggers.
func New(o Options) (_ *Harness, err error) {
	st := o.Store
	if st == nil {
		st = memory.New()
	}
	if o.NetworkKey == nil {
		_, priv, err := ed25519.GenerateKey(rand.Reader)
		if err != nil {
			return nil, fmt.Errorf("harness: network key: %w", err)
		}
		o.NetworkKey = priv
	} else if len(o.NetworkKey) != ed25519.PrivateKeySize {
		return nil, errors.New("harness: network key is not an Ed25519 private key")
	}
	feed := o.Feed
	if feed == nil {
		feed, _ = st.(store.Feed)
	}
	if o.Queues == nil {
		o.Queues = NewQueues(o.Now)
	}
	var fns []Function
	for name, h := range Handlers(o, st) {
		fns = append(fns, Function{Name: name, Handler: h, Config: routes.Config(name)})
	}
	fns = append(fns, o.Extra...)
	h := &Harness{entries: map[string]*cloud.Entry{}, streaming: map[string]streamFunction{}, log: o.Log, kinds: map[string][]routes.TriggerKind{}, networkKey: o.NetworkKey, queues: o.Queues,
		failures: map[string]*queue.Memory{}}
	if o.Store == nil {
		h.closers = append(h.closers, st.(*memory.Store).Close)
	}
	defer func() {
		if err != nil {
			_ = h.Close()
		}
	}()
	for _, f := range fns {
		if h.entries[f.Name] != nil || h.streaming[f.Name].handler != nil {
			return nil, fmt.Errorf("harness: function %q listed twice", f.Name)
		}
		if f.Config.Streaming {
			h.streaming[f.Name] = streamFunction{handler: streamHandler(f.Name, f.Handler), timeout: time.Duration(f.Config.TimeoutSeconds) * time.Second}
			continue
		}
		timeout := time.Duration(f.Config.TimeoutSeconds) * time.Second
		if timeout <= 0 {
			return nil, fmt.Errorf("harness: function %q has no timeout", f.Name)
		}
		e := cloud.NewEntry(f.Name, f.Handler, timeout).WithReservedConcurrency(o.ReservedConcurrency[f.Name])
		h.entries[f.Name] = e
		for _, t := range f.Config.Triggers {
			h.kinds[f.Name] = append(h.kinds[f.Name], t.Kind)
			switch t.Kind {
			case routes.StreamTrigger:
				if feed == nil {
					return nil, fmt.Errorf("harness: function %q has a stream trigger but the store keeps no change feed", f.Name)
				}
				// The on-failure destination the deploy gives every stream
				// mapping: what the mapping gives up on waits there for
				// cmd/a2awire-redrive, as in AWS.
				var fopts []queue.MemoryOption
				if o.Now != nil {
					fopts = append(fopts, queue.WithClock(o.Now))
				}
				fq := queue.NewMemory(queue.Config{VisibilityTimeout: time.Minute}, fopts...)
				h.failures[f.Name] = fq
				h.streams = append(h.streams, &cloud.Stream{Entry: e, Feed: feed, Trigger: t, Log: o.Log, Backoff: o.Backoff, Failures: fq, Now: o.Now})
			case routes.ScheduleTrigger:
				if _, err := cloud.ParseRate(t.Schedule); err != nil {
					return nil, fmt.Errorf("harness: function %q: %w", f.Name, err)
				}
				h.schedule = append(h.schedule, &cloud.Schedule{Entry: e, Expression: t.Schedule, Log: o.Log, NewTicker: o.NewTicker})
			case routes.QueueTrigger:
				q, ok := o.Queues[t.Queue]
				if !ok {
					return nil, fmt.Errorf("harness: function %q: no queue %q", f.Name, t.Queue)
				}
				h.mappings = append(h.mappings, &cloud.QueueMapping{Entry: e, Queue: q, Trigger: t, Log: o.Log})
			default:
				return nil, fmt.Errorf("harness: function %q: unknown trigger kind %q", f.Name, t.Kind)
			}
		}
	}
	for name := range o.ReservedConcurrency {
		if h.entries[name] == nil {
			return nil, fmt.Errorf("harness: reserved concurrency for %q: no such function", name)
		}
	}
	gw, err := cloud.NewGateway(h.entries, o.Log, o.Gateway)
	if err != nil {
		return nil, err
	}
	h.Gateway = gw
	return h, nil
}

// Functions returns the names of the functions the harness runs, sorted.
func (h *Harness) Functions() []string {
	var names []string
	for n := range h.entries {
		names = append(names, n)
	}
	for n := range h.streaming {
		names = append(names, n)
	}
	slices.Sort(names)
	return names
}

// Entry returns the named function's entry, or nil.
func (h *Harness) Entry(name string) *cloud.Entry { return h.entries[name] }

// Triggers describes the triggers Run drives, one line each, for the
// start-up banner.
func (h *Harness) Triggers() []string {
	var out []string
	for _, s := range h.streams {
		out = append(out, fmt.Sprintf("%s: table stream (batch %d, window %ds, batchItemFailures %v)", s.Entry.Name(),
			cmpInt(s.Trigger.BatchSize, routes.DefaultStreamBatchSize), s.Trigger.BatchWindowSeconds, s.Trigger.ReportBatchItemFailures))
	}
	for _, s := range h.schedule {
		out = append(out, fmt.Sprintf("%s: schedule %s", s.Entry.Name(), s.Expression))
	}
	for _, m := range h.mappings {
		out = append(out, fmt.Sprintf("%s: queue %s (batch %d, window %ds, concurrency %d, batchItemFailures %v)", m.Entry.Name(), m.Trigger.Queue,
			cmpInt(m.Trigger.BatchSize, routes.DefaultQueueBatchSize), m.Trigger.BatchWindowSeconds, cmpInt(m.Trigger.MaxConcurrency, routes.DefaultQueueConcurrency), m.Trigger.ReportBatchItemFailures))
	}
	return out
}

func cmpInt(v, def int) int {
	if v == 0 {
		return def
	}
	return v
}

// Start runs Run in the background until stop, which ends it, waits for
// it and returns its error: how a test or an embedding program drives the
// triggers beside its own calls.
func (h *Harness) Start(ctx context.Context) (stop func() error) {
	ctx, cancel := context.WithCancel(ctx)
	done := make(chan error, 1)
	go func() { done <- h.Run(ctx) }()
	return func() error {
		cancel()
		return <-done
	}
}

// Run drives every stream and schedule trigger until ctx ends, then waits
// for them to stop. It returns early only when a trigger cannot run.
func (h *Harness) Run(ctx context.Context) error {
	if len(h.streams)+len(h.schedule)+len(h.mappings) == 0 {
		<-ctx.Done()
		return nil
	}
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	var (
		wg   sync.WaitGroup
		mu   sync.Mutex
		errs []error
	)
	start := func(run func(context.Context) error) {
		wg.Go(func() {
			if err := run(ctx); err != nil {
				mu.Lock()
				errs = append(errs, err)
				mu.Unlock()
				cancel()
			}
		})
	}
	for _, s := range h.streams {
		start(s.Run)
	}
	for _, s := range h.schedule {
		start(s.Run)
	}
	for _, m := range h.mappings {
		start(m.Run)
	}
	wg.Wait()
	// The store outlives Run: functions an invocation left running when
	// ctx ended finish before Run returns and the caller closes it.
	for _, s := range h.streams {
		s.Entry.Drain()
	}
	for _, s := range h.schedule {
		s.Entry.Drain()
	}
	for _, m := range h.mappings {
		m.Entry.Drain()
	}
	return errors.Join(errs...)
}
