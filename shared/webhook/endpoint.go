package webhook

import (
	"context"
	"crypto/rand"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"strconv"
	"time"

	"github.com/a2awire/a2awire/shared/apierror"
	"github.com/a2awire/a2awire/shared/queue"
	"github.com/a2awire/a2awire/shared/store"
	"github.com/a2awire/a2awire/shared/webhook/delivery"
	"github.com/a2awire/a2awire/shared/world"
)

// The per-endpoint concurrency cap. Every delivery worker, in every Lambda
// instance, takes one of an endpoint's slots before an attempt and frees
// it after, so an endpoint has at most its limit of attempts in flight,
// network-wide: a slow endpoint ties up that many workers and no more,
// and the others keep delivering. The limit adapts: an endpoint starts at
// one; each attempt answered within FastAnswer raises it by one up to
// MaxEndpointConcurrency, and an attempt that is slower (or times out)
// drops it back to one. So an endpoint that never answers holds one worker
// at a time, while one that answers at once gets up to
// MaxEndpointConcurrency concurrent attempts.
//
//	item   pk              sk            attributes
//	limit  WHEP#<url hash> LIMIT         limit
//	slot   WHEP#<url hash> SLOT#<n>      until, since (ms), holder
//
// An endpoint is a webhook URL (its SHA-256, so the key is bounded and
// holds no secret path). Slots are leased: a worker that dies leaves its
// slot free once the lease passes.
const (
	MaxEndpointConcurrency = 16
	// FastAnswer is the round trip under which an attempt raises its
	// endpoint's limit.
	FastAnswer = time.Second
	// slotLease bounds how long a slot is held: an attempt and the writes
	// around it.
	slotLease = 15 * time.Second
	// SlotWait is how long a worker waits for a free slot before handing
	// the delivery back to the queue with DeferDelay.
	SlotWait = 300 * time.Millisecond
	// DeferDelay is the queue delay of a delivery's first deferral, when
	// it found its endpoint at its limit (SQS delays count whole seconds).
	// Each later deferral of the same delivery doubles it, up to the time
	// the oldest attempt in flight must have ended: how long a holder
	// will still take is unknown (an attempt to a fast endpoint can take
	// over FastAnswer on a loaded store), so the delivery looks again
	// soon, then less often — one extra Query and SendMessage each time —
	// rather than waiting out the attempt timeout behind an attempt that
	// is about to end.
	DeferDelay = time.Second
	// maxDeferShift bounds the doubling (DeferDelay << 4 = 16 s, past any
	// attempt's timeout).
	maxDeferShift = 4

	endpointPrefix = "WHEP#"
	limitSK        = "LIMIT"
	slotPrefix     = "SLOT#"
	attrLimit      = "limit"
	attrUntil      = "until"
	attrHolder     = "holder"
	attrSince      = "since"
	// TypeEndpointSlot and TypeEndpointLimit are the items' type
	// attributes.
	TypeEndpointSlot  = "whslot"
	TypeEndpointLimit = "whlimit"
)

// EndpointPK is the partition of url's slots and limit.
func EndpointPK(url string) string {
	sum := sha256.Sum256([]byte(url))
	return endpointPrefix + hex.EncodeToString(sum[:16])
}

// slot is a held slot.
type slot struct {
	key    store.Key
	holder string
	limit  int
}

// noSlot: the endpoint is at its limit; a slot must be free in retryIn at
// the latest.
type noSlot struct{ retryIn time.Duration }

// deferral is the queue delay of a delivery deferred for the deferred'th
// time (0 for the first) by full: DeferDelay doubled per earlier deferral,
// never past the time a slot must be free, in whole seconds.
func deferral(full noSlot, deferred int) time.Duration {
	grow := DeferDelay << min(max(deferred, 0), maxDeferShift)
	must := (full.retryIn + time.Second - 1).Truncate(time.Second)
	return max(DeferDelay, min(grow, must, queue.MaxDelay))
}

func (noSlot) Error() string { return "webhook: endpoint at its concurrency limit" }

// acquire takes a free slot of url's endpoint: one Query for the limit and
// the slots, then a Put conditioned on the slot being free (absent or its
// lease passed). While the endpoint is full it polls for up to SlotWait
// if a slot was taken under FastAnswer ago (a fast endpoint frees one
// soon; deferring instead would also let a later event overtake this
// one at a new endpoint), and otherwise answers noSlot at once, with the time until the
// oldest attempt in flight must have ended (its timeout), so a delivery to
// a slow endpoint waits in the queue, not in a worker (see DeferDelay for
// how long).
func (d *Dispatcher) acquire(ctx context.Context, url string) (slot, error) {
	pk := EndpointPK(url)
	holder := rand.Text()
	wait := time.NewTimer(SlotWait)
	defer wait.Stop()
	for {
		p, err := d.store.st.Query(ctx, store.Query{PK: pk})
		if err != nil {
			return slot{}, apierror.FromStore("webhook: endpoint slots", err)
		}
		now := d.now()
		limit := 1
		busy := map[string]bool{}
		recent := false
		retryIn := queue.MaxDelay
		for _, it := range p.Items {
			sk := it.Str(store.AttrSK)
			if sk == limitSK {
				if n, err := it.Int(attrLimit); err == nil {
					limit = int(max(1, min(n, MaxEndpointConcurrency)))
				}
				continue
			}
			if until, err := it.Int(attrUntil); err == nil && until > now.UnixMilli() {
				busy[sk] = true
				since, _ := it.Int(attrSince)
				age := now.Sub(time.UnixMilli(since))
				recent = recent || age < FastAnswer
				retryIn = min(retryIn, delivery.AttemptTimeout-age)
			}
		}
		for n := range limit {
			sk := slotPrefix + strconv.Itoa(n)
			if busy[sk] {
				continue
			}
			k := store.Key{PK: pk, SK: sk}
			_, err := d.store.st.Write(ctx, store.Put(k, store.Item{
				world.AttrType:      store.S(TypeEndpointSlot),
				attrUntil:           store.N(now.Add(slotLease).UnixMilli()),
				attrSince:           store.N(now.UnixMilli()),
				attrHolder:          store.S(holder),
				store.AttrExpiresAt: store.ExpiresAt(now.Add(time.Hour)),
			}).When(store.Or(store.ItemAbsent(), store.Le(attrUntil, store.N(now.UnixMilli())))))
			if err == nil {
				return slot{key: k, holder: holder, limit: limit}, nil
			}
			if !errors.Is(err, store.ErrConditionFailed) {
				return slot{}, apierror.FromStore("webhook: take endpoint slot", err)
			}
			// Another worker took it between the Query and the Put: a
			// holder that just began, so wait for it as for one seen busy
			// and recent. Left at its start value, retryIn would defer
			// the delivery by the queue's longest delay (15 min).
			recent = true
			retryIn = min(retryIn, delivery.AttemptTimeout)
		}
		if !recent {
			return slot{}, noSlot{retryIn: max(DeferDelay, retryIn)}
		}
		select {
		case <-ctx.Done():
			return slot{}, ctx.Err()
		case <-wait.C:
			return slot{}, noSlot{retryIn: DeferDelay}
		case <-time.After(SlotWait / 5):
		}
	}
}

// release frees s and adapts the endpoint's limit to how the attempt went:
// raised by one after a fast answer, back to one after a slow answer or
// none. A release that fails leaves the slot to its lease.
func (d *Dispatcher) release(ctx context.Context, s slot, latency time.Duration, answered bool) {
	ctx = context.WithoutCancel(ctx)
	acts := []store.Action{store.Delete(s.key).When(store.Eq(attrHolder, store.S(s.holder)))}
	if _, err := d.store.st.Write(ctx, acts...); err != nil && !errors.Is(err, store.ErrConditionFailed) {
		d.log.WarnContext(ctx, "webhook: endpoint slot not released (its lease frees it)", "err", err)
	}
	limitKey := store.Key{PK: s.key.PK, SK: limitSK}
	var a store.Action
	switch fast := answered && latency < FastAnswer; {
	case fast && s.limit < MaxEndpointConcurrency:
		a = store.Put(limitKey, store.Item{world.AttrType: store.S(TypeEndpointLimit), attrLimit: store.N(int64(s.limit + 1)),
			store.AttrExpiresAt: store.ExpiresAt(d.now().Add(24 * time.Hour))})
	case !fast && s.limit > 1:
		a = store.Put(limitKey, store.Item{world.AttrType: store.S(TypeEndpointLimit), attrLimit: store.N(1),
			store.AttrExpiresAt: store.ExpiresAt(d.now().Add(24 * time.Hour))})
	default:
		return
	}
	if _, err := d.store.st.Write(ctx, a); err != nil {
		d.log.WarnContext(ctx, "webhook: endpoint limit not adapted", "err", err)
	}
}
