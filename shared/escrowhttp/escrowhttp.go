// Package escrowhttp is the HTTP surface of credits and escrow: the
// accounts function (an agent's balance and entries, the operator's
// grant), the escrows function (create, fund, verify, release, refund,
// dispute, show, list) and the escrow-schedule function (the deadline
// refunds and dispute-window releases, on an EventBridge schedule). The
// domains are shared/credits and shared/escrow; this package decodes,
// dispatches and renders.
//
// Every route's auth comes from the route table through shared/access.
// Signing keys are the registry's (a buyer is a registered agent) and the
// network's own key, which is the operator's: it grants credits and
// resolves disputes. Errors use the registry surface's {"error",
// "message"} shape: 402 insufficient_funds, 409 invalid_transition.
package escrowhttp

import (
	"context"
	"crypto/ed25519"
	"encoding/json"
	"fmt"
	"log/slog"
	"net/http"
	"strconv"
	"time"

	"github.com/aws/aws-lambda-go/events"

	"github.com/a2awire/a2awire/shared/access"
	"github.com/a2awire/a2awire/shared/apierror"
	"github.com/a2awire/a2awire/shared/auth"
	"github.com/a2awire/a2awire/shared/credits"
	"github.com/a2awire/a2awire/shared/egress"
	"github.com/a2awire/a2awire/shared/escrow"
	"github.com/a2awire/a2awire/shared/function"
	"github.com/a2awire/a2awire/shared/httperr"
	"github.com/a2awire/a2awire/shared/lambdahttp"
	"github.com/a2awire/a2awire/shared/protocol"
	"github.com/a2awire/a2awire/shared/registry"
	"github.com/a2awire/a2awire/shared/store"
	"github.com/a2awire/a2awire/shared/store/guard"
)

// Function names (their functions/ folders).
const (
	Accounts = "accounts"
	Escrows  = "escrows"
	Schedule = "escrow-schedule"
)

// verifyBudget bounds one verify's invocation of the provider, inside the
// function's 29 s.
const verifyBudget = 25 * time.Second

// deps are what the handlers share.
type deps struct {
	log        *slog.Logger
	st         store.Store
	reg        *registry.Registry
	lookup     *registry.KeyLookup
	svc        *escrow.Service
	networkKey ed25519.PublicKey
	operator   string
}

func newDeps(env function.Env) (*deps, error) {
	st, err := env.NeedStore(env.Name)
	if err != nil {
		return nil, err
	}
	d := &deps{log: env.Logger(), st: st, networkKey: env.NetworkPublicKey}
	opts := []registry.Option{registry.WithClock(env.Clock())}
	if env.NetworkPublicKey != nil {
		opts = append(opts, registry.SharedKey(env.NetworkPublicKey))
		d.operator = auth.AWNID(env.NetworkPublicKey)
	} else {
		d.log.Warn(env.Name + ": the network key is not set, so no one is the operator (grants and dispute resolutions are refused)")
	}
	d.reg = registry.New(st, opts...)
	d.lookup = d.reg.NewKeyLookup()
	var window time.Duration
	if v := env.Env("DISPUTE_WINDOW"); v != "" {
		if window, err = time.ParseDuration(v); err != nil || window <= 0 {
			return nil, fmt.Errorf("%s: DISPUTE_WINDOW %q is not a positive duration", env.Name, v)
		}
	}
	inv := &invoker{c: &protocol.Client{HTTP: egress.NewClient(env.Egress), MaxAttempts: 2, AttemptTimeout: 10 * time.Second}}
	d.svc, err = escrow.New(escrow.Options{Store: st, Providers: providers{d.reg}, Invoker: inv, Operator: d.operator,
		Now: env.Clock(), DisputeWindow: window})
	if err != nil {
		return nil, err
	}
	return d, nil
}

// providers finds providers in the registry.
type providers struct{ reg *registry.Registry }

func (p providers) Provider(ctx context.Context, name string) (escrow.Provider, error) {
	a, err := p.reg.Get(ctx, name)
	if err != nil {
		return escrow.Provider{}, err
	}
	return escrow.Provider{Endpoint: a.Endpoint, Account: a.AWNID, Capabilities: a.Capabilities}, nil
}

// escrowAhead names the escrow in the path as the request's first read,
// read beside the key lookup's on an instance that has not seen the key.
func escrowAhead(r *http.Request) []guard.Read { return escrow.Reads(access.Param(r, "id")) }

// providerAhead names a create's first read, the provider's profile, from
// its body, read beside the key lookup's on an instance that has not seen
// the key. A body that does not decode names none (create answers it).
func providerAhead(r *http.Request) []guard.Read {
	b, _, err := DecodeCreate(access.Body(r))
	if err != nil {
		return nil
	}
	return registry.ProfileReads(b.Provider)
}

// Unchanged holds that name is still registered at endpoint
// (escrow.ProviderChecks).
func (p providers) Unchanged(name, endpoint string) store.Action {
	return registry.EndpointIs(name, endpoint)
}

// invoker invokes through the protocol client, whose HTTP client holds
// the egress policy.
type invoker struct{ c *protocol.Client }

func (i *invoker) Invoke(ctx context.Context, endpoint string, req protocol.Request, taskID string) (int, http.Header, []byte, error) {
	ctx, cancel := context.WithTimeout(ctx, verifyBudget)
	defer cancel()
	res, err := i.c.Invoke(ctx, endpoint, req, protocol.WithTaskID(taskID))
	if res == nil {
		return 0, nil, nil, err
	}
	return res.Status, res.Header, res.Body, err
}

// keys finds a signing key: the network's (the operator), else a
// registered one.
func (d *deps) keys(ctx context.Context, keyID string) (ed25519.PublicKey, error) {
	if d.networkKey != nil && auth.KeyID(d.networkKey) == keyID {
		return d.networkKey, nil
	}
	return d.lookup.Lookup(ctx, keyID)
}

func (d *deps) dispatcher(fn string, now func() time.Time, routes map[string]access.Route) (http.Handler, error) {
	return access.New(access.Config{
		Function: fn,
		Routes:   routes,
		Verifier: auth.NewVerifier(auth.NewNonces(d.st), now),
		Keys:     d.keys,
		Render:   httperr.WriteRegistry,
		Log:      d.log,
	})
}

// fn adapts a handler that returns its error.
func (d *deps) fn(f func(http.ResponseWriter, *http.Request, access.Identity) error) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		id, _ := access.IdentityFrom(r.Context())
		if err := f(w, r, id); err != nil {
			if k := apierror.KindOf(err); k == apierror.Internal || k == apierror.Unavailable {
				d.log.ErrorContext(r.Context(), "escrow request failed", "route", access.RouteOf(r).Key(), "err", err)
			}
			httperr.WriteRegistry(w, err)
		}
	})
}

// BuildAccounts builds the accounts function: GET /api/v1/accounts/{awnId}
// (signed by that agent) and POST /api/v1/accounts/{awnId}/grant (the
// operator).
func BuildAccounts(env function.Env) (any, error) {
	d, err := newDeps(env)
	if err != nil {
		return nil, err
	}
	h, err := d.dispatcher(Accounts, time.Now, map[string]access.Route{
		"GET /api/v1/accounts/{awnId}":        {Handler: d.fn(d.account)},
		"POST /api/v1/accounts/{awnId}/grant": {Handler: d.fn(d.grant), Owns: d.isOperator},
	})
	if err != nil {
		return nil, fmt.Errorf("escrowhttp: %w", err)
	}
	return lambdahttp.Entry(h), nil
}

// isOperator: the operator owns every account's grant route.
func (d *deps) isOperator(_ context.Context, _ map[string]string, id access.Identity) (bool, error) {
	return d.operator != "" && id.AWNID == d.operator, nil
}

func (d *deps) account(w http.ResponseWriter, r *http.Request, id access.Identity) error {
	awnID := access.Param(r, "awnId")
	if id.AWNID != awnID && id.AWNID != d.operator {
		return apierror.New(apierror.Forbidden, "an account is shown to its agent only")
	}
	q := r.URL.Query()
	limit, err := intParam(q.Get("limit"), credits.MaxEntries)
	if err != nil {
		return err
	}
	a, err := d.svc.Ledger().Get(r.Context(), awnID, limit, q.Get("cursor"))
	if err != nil {
		return err
	}
	entries := make([]entryOut, 0, len(a.Entries))
	for _, e := range a.Entries {
		entries = append(entries, entryOut{ID: e.ID, Tx: e.Tx, Amount: e.Amount, Counterparty: e.Counterparty, Memo: e.Memo, At: e.At.Format(time.RFC3339Nano)})
	}
	writeJSON(w, http.StatusOK, accountOut{Balance: a.Balance, Held: a.Held, Entries: entries, NextCursor: optional(a.Next)})
	return nil
}

// GrantBody is the body of POST /api/v1/accounts/{awnId}/grant.
type GrantBody struct {
	Amount int64  `json:"amount"`
	Memo   string `json:"memo"`
}

func (d *deps) grant(w http.ResponseWriter, r *http.Request, _ access.Identity) error {
	var b GrantBody
	if err := access.Decode(r, &b); err != nil {
		return err
	}
	awnID := access.Param(r, "awnId")
	if !credits.IsAWNID(awnID) {
		// Not the mint, not an escrow's hold: those move by transitions.
		return apierror.New(apierror.Invalid, "credits are granted to an agent's awnId (aw:sha256:<64 lowercase hex>)")
	}
	if err := d.svc.Ledger().Grant(r.Context(), awnID, b.Amount, b.Memo); err != nil {
		return err
	}
	a, err := d.svc.Ledger().Get(r.Context(), awnID, 1, "")
	if err != nil {
		return err
	}
	writeJSON(w, http.StatusOK, map[string]any{"awnId": awnID, "balance": a.Balance, "held": a.Held})
	return nil
}

// BuildEscrows builds the escrows function: every escrow route.
func BuildEscrows(env function.Env) (any, error) {
	d, err := newDeps(env)
	if err != nil {
		return nil, err
	}
	move := func(f func(context.Context, string, string) (escrow.Escrow, error)) http.Handler {
		return d.fn(func(w http.ResponseWriter, r *http.Request, id access.Identity) error {
			if err := emptyBody(r); err != nil {
				return err
			}
			e, err := f(r.Context(), access.Param(r, "id"), id.AWNID)
			if err != nil {
				return err
			}
			writeJSON(w, http.StatusOK, escrowJSON(e))
			return nil
		})
	}
	h, err := d.dispatcher(Escrows, time.Now, map[string]access.Route{
		"POST /api/v1/escrows":              {Handler: d.fn(d.create), ReadAhead: providerAhead},
		"GET /api/v1/escrows":               {Handler: d.fn(d.list)},
		"GET /api/v1/escrows/{id}":          {Handler: d.fn(d.show), ReadAhead: escrowAhead},
		"POST /api/v1/escrows/{id}/fund":    {Handler: move(d.svc.Fund), ReadAhead: escrowAhead},
		"POST /api/v1/escrows/{id}/verify":  {Handler: move(d.svc.Verify), ReadAhead: escrowAhead},
		"POST /api/v1/escrows/{id}/release": {Handler: move(d.svc.Release), ReadAhead: escrowAhead},
		"POST /api/v1/escrows/{id}/refund":  {Handler: move(d.svc.Refund), ReadAhead: escrowAhead},
		"POST /api/v1/escrows/{id}/dispute": {Handler: move(d.svc.Dispute), ReadAhead: escrowAhead},
	})
	if err != nil {
		return nil, fmt.Errorf("escrowhttp: %w", err)
	}
	return lambdahttp.Entry(h), nil
}

// emptyBody accepts a transition's body when it is empty or an object.
func emptyBody(r *http.Request) error {
	if len(access.Body(r)) == 0 {
		return nil
	}
	var none struct{}
	return access.Decode(r, &none)
}

// CreateBody is the body of POST /api/v1/escrows.
type CreateBody struct {
	Provider   string          `json:"provider"`
	Capability string          `json:"capability"`
	Input      json.RawMessage `json:"input"`
	Amount     int64           `json:"amount"`
	Deadline   string          `json:"deadline"`
}

// DecodeCreate decodes a create body strictly (the fuzzed decoder).
func DecodeCreate(body []byte) (CreateBody, time.Time, error) {
	var b CreateBody
	if err := access.DecodeJSON(body, &b); err != nil {
		return CreateBody{}, time.Time{}, err
	}
	var deadline time.Time
	if b.Deadline != "" {
		t, err := time.Parse(time.RFC3339, b.Deadline)
		if err != nil {
			return CreateBody{}, time.Time{}, apierror.New(apierror.Invalid, "deadline must be an RFC 3339 time")
		}
		deadline = t
	}
	return b, deadline, nil
}

func (d *deps) create(w http.ResponseWriter, r *http.Request, id access.Identity) error {
	b, deadline, err := DecodeCreate(access.Body(r))
	if err != nil {
		return err
	}
	e, err := d.svc.Create(r.Context(), escrow.CreateInput{Buyer: id.AWNID, Provider: b.Provider, Capability: b.Capability,
		Input: b.Input, Amount: b.Amount, Deadline: deadline})
	if err != nil {
		return err
	}
	writeJSON(w, http.StatusCreated, escrowJSON(e))
	return nil
}

func (d *deps) show(w http.ResponseWriter, r *http.Request, id access.Identity) error {
	e, err := d.svc.Show(r.Context(), access.Param(r, "id"), id.AWNID)
	if err != nil {
		return err
	}
	writeJSON(w, http.StatusOK, escrowJSON(e))
	return nil
}

func (d *deps) list(w http.ResponseWriter, r *http.Request, id access.Identity) error {
	q := r.URL.Query()
	role := q.Get("role")
	if role == "" {
		role = "buyer"
	}
	limit, err := intParam(q.Get("limit"), escrow.MaxLimit)
	if err != nil {
		return err
	}
	p, err := d.svc.List(r.Context(), id.AWNID, role, escrow.State(q.Get("state")), limit, q.Get("cursor"))
	if err != nil {
		return err
	}
	out := make([]escrowOut, 0, len(p.Escrows))
	for _, e := range p.Escrows {
		out = append(out, escrowJSON(e))
	}
	writeJSON(w, http.StatusOK, map[string]any{"escrows": out, "next_cursor": optional(p.Next)})
	return nil
}

func intParam(s string, most int) (int, error) {
	if s == "" {
		return 0, nil
	}
	n, err := strconv.Atoi(s)
	if err != nil || n < 1 || n > most {
		return 0, apierror.New(apierror.Invalid, "limit must be an integer from 1 to %d", most)
	}
	return n, nil
}

// BuildSchedule builds the escrow-schedule function: each scheduled tick
// moves the escrows time has moved (escrow.Service.Run).
func BuildSchedule(env function.Env) (any, error) {
	d, err := newDeps(env)
	if err != nil {
		return nil, err
	}
	return NewSchedule(d.svc, d.log), nil
}

// ScheduleHandler is what the schedule function's main passes to
// lambda.Start.
type ScheduleHandler func(context.Context, events.EventBridgeEvent) error

// NewSchedule returns the scheduled handler over svc. A failed run fails
// the invocation; what it did not move stays due for the next tick.
func NewSchedule(svc *escrow.Service, log *slog.Logger) ScheduleHandler {
	return func(ctx context.Context, _ events.EventBridgeEvent) error {
		rep, err := svc.Run(ctx)
		if rep.Due > 0 {
			log.InfoContext(ctx, "escrow schedule", "due", rep.Due, "refunded", rep.Refunded, "released", rep.Released)
		}
		if err != nil {
			return fmt.Errorf("escrow-schedule: %w", err)
		}
		return nil
	}
}

// Wire shapes.
type (
	entryOut struct {
		ID           string `json:"id"`
		Tx           string `json:"tx"`
		Amount       int64  `json:"amount"`
		Counterparty string `json:"counterparty"`
		Memo         string `json:"memo"`
		At           string `json:"at"`
	}
	accountOut struct {
		Balance    int64      `json:"balance"`
		Held       int64      `json:"held"`
		Entries    []entryOut `json:"entries"`
		NextCursor *string    `json:"next_cursor"`
	}
	transitionOut struct {
		From string `json:"from"`
		To   string `json:"to"`
		By   string `json:"by"`
		At   string `json:"at"`
	}
	escrowOut struct {
		ID              string          `json:"id"`
		State           string          `json:"state"`
		Buyer           string          `json:"buyer"`
		Provider        string          `json:"provider"`
		ProviderAccount string          `json:"providerAccount"`
		Capability      string          `json:"capability"`
		Input           json.RawMessage `json:"input"`
		Amount          int64           `json:"amount"`
		Deadline        string          `json:"deadline"`
		CreatedAt       string          `json:"createdAt"`
		Output          json.RawMessage `json:"output,omitempty"`
		OutputSHA256    string          `json:"outputSha256,omitempty"`
		Status          int             `json:"status,omitempty"`
		Reason          string          `json:"reason,omitempty"`
		Transitions     []transitionOut `json:"transitions"`
	}
)

func escrowJSON(e escrow.Escrow) escrowOut {
	trs := make([]transitionOut, 0, len(e.Transitions))
	for _, t := range e.Transitions {
		trs = append(trs, transitionOut{From: string(t.From), To: string(t.To), By: t.By, At: t.At.Format(time.RFC3339Nano)})
	}
	return escrowOut{ID: e.ID, State: string(e.State), Buyer: e.Buyer, Provider: e.Provider, ProviderAccount: e.ProviderAccount,
		Capability: e.Capability, Input: e.Input, Amount: e.Amount, Deadline: e.Deadline.Format(time.RFC3339),
		CreatedAt: e.CreatedAt.Format(time.RFC3339Nano), Output: e.Output, OutputSHA256: e.OutputSHA256,
		Status: e.Status, Reason: e.Reason, Transitions: trs}
}

func optional(s string) *string {
	if s == "" {
		return nil
	}
	return &s
}

func writeJSON(w http.ResponseWriter, status int, v any) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	_ = json.NewEncoder(w).Encode(v)
}
