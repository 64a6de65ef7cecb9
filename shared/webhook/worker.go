package webhook

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"time"

	"github.com/a2awire/a2awire/shared/apierror"
	"github.com/a2awire/a2awire/shared/queue"
	"github.com/a2awire/a2awire/shared/webhook/delivery"
	"github.com/a2awire/a2awire/shared/world"
)

// Delivery off the stream's critical path. A DynamoDB stream shard is
// consumed one batch at a time, so an attempt made by the stream's
// function would let one slow receiver hold up every event behind it.
// Instead the stream's function (Enqueue) only turns each event into one
// Job per recipient webhook on the delivery queue, and the delivery
// workers (Work, an SQS event source mapping with partial batch
// responses) make the attempts, each under its endpoint's concurrency cap
// (endpoint.go).
//
// A failed attempt's next try:
//   - waits in the queue while the wait fits a queue delay and the message
//     has been received fewer than QueueRetries times: the worker makes
//     the message visible again after the wait (ChangeVisibility) and
//     reports it failed, so its receive count is its attempt count;
//   - otherwise waits in the table's schedule (a retry item), which the
//     retry function puts back on the queue when it comes due.
//
// A message the workers keep failing on (a store outage, a crash) moves to
// the dead-letter queue after the queue's maxReceiveCount receives, where
// DeadLetterJobs keeps it as the webhook's dead letter, replayable.
//
// A Job carries the generation of the webhook it is for: a worker finding
// the webhook removed, or removed and set again, drops it — so a DELETE or
// a leave ends the deliveries and retries pending for it, and none reaches
// a new URL or goes out under a new secret.

// QueueRetries is how many receives of one message may end in an early
// retry that waits in the queue (the first attempt's and the early
// retries'); later retries go to the table's schedule. It is below the
// delivery queue's maxReceiveCount, leaving receives to spare for a worker
// that fails before it can settle a message.
const QueueRetries = 3

// Job is one delivery on the queue: an event for one recipient's webhook.
type Job struct {
	Event     world.Event `json:"event"`
	Recipient string      `json:"recipient"`
	// Hook is the Generation of the webhook the job is for, URL its URL
	// then (the endpoint whose cap the job waits for).
	Hook string `json:"hook"`
	URL  string `json:"url"`
	// Attempts were made before this message was sent (by earlier
	// messages, for a retry from the schedule).
	Attempts int `json:"attempts,omitempty"`
	// Deferred counts the times the job found its endpoint at its
	// concurrency cap and went back on the queue (each waits longer).
	Deferred int `json:"deferred,omitempty"`
}

// Received is a job's message as a worker gets it.
type Received struct {
	// ID names the message in the batch's failures.
	ID      string
	Body    string
	Receipt string
	// ReceiveCount is how many times it has been received, this time
	// included.
	ReceiveCount int
}

func encodeJob(j Job) (queue.Message, error) {
	b, err := json.Marshal(j)
	if err != nil {
		return queue.Message{}, err
	}
	if len(b) > queue.MaxBody {
		return queue.Message{}, fmt.Errorf("webhook: job of %d bytes is over the queue's %d", len(b), queue.MaxBody)
	}
	return queue.Message{Body: string(b)}, nil
}

func decodeJob(body string) (Job, error) {
	var j Job
	if err := json.Unmarshal([]byte(body), &j); err != nil {
		return Job{}, err
	}
	if j.Event.ID == "" || j.Event.World == "" || j.Recipient == "" || !json.Valid(j.Event.Data) {
		return Job{}, errors.New("webhook: job without event or recipient")
	}
	return j, nil
}

// Enqueue turns each event into one Job per recipient webhook and sends
// them to the delivery queue; it makes no attempt. It returns one error
// per event: nil when all its jobs were sent. A redelivered event sends its
// jobs again; receivers dedupe by webhook-id, as Standard Webhooks asks.
func (d *Dispatcher) Enqueue(ctx context.Context, evs []world.Event) []error {
	errs := make([]error, len(evs))
	if d.queue == nil {
		for i := range errs {
			errs[i] = errors.New("webhook: no delivery queue")
		}
		return errs
	}
	for i, e := range evs {
		hooks, err := d.recipients(ctx, e)
		if err != nil {
			errs[i] = fmt.Errorf("webhook: recipients of %s in %s: %w", e.ID, e.World, err)
			continue
		}
		var msgs []queue.Message
		for _, h := range hooks {
			m, err := encodeJob(Job{Event: e, Recipient: h.AWNID, Hook: h.Generation, URL: h.URL})
			if err != nil {
				errs[i] = err
				break
			}
			msgs = append(msgs, m)
		}
		if errs[i] != nil {
			continue
		}
		if err := d.queue.Send(ctx, msgs...); err != nil {
			errs[i] = fmt.Errorf("webhook: enqueue %s: %w", e.ID, err)
		}
	}
	return errs
}

// Work makes the attempts of a batch of jobs, concurrently (at most the
// dispatcher's workers at once), and returns the IDs of the messages to
// leave on the queue: those whose attempt failed and wait in the queue
// for their early retry, and those it could not settle (a store error),
// which come back when their visibility timeout ends. Every other message
// is done: delivered, dropped, deferred (sent again), scheduled in the
// table or dead-lettered.
func (d *Dispatcher) Work(ctx context.Context, msgs []Received) []string {
	failed := make([]bool, len(msgs))
	next := make(chan int)
	var wg sync.WaitGroup
	for range min(d.workers, len(msgs)) {
		wg.Go(func() {
			for i := range next {
				keep, err := d.work(ctx, msgs[i])
				if err != nil {
					d.log.ErrorContext(ctx, "webhook: delivery not settled; it comes back", "message", msgs[i].ID, "receive", msgs[i].ReceiveCount, "err", err)
				}
				failed[i] = keep || err != nil
			}
		})
	}
	for i := range msgs {
		next <- i
	}
	close(next)
	wg.Wait()
	var out []string
	for i, f := range failed {
		if f {
			out = append(out, msgs[i].ID)
		}
	}
	return out
}

// work handles one message; keep is true when it stays on the queue for
// its early retry.
func (d *Dispatcher) work(ctx context.Context, m Received) (keep bool, err error) {
	j, err := decodeJob(m.Body)
	if err != nil {
		d.log.ErrorContext(ctx, "webhook: undecodable delivery dropped", "message", m.ID, "err", err)
		return false, nil
	}
	p := Pending{Event: j.Event, Recipient: j.Recipient, Attempts: j.Attempts, Hook: j.Hook}
	// The endpoint's cap first: a delivery to a full endpoint goes back on
	// the queue for one Query, before the webhook and member reads.
	s, err := d.acquire(ctx, j.URL)
	var full noSlot
	if errors.As(err, &full) {
		// No attempt counted; this worker moves on.
		delay := deferral(full, j.Deferred)
		j.Deferred++
		msg, err := encodeJob(j)
		if err != nil {
			return false, err
		}
		msg.Delay = delay
		return false, d.queue.Send(ctx, msg)
	}
	if err != nil {
		return false, err
	}
	answered, latency := false, time.Duration(0)
	defer func() { d.release(ctx, s, latency, answered) }()
	h, err := d.store.get(ctx, p.Event.World, p.Recipient)
	switch {
	case apierror.KindOf(err) == apierror.NotFound || err == nil && (h.Generation != j.Hook || h.URL != j.URL && j.URL != ""):
		// Removed (a DELETE, a leave), or replaced: the delivery was for
		// a webhook that no longer exists.
		return false, nil
	case err != nil:
		return false, err
	case !h.Enabled:
		d.recordStats(ctx, h, outcome{deadLettered: true})
		return false, d.store.deadLetter(ctx, p, "the webhook is disabled")
	}
	member, pr, err := d.member(ctx, p.Event.World, p.Recipient)
	h.probes = pr
	if err != nil {
		return false, err
	}
	if !member {
		return false, nil
	}
	r := delivery.Deliver(ctx, d.client, h.URL, delivery.Delivery{
		WorldID: p.Event.World, EventID: p.Event.ID, Type: p.Event.Type, Payload: p.Event.Data,
		Timestamp: p.Event.CreatedAt, SignedAt: d.now(),
	}, h.Secret, d.key)
	answered, latency = r.Err == nil || isStatus(r.Err), r.Latency
	// Every receive of this message counts as an attempt, a receive that
	// failed before its attempt included (it may have sent).
	attempts := j.Attempts + max(1, m.ReceiveCount)
	if r.OK() {
		d.logAttempt(ctx, p, h.URL, r, attempts, "delivered")
		dropped := d.forward(ctx, p, r)
		d.recordStats(ctx, h, outcome{delivered: true, actionDropped: dropped})
		return false, nil
	}
	why := describe(r)
	p.Attempts = attempts
	if r.Gone {
		d.logAttempt(ctx, p, h.URL, r, attempts, "dead-lettered: "+why+", the webhook is disabled")
		d.recordStats(ctx, h, outcome{failed: true, deadLettered: true, gone: true, err: why})
		return false, d.store.deadLetter(ctx, p, why)
	}
	wait, ok := NextWait(attempts, d.jitter(), r.RetryAfter)
	if !ok {
		d.logAttempt(ctx, p, h.URL, r, attempts, "dead-lettered: "+why+", no attempts left")
		d.recordStats(ctx, h, outcome{failed: true, deadLettered: true, err: why})
		return false, d.store.deadLetter(ctx, p, why)
	}
	d.logAttempt(ctx, p, h.URL, r, attempts, fmt.Sprintf("failed: %s; retry in %s", why, wait.Round(time.Millisecond)))
	// The stats are written once the retry is set, so a reader that sees
	// the failure counted sees its retry waiting.
	defer d.recordStats(ctx, h, outcome{failed: true, err: why})
	if wait <= queue.MaxDelay && m.ReceiveCount < QueueRetries {
		if err := d.queue.ChangeVisibility(ctx, m.Receipt, wait); err == nil {
			return true, nil
		}
		// The message cannot wait in the queue: the schedule takes it.
	}
	p.Due = d.now().Add(wait)
	return false, d.store.schedule(ctx, p)
}

// logAttempt writes one line per delivery attempt, as the gateway writes
// one per request: a person watching the harness (or CloudWatch) sees each
// delivery, and why one failed, without reading the webhook's stats.
// Failures are warnings; the outcome says what happens next.
func (d *Dispatcher) logAttempt(ctx context.Context, p Pending, url string, r delivery.Result, attempt int, result string) {
	level := slog.LevelInfo
	if !r.OK() {
		level = slog.LevelWarn
	}
	d.log.LogAttrs(ctx, level, "webhook delivery", slog.String("world", p.Event.World), slog.String("event", p.Event.ID),
		slog.String("type", p.Event.Type), slog.String("recipient", p.Recipient), slog.String("url", url),
		slog.Int("attempt", attempt), slog.Int("status", r.Status), slog.Int64("latency_ms", r.Latency.Milliseconds()),
		slog.String("outcome", result))
}

// isStatus reports whether err is an answer (a status), not a timeout or a
// network failure.
func isStatus(err error) bool {
	var se *delivery.StatusError
	return errors.As(err, &se)
}

// DeadLetterJobs keeps the messages of the delivery queue's dead-letter
// queue as their webhooks' dead letters (replayable like any other) and
// counts them in the webhooks' stats. It returns the IDs of the messages
// it could not keep (a store error), to come back. A job whose webhook was
// removed or replaced is dropped.
func (d *Dispatcher) DeadLetterJobs(ctx context.Context, msgs []Received) []string {
	var failed []string
	for _, m := range msgs {
		j, err := decodeJob(m.Body)
		if err != nil {
			d.log.ErrorContext(ctx, "webhook: undecodable dead delivery dropped", "message", m.ID, "err", err)
			continue
		}
		h, err := d.store.get(ctx, j.Event.World, j.Recipient)
		switch {
		case apierror.KindOf(err) == apierror.NotFound || err == nil && h.Generation != j.Hook:
			continue
		case err != nil:
			failed = append(failed, m.ID)
			continue
		}
		p := Pending{Event: j.Event, Recipient: j.Recipient, Attempts: j.Attempts, Hook: j.Hook}
		if err := d.store.deadLetter(ctx, p, "the delivery workers failed on it repeatedly"); err != nil {
			failed = append(failed, m.ID)
			continue
		}
		d.recordStats(ctx, h, outcome{deadLettered: true})
	}
	return failed
}

// requeue puts a claimed retry from the schedule back on the queue, due
// now, and deletes its retry item (settle). A crash in between sends it
// twice at worst (the lease frees the item again); receivers dedupe by
// webhook-id.
func (d *Dispatcher) requeue(ctx context.Context, p Pending, url string) error {
	msg, err := encodeJob(Job{Event: p.Event, Recipient: p.Recipient, Hook: p.Hook, URL: url, Attempts: p.Attempts})
	if err != nil {
		return err
	}
	if err := d.queue.Send(ctx, msg); err != nil {
		return fmt.Errorf("webhook: requeue retry: %w", err)
	}
	return d.store.settle(ctx, p, nil, false, "")
}
