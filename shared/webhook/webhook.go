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
//	retry        WHRETRY#<world>#<awnId>   <eventId>         WHDUE#<shard>   <due ms, 15 digits>#<world>#<awnId>#<eventId>  whretry
//	dead letter  WHDEAD#<world>#<awnId>    <eventId>         —               —                                        whdead
//
// The webhook item holds url, secret, generation, enabled,
// disabledReason, createdAt and the counters delivered, failed (attempts),
// deadLettered and actionsDropped, changed with ADD so concurrent outcomes
// never lose a count. The retry item of one (event, recipient) carries the
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
// condition that the member item exists (a ConditionCheck in the same
// transaction), and a leave deletes the member item and the webhook item
// in one transaction, so whichever comes second sees the other. Stats
// updates are conditioned on the webhook's url, so none recreates a
// deleted item. The dispatcher still reads the member item before each
// attempt (one GetItem): a webhook item written before this rule held, or
// by hand, reaches no one who is not a member. A retry carries the
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
	Stats          Stats
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
// Cost: one TransactWriteItems (the member's ConditionCheck, the Put).
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
	_, err = s.st.Write(ctx, store.Put(world.WebhookKey(worldID, awnID), it), world.MemberCheck(worldID, awnID))
	var cf *store.ConditionFailedError
	switch {
	case err == nil:
		return secret, nil
	case errors.As(err, &cf) && cf.Action == 1:
		return "", apierror.New(apierror.NotJoined, "you are not a member of this world; join it first")
	default:
		return "", apierror.FromStore("webhook: set", err)
	}
}

// Get returns awnID's webhook in world; none is NotFound.
func (s *Store) Get(ctx context.Context, worldID, awnID string) (Webhook, error) {
	it, err := s.st.Get(ctx, world.WebhookKey(worldID, awnID))
	if errors.Is(err, store.ErrNotFound) {
		return Webhook{}, apierror.New(apierror.NotFound, "no webhook is registered for this agent in this world")
	}
	if err != nil {
		return Webhook{}, apierror.FromStore("webhook: get", err)
	}
	return decodeWebhook(it)
}

// Show is Get as the GET route shows it: never the secret.
func (s *Store) Show(ctx context.Context, worldID, awnID string) (View, error) {
	w, err := s.Get(ctx, worldID, awnID)
	if err != nil {
		return View{}, err
	}
	return View{URL: w.URL, Enabled: w.Enabled, DisabledReason: w.DisabledReason, CreatedAt: w.CreatedAt, Stats: w.Stats}, nil
}

// Remove deletes awnID's webhook in world; none is NotFound. Retries
// already scheduled for it are dropped when they come due, even if another
// webhook has been set by then (its generation differs).
func (s *Store) Remove(ctx context.Context, worldID, awnID string) error {
	_, err := s.st.Write(ctx, store.Delete(world.WebhookKey(worldID, awnID)).When(store.ItemExists()))
	if errors.Is(err, store.ErrConditionFailed) {
		return apierror.New(apierror.NotFound, "no webhook is registered for this agent in this world")
	}
	if err != nil {
		return apierror.FromStore("webhook: remove", err)
	}
	return nil
}

// Enabled returns the enabled webhooks of world: one Query of the world
// partition's WEBHOOK# prefix (paged), not one read per member.
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
	}
	w.Stats.Delivered = count(it, attrDelivered)
	w.Stats.Failed = count(it, attrFailed)
	w.Stats.DeadLettered = count(it, attrDeadLettered)
	w.Stats.ActionsDropped = count(it, attrActionsDropped)
	w.Stats.LastError = it.Str(attrLastError)
	if t := unixNano(it, attrLastErrorAt); !t.IsZero() {
		w.Stats.LastErrorAt = &t
	}
	if t := unixNano(it, attrLastSuccessAt); !t.IsZero() {
		w.Stats.LastSuccessAt = &t
	}
	return w, nil
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

// record applies an attempt's outcome to the webhook's stats with one
// UpdateItem, only while the webhook still exists and still points at url
// (a webhook removed or replaced meanwhile keeps no stats of the old one).
func (s *Store) record(ctx context.Context, worldID, awnID, url string, o outcome) error {
	now := s.now().UnixNano()
	a := store.Update(world.WebhookKey(worldID, awnID)).When(store.Eq(attrURL, store.S(url)))
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
	if o.gone {
		a = a.SetAttr(attrEnabled, store.Bool(false)).SetAttr(attrDisabledReason, store.S("the receiver answered 410 Gone"))
	}
	_, err := s.st.Write(ctx, a)
	if errors.Is(err, store.ErrConditionFailed) {
		return nil
	}
	if err != nil {
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
