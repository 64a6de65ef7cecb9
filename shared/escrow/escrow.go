// Package escrow settles a hire against a verified delivery: a buyer
// creates an escrow for a provider's capability, funds it (credits move
// from the buyer to the escrow's hold), has the network verify the
// delivery (the network invokes the provider with the escrow id as the
// task id and checks the answer with the protocol verifier), and releases
// it (the hold pays the provider) — or refunds, or disputes for the
// operator to resolve. Time moves escrows too (Run): a funded escrow past
// its deadline is refunded, a delivered one past its dispute window is
// released. It is written over the item API (store.Store) and moves money
// with package credits, so it runs on memory, bolt and DynamoDB alike.
//
// # States
//
//	created ──fund──▶ funded ──verify──▶ delivered ──release──▶ released
//	   │                │  ▲                 │  (window ends: schedule)
//	   │                │  │verify           └──dispute──▶ disputed ──operator──▶ released | refunded
//	   │                ▼  │
//	   │              failed ──verify──▶ delivered
//	   └──refund──▶ refunded ◀──refund (funded, failed; deadline: schedule)
//
// Legal reports the edges; every other one is 409 invalid_transition.
//
// # Items
//
//	item        pk                          sk           notes
//	escrow      ESCROW#<id>                 ESCROW       state, version, …; gsi1pk ESCROWDUE#<shard>, gsi1sk <due>#<id> while time may move it
//	transition  ESCROW#<id>                 T#<version>  from, to, by, at
//	index       ESCROWS#buyer#<awnId>       <id>         the buyer's escrows, newest first
//	index       ESCROWS#provider#<awnId>    <id>         the provider's
//	hold        credits account escrow:<id> (package credits)
//
// # One write per transition
//
// A transition reads the escrow's partition (one Query: the escrow and its
// transitions) and writes one conditional write: the escrow's Update
// conditioned on its state and version as read, the Put of the new
// transition item (conditioned on its absence), and, when money moves, the
// credits transfer's balance updates and entries — one TransactWriteItems.
// Of two racing transitions (a release and a refund, a hundred releases)
// exactly one commits; the others' condition fails, they read again, and
// either find their own transition already done (a repeat: 200 with the
// escrow unchanged, no second movement) or find it illegal now (409). The
// version in the condition makes a transition that read a stale escrow
// fail even when the state happens to match again (failed → failed).
//
// # Costs (sequential round trips on a warm instance)
//
//	create    registry Get, then TransactWriteItems (escrow, transition, 2 index items)   2
//	fund      Query, then TransactWriteItems (escrow, transition, 2 balances, 2 entries)   2
//	verify    Query, the provider's invocation, then TransactWriteItems (escrow, transition)   2 + the provider
//	release   Query, then TransactWriteItems (escrow, transition, 2 balances, 2 entries, buyer's held)   2
//	refund    Query, then one write (2 actions from created; 6 when money goes back)   2
//	dispute   Query, then TransactWriteItems (escrow, transition)   2
//	show      Query   1
//	list      Query of the index, then one Query per escrow in parallel   2
//
// A lost race adds a Query and a write per retry.
package escrow

import (
	"context"
	crand "crypto/rand"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"hash/fnv"
	"math/rand/v2"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/oklog/ulid/v2"

	"github.com/a2awire/a2awire/shared/apierror"
	"github.com/a2awire/a2awire/shared/credits"
	"github.com/a2awire/a2awire/shared/protocol"
	"github.com/a2awire/a2awire/shared/store"
	"github.com/a2awire/a2awire/shared/store/guard"
)

// State is an escrow's state.
type State string

// States.
const (
	Created   State = "created"
	Funded    State = "funded"
	Delivered State = "delivered"
	Failed    State = "failed"
	Released  State = "released"
	Refunded  State = "refunded"
	Disputed  State = "disputed"
)

// BySchedule is the "by" of the transitions time makes.
const BySchedule = "schedule"

// CodeInvalidTransition is the code of an illegal transition (409).
const CodeInvalidTransition = "invalid_transition"

// Limits.
const (
	// DefaultDeadline is how long a funded escrow waits for its delivery
	// when create names no deadline; MaxDeadline the furthest it may name.
	DefaultDeadline = 24 * time.Hour
	MaxDeadline     = 30 * 24 * time.Hour
	// DefaultDisputeWindow is how long a delivered escrow may be disputed.
	DefaultDisputeWindow = 24 * time.Hour
	// MaxInput and MaxOutput bound the JSON an escrow item holds (DynamoDB
	// items end at 400 KB).
	MaxInput  = 64 << 10
	MaxOutput = 256 << 10
	// DefaultLimit and MaxLimit bound a listing page.
	DefaultLimit = 20
	MaxLimit     = 100
	// dueShards spreads the schedule's index over partitions.
	dueShards = 4
	// attempts bounds a transition's read-decide-write rounds.
	attempts = 12
)

var legal = map[State][]State{
	"":        {Created},
	Created:   {Funded, Refunded},
	Funded:    {Delivered, Failed, Refunded},
	Failed:    {Delivered, Failed, Refunded},
	Delivered: {Released, Disputed},
	Disputed:  {Released, Refunded},
}

// Legal reports whether from → to is an edge of the state machine.
func Legal(from, to State) bool {
	for _, s := range legal[from] {
		if s == to {
			return true
		}
	}
	return false
}

// Transition is one step of an escrow's history.
type Transition struct {
	From, To State
	By       string
	At       time.Time
}

// Escrow is one hire.
type Escrow struct {
	ID    string
	State State
	// Buyer is the buyer's awnId; Provider the registry name, and
	// ProviderAccount the awnId of the key that registered it (paid on
	// release).
	Buyer, Provider, ProviderAccount string
	// ProviderEndpoint is where the provider answered when the escrow
	// was created (empty on escrows created before it was kept): verify
	// invokes it when the registry still says so (ProviderChecks).
	ProviderEndpoint string
	Capability       string
	Input            json.RawMessage
	Amount           int64
	Deadline         time.Time
	CreatedAt        time.Time
	// Output and OutputSHA256 are set once delivered.
	Output       json.RawMessage
	OutputSHA256 string
	// Status and Reason are set when a verification failed.
	Status      int
	Reason      string
	DeliveredAt time.Time
	Version     int64
	Transitions []Transition
}

// Hold is the credits account holding a funded escrow's amount.
func Hold(id string) string { return "escrow:" + id }

// Provider is a registered provider as escrow needs it.
type Provider struct {
	Endpoint     string
	Account      string // the awnId of its key
	Capabilities []string
}

// Providers finds a provider by registry name; NotFound when none.
type Providers interface {
	Provider(ctx context.Context, name string) (Provider, error)
}

// ProviderChecks is what Providers may also do: give the condition that
// provider name is still registered at endpoint, for a write to carry. A
// verify then invokes the endpoint its escrow kept from its creation
// without reading the provider first, and its write holds that the
// registry still names that endpoint (when not, it reads the provider and
// invokes again, with the escrow's id as the task id: idempotent).
type ProviderChecks interface {
	Unchanged(name, endpoint string) store.Action
}

// Invoker invokes a provider's endpoint with a task id.
type Invoker interface {
	Invoke(ctx context.Context, endpoint string, req protocol.Request, taskID string) (status int, header http.Header, body []byte, err error)
}

// Options configure a Service.
type Options struct {
	Store     store.Store
	Providers Providers
	Invoker   Invoker
	// Operator is the operator's awnId (the network key's): it resolves
	// disputes and may read every escrow.
	Operator string
	// Now is the clock (nil: time.Now).
	Now func() time.Time
	// DisputeWindow (0: DefaultDisputeWindow).
	DisputeWindow time.Duration
}

// Service is the escrow domain.
type Service struct {
	st        store.Store
	ledger    *credits.Ledger
	providers Providers
	invoker   Invoker
	operator  string
	now       func() time.Time
	window    time.Duration
	mu        sync.Mutex
	ent       *ulid.MonotonicEntropy
}

// New returns the service.
func New(o Options) (*Service, error) {
	if o.Store == nil {
		return nil, errors.New("escrow: no store")
	}
	if o.Now == nil {
		o.Now = time.Now
	}
	if o.DisputeWindow <= 0 {
		o.DisputeWindow = DefaultDisputeWindow
	}
	return &Service{st: o.Store, ledger: credits.New(o.Store, o.Now), providers: o.Providers, invoker: o.Invoker,
		operator: o.Operator, now: o.Now, window: o.DisputeWindow, ent: ulid.Monotonic(crand.Reader, 0)}, nil
}

// Ledger returns the credits ledger the service moves money in.
func (s *Service) Ledger() *credits.Ledger { return s.ledger }

func (s *Service) newID() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return ulid.MustNew(ulid.Timestamp(s.now()), s.ent).String()
}

// Keys and attributes.
func pk(id string) string           { return "ESCROW#" + id }
func escrowKey(id string) store.Key { return store.Key{PK: pk(id), SK: "ESCROW"} }
func transitionKey(id string, v int64) store.Key {
	return store.Key{PK: pk(id), SK: fmt.Sprintf("T#%06d", v)}
}
func indexPK(role, awnID string) string { return "ESCROWS#" + role + "#" + awnID }
func duePK(id string) string {
	h := fnv.New32a()
	_, _ = h.Write([]byte(id))
	return "ESCROWDUE#" + strconv.Itoa(int(h.Sum32()%dueShards))
}
func dueSK(t time.Time, id string) string { return fmt.Sprintf("%012d#%s", t.Unix(), id) }

const (
	aType     = "type"
	aState    = "state"
	aVersion  = "version"
	aBuyer    = "buyer"
	aProvider = "provider"
	aPAccount = "providerAccount"
	aPEnd     = "providerEndpoint"
	aCap      = "capability"
	aInput    = "input"
	aAmount   = "amount"
	aDeadline = "deadline"
	aCreated  = "createdAt"
	aOutput   = "output"
	aSHA      = "outputSha256"
	aStatus   = "status"
	aReason   = "reason"
	aDelivAt  = "deliveredAt"
	aFrom     = "from"
	aTo       = "to"
	aBy       = "by"
	aAt       = "at"
	aID       = "id"
)

// CreateInput is a buyer's request for an escrow.
type CreateInput struct {
	Buyer      string
	Provider   string
	Capability string
	Input      json.RawMessage
	Amount     int64
	// Deadline is zero for DefaultDeadline.
	Deadline time.Time
}

// Create writes a new escrow in state created.
func (s *Service) Create(ctx context.Context, in CreateInput) (Escrow, error) {
	if in.Provider == "" {
		return Escrow{}, apierror.New(apierror.Invalid, "provider is required")
	}
	if in.Capability == "" {
		return Escrow{}, apierror.New(apierror.Invalid, "capability is required")
	}
	if err := credits.CheckAmount(in.Amount); err != nil {
		return Escrow{}, err
	}
	input := in.Input
	if len(input) == 0 || string(input) == "null" {
		input = json.RawMessage("{}")
	}
	if len(input) > MaxInput {
		return Escrow{}, apierror.New(apierror.Invalid, "input must be at most %d bytes", MaxInput)
	}
	var obj map[string]json.RawMessage
	if err := json.Unmarshal(input, &obj); err != nil || obj == nil {
		return Escrow{}, apierror.New(apierror.Invalid, "input must be a JSON object")
	}
	now := s.now()
	deadline := in.Deadline
	if deadline.IsZero() {
		deadline = now.Add(DefaultDeadline)
	}
	if !deadline.After(now) || deadline.Sub(now) > MaxDeadline {
		return Escrow{}, apierror.New(apierror.Invalid, "deadline must be in the future and at most %d days away", int(MaxDeadline/(24*time.Hour)))
	}
	if s.providers == nil {
		return Escrow{}, errors.New("escrow: no provider lookup")
	}
	p, err := s.providers.Provider(ctx, in.Provider)
	if err != nil {
		return Escrow{}, err
	}
	found := false
	for _, c := range p.Capabilities {
		found = found || c == in.Capability
	}
	if !found {
		return Escrow{}, apierror.New(apierror.Invalid, "provider %s does not advertise capability %s", apierror.Quote(in.Provider), apierror.Quote(in.Capability))
	}
	if p.Account == in.Buyer {
		return Escrow{}, apierror.New(apierror.Invalid, "an agent cannot hire itself")
	}
	id := s.newID()
	e := Escrow{ID: id, State: Created, Buyer: in.Buyer, Provider: in.Provider, ProviderAccount: p.Account,
		Capability: in.Capability, Input: input, Amount: in.Amount, Deadline: deadline.UTC().Truncate(time.Second),
		CreatedAt: now.UTC(), Version: 1}
	tr := Transition{From: "", To: Created, By: in.Buyer, At: now.UTC()}
	item := store.Item{
		aType: store.S("escrow"), aID: store.S(id), aState: store.S(string(Created)), aVersion: store.N(1),
		aBuyer: store.S(e.Buyer), aProvider: store.S(e.Provider), aPAccount: store.S(e.ProviderAccount), aPEnd: store.S(p.Endpoint),
		aCap: store.S(e.Capability), aInput: store.S(string(input)), aAmount: store.N(e.Amount),
		aDeadline: store.N(e.Deadline.Unix()), aCreated: store.N(now.UnixNano()),
	}
	_, err = s.st.Write(ctx,
		store.Put(escrowKey(id), item).When(store.ItemAbsent()),
		store.Put(transitionKey(id, 1), transitionItem(tr)).When(store.ItemAbsent()),
		store.Put(store.Key{PK: indexPK("buyer", e.Buyer), SK: id}, store.Item{aType: store.S("escrow-index"), aID: store.S(id)}),
		store.Put(store.Key{PK: indexPK("provider", e.ProviderAccount), SK: id}, store.Item{aType: store.S("escrow-index"), aID: store.S(id)}),
	)
	if err != nil {
		return Escrow{}, apierror.FromStore("create escrow", err)
	}
	e.Transitions = []Transition{tr}
	return e, nil
}

func transitionItem(t Transition) store.Item {
	return store.Item{aType: store.S("escrow-transition"), aFrom: store.S(string(t.From)), aTo: store.S(string(t.To)),
		aBy: store.S(t.By), aAt: store.N(t.At.UnixNano())}
}

// Reads are Get's reads of escrow id (its partition's Query), named
// from a route's path so that a request reads them ahead, beside its key
// lookup's read (guard.Ahead, access.Route.ReadAhead): on an instance that
// has not seen the key, the lookup and the escrow are one round trip. A
// malformed id names none (Get answers it without a read).
func Reads(id string) []guard.Read {
	if !validID(id) {
		return nil
	}
	return []guard.Read{guard.QueryRead(store.Query{PK: pk(id)})}
}

// Get reads an escrow with its history: one Query. NotFound when none.
func (s *Service) Get(ctx context.Context, id string) (Escrow, error) {
	if !validID(id) {
		return Escrow{}, notFound()
	}
	var items []store.Item
	cursor := ""
	for {
		page, err := s.st.Query(ctx, store.Query{PK: pk(id), Cursor: cursor})
		if err != nil {
			return Escrow{}, apierror.FromStore("read escrow", err)
		}
		items = append(items, page.Items...)
		if page.Cursor == "" {
			break
		}
		cursor = page.Cursor
	}
	if len(items) == 0 || items[0].Str(store.AttrSK) != "ESCROW" {
		return Escrow{}, notFound()
	}
	e := decode(items[0])
	for _, it := range items[1:] {
		at, _ := it.Int(aAt)
		e.Transitions = append(e.Transitions, Transition{From: State(it.Str(aFrom)), To: State(it.Str(aTo)), By: it.Str(aBy), At: time.Unix(0, at).UTC()})
	}
	return e, nil
}

// Show is Get for caller: the buyer, the provider or the operator.
func (s *Service) Show(ctx context.Context, id, caller string) (Escrow, error) {
	e, err := s.Get(ctx, id)
	if err != nil {
		return Escrow{}, err
	}
	if caller != e.Buyer && caller != e.ProviderAccount && caller != s.operator {
		return Escrow{}, apierror.New(apierror.Forbidden, "an escrow is shown to its buyer, its provider and the operator only")
	}
	return e, nil
}

func validID(id string) bool {
	if len(id) != 26 {
		return false
	}
	_, err := ulid.ParseStrict(id)
	return err == nil
}

func notFound() error { return apierror.New(apierror.NotFound, "no such escrow") }

func decode(it store.Item) Escrow {
	num := func(n string) int64 { v, _ := it.Int(n); return v }
	e := Escrow{ID: it.Str(aID), State: State(it.Str(aState)), Buyer: it.Str(aBuyer), Provider: it.Str(aProvider),
		ProviderAccount: it.Str(aPAccount), ProviderEndpoint: it.Str(aPEnd), Capability: it.Str(aCap), Input: json.RawMessage(it.Str(aInput)),
		Amount: num(aAmount), Deadline: time.Unix(num(aDeadline), 0).UTC(), CreatedAt: time.Unix(0, num(aCreated)).UTC(),
		OutputSHA256: it.Str(aSHA), Status: int(num(aStatus)), Reason: it.Str(aReason), Version: num(aVersion)}
	if o := it.Str(aOutput); o != "" {
		e.Output = json.RawMessage(o)
	}
	if d := num(aDelivAt); d != 0 {
		e.DeliveredAt = time.Unix(0, d).UTC()
	}
	return e
}

// step is what a transition does to an escrow it may act on.
type step struct {
	to State
	// set are the escrow's attributes to set, remove to remove.
	set    store.Item
	remove []string
	// transfer moves money in the same transaction (nil: none).
	transfer *credits.Transfer
	// check is a condition the write carries (Kind 0: none).
	check store.Action
}

// plan decides a transition on e as read: done (a repeat: return e), or
// the step, or an error (illegal, forbidden).
type plan func(e Escrow) (done bool, st step, err error)

func invalid(e Escrow, action string) error {
	return &apierror.Error{Kind: apierror.Conflict, Code: CodeInvalidTransition,
		Message: fmt.Sprintf("cannot %s an escrow that is %s", action, e.State)}
}

func reached(e Escrow, s State) bool {
	for _, t := range e.Transitions {
		if t.To == s {
			return true
		}
	}
	return false
}

// apply runs p against the escrow until its write commits, it is a repeat,
// or it is refused.
func (s *Service) apply(ctx context.Context, id, by string, p plan) (Escrow, error) {
	return s.applyFrom(ctx, id, by, nil, p)
}

// applyFrom is apply whose first round decides on first, the escrow as
// its caller read it, instead of reading it again.
func (s *Service) applyFrom(ctx context.Context, id, by string, first *Escrow, p plan) (Escrow, error) {
	var lastErr error
	for n := 0; n < attempts; n++ {
		if n > 0 {
			// Racers spread out so one of them commits.
			d := time.Duration(rand.Int64N(int64(time.Millisecond) * int64(min(1<<n, 64))))
			select {
			case <-ctx.Done():
				return Escrow{}, apierror.FromStore("escrow transition", ctx.Err())
			case <-time.After(d):
			}
		}
		var e Escrow
		var err error
		if first != nil {
			e, first = *first, nil
		} else if e, err = s.Get(ctx, id); err != nil {
			return Escrow{}, err
		}
		done, st, err := p(e)
		if err != nil || done {
			return e, err
		}
		next, err := s.commit(ctx, e, by, st)
		if err == nil {
			return next, nil
		}
		var cf *store.ConditionFailedError
		switch {
		case apierror.KindOf(err) == apierror.PaymentRequired:
			return Escrow{}, err
		case errors.As(err, &cf), errors.Is(err, store.ErrUnavailable), errors.Is(err, store.ErrOutcomeUnknown):
			// Someone else moved the escrow (or the store could not
			// say): read again and decide again. A write whose outcome
			// is unknown is resolved by that read: if it committed, the
			// plan now sees its own transition done.
			lastErr = err
			continue
		default:
			return Escrow{}, apierror.FromStore("escrow transition", err)
		}
	}
	return Escrow{}, apierror.FromStore("escrow transition", fmt.Errorf("%w: %w", store.ErrUnavailable, lastErr))
}

// commit writes one transition of e: the escrow's update conditioned on
// the state and version read, the transition item, and the money. It
// returns the escrow as written, without reading it back.
func (s *Service) commit(ctx context.Context, e Escrow, by string, st step) (Escrow, error) {
	now := s.now().UTC()
	v := e.Version + 1
	upd := store.Update(escrowKey(e.ID)).SetAttr(aState, store.S(string(st.to))).SetAttr(aVersion, store.N(v)).
		When(store.And(store.Eq(aState, store.S(string(e.State))), store.Eq(aVersion, store.N(e.Version))))
	for k, val := range st.set {
		upd = upd.SetAttr(k, val)
	}
	if len(st.remove) > 0 {
		upd = upd.Del(st.remove...)
	}
	tr := store.Put(transitionKey(e.ID, v), transitionItem(Transition{From: e.State, To: st.to, By: by, At: now})).When(store.ItemAbsent())
	var err error
	if st.transfer != nil {
		err = s.ledger.Move(ctx, *st.transfer, upd, tr)
	} else if st.check.Kind != 0 {
		_, err = s.st.Write(ctx, upd, tr, st.check)
	} else {
		_, err = s.st.Write(ctx, upd, tr)
	}
	if err != nil {
		return Escrow{}, err
	}
	next := e
	next.Transitions = append(append([]Transition(nil), e.Transitions...), Transition{From: e.State, To: st.to, By: by, At: now})
	next.State, next.Version = st.to, v
	for _, a := range st.remove {
		switch a {
		case aStatus:
			next.Status = 0
		case aReason:
			next.Reason = ""
		}
	}
	for k, val := range st.set {
		it := store.Item{k: val}
		switch k {
		case aOutput:
			next.Output = json.RawMessage(it.Str(k))
		case aSHA:
			next.OutputSHA256 = it.Str(k)
		case aReason:
			next.Reason = it.Str(k)
		case aStatus:
			n, _ := it.Int(k)
			next.Status = int(n)
		case aDelivAt:
			n, _ := it.Int(k)
			next.DeliveredAt = time.Unix(0, n).UTC()
		}
	}
	return next, nil
}

func (s *Service) dueSet(e Escrow, due time.Time) store.Item {
	return store.Item{store.AttrGSI1PK: store.S(duePK(e.ID)), store.AttrGSI1SK: store.S(dueSK(due, e.ID))}
}

var dueRemove = []string{store.AttrGSI1PK, store.AttrGSI1SK}

// Fund moves the amount from the buyer to the escrow's hold: created →
// funded. 402 insufficient_funds when the buyer's balance is short.
func (s *Service) Fund(ctx context.Context, id, caller string) (Escrow, error) {
	return s.apply(ctx, id, caller, func(e Escrow) (bool, step, error) {
		if caller != e.Buyer {
			return false, step{}, forbidden()
		}
		if reached(e, Funded) {
			return true, step{}, nil
		}
		if e.State != Created {
			return false, step{}, invalid(e, "fund")
		}
		return false, step{to: Funded, set: s.dueSet(e, e.Deadline),
			transfer: &credits.Transfer{From: e.Buyer, To: Hold(e.ID), Amount: e.Amount, Memo: "fund escrow " + e.ID, Held: e.Buyer, HeldDelta: e.Amount}}, nil
	})
}

func forbidden() error {
	return apierror.New(apierror.Forbidden, "only the escrow's buyer may do this")
}

// Release pays the provider: delivered → released by the buyer, disputed →
// released by the operator.
func (s *Service) Release(ctx context.Context, id, caller string) (Escrow, error) {
	return s.apply(ctx, id, caller, s.releasePlan(caller))
}

func (s *Service) releasePlan(caller string) plan {
	return func(e Escrow) (bool, step, error) {
		if caller != e.Buyer && caller != s.operator && caller != BySchedule {
			return false, step{}, forbidden()
		}
		if e.State == Released {
			return true, step{}, nil
		}
		ok := e.State == Delivered && (caller == e.Buyer || caller == BySchedule) || e.State == Disputed && caller == s.operator
		if !ok {
			return false, step{}, invalid(e, "release")
		}
		return false, step{to: Released, remove: dueRemove,
			transfer: &credits.Transfer{From: Hold(e.ID), To: e.ProviderAccount, Amount: e.Amount, Memo: "release escrow " + e.ID, Held: e.Buyer, HeldDelta: -e.Amount}}, nil
	}
}

// Refund ends an escrow with the money back to the buyer: created, funded
// or failed → refunded by the buyer; disputed → refunded by the operator.
func (s *Service) Refund(ctx context.Context, id, caller string) (Escrow, error) {
	return s.apply(ctx, id, caller, s.refundPlan(caller))
}

func (s *Service) refundPlan(caller string) plan {
	return func(e Escrow) (bool, step, error) {
		if caller != e.Buyer && caller != s.operator && caller != BySchedule {
			return false, step{}, forbidden()
		}
		if e.State == Refunded {
			return true, step{}, nil
		}
		var ok bool
		switch e.State {
		case Created, Funded, Failed:
			ok = caller == e.Buyer || caller == BySchedule && e.State != Created
		case Disputed:
			ok = caller == s.operator
		}
		if !ok {
			return false, step{}, invalid(e, "refund")
		}
		st := step{to: Refunded, remove: dueRemove}
		if e.State != Created {
			st.transfer = &credits.Transfer{From: Hold(e.ID), To: e.Buyer, Amount: e.Amount, Memo: "refund escrow " + e.ID, Held: e.Buyer, HeldDelta: -e.Amount}
		}
		return false, st, nil
	}
}

// Dispute holds a delivered escrow for the operator, within the dispute
// window.
func (s *Service) Dispute(ctx context.Context, id, caller string) (Escrow, error) {
	return s.apply(ctx, id, caller, func(e Escrow) (bool, step, error) {
		if caller != e.Buyer {
			return false, step{}, forbidden()
		}
		if reached(e, Disputed) {
			return true, step{}, nil
		}
		if e.State != Delivered {
			return false, step{}, invalid(e, "dispute")
		}
		if !s.now().Before(e.DeliveredAt.Add(s.window)) {
			return false, step{}, &apierror.Error{Kind: apierror.Conflict, Code: CodeInvalidTransition, Message: "the dispute window has closed"}
		}
		return false, step{to: Disputed, remove: dueRemove}, nil
	})
}

// Verify has the network invoke the provider with the escrow id as the
// task id and judge the answer with the protocol verifier: funded or
// failed → delivered (output and its SHA-256 kept) or failed (status and
// reason kept). A repeat on a delivered (or later) escrow returns it
// unchanged without invoking; a retry of a failed one invokes again with
// the same task id, so a stateful provider acts once.
func (s *Service) Verify(ctx context.Context, id, caller string) (Escrow, error) {
	e, err := s.Get(ctx, id)
	if err != nil {
		return Escrow{}, err
	}
	if caller != e.Buyer {
		return Escrow{}, forbidden()
	}
	if reached(e, Delivered) {
		return e, nil
	}
	if e.State != Funded && e.State != Failed {
		return Escrow{}, invalid(e, "verify")
	}
	if s.invoker == nil || s.providers == nil {
		return Escrow{}, errors.New("escrow: no invoker")
	}
	// The endpoint the escrow kept is invoked when the registry can be
	// asked, in the write, whether it still names it: no provider read
	// before the invocation.
	kept := ""
	pc, ok := s.providers.(ProviderChecks)
	if ok && e.ProviderEndpoint != "" {
		kept = e.ProviderEndpoint
	}
	judged := s.judge(ctx, e, kept)
	if kept != "" {
		judged.check = pc.Unchanged(e.Provider, kept)
	}
	read, rounds := e, 0
	// The escrow as read before the invocation is the first round's: the
	// write is conditioned on its state and version, so a verify or a
	// refund that moved it meanwhile makes it fail and read again.
	return s.applyFrom(ctx, id, caller, &read, func(e Escrow) (bool, step, error) {
		rounds++
		if reached(e, Delivered) {
			return true, step{}, nil
		}
		if e.Version != read.Version {
			// Another verify (or a refund) moved it while this one
			// invoked: its outcome stands.
			if e.State == Failed {
				return true, step{}, nil
			}
			return false, step{}, invalid(e, "verify")
		}
		if rounds > 1 && judged.check.Kind != 0 {
			// The write failed with the escrow unchanged: the registry
			// no longer names the endpoint invoked. Where the provider
			// is now decides (read, then invoked).
			judged = s.judge(ctx, e, "")
		}
		return false, judged, nil
	})
}

// judge invokes the provider and turns its answer into the step: at
// endpoint when set, else where the registry says the provider is now.
func (s *Service) judge(ctx context.Context, e Escrow, endpoint string) step {
	failed := func(status int, reason string) step {
		if len(reason) > 1000 {
			reason = reason[:1000]
		}
		return step{to: Failed, set: store.Item{aStatus: store.N(int64(status)), aReason: store.S(reason)}}
	}
	if endpoint == "" {
		p, err := s.providers.Provider(ctx, e.Provider)
		if err != nil {
			return failed(0, "the provider is no longer registered")
		}
		endpoint = p.Endpoint
	}
	status, header, body, err := s.invoker.Invoke(ctx, endpoint, protocol.Request{Task: e.Capability, Input: e.Input}, e.ID)
	if err != nil && status == 0 {
		return failed(0, "the provider could not be reached: "+err.Error())
	}
	if verr := protocol.Verify(status, header, body, protocol.Expect{Agent: e.Provider, Capability: e.Capability}); verr != nil {
		return failed(status, "the answer fails the protocol verifier: "+strings.ReplaceAll(verr.Error(), "\n", "; "))
	}
	if status != http.StatusOK {
		var eb struct {
			Error   string `json:"error"`
			Message string `json:"message"`
		}
		_ = json.Unmarshal(body, &eb)
		return failed(status, fmt.Sprintf("the provider answered %d %s: %s", status, eb.Error, eb.Message))
	}
	var top struct {
		Output json.RawMessage `json:"output"`
	}
	if err := json.Unmarshal(body, &top); err != nil {
		return failed(status, "the answer is not a response")
	}
	if len(top.Output) > MaxOutput {
		return failed(status, fmt.Sprintf("the output is over %d bytes, more than an escrow holds", MaxOutput))
	}
	sum := sha256.Sum256(top.Output)
	return step{to: Delivered, set: store.Item{aOutput: store.S(string(top.Output)), aSHA: store.S(hex.EncodeToString(sum[:])),
		aDelivAt: store.N(s.now().UnixNano()), store.AttrGSI1PK: store.S(duePK(e.ID)), store.AttrGSI1SK: store.S(dueSK(s.now().Add(s.window), e.ID))},
		remove: []string{aStatus, aReason}}
}

// Page is a listing page.
type Page struct {
	Escrows []Escrow
	Next    string
}

// List lists caller's escrows as role ("buyer" or "provider"), newest
// first, optionally only those in state. The state filter applies to each
// page read, so a page may hold fewer than limit escrows and still have a
// next one.
func (s *Service) List(ctx context.Context, caller, role string, state State, limit int, cursor string) (Page, error) {
	if role != "buyer" && role != "provider" {
		return Page{}, apierror.New(apierror.Invalid, "role must be buyer or provider")
	}
	if state != "" && legal[state] == nil && state != Released && state != Refunded {
		return Page{}, apierror.New(apierror.Invalid, "state is not an escrow state")
	}
	if limit <= 0 {
		limit = DefaultLimit
	}
	limit = min(limit, MaxLimit)
	page, err := s.st.Query(ctx, store.Query{PK: indexPK(role, caller), Backward: true, Limit: limit, Cursor: cursor})
	if err != nil {
		if errors.Is(err, store.ErrBadCursor) {
			return Page{}, apierror.New(apierror.Invalid, "cursor is not one this listing made")
		}
		return Page{}, apierror.FromStore("list escrows", err)
	}
	out := make([]Escrow, len(page.Items))
	errs := make([]error, len(page.Items))
	var wg sync.WaitGroup
	for i, it := range page.Items {
		wg.Add(1)
		go func() {
			defer wg.Done()
			out[i], errs[i] = s.Get(ctx, it.Str(aID))
		}()
	}
	wg.Wait()
	res := Page{Escrows: []Escrow{}, Next: page.Cursor}
	for i, e := range out {
		if errs[i] != nil {
			return Page{}, errs[i]
		}
		if state == "" || e.State == state {
			res.Escrows = append(res.Escrows, e)
		}
	}
	return res, nil
}

// Report is what one Run did.
type Report struct {
	Due, Refunded, Released int
}

// Run moves the escrows time has moved by now: a funded or failed escrow
// past its deadline is refunded, a delivered one past its dispute window
// released (by "schedule"). It reads each shard of the schedule index up
// to now (one Query per shard, in parallel) and applies each transition as
// any other, so a buyer's release racing the schedule moves money once.
func (s *Service) Run(ctx context.Context) (Report, error) {
	now := s.now()
	var (
		mu  sync.Mutex
		rep Report
		wg  sync.WaitGroup
		ers []error
	)
	for shard := range dueShards {
		wg.Add(1)
		go func() {
			defer wg.Done()
			cursor := ""
			for {
				page, err := s.st.Query(ctx, store.Query{Index: store.IndexGSI1, PK: "ESCROWDUE#" + strconv.Itoa(shard),
					SK: store.SKLE(fmt.Sprintf("%012d#~", now.Unix())), Limit: 100, Cursor: cursor})
				if err != nil {
					mu.Lock()
					ers = append(ers, err)
					mu.Unlock()
					return
				}
				for _, it := range page.Items {
					r, err := s.expire(ctx, it.Str(aID), now)
					mu.Lock()
					rep.Due++
					switch {
					case err != nil:
						ers = append(ers, err)
					case r == Refunded:
						rep.Refunded++
					case r == Released:
						rep.Released++
					}
					mu.Unlock()
				}
				if page.Cursor == "" {
					return
				}
				cursor = page.Cursor
			}
		}()
	}
	wg.Wait()
	return rep, errors.Join(ers...)
}

// expire applies the time-driven transition of one escrow, if still due.
func (s *Service) expire(ctx context.Context, id string, now time.Time) (State, error) {
	var did State
	_, err := s.apply(ctx, id, BySchedule, func(e Escrow) (bool, step, error) {
		did = ""
		switch {
		case (e.State == Funded || e.State == Failed) && !now.Before(e.Deadline):
			did = Refunded
			return s.refundPlan(BySchedule)(e)
		case e.State == Delivered && !now.Before(e.DeliveredAt.Add(s.window)):
			did = Released
			return s.releasePlan(BySchedule)(e)
		}
		return true, step{}, nil
	})
	if apierror.KindOf(err) == apierror.Conflict {
		return "", nil
	}
	return did, err
}
