// Package webhook is webhook delivery written once over the item API
// (store.Store), so it runs on memory, bolt and DynamoDB alike: a member's
// webhook (URL, secret, enabled, delivery stats), the retry schedule, the
// dead letters and their replay, and the Dispatcher that delivers events
// from the table's change feed, works the schedule and probes a member's
// webhook for ping. One attempt (body, signatures, 5 s, the answer) is
// package delivery's; the client that refuses private addresses is
// package egress's.
//
// # Items
//
//	item         pk                        sk                gsi1pk          gsi1sk                                   type
//	webhook      WORLD#<world>             WEBHOOK#<awnId>   —               —                                        webhook
//	counters     WHSTATS#<world>#<awnId>   STATS             —               —                                        whstats
//	retry        WHRETRY#<world>#<awnId>   <eventId>         WHDUE#<shard>   <due ms, 15 digits>#<world>#<awnId>#<eventId>  whretry
//	dead letter  WHDEAD#<world>#<awnId>    <eventId>         —               —                                        whdead
//
// The webhook item holds url, secret, generation, enabled,
// disabledReason and createdAt. Its delivery counters are on an item of
// their own, in a partition of its own (world.WebhookStatsKey): delivered,
// failed (attempts), deadLettered and actionsDropped, changed with ADD so
// concurrent outcomes never lose a count, and the latest outcomes
// (lastSuccessAt, lastErrorAt, lastError). Every delivery updates them, so
// on the world's partition a fan-out to 10,000 webhooks would be 10,000
// writes to one partition (docs/scale.md); on their own it is one write to
// each of 10,000. Set writes a fresh counters item with the webhook in one
// transaction, Remove deletes both; an outcome is counted only on the
// counters item of the webhook generation it was attempted for.
//
// What presence needs of the outcomes stays on the webhook item, where
// the world reads it with its members (one Query a page): lastSuccessAt
// and lastErrorAt there are written only by an outcome that changes the
// presence rule's answer to "did the webhook answer the last delivery or
// probe" (the rule of package world: the latest of the webhook's outcomes
// and the member's probes). Since each such write is the latest time the
// rule sees, the answer from these times is the answer from the latest
// ones; a steady receiver writes the world's partition no more. Two
// deliveries to one webhook racing with different outcomes may leave the
// answer of the one that decided first until the next outcome.
//
// The retry item of one (event, recipient) carries the
// event itself (so a retry reads no event), the generation of the webhook
// it was scheduled for, the attempts made so far and when the next is
// due; the
// scheduled function finds due retries with one Query per shard of gsi1
// (gsi1sk ≤ now), never a Scan. A worker claims a retry by moving its due
// time a lease ahead with a write conditioned on the due time it read, so
// two workers never send the same retry and a worker that dies leaves the
// retry due again when the lease ends. Dead letters are kept
// DeadLetterTTL for replay, which re-schedules them (one Query, one Write
// per 50).
//
// # Membership
//
// A webhook exists only while its agent is a member: Set writes it on the
// condition that the membership exists (world.MemberCheck, a
// ConditionCheck in the same transaction), and a leave ends the
// membership and deletes the webhook item in one transaction, so
// whichever comes second sees the other. Counter
// and outcome updates are conditioned on the webhook's generation, so none
// recreates a deleted item or counts toward a newer webhook. A leave
// leaves the counters item behind (the world's membership code does not
// know it); the agent's next Set replaces it, nothing reads it without a
// webhook item, and the world's deletion removes it (the world-deleter
// names its partition with the agent's retries and dead letters). A
// webhook set before the counters had an item of their own has none: it
// shows zeros and counts nothing until it is set again. The dispatcher
// still reads the member item before each attempt (one GetItem): a
// webhook item written before this rule held, or by hand, reaches no one
// who is not a member. A retry carries the
// generation of the webhook it was scheduled for, a random value each Set
// draws: a retry whose webhook was removed, or replaced (a DELETE and a PUT,
// a leave and a rejoin), is dropped when it comes due, so it never reaches
// a new URL or goes out signed with a new secret.
//
// # Errors
//
// Every error is an *apierror.Error: no webhook → NotFound; a store
// failure → apierror.FromStore (Unavailable with Retry-After when the
// store is busy, Internal otherwise).
package webhook

import (
	"context"
	"crypto/rand"
	"errors"
	"fmt"
	"time"

	"github.com/a2awire/a2awire/shared/apierror"
	"github.com/a2awire/a2awire/shared/store"
	"github.com/a2awire/a2awire/shared/webhook/signature"
	"github.com/a2awire/a2awire/shared/world"
)

// Type attributes of the items this package owns.
const (
	TypeWebhook    = "webhook"
	TypeRetry      = "whretry"
	TypeDeadLetter = "whdead"
	TypeStats      = "whstats"
)

// DeadLetterTTL is how long a dead letter is kept for replay.
const DeadLetterTTL = 14 * 24 * time.Hour

// Attributes of the webhook item.
const (
	attrURL            = "url"
	attrSecret         = "secret"
	attrEnabled        = "enabled"
	attrDisabledReason = "disabledReason"
	attrCreatedAt      = "createdAt"
	attrAWNID          = "awnId"
	attrWorld          = "world"
	attrDelivered      = "delivered"
	attrFailed         = "failed"
	attrDeadLettered   = "deadLettered"
	attrActionsDropped = "actionsDropped"
	attrGeneration     = "generation"
	attrLastError      = "lastError"
	attrLastErrorAt    = "lastErrorAt"
	attrLastSuccessAt  = "lastSuccessAt"
)

// MaxErrorText bounds the lastError text kept on a webhook.
const MaxErrorText = 200

// Webhook is a member's registered receiver.
type Webhook struct {
	World string
	AWNID string
	URL   string
	// Secret is the whsec_ secret the v1 signature is made with.
	Secret string
	// Generation is a random value each Set draws; a retry scheduled for
	// another generation is dropped.
	Generation     string
	Enabled        bool
	DisabledReason string
	CreatedAt      time.Time
	// Stats are the counters: Get reads them, the dispatcher's own reads
	// of the webhook do not.
	Stats Stats
	// okAt and failAt are the webhook item's outcomes that changed the
	// presence rule's answer (the package doc's Items).
	okAt, failAt time.Time
	// probes are its member's, when the dispatcher read them.
	probes probes
}

// Store is the webhook domain over the item API. It satisfies
// webhookhttp's Setter, Shower, Remover and Replayer.
type Store struct {
	st  store.Store
	now func() time.Time
}

// Option configures a Store or a Dispatcher's Store.
type Option func(*Store)

// WithClock sets the clock (tests inject one).
func WithClock(now func() time.Time) Option { return func(s *Store) { s.now = now } }

// NewStore returns the webhook domain over st.
func NewStore(st store.Store, opts ...Option) *Store {
	s := &Store{st: st, now: time.Now}
	for _, o := range opts {
		o(s)
	}
	return s
}

// Set registers url as awnID's webhook in world with a fresh secret and
// generation, replacing an earlier one (and its stats, and its pending
// retries, which then find another generation), enabled; it returns the
// secret, which is never shown again. The URL is validated by the caller
// (egress.ValidateURL). awnID must be a member when the webhook is
// written, whatever the route checked before: not a member → NotJoined.
// Cost: one TransactWriteItems (the member's ConditionCheck, the Put, a
// fresh counters item).
func (s *Store) Set(ctx context.Context, worldID, awnID, url string) (string, error) {
	secret, err := signature.NewSecret()
	if err != nil {
		return "", apierror.Wrap(apierror.Internal, fmt.Errorf("webhook: new secret: %w", err), "internal error; try again later")
	}
	it := store.Item{
		world.AttrType: store.S(TypeWebhook),
		attrWorld:      store.S(worldID),
		attrAWNID:      store.S(awnID),
		attrURL:        store.S(url),
		attrSecret:     store.S(secret),
		attrGeneration: store.S(rand.Text()),
		attrEnabled:    store.Bool(true),
		attrCreatedAt:  store.N(s.now().UnixNano()),
	}
	stats := store.Item{
		world.AttrType: store.S(TypeStats),
		attrWorld:      it[attrWorld],
		attrAWNID:      it[attrAWNID],
		attrGeneration: it[attrGeneration],
	}
	write := func() error {
		_, err := s.st.Write(ctx, store.Put(world.WebhookKey(worldID, awnID), it), world.MemberCheck(worldID, awnID),
			store.Put(world.WebhookStatsKey(worldID, awnID), stats))
		return err
	}
	err = write()
	var cf *store.ConditionFailedError
	if errors.As(err, &cf) && cf.Action == 1 && world.RestoreIndexEntry(ctx, s.st, worldID, awnID) {
		err = write() // a membership older than the agent's index of worlds
	}
	switch {
	case err == nil:
		return secret, nil
	case errors.As(err, &cf) && cf.Action == 1:
		return "", apierror.New(apierror.NotJoined, "you are not a member of this world; join it first")
	default:
		return "", apierror.FromStore("webhook: set", err)
	}
}

// Get returns awnID's webhook in world with its counters; none is
// NotFound. Cost: 2 GetItems.
func (s *Store) Get(ctx context.Context, worldID, awnID string) (Webhook, error) {
	w, err := s.get(ctx, worldID, awnID)
	if err != nil {
		return Webhook{}, err
	}
	it, err := s.st.Get(ctx, world.WebhookStatsKey(worldID, awnID))
	switch {
	case errors.Is(err, store.ErrNotFound):
		// None yet (a webhook written before the counters had an item).
	case err != nil:
		return Webhook{}, apierror.FromStore("webhook: get stats", err)
	default:
		w.Stats = decodeStats(it)
	}
	return w, nil
}

// get is Get without the counters (w.Stats empty): the dispatcher's read.
// Cost: 1 GetItem.
func (s *Store) get(ctx context.Context, worldID, awnID string) (Webhook, error) {
	it, err := s.st.Get(ctx, world.WebhookKey(worldID, awnID))
	if errors.Is(err, store.ErrNotFound) {
		return Webhook{}, apierror.New(apierror.NotFound, "no webhook is registered for this agent in this world")
	}
	if err != nil {
		return Webhook{}, apierror.FromStore("webhook: get", err)
	}
	return decodeWebhook(it)
}

// Show is Get as the GET route shows it: never the secret. Cost: 2
// GetItems (the webhook, its counters).
func (s *Store) Show(ctx context.Context, worldID, awnID string) (View, error) {
	w, err := s.Get(ctx, worldID, awnID)
	if err != nil {
		return View{}, err
	}
	return View{URL: w.URL, Enabled: w.Enabled, DisabledReason: w.DisabledReason, CreatedAt: w.CreatedAt, Stats: w.Stats}, nil
}

// Remove deletes awnID's webhook in world and its counters; none is
// NotFound. Retries already scheduled for it are dropped when they come
// due, even if another webhook has been set by then (its generation
// differs). Cost: one TransactWriteItems.
func (s *Store) Remove(ctx context.Context, worldID, awnID string) error {
	_, err := s.st.Write(ctx, store.Delete(world.WebhookKey(worldID, awnID)).When(store.ItemExists()),
		store.Delete(world.WebhookStatsKey(worldID, awnID)))
	if errors.Is(err, store.ErrConditionFailed) {
		return apierror.New(apierror.NotFound, "no webhook is registered for this agent in this world")
	}
	if err != nil {
		return apierror.FromStore("webhook: remove", err)
	}
	return nil
}

// Enabled returns the enabled webhooks of world, without their counters:
// one Query of the world partition's WEBHOOK# prefix (paged), not one read
// per member.
func (s *Store) Enabled(ctx context.Context, worldID string) ([]Webhook, error) {
	var out []Webhook
	q := store.Query{PK: world.WorldPK(worldID), SK: store.SKPrefix(world.WebhookPrefix)}
	for {
		p, err := s.st.Query(ctx, q)
		if err != nil {
			return nil, apierror.FromStore("webhook: list", err)
		}
		for _, it := range p.Items {
			w, err := decodeWebhook(it)
			if err != nil {
				return nil, err
			}
			if w.Enabled {
				out = append(out, w)
			}
		}
		if p.Cursor == "" {
			return out, nil
		}
		q.Cursor = p.Cursor
	}
}

func decodeWebhook(it store.Item) (Webhook, error) {
	if it.Str(world.AttrType) != TypeWebhook {
		return Webhook{}, apierror.Wrap(apierror.Internal, fmt.Errorf("webhook: item %s is not a webhook", it.Key()), "internal error; try again later")
	}
	w := Webhook{
		World:          it.Str(attrWorld),
		AWNID:          it.Str(attrAWNID),
		URL:            it.Str(attrURL),
		Secret:         it.Str(attrSecret),
		Generation:     it.Str(attrGeneration),
		Enabled:        it.BoolAttr(attrEnabled),
		DisabledReason: it.Str(attrDisabledReason),
		CreatedAt:      unixNano(it, attrCreatedAt),
		okAt:           unixNano(it, attrLastSuccessAt),
		failAt:         unixNano(it, attrLastErrorAt),
	}
	return w, nil
}

// decodeStats reads a counters item.
func decodeStats(it store.Item) Stats {
	st := Stats{
		Delivered:      count(it, attrDelivered),
		Failed:         count(it, attrFailed),
		DeadLettered:   count(it, attrDeadLettered),
		ActionsDropped: count(it, attrActionsDropped),
		LastError:      it.Str(attrLastError),
	}
	if t := unixNano(it, attrLastErrorAt); !t.IsZero() {
		st.LastErrorAt = &t
	}
	if t := unixNano(it, attrLastSuccessAt); !t.IsZero() {
		st.LastSuccessAt = &t
	}
	return st
}

// count reads a counter; a missing one is 0.
func count(it store.Item, name string) int64 {
	n, err := it.Int(name)
	if err != nil {
		return 0
	}
	return n
}

// unixNano reads a time kept as Unix nanoseconds; missing is the zero time.
func unixNano(it store.Item, name string) time.Time {
	n, err := it.Int(name)
	if err != nil || n == 0 {
		return time.Time{}
	}
	return time.Unix(0, n).UTC()
}

// outcome is what one attempt changes on the webhook item.
type outcome struct {
	delivered, failed, deadLettered bool
	err                             string
	gone                            bool
	// actionDropped: the receiver answered with an action that was not
	// forwarded (a hop too many, over the rate limit, refused).
	actionDropped bool
}

// record applies an attempt's outcome to the webhook's counters with one
// UpdateItem, only while they are the counters of the webhook generation
// the attempt was for (a webhook removed or replaced meanwhile keeps no
// stats of the old one). The webhook item itself is written (one more
// UpdateItem, conditioned the same way) only to disable it on 410 or when
// flip is set: the outcome changes whether the webhook answered (the
// package doc's Items).
func (s *Store) record(ctx context.Context, h Webhook, o outcome, flip bool) error {
	now := s.now().UnixNano()
	gen := store.Eq(attrGeneration, store.S(h.Generation))
	a := store.Update(world.WebhookStatsKey(h.World, h.AWNID)).When(gen)
	if o.delivered {
		a = a.AddNum(attrDelivered, 1).SetAttr(attrLastSuccessAt, store.N(now))
	}
	if o.failed {
		a = a.AddNum(attrFailed, 1).SetAttr(attrLastErrorAt, store.N(now)).SetAttr(attrLastError, store.S(clip(o.err)))
	}
	if o.deadLettered {
		a = a.AddNum(attrDeadLettered, 1)
	}
	if o.actionDropped {
		a = a.AddNum(attrActionsDropped, 1)
	}
	_, err := s.st.Write(ctx, a)
	if err != nil && !errors.Is(err, store.ErrConditionFailed) {
		return apierror.FromStore("webhook: record outcome", err)
	}
	if !o.gone && !flip {
		return nil
	}
	hook := store.Update(world.WebhookKey(h.World, h.AWNID)).When(gen)
	switch {
	case flip && o.delivered:
		hook = hook.SetAttr(attrLastSuccessAt, store.N(now))
	case flip && o.failed:
		hook = hook.SetAttr(attrLastErrorAt, store.N(now))
	}
	if o.gone {
		hook = hook.SetAttr(attrEnabled, store.Bool(false)).SetAttr(attrDisabledReason, store.S("the receiver answered 410 Gone"))
	}
	_, err = s.st.Write(ctx, hook)
	if err != nil && !errors.Is(err, store.ErrConditionFailed) {
		return apierror.FromStore("webhook: record outcome", err)
	}
	return nil
}

func clip(s string) string {
	if len(s) <= MaxErrorText {
		return s
	}
	// Cut on a rune boundary so the stored text stays valid UTF-8.
	cut := MaxErrorText
	for cut > 0 && s[cut]&0xC0 == 0x80 {
		cut--
	}
	return s[:cut]
}
