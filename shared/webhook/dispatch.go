package webhook

import (
	"context"
	"crypto/ed25519"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"math/rand/v2"
	"sync"
	"time"

	"github.com/a2awire/a2awire/shared/function"

	"github.com/a2awire/a2awire/shared/apierror"
	"github.com/a2awire/a2awire/shared/egress"
	"github.com/a2awire/a2awire/shared/queue"
	"github.com/a2awire/a2awire/shared/queue/sqsqueue"
	"github.com/a2awire/a2awire/shared/ratelimit"
	"github.com/a2awire/a2awire/shared/routes"
	"github.com/a2awire/a2awire/shared/store"
	"github.com/a2awire/a2awire/shared/store/guard"
	"github.com/a2awire/a2awire/shared/webhook/delivery"
	"github.com/a2awire/a2awire/shared/world"
)

// ActionSubmitter forwards a receiver's answer as its agent's action, with
// the validation, membership condition and event of POST /actions, the
// event marked as forwarded (world.Forwarded) so that no answer to it is
// forwarded again. world.Service satisfies it.
type ActionSubmitter interface {
	ForwardAction(ctx context.Context, world, awnID, action string, params json.RawMessage) (string, error)
}

// PresenceSettler announces a member's presence when it changed
// (presence.changed): a webhook's answer is one of the presence rule's
// inputs. world.Service satisfies it.
type PresenceSettler interface {
	SettlePresence(ctx context.Context, world, awnID string) error
}

// Limiter admits one request of op by awnID in world, or answers an error
// (*ratelimit.Limiter satisfies it). A forwarded action counts against the
// same per-agent limit as POST …/actions (ratelimit.Actions): a receiver
// is one more way for its agent to act, not a way around the limit.
type Limiter interface {
	Allow(ctx context.Context, world, awnID string, op ratelimit.Op) error
}

// DefaultWorkers bounds the attempts one invocation makes at once.
const DefaultWorkers = 128

// ProbeTimeout bounds a ping probe: a webhook that answers 2xx within it
// is reachable.
const ProbeTimeout = 2 * time.Second

// RetryBatch is how many due retries a shard's Query returns per pass.
const RetryBatch = 100

// Config are a Dispatcher's dependencies.
type Config struct {
	// Store is the table.
	Store store.Store
	// Client makes the attempts: egress.NewClient (cloud mode in Lambda,
	// loopback and http allowed by the harness). Nil means cloud mode.
	Client delivery.Doer
	// NetworkKey signs v1a; nil sends v1 only.
	NetworkKey ed25519.PrivateKey
	// Actions forwards receivers' actions; nil drops them (logged).
	Actions ActionSubmitter
	// Presence announces a change of presence that a delivery's outcome
	// makes; nil announces none (the lists and ping still compute it).
	Presence PresenceSettler
	// Limiter holds forwarded actions to the agent's action rate limit;
	// nil forwards without one (tests, benchmarks). Mains pass the one
	// POST …/actions uses (FromEnv, the harness).
	Limiter Limiter
	// Now is the clock; nil means time.Now.
	Now func() time.Time
	// Jitter returns a number in [-1, 1] scaling a retry wait's jitter;
	// nil means uniformly random.
	Jitter func() float64
	// Workers bounds concurrent attempts; 0 means DefaultWorkers.
	Workers int
	// Queue is the delivery queue (routes.DeliveryQueue): Enqueue sends
	// to it, deferred deliveries and the schedule's due retries go back
	// to it. Nil makes the attempts in process, as Dispatch and a
	// RunRetries without a queue do (tests, benchmarks).
	Queue queue.Queue
	// Log receives what no caller can act on: attempts' stats that could
	// not be written, refused forwarded actions.
	Log *slog.Logger
}

// Dispatcher delivers events to webhooks: the first attempt from the
// change feed (DispatchEach, which the dispatcher function calls with the
// events its stream batch decodes to), retries from the schedule (RunRetries), and
// ping probes (Probe).
type Dispatcher struct {
	store    *Store
	client   delivery.Doer
	key      ed25519.PrivateKey
	actions  ActionSubmitter
	presence PresenceSettler
	limiter  Limiter
	now      func() time.Time
	jitter   func() float64
	workers  int
	log      *slog.Logger
	ids      *world.IDs
	queue    queue.Queue
}

// NewDispatcher returns a Dispatcher over c.
func NewDispatcher(c Config) (*Dispatcher, error) {
	if c.Store == nil {
		return nil, errors.New("webhook: dispatcher needs a store")
	}
	if c.NetworkKey != nil && len(c.NetworkKey) != ed25519.PrivateKeySize {
		return nil, errors.New("webhook: the network key is not an Ed25519 private key")
	}
	d := &Dispatcher{client: c.Client, key: c.NetworkKey, actions: c.Actions, presence: c.Presence, limiter: c.Limiter, now: c.Now, jitter: c.Jitter,
		workers: c.Workers, log: c.Log, ids: world.NewIDs(), queue: c.Queue}
	if d.client == nil {
		d.client = egress.NewClient(egress.Options{Timeout: delivery.AttemptTimeout})
	}
	if d.now == nil {
		d.now = time.Now
	}
	if d.jitter == nil {
		d.jitter = func() float64 { return rand.Float64()*2 - 1 }
	}
	if d.workers <= 0 {
		d.workers = DefaultWorkers
	}
	if d.log == nil {
		d.log = slog.New(slog.DiscardHandler)
	}
	d.store = NewStore(c.Store, WithClock(d.now))
	return d, nil
}

// Log is the logger the dispatcher writes to (Config.Log), for the stream
// handler to log the records it cannot decode alongside.
func (d *Dispatcher) Log() *slog.Logger { return d.log }

// Queue is the delivery queue (Config.Queue), nil when none.
func (d *Dispatcher) Queue() queue.Queue { return d.queue }

// Store is the webhook domain the dispatcher works on.
func (d *Dispatcher) Store() *Store { return d.store }

// job is one attempt for the pool; record is the index of its event in
// DispatchEach's batch.
type job struct {
	record  int
	p       Pending
	hook    Webhook
	isRetry bool
}

// DispatchEach delivers each event to its recipients' webhooks,
// concurrently through the bounded pool, and returns one error per event:
// nil when every delivery went out or its retry was scheduled, else why
// some could not be scheduled (recipients unreadable, a failed attempt's
// retry not written). A failed attempt that is scheduled for retry is a
// success here.
func (d *Dispatcher) DispatchEach(ctx context.Context, evs []world.Event) []error {
	var jobs []job
	errs := make([]error, len(evs))
	for i, e := range evs {
		hooks, err := d.recipients(ctx, e)
		if err != nil {
			errs[i] = fmt.Errorf("webhook: recipients of %s in %s: %w", e.ID, e.World, err)
			continue
		}
		for _, h := range hooks {
			jobs = append(jobs, job{record: i, p: Pending{Event: e, Recipient: h.AWNID, Hook: h.Generation}, hook: h})
		}
	}
	for i, err := range d.run(ctx, jobs) {
		if err != nil {
			d.log.ErrorContext(ctx, "webhook: delivery not scheduled", "world", jobs[i].p.Event.World, "event", jobs[i].p.Event.ID,
				"recipient", jobs[i].p.Recipient, "err", err)
			errs[jobs[i].record] = errors.Join(errs[jobs[i].record], err)
		}
	}
	return errs
}

// Dispatch delivers events to their recipients (DispatchEach; tests and
// benchmarks call it) and returns the errors of deliveries that could not
// be scheduled, joined.
func (d *Dispatcher) Dispatch(ctx context.Context, evs ...world.Event) error {
	var jobs []job
	for _, e := range evs {
		hooks, err := d.recipients(ctx, e)
		if err != nil {
			return err
		}
		for _, h := range hooks {
			jobs = append(jobs, job{p: Pending{Event: e, Recipient: h.AWNID, Hook: h.Generation}, hook: h})
		}
	}
	return errors.Join(d.run(ctx, jobs)...)
}

// recipients are the enabled webhooks that may see e: the recipient's
// alone for a private event (one Get), every member's otherwise (one
// Query of the world's webhooks). Each attempt checks its agent is still a
// member before it goes out (attempt).
func (d *Dispatcher) recipients(ctx context.Context, e world.Event) ([]Webhook, error) {
	if e.Type == world.PingProbe {
		return nil, nil
	}
	if e.Visibility == world.Private {
		h, err := d.store.get(ctx, e.World, e.Recipient)
		if apierror.KindOf(err) == apierror.NotFound {
			return nil, nil
		}
		if err != nil {
			return nil, err
		}
		if !h.Enabled {
			return nil, nil
		}
		return []Webhook{h}, nil
	}
	hooks, err := d.store.Enabled(ctx, e.World)
	if err != nil {
		return nil, err
	}
	var out []Webhook
	for _, h := range hooks {
		if e.VisibleTo(h.AWNID) {
			out = append(out, h)
		}
	}
	return out, nil
}

// run works jobs through at most d.workers goroutines and returns each
// job's error (nil when it was delivered or its retry scheduled).
func (d *Dispatcher) run(ctx context.Context, jobs []job) []error {
	errs := make([]error, len(jobs))
	next := make(chan int)
	var wg sync.WaitGroup
	for range min(d.workers, len(jobs)) {
		wg.Go(func() {
			for i := range next {
				if dl, ok := ctx.Deadline(); ok && time.Until(dl) < startBudget {
					errs[i] = d.postpone(ctx, jobs[i])
					continue
				}
				errs[i] = d.attempt(ctx, jobs[i])
			}
		})
	}
	for i := range jobs {
		next <- i
	}
	close(next)
	wg.Wait()
	return errs
}

// startBudget is the time left before the invocation's deadline under
// which a job is no longer attempted: an attempt's 5 s and its writes.
const startBudget = delivery.AttemptTimeout + 2*time.Second

// postpone hands a job the invocation has no time left for to the retry
// schedule, due now and with no attempt counted: a first attempt becomes a
// retry item, a claimed retry stays claimed and comes due again when its
// lease ends.
func (d *Dispatcher) postpone(ctx context.Context, j job) error {
	if j.isRetry {
		return nil
	}
	p := j.p
	p.Due = d.now()
	// The deadline is near but not passed: the write gets what is left.
	return d.store.schedule(context.WithoutCancel(ctx), p)
}

// attempt makes one attempt of j and records what it leads to: stats,
// the forwarded action, the next retry or the dead letter, a disabled
// webhook on 410. An agent that is no longer a member gets nothing, and
// its retry is dropped.
func (d *Dispatcher) attempt(ctx context.Context, j job) error {
	p, h := j.p, j.hook
	member, pr, err := d.member(ctx, p.Event.World, p.Recipient)
	h.probes = pr
	if err != nil {
		return err
	}
	if !member {
		d.log.InfoContext(ctx, "webhook: recipient is not a member; not delivered", "world", p.Event.World, "event", p.Event.ID, "recipient", p.Recipient)
		if j.isRetry {
			return d.store.settle(ctx, p, nil, false, "")
		}
		return nil
	}
	r := delivery.Deliver(ctx, d.client, h.URL, delivery.Delivery{
		WorldID: p.Event.World, EventID: p.Event.ID, Type: p.Event.Type, Payload: p.Event.Data,
		Timestamp: p.Event.CreatedAt, SignedAt: d.now(),
	}, h.Secret, d.key)
	attempts := p.Attempts + 1
	if r.OK() {
		d.logAttempt(ctx, p, h.URL, r, attempts, "delivered")
		dropped := d.forward(ctx, p, r)
		d.recordStats(ctx, h, outcome{delivered: true, actionDropped: dropped})
		if j.isRetry {
			return d.store.settle(ctx, p, nil, false, "")
		}
		return nil
	}
	why := describe(r)
	if r.Gone {
		d.logAttempt(ctx, p, h.URL, r, attempts, "dead-lettered: "+why+", the webhook is disabled")
		d.recordStats(ctx, h, outcome{failed: true, deadLettered: true, gone: true, err: why})
		p.Attempts = attempts
		if j.isRetry {
			return d.store.settle(ctx, p, nil, true, why)
		}
		return d.store.deadLetter(ctx, p, why)
	}
	wait, ok := NextWait(attempts, d.jitter(), r.RetryAfter)
	if !ok {
		d.logAttempt(ctx, p, h.URL, r, attempts, "dead-lettered: "+why+", no attempts left")
		d.recordStats(ctx, h, outcome{failed: true, deadLettered: true, err: why})
		p.Attempts = attempts
		return d.store.settle(ctx, p, nil, true, why)
	}
	d.logAttempt(ctx, p, h.URL, r, attempts, fmt.Sprintf("failed: %s; retry in %s", why, wait.Round(time.Millisecond)))
	d.recordStats(ctx, h, outcome{failed: true, err: why})
	n := Pending{Event: p.Event, Recipient: p.Recipient, Attempts: attempts, Due: d.now().Add(wait), Hook: p.Hook}
	if j.isRetry {
		return d.store.settle(ctx, p, &n, false, "")
	}
	return d.store.schedule(ctx, n)
}

// recordStats writes an outcome; a failure there loses a count, not a
// delivery, so it is logged rather than retried.
func (d *Dispatcher) recordStats(ctx context.Context, h Webhook, o outcome) {
	// Whether the webhook answered, by the presence rule, before this
	// outcome: an outcome that changes it is written on the webhook item
	// too, and may change its member's presence.
	was := world.Answered(world.Member{ProbeOKAt: h.probes.ok, ProbeFailAt: h.probes.fail},
		world.Hook{Set: true, Enabled: true, LastSuccessAt: h.okAt, LastErrorAt: h.failAt})
	flip := (o.delivered || o.failed) && was != o.delivered
	if err := d.store.record(ctx, h, o, flip); err != nil {
		d.log.ErrorContext(ctx, "webhook: stats not recorded", "world", h.World, "recipient", h.AWNID, "err", err)
		return
	}
	// Announce it (the world reads the rule's every input, probes
	// included, and commits only a change). Only on a flip, so a steady
	// receiver costs nothing more.
	if d.presence == nil || !flip {
		return
	}
	if err := d.presence.SettlePresence(ctx, h.World, h.AWNID); err != nil && apierror.KindOf(err) != apierror.NotFound {
		d.log.ErrorContext(ctx, "webhook: presence not settled", "world", h.World, "recipient", h.AWNID, "err", err)
	}
}

// probes are the outcomes of the live probes of a member's webhook (ping),
// kept on its member item by package world.
type probes struct{ ok, fail time.Time }

// Attributes of the member item (package world writes them) that the
// presence rule reads.
const (
	memberAttrProbeOKAt   = "probeOkAt"
	memberAttrProbeFailAt = "probeFailAt"
)

// member reports whether awnID is a member of world now, and its probes'
// outcomes (one GetItem of its member item).
func (d *Dispatcher) member(ctx context.Context, worldID, awnID string) (bool, probes, error) {
	it, err := d.store.st.Get(ctx, world.MemberKey(worldID, awnID))
	switch {
	case err == nil:
		return true, probes{unixNano(it, memberAttrProbeOKAt), unixNano(it, memberAttrProbeFailAt)}, nil
	case errors.Is(err, store.ErrNotFound):
		return false, probes{}, nil
	default:
		return false, probes{}, apierror.FromStore("webhook: read member", err)
	}
}

// forward submits a receiver's answered action as its agent's, and
// reports whether an action it answered with was dropped (the webhook's
// actionsDropped counts it; each drop is logged). Forwarded actions are
// actions: they count against the agent's action rate limit, and the
// world writes them only while the agent is a member. An answer to an
// action that was itself forwarded from a webhook is never forwarded, so a
// chain of answers is one hop long: two receivers that answer every event
// with an action produce one action each per event that was not itself a
// forwarded action, then stop. An answer to the agent's own action is not
// forwarded either.
func (d *Dispatcher) forward(ctx context.Context, p Pending, r delivery.Result) bool {
	a := r.Action
	if a == nil {
		if r.Ignored != "" {
			d.log.InfoContext(ctx, "webhook: the receiver's answer is not an action; ignored", "world", p.Event.World,
				"event", p.Event.ID, "recipient", p.Recipient, "why", r.Ignored)
		}
		return false
	}
	drop := func(why string, args ...any) bool {
		d.log.WarnContext(ctx, "webhook: answered action not forwarded: "+why, append([]any{"world", p.Event.World,
			"event", p.Event.ID, "recipient", p.Recipient, "action", a.Action}, args...)...)
		return true
	}
	if world.Forwarded(p.Event) {
		return drop("it answers an action that was itself forwarded from a webhook (one hop only)")
	}
	if p.Event.Type == world.ActionSubmitted {
		var by struct {
			AWNID string `json:"awnId"`
		}
		if json.Unmarshal(p.Event.Data, &by) == nil && by.AWNID == p.Recipient {
			return drop("it answers the agent's own action")
		}
	}
	if d.actions == nil {
		return drop("no action forwarder is configured")
	}
	if d.limiter != nil {
		if err := d.limiter.Allow(ctx, p.Event.World, p.Recipient, ratelimit.Actions); err != nil {
			return drop("the agent's action rate limit", "err", err)
		}
	}
	if _, err := d.actions.ForwardAction(ctx, p.Event.World, p.Recipient, a.Action, a.Params); err != nil {
		return drop("the world refused it", "err", err)
	}
	return false
}

// describe is the lastError text of a failed attempt: what the webhook's
// owner can act on, without the network's internals.
func describe(r delivery.Result) string {
	var se *delivery.StatusError
	switch {
	case errors.As(r.Err, &se):
		return fmt.Sprintf("the receiver answered %d", se.Status)
	case errors.Is(r.Err, egress.ErrBlocked):
		return "the URL resolves to an address webhooks may not reach"
	case errors.Is(r.Err, context.DeadlineExceeded) || isTimeout(r.Err):
		return fmt.Sprintf("no answer within %s", delivery.AttemptTimeout)
	default:
		return "could not connect to the receiver"
	}
}

func isTimeout(err error) bool {
	var t interface{ Timeout() bool }
	return errors.As(err, &t) && t.Timeout()
}

// RetryReport says what one RunRetries did.
type RetryReport struct {
	// Due is how many retries were due; Sent how many this run attempted
	// (the rest were claimed by another worker or dropped).
	Due, Sent int
}

// RunRetries works the retries due now: claimed one by one (so concurrent
// runs never send one twice), attempted through the pool, then deleted,
// re-scheduled or dead-lettered. A retry whose webhook was removed is
// dropped; one whose webhook is disabled is dead-lettered. It makes passes
// until a pass finds fewer than a full page due or ctx is within 10 s of
// its deadline.
func (d *Dispatcher) RunRetries(ctx context.Context) (RetryReport, error) {
	var rep RetryReport
	for {
		due, err := d.store.Due(ctx, d.now(), RetryBatch)
		if err != nil {
			return rep, err
		}
		rep.Due += len(due)
		var jobs []job
		var errs []error
		for _, p := range due {
			ok, err := d.store.claim(ctx, &p, d.now())
			if err != nil {
				errs = append(errs, err)
				continue
			}
			if !ok {
				continue
			}
			h, err := d.store.get(ctx, p.Event.World, p.Recipient)
			switch {
			case apierror.KindOf(err) == apierror.NotFound || err == nil && h.Generation != p.Hook:
				// Removed, or removed and set again: the retry was for
				// a webhook that no longer exists.
				errs = append(errs, d.store.settle(ctx, p, nil, false, ""))
			case err != nil:
				errs = append(errs, err)
			case !h.Enabled:
				d.recordStats(ctx, h, outcome{deadLettered: true})
				errs = append(errs, d.store.settle(ctx, p, nil, true, "the webhook is disabled"))
			case d.queue != nil:
				// The workers make the attempt, under the endpoint's cap.
				errs = append(errs, d.requeue(ctx, p, h.URL))
				rep.Sent++
			default:
				jobs = append(jobs, job{record: -1, p: p, hook: h, isRetry: true})
			}
		}
		rep.Sent += len(jobs)
		errs = append(errs, d.run(ctx, jobs)...)
		if err := errors.Join(errs...); err != nil {
			return rep, err
		}
		full := len(due) >= RetryBatch
		if dl, ok := ctx.Deadline(); !full || (ok && time.Until(dl) < 10*time.Second) {
			return rep, nil
		}
	}
}

// Probe is the live ping probe: a signed ping event POSTed to target's
// webhook in world, reachable when it answers 2xx within ProbeTimeout;
// latency is that round trip. No webhook, or a disabled one, is not
// reachable (false, 0, nil); err is a store failure only. A probe keeps
// no stats and forwards no action.
func (d *Dispatcher) Probe(ctx context.Context, worldID, target string) (bool, time.Duration, error) {
	h, err := d.store.get(ctx, worldID, target)
	if apierror.KindOf(err) == apierror.NotFound {
		return false, 0, nil
	}
	if err != nil {
		return false, 0, err
	}
	if !h.Enabled {
		return false, 0, nil
	}
	// Inside a guarded request (world-ping) nothing is POSTed before the
	// request's guard holds: the webhook's read may have been read ahead
	// (guard.Ahead), which leaves the guard pending.
	if err := guard.Settle(ctx); err != nil {
		return false, 0, err
	}
	now := d.now()
	ctx, cancel := context.WithTimeout(ctx, ProbeTimeout)
	defer cancel()
	r := delivery.Deliver(ctx, d.client, h.URL, delivery.Delivery{
		WorldID: worldID, EventID: d.ids.New(now), Type: world.PingProbe, Payload: json.RawMessage(`{}`),
		Timestamp: now, SignedAt: now,
	}, h.Secret, d.key)
	if !r.OK() || r.Latency > ProbeTimeout {
		return false, 0, nil
	}
	return true, r.Latency, nil
}

// Build is the Dispatcher of the dispatcher, deliverer and retry functions
// over env, with the delivery queue (the harness's, or SQS from its URL):
// the network key signs v1a (none: v1 only), attempts go through env's
// egress policy with a 5 s timeout each, and receivers' answers become
// their agents' actions through the world service, with the checks, event
// and rate limit of POST /actions.
func Build(env function.Env) (*Dispatcher, error) { return build(env, true) }

// BuildDeadLetters is Build without the delivery queue, for the function
// that keeps the dead-letter queue's jobs (DeadLetterJobs sends nothing).
func BuildDeadLetters(env function.Env) (*Dispatcher, error) { return build(env, false) }

func build(env function.Env, withQueue bool) (*Dispatcher, error) {
	st, err := env.NeedStore(env.Name)
	if err != nil {
		return nil, err
	}
	// Forwarded answers count against the agent's actions window, with
	// the RATE_LIMIT_ACTIONS the world functions read.
	limits, err := ratelimit.LimitsFromEnv(env.Env)
	if err != nil {
		return nil, err
	}
	var lopts []ratelimit.Option
	if env.Now != nil {
		lopts = append(lopts, ratelimit.WithClock(env.Now))
	}
	eg := env.Egress
	eg.Timeout = delivery.AttemptTimeout
	var q queue.Queue
	switch {
	case !withQueue:
	case env.Queues != nil:
		q, err = env.Queues(routes.DeliveryQueue)
	default:
		q, err = sqsqueue.FromEnv(env.Env, routes.DeliveryQueue)
	}
	if err != nil {
		return nil, err
	}
	w := world.New(st, world.WithClock(env.Now))
	return NewDispatcher(Config{
		Queue:      q,
		Store:      st,
		Client:     egress.NewClient(eg),
		NetworkKey: env.NetworkKey,
		Actions:    w,
		Presence:   w,
		Limiter:    ratelimit.New(st, limits, lopts...),
		Now:        env.Now,
		Log:        env.Log,
	})
}
