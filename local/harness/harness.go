// Package harness is the whole system in one process, behind
// `go run ./local`: every function's Lambda entry (the very handler its main
// passes to lambda.Start) behind the in-process API Gateway of package
// cloud, mounted from the shared route table, with each function's stream
// and schedule triggers driven as AWS drives them.
package harness

import (
	"context"
	"crypto/ed25519"
	"crypto/rand"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"slices"
	"sync"
	"time"

	"github.com/a2awire/a2awire/functions/fixture-clean/clean"
	"github.com/a2awire/a2awire/functions/fixture-ledger/ledger"
	"github.com/a2awire/a2awire/functions/fixture-messy/messy"
	"github.com/a2awire/a2awire/functions/fixture-punctual/punctual"
	"github.com/a2awire/a2awire/functions/fixture-translator/llm"
	"github.com/a2awire/a2awire/functions/fixture-translator/translator"
	"github.com/a2awire/a2awire/functions/registry/registryapi"
	"github.com/a2awire/a2awire/functions/webhook-dispatcher/dispatcher"
	"github.com/a2awire/a2awire/functions/webhook-retry/retry"
	"github.com/a2awire/a2awire/local/cloud"
	"github.com/a2awire/a2awire/shared/egress"
	"github.com/a2awire/a2awire/shared/fixtures/seed"
	"github.com/a2awire/a2awire/shared/lambdahttp"
	"github.com/a2awire/a2awire/shared/ratelimit"
	"github.com/a2awire/a2awire/shared/routes"
	"github.com/a2awire/a2awire/shared/store"
	"github.com/a2awire/a2awire/shared/store/memory"
	"github.com/a2awire/a2awire/shared/webhook"
	"github.com/a2awire/a2awire/shared/webhook/delivery"
	"github.com/a2awire/a2awire/shared/webhookhttp"
	"github.com/a2awire/a2awire/shared/world"
	"github.com/a2awire/a2awire/shared/worldhttp"
	"github.com/aws/aws-lambda-go/events"
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
	// TranslatorLLM configures the translator's model endpoint; the zero
	// value means none (the fixture answers from its dictionary). Fill it
	// with translator.EnvConfig(os.Getenv) to use the Lambda's variables.
	TranslatorLLM llm.Config
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
	// BaseURL is the public URL the registry's Agent Card names; empty
	// means each request's forwarded proto and Host.
	BaseURL string
}

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
// built from the options instead of the environment, keyed by function
// folder name. It is the one list of functions outside the route table; a
// test keeps the two (and the functions/ folders) in step.
func Handlers(o Options, st store.Store) map[string]any {
	return map[string]any{
		"world-put":            worldEntry(o, st, "world-put"),
		"world-get":            worldEntry(o, st, "world-get"),
		"world-join":           worldEntry(o, st, "world-join"),
		"world-leave":          worldEntry(o, st, "world-leave"),
		"world-agents":         worldEntry(o, st, "world-agents"),
		"world-send":           worldEntry(o, st, "world-send"),
		"world-messages":       worldEntry(o, st, "world-messages"),
		"world-ping":           worldEntry(o, st, "world-ping"),
		"world-act":            worldEntry(o, st, "world-act"),
		"world-events":         worldEntry(o, st, "world-events"),
		"world-card":           worldEntry(o, st, "world-card"),
		"fixture-clean":        lambdahttp.Entry(clean.New(o.Log)),
		"fixture-ledger":       lambdahttp.Entry(ledger.New(o.Log, st)),
		"fixture-messy":        lambdahttp.Entry(messy.New(o.Log)),
		"fixture-punctual":     lambdahttp.Entry(punctual.New(o.Log)),
		"fixture-translator":   lambdahttp.Entry(translator.New(o.Log, o.TranslatorLLM, nil)),
		"registry":             registryEntry(o, st),
		"registry-seed":        seed.Handler(st),
		"world-webhook-set":    webhookRouteEntry(o, st, webhookhttp.FunctionSet),
		"world-webhook-show":   webhookRouteEntry(o, st, webhookhttp.FunctionShow),
		"world-webhook-remove": webhookRouteEntry(o, st, webhookhttp.FunctionRemove),
		"world-webhook-replay": webhookRouteEntry(o, st, webhookhttp.FunctionReplay),
		"webhook-dispatcher":   webhookEntry(o, st, func(d *webhook.Dispatcher) any { return dispatcher.New(d) }),
		"webhook-retry":        webhookEntry(o, st, func(d *webhook.Dispatcher) any { return retry.New(d, o.Log) }),
	}
}

// registryEntry is the registry's entry, with http:// endpoints allowed as
// DESIGN §5 allows them locally. A handler that cannot be built answers
// every invocation with the error, as a Lambda whose init failed.
func registryEntry(o Options, st store.Store) any {
	var pub ed25519.PublicKey
	if o.NetworkKey != nil {
		pub, _ = o.NetworkKey.Public().(ed25519.PublicKey)
	}
	h, err := registryapi.New(registryapi.Options{Log: o.Log, Store: st, NetworkKey: pub, BaseURL: o.BaseURL, AllowInsecureEndpoints: true})
	if err != nil {
		return func(context.Context, events.APIGatewayV2HTTPRequest) (events.APIGatewayV2HTTPResponse, error) {
			return events.APIGatewayV2HTTPResponse{}, err
		}
	}
	return lambdahttp.Entry(h)
}

// webhookEntry builds a webhook function's entry over a Dispatcher that
// may reach receivers on this machine over http (the local mode of
// egress), signing v1a with the network key, and submitting receivers'
// actions through the world service, under the action rate limit the
// world routes use. A dispatcher that cannot be
// built answers every invocation with the error, as a Lambda whose init
// failed.
func webhookEntry(o Options, st store.Store, entry func(*webhook.Dispatcher) any) any {
	d, err := localDispatcher(o, st)
	if err != nil {
		return func(context.Context, json.RawMessage) (json.RawMessage, error) { return nil, err }
	}
	return entry(d)
}

// localDispatcher is the webhook Dispatcher of the harness's functions.
func localDispatcher(o Options, st store.Store) (*webhook.Dispatcher, error) {
	return webhook.NewDispatcher(webhook.Config{
		Store:      st,
		Client:     egress.NewClient(egress.Options{AllowLoopback: true, AllowHTTP: true, Timeout: delivery.AttemptTimeout}),
		NetworkKey: o.NetworkKey,
		Actions:    world.New(st),
		Limiter:    ratelimit.New(st, ratelimit.DefaultLimits()),
		Log:        o.Log,
	})
}

// webhookRouteEntry builds the entry of a member webhook route's function
// over st with the dependencies its main builds (worldhttp.NewDeps), and
// URLs allowed to be http:// and loopback, so a receiver on this machine
// can be registered.
func webhookRouteEntry(o Options, st store.Store, name string) any {
	deps := worldhttp.NewDeps(st, ratelimit.DefaultLimits(), o.BaseURL, o.Log)
	ho := webhookhttp.Options{Log: o.Log, URLs: egress.Options{AllowLoopback: true, AllowHTTP: true},
		Auth: webhookhttp.Auth{Verifier: deps.Options.Verifier, ParamKeys: webhookhttp.MemberKeys(deps.World)}}
	hooks := webhook.NewStore(st)
	var h http.Handler
	var err error
	switch name {
	case webhookhttp.FunctionSet:
		h, err = webhookhttp.NewSet(ho, hooks)
	case webhookhttp.FunctionShow:
		h, err = webhookhttp.NewShow(ho, hooks)
	case webhookhttp.FunctionRemove:
		h, err = webhookhttp.NewRemove(ho, hooks)
	case webhookhttp.FunctionReplay:
		h, err = webhookhttp.NewReplay(ho, hooks)
	default:
		err = fmt.Errorf("harness: no webhook function %q", name)
	}
	if err != nil {
		return func(context.Context, events.APIGatewayV2HTTPRequest) (events.APIGatewayV2HTTPResponse, error) {
			return events.APIGatewayV2HTTPResponse{}, err
		}
	}
	return lambdahttp.Entry(h)
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
	entries  map[string]*cloud.Entry
	streams  []*cloud.Stream
	schedule []*cloud.Schedule
	kinds    map[string][]routes.TriggerKind
	closers  []func() error
	log      *slog.Logger
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
	var fns []Function
	for name, h := range Handlers(o, st) {
		fns = append(fns, Function{Name: name, Handler: h, Config: routes.Config(name)})
	}
	fns = append(fns, o.Extra...)
	h := &Harness{entries: map[string]*cloud.Entry{}, log: o.Log, kinds: map[string][]routes.TriggerKind{}, networkKey: o.NetworkKey}
	if o.Store == nil {
		h.closers = append(h.closers, st.(*memory.Store).Close)
	}
	defer func() {
		if err != nil {
			_ = h.Close()
		}
	}()
	for _, f := range fns {
		if h.entries[f.Name] != nil {
			return nil, fmt.Errorf("harness: function %q listed twice", f.Name)
		}
		timeout := time.Duration(f.Config.TimeoutSeconds) * time.Second
		if timeout <= 0 {
			return nil, fmt.Errorf("harness: function %q has no timeout", f.Name)
		}
		e := cloud.NewEntry(f.Name, f.Handler, timeout)
		h.entries[f.Name] = e
		for _, t := range f.Config.Triggers {
			h.kinds[f.Name] = append(h.kinds[f.Name], t.Kind)
			switch t.Kind {
			case routes.StreamTrigger:
				if feed == nil {
					return nil, fmt.Errorf("harness: function %q has a stream trigger but the store keeps no change feed", f.Name)
				}
				h.streams = append(h.streams, &cloud.Stream{Entry: e, Feed: feed, Trigger: t, Log: o.Log, Backoff: o.Backoff})
			case routes.ScheduleTrigger:
				if _, err := cloud.ParseRate(t.Schedule); err != nil {
					return nil, fmt.Errorf("harness: function %q: %w", f.Name, err)
				}
				h.schedule = append(h.schedule, &cloud.Schedule{Entry: e, Expression: t.Schedule, Log: o.Log, NewTicker: o.NewTicker})
			default:
				return nil, fmt.Errorf("harness: function %q: unknown trigger kind %q", f.Name, t.Kind)
			}
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
	return out
}

func cmpInt(v, def int) int {
	if v == 0 {
		return def
	}
	return v
}

// Run drives every stream and schedule trigger until ctx ends, then waits
// for them to stop. It returns early only when a trigger cannot run.
func (h *Harness) Run(ctx context.Context) error {
	if len(h.streams)+len(h.schedule) == 0 {
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
	wg.Wait()
	return errors.Join(errs...)
}
