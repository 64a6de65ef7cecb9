// Package a2abridge makes every registered provider an A2A agent, without
// the provider changing anything: it serves, per registry name, an A2A v1.0
// Agent Card and A2A's JSON-RPC 2.0 binding, and turns each A2A message
// into one A2AWire invocation of the provider's registered endpoint.
//
// Routes (function a2a-bridge):
//
//	GET  /a2a/{name}/.well-known/agent-card.json   the provider's card (agent.json: the same)
//	POST /a2a/{name}                               SendMessage, SendStreamingMessage, GetTask, CancelTask
//
// The mapping: a message's data part {"task", "input"} (or, without one,
// its first text part as input.text for the provider's first capability)
// is POSTed to the endpoint with the message id as X-A2AWire-Task-Id, so a
// stateful provider acts once however often a client re-sends one message.
// A verified 200 is a completed Task whose artifact holds the output (the
// metadata in the artifact's metadata); a 400 or 422 is JSON-RPC invalid
// params carrying the provider's {error, message}; a 5xx, any other answer
// or one the protocol verifier refuses is a failed Task with the reason.
// Tasks are kept in the table as long as the provider kit keeps task-id
// records (TaskTTL), for GetTask. Provider calls go through the egress
// policy. docs/a2a.md has the whole table.
package a2abridge

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"strings"
	"time"

	"github.com/a2awire/a2awire/shared/access"
	"github.com/a2awire/a2awire/shared/agentcard"
	"github.com/a2awire/a2awire/shared/apierror"
	"github.com/a2awire/a2awire/shared/egress"
	"github.com/a2awire/a2awire/shared/httperr"
	"github.com/a2awire/a2awire/shared/lambdahttp"
	"github.com/a2awire/a2awire/shared/protocol"
	"github.com/a2awire/a2awire/shared/registry"
	"github.com/a2awire/a2awire/shared/store"
)

// Function is the bridge's function (its folder under functions/).
const Function = "a2a-bridge"

// VersionHeader is A2A's version service parameter, sent as an HTTP header.
const VersionHeader = "A2A-Version"

// MaxBody bounds a JSON-RPC request body.
const MaxBody = 1 << 20

// JSON-RPC methods served.
const (
	MethodSendMessage          = "SendMessage"
	MethodSendStreamingMessage = "SendStreamingMessage"
	MethodGetTask              = "GetTask"
	MethodCancelTask           = "CancelTask"
)

// AgentLookup finds a registered provider's profile; a name nobody
// registered is an apierror NotFound.
type AgentLookup interface {
	Get(ctx context.Context, name string) (registry.Agent, error)
}

// Options builds the bridge.
type Options struct {
	// Log receives server-side failures; nil discards them.
	Log *slog.Logger
	// Store keeps the Tasks.
	Store store.Store
	// Agents finds profiles; nil reads the registry over Store.
	Agents AgentLookup
	// Egress is the policy of calls to provider endpoints: the URL is
	// checked with it and HTTP (when nil) is its client.
	Egress egress.Options
	// HTTP sends the invocations; nil means egress.NewClient(Egress).
	HTTP *http.Client
	// BaseURL, when set (A2A_BASE_URL), is the origin the cards' interface
	// URLs are below; empty derives it from each request (see origin).
	BaseURL string
	// NetworkURL is the network's public URL (BASE_URL), the cards'
	// provider URL; empty means the card's own origin.
	NetworkURL string
	// Now is the clock of Tasks' timestamps and expiry; nil is time.Now.
	Now func() time.Time
	// MaxAttempts bounds the attempts of one invocation (retries of a 5xx,
	// 429 or a dropped connection carry the same task id); 0 means 2.
	MaxAttempts int
	// AttemptTimeout bounds one attempt; 0 means 12 s, so two fit in the
	// function's 29 s.
	AttemptTimeout time.Duration
	// Backoff is the wait between attempts when the provider sent no
	// Retry-After; nil is the buyer client's default.
	Backoff func(attempt int) time.Duration
}

type bridge struct {
	log     *slog.Logger
	agents  AgentLookup
	tasks   *taskStore
	client  *protocol.Client
	egress  egress.Options
	base    string
	network string
	now     func() time.Time
}

// New returns the bridge's handler: its routes of the route table behind
// the access dispatcher (all public).
func New(o Options) (http.Handler, error) {
	if o.Store == nil {
		return nil, errors.New("a2abridge: no store")
	}
	b := &bridge{log: o.Log, agents: o.Agents, egress: o.Egress, now: o.Now}
	if b.log == nil {
		b.log = slog.New(slog.DiscardHandler)
	}
	if b.now == nil {
		b.now = time.Now
	}
	if b.agents == nil {
		b.agents = registry.New(o.Store)
	}
	b.tasks = &taskStore{st: o.Store, now: b.now}
	hc := o.HTTP
	if hc == nil {
		hc = egress.NewClient(o.Egress)
	}
	attempts := o.MaxAttempts
	if attempts <= 0 {
		attempts = 2
	}
	timeout := o.AttemptTimeout
	if timeout <= 0 {
		timeout = 12 * time.Second
	}
	b.client = &protocol.Client{HTTP: hc, MaxAttempts: attempts, AttemptTimeout: timeout, Backoff: o.Backoff}
	if o.BaseURL != "" {
		base, err := agentcard.ParseBaseURL(o.BaseURL)
		if err != nil {
			return nil, fmt.Errorf("a2abridge: A2A_BASE_URL: %w", err)
		}
		b.base = base
	}
	if o.NetworkURL != "" {
		nw, err := agentcard.ParseBaseURL(o.NetworkURL)
		if err != nil {
			return nil, fmt.Errorf("a2abridge: BASE_URL: %w", err)
		}
		b.network = nw
	}
	card := http.HandlerFunc(b.card)
	return access.New(access.Config{
		Function: Function,
		Routes: map[string]access.Route{
			"GET /a2a/{name}/.well-known/agent-card.json": {Handler: card},
			"GET /a2a/{name}/.well-known/agent.json":      {Handler: card},
			"POST /a2a/{name}":                            {Handler: http.HandlerFunc(b.rpc)},
		},
		MaxBody: MaxBody,
		Log:     b.log,
	})
}

// card serves the provider's Agent Card; an unregistered name is 404 in
// the registry's error shape.
func (b *bridge) card(w http.ResponseWriter, r *http.Request) {
	name := access.Param(r, "name")
	origin, err := b.origin(r)
	if err != nil {
		httperr.WriteRegistry(w, err)
		return
	}
	a, err := b.agents.Get(r.Context(), name)
	if err != nil {
		b.logFailure(r, "card", err)
		httperr.WriteRegistry(w, err)
		return
	}
	network := b.network
	if network == "" {
		network = origin
	}
	// The interface URL follows the request's origin (unless configured),
	// so caches must key the card on it too.
	w.Header().Set("Vary", "Host, X-Forwarded-Proto")
	if err := agentcard.Serve(w, r, providerCard(a, origin, network)); err != nil {
		b.logFailure(r, "card", err)
		httperr.WriteRegistry(w, err)
	}
}

func (b *bridge) logFailure(r *http.Request, op string, err error) {
	if k := apierror.KindOf(err); k == apierror.Internal || k == apierror.Unavailable {
		b.log.ErrorContext(r.Context(), "a2abridge: "+op, "err", err.Error())
	}
}

// rpc serves the JSON-RPC binding.
func (b *bridge) rpc(w http.ResponseWriter, r *http.Request) {
	req, rerr := decodeRequest(access.Body(r))
	out := &replier{w: w, id: req.ID, streaming: rerr == nil && req.Method == MethodSendStreamingMessage}
	if rerr != nil {
		out.fail(rerr)
		return
	}
	if ct, ok := lambdahttp.RawHeader(r, "Content-Type"); !ok || !protocol.IsJSON(ct) {
		out.status = http.StatusUnsupportedMediaType
		out.fail(newError(codeInvalidRequest, "Content-Type must be application/json"))
		return
	}
	if err := checkVersion(r); err != nil {
		out.fail(err)
		return
	}
	name := access.Param(r, "name")
	agent, err := b.agents.Get(r.Context(), name)
	if err != nil {
		if apierror.KindOf(err) == apierror.NotFound {
			out.status = http.StatusNotFound
			out.fail(newError(codeInvalidRequest, "no agent is registered as "+quote(name)))
			return
		}
		b.logFailure(r, "rpc", err)
		out.fail(newError(codeInternalError, "internal error; try again later"))
		return
	}
	switch req.Method {
	case MethodSendMessage, MethodSendStreamingMessage:
		b.send(r.Context(), out, agent, req.Params)
	case MethodGetTask:
		b.getTask(r.Context(), out, agent, req.Params)
	case MethodCancelTask:
		b.cancelTask(r.Context(), out, agent, req.Params)
	default:
		out.fail(newError(codeMethodNotFound, "method "+quote(req.Method)+" is not served: this agent answers SendMessage, SendStreamingMessage, GetTask and CancelTask"))
	}
}

// checkVersion applies A2A's version rule: the request is served in the
// Major.Minor its A2A-Version header names, and a request without one is
// a 0.3 client's. Only 1.0 is served.
func checkVersion(r *http.Request) *rpcError {
	v, ok := lambdahttp.RawHeader(r, VersionHeader)
	v = strings.TrimSpace(v)
	if !ok || v == "" {
		return newError(codeVersionNotSupported, "no A2A-Version header, which means version 0.3; this agent serves A2A 1.0 only: send A2A-Version: 1.0")
	}
	if v != "1.0" && !strings.HasPrefix(v, "1.0.") {
		return newError(codeVersionNotSupported, "A2A-Version "+quote(v)+" is not served; this agent serves A2A 1.0 only")
	}
	return nil
}
