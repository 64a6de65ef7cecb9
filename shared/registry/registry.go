// Package registry is the agent registry and the key directory, written once
// over the item API (store.Store) so that it runs on memory, bolt and
// DynamoDB alike: a name is bound to the first key that registers it, its
// owner updates it and sets its presence, and buyers discover agents by
// capability through gsi1 — a Query of the matching items only, never a scan
// of the registry.
//
// # Items
//
//	item        pk               sk          gsi1pk                    gsi1sk   type
//	profile     AGENT#<name>     PROFILE     AGENTS#<status>           <name>   agent
//	capability  AGENT#<name>     CAP#<cap>   CAP#<cap>#<status>        <name>   agentcap
//	key         KEY#<keyid>      KEY         —                         —        agentkey  (+ status)
//	skeleton    SKEL#<skeleton>  SKEL        —                         —        agentskel
//
// The profile and each capability item carry the whole profile (name,
// description, endpoint, capabilities, publicKey, keyId, status,
// registeredAt, updatedAt in Unix nanoseconds, rev), so that a discovery
// page is one Query and no Get per agent. <status> is "online" or
// "offline": presence moves every item of an agent from one partition to
// the other. The key item binds a keyid to its public key and to the one
// name it registers (one key is one agent): the key
// directory and NameForKey read it with one Get. The skeleton item binds a
// name's confusable skeleton (ident.Skeleton: "a2awire-c1ean" and
// "a2awire-clean" share one) to the keyid that holds it and the name that
// took it, so that no other key can take a name that reads the same.
//
// # Writes
//
// Register and SetPresence read the profile (1 Get) and rewrite all the
// agent's items in one store.Write: the profile, one Put per capability, a
// Delete per capability the update dropped, on first registration the key
// item, and (Register only) the skeleton item — at most 1 + 32 + 32 + 1
// actions.
// Conditions make it race-safe: a first registration puts the profile only
// if it is absent (of any number of racing first registrations one wins,
// the others get 409 name_taken from the item in the way), the key item
// only if it is absent or already names the agent (409 key_taken
// otherwise), and the skeleton item only if it is absent or held by the
// same keyid (409 name_confusable otherwise): two keys racing for
// "a2awire-c1ean" and "a2awire-clean" cannot both win, as the condition is
// in the write, not in a read before it. An update rewrites the skeleton
// item under the same condition, which fills it in for names registered
// before skeletons were kept. An update or presence
// change requires the profile's rev to be the one read, so two racing
// updates by the owner cannot leave a dropped capability's item behind
// (the loser reads again and retries).
//
// # Discovery
//
// Discover queries gsi1 partition CAP#<cap>#<status> (or AGENTS#<status>
// without a capability) after the cursor's name with Limit limit+1: the
// extra item only tells whether a next page exists, so a page reads at most
// limit+1 items. status "any" lists the online partition, then the offline
// one, still reading at most limit+1 items in at most two Queries. Cursors
// are the registry's own: the partition and the last name, sealed with an
// HMAC over the filter under a key derived from the deploy's secret
// (WithCursorSecret), so a tampered cursor, one of another filter, or one
// sealed elsewhere is refused (400). gsi1 is eventually consistent on DynamoDB: an agent
// registered a moment ago may take a moment to be discoverable; Get reads
// the profile strongly consistently.
//
// # Errors
//
// Every error is an *apierror.Error: invalid input → Invalid naming the
// field; a taken name → Conflict "name_taken"; a key already bound to
// another name → Conflict "key_taken"; a name whose skeleton another key
// holds → Conflict "name_confusable"; a name under ReservedPrefix by any
// key but the SharedKey → Forbidden "name_reserved"; presence by another
// key → Forbidden;
// missing → NotFound. store.ErrUnavailable or a context that ran out →
// Unavailable with Retry-After 1 s; any other store failure → Internal, its
// text in Err only.
package registry

import (
	"context"
	"crypto/ed25519"
	"crypto/hmac"
	"crypto/sha256"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"net/url"
	"strconv"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"

	"github.com/a2awire/a2awire/shared/apierror"
	"github.com/a2awire/a2awire/shared/auth"
	"github.com/a2awire/a2awire/shared/ident"
	"github.com/a2awire/a2awire/shared/store"
)

// Status is an agent's presence.
type Status string

// Presence values.
const (
	Online  Status = "online"
	Offline Status = "offline"
)

// Limits of a registration.
const (
	MaxEndpointLen    = 2048
	MaxDescriptionLen = 1024 // characters
	MaxCapabilities   = 32
	DefaultLimit      = 50
	MaxLimit          = 100
	// RetryAfter is what an unavailable store asks the client to wait.
	RetryAfter = time.Second
	// maxAttempts bounds the optimistic retries of racing owner updates.
	maxAttempts = 8
)

// Type attributes, so a change-feed consumer tells items apart without
// parsing keys.
const (
	TypeProfile    = "agent"
	TypeCapability = "agentcap"
	TypeKey        = "agentkey"
	TypeSkeleton   = "agentskel"
)

// ReservedPrefix starts the names of the network's own agents (the
// fixtures): only the SharedKey registers a name whose skeleton starts
// with its skeleton (so "a2avvire-x" is reserved too).
const ReservedPrefix = "a2awire-"

const (
	agentPrefix = "AGENT#"
	profileSK   = "PROFILE"
	capSKPrefix = "CAP#"
	keyPrefix   = "KEY#"
	keySK       = "KEY"
	skelPrefix  = "SKEL#"
	skelSK      = "SKEL"
	listPrefix  = "AGENTS#"
	capPrefix   = "CAP#"

	attrType         = "type"
	attrName         = "name"
	attrDescription  = "description"
	attrEndpoint     = "endpoint"
	attrCapabilities = "capabilities"
	attrPublicKey    = "publicKey"
	attrKeyID        = "keyId"
	attrStatus       = "status"
	attrRegisteredAt = "registeredAt"
	attrUpdatedAt    = "updatedAt"
	attrRev          = "rev"
)

// Shapes of names (package ident: no regular expression to compile at a
// cold start); the tests hold each to its expression.
var (
	// nameShape: ^[a-z0-9][a-z0-9-]{1,62}$.
	nameShape = ident.AgentName
	// capShape: ^[a-z0-9][a-z0-9-]{0,63}$.
	capShape = ident.Capability
)

// Agent is a registered agent's profile.
type Agent struct {
	Name, Description, Endpoint string
	Capabilities                []string
	PublicKey                   ed25519.PublicKey
	// KeyID and AWNID are derived from PublicKey (auth.KeyID, auth.AWNID);
	// Register ignores what the caller puts there.
	KeyID, AWNID string
	Status       Status
	RegisteredAt time.Time
	UpdatedAt    time.Time
}

// Filter selects a discovery page.
type Filter struct {
	// Capability restricts the listing to agents advertising it; "" lists
	// every agent.
	Capability string
	// Status is "" (= online), "online", "offline" or "any".
	Status string
	// Limit is the most agents per page: 0 means DefaultLimit, more than
	// MaxLimit means MaxLimit.
	Limit int
	// Cursor continues from the page that returned it as Next.
	Cursor string
}

// Page is one discovery page.
type Page struct {
	Agents []Agent
	// Next continues the listing; "" on the last page.
	Next string
}

// Registry is the agent registry over a store. It holds no mutable state;
// one Registry serves any number of concurrent requests.
type Registry struct {
	store    store.Store
	now      func() time.Time
	insecure bool
	secret   []byte
	// shared is the one key that may register several names (SharedKey).
	shared ed25519.PublicKey
}

// Option configures a Registry.
type Option func(*Registry)

// WithClock replaces time.Now (registeredAt, updatedAt).
func WithClock(now func() time.Time) Option {
	return func(r *Registry) {
		if now != nil {
			r.now = now
		}
	}
}

// AllowInsecureEndpoints accepts http:// endpoints, as the local harness
// does; by default only https:// is accepted.
func AllowInsecureEndpoints() Option { return func(r *Registry) { r.insecure = true } }

// SharedKey lets key register any number of names: the network's own key,
// which owns the five fixtures (package fixtures/seed). Every other key
// registers one name (Conflict "key_taken"). The shared key's key item
// names the name it registered last.
func SharedKey(key ed25519.PublicKey) Option {
	return func(r *Registry) { r.shared = append(ed25519.PublicKey(nil), key...) }
}

// WithCursorSecret keys discovery cursors with a key derived from secret
// (store.DeriveKey under cursorLabel): the deploy's secret in the cloud,
// the harness's key file locally. Every instance serving one table must
// share it for a cursor to work on the instance that serves the next page.
// Without it the key is random, this Registry's own: cursors then fail
// (400, start again) when the next page reaches another instance, which is
// safe, where a key in the source would let anyone seal a cursor.
func WithCursorSecret(secret []byte) Option {
	return func(r *Registry) {
		if len(secret) > 0 {
			r.secret = store.DeriveKey(secret, cursorLabel)
		}
	}
}

// cursorLabel separates the registry's cursor key from other keys derived
// from the same secret (the store's).
const cursorLabel = "a2awire registry cursor v1"

// New returns a Registry over st.
func New(st store.Store, opts ...Option) *Registry {
	if st == nil {
		panic("registry: nil store")
	}
	r := &Registry{store: st, now: time.Now}
	for _, o := range opts {
		o(r)
	}
	if r.secret == nil {
		r.secret = store.DeriveKey(nil, cursorLabel) // random
	}
	return r
}

// ProfileKey is the key of name's profile item.
func ProfileKey(name string) store.Key { return store.Key{PK: agentPrefix + name, SK: profileSK} }

func capKey(name, capability string) store.Key {
	return store.Key{PK: agentPrefix + name, SK: capSKPrefix + capability}
}

// EndpointIs is the condition, for a write to carry, that name is
// registered with endpoint: its profile item exists and names it.
func EndpointIs(name, endpoint string) store.Action {
	return store.Check(ProfileKey(name), store.And(store.ItemExists(), store.Eq(attrEndpoint, store.S(endpoint))))
}

// KeyKey is the key of the key item of keyid.
func KeyKey(keyID string) store.Key { return store.Key{PK: keyPrefix + keyID, SK: keySK} }

func listPK(s Status) string                   { return listPrefix + string(s) }
func capPK(capability string, s Status) string { return capPrefix + capability + "#" + string(s) }

// Register creates or updates a.Name's registration. The first
// registration binds the name to a.PublicKey (created = true; the agent is
// online); the same key later updates description, endpoint and
// capabilities (created = false; presence and registeredAt kept); another
// key gets Conflict "name_taken". A key may register one name only
// (Conflict "key_taken"), and a name that reads like one another key holds
// is refused (Conflict "name_confusable"; ident.Skeleton). Cost: 1 Get and
// 1 Write (a TransactWriteItems of 3 + capabilities actions on creation,
// 2 + new + dropped capabilities on update: the skeleton item is one), more
// only when racing writers force a retry.
func (r *Registry) Register(ctx context.Context, a Agent) (Agent, bool, error) {
	if err := r.validate(&a); err != nil {
		return Agent{}, false, err
	}
	if err := r.checkReserved(a); err != nil {
		return Agent{}, false, err
	}
	a.KeyID, a.AWNID = auth.KeyID(a.PublicKey), auth.AWNID(a.PublicKey)
	for range maxAttempts {
		cur, rev, err := r.read(ctx, a.Name)
		switch {
		case err == nil:
			if !cur.PublicKey.Equal(a.PublicKey) {
				return Agent{}, false, nameTaken(a.Name)
			}
			next := a
			next.Status, next.RegisteredAt, next.UpdatedAt = cur.Status, cur.RegisteredAt, r.now().UTC()
			acts := r.rewrite(next, rev+1, cur.Capabilities, store.Eq(attrRev, store.N(rev)))
			acts = append(acts, skeletonPut(a))
			if _, err := r.store.Write(ctx, acts...); err != nil {
				var cf *store.ConditionFailedError
				if errors.As(err, &cf) && cf.Action == len(acts)-1 {
					return Agent{}, false, nameConfusable(a.Name, cf.Item)
				}
				if errors.Is(err, store.ErrConditionFailed) {
					continue // another write of this agent came first: read again
				}
				return Agent{}, false, storeError("update agent", err)
			}
			return next, false, nil
		case apierror.KindOf(err) != apierror.NotFound:
			return Agent{}, false, err
		}
		now := r.now().UTC()
		next := a
		next.Status, next.RegisteredAt, next.UpdatedAt = Online, now, now
		acts := r.rewrite(next, 1, nil, store.ItemAbsent())
		acts[0] = acts[0].OnFailReturn()
		acts = append(acts, store.Put(KeyKey(a.KeyID), store.Item{
			attrType:      store.S(TypeKey),
			attrKeyID:     store.S(a.KeyID),
			attrPublicKey: store.B(a.PublicKey),
			attrName:      store.S(a.Name),
		}).When(r.keyCondition(a)).OnFailReturn())
		keyAt := len(acts) - 1
		acts = append(acts, skeletonPut(a))
		_, err = r.store.Write(ctx, acts...)
		var cf *store.ConditionFailedError
		switch {
		case err == nil:
			return next, true, nil
		case errors.As(err, &cf) && cf.Action == len(acts)-1:
			return Agent{}, false, nameConfusable(a.Name, cf.Item)
		case errors.As(err, &cf) && cf.Action == keyAt:
			owner := "another agent"
			if cf.Item != nil {
				owner = "agent " + apierror.Quote(cf.Item.Str(attrName))
			}
			return Agent{}, false, &apierror.Error{Kind: apierror.Conflict, Code: "key_taken",
				Message: "this public key already registers " + owner + "; use one key per agent"}
		case errors.As(err, &cf) && cf.Action == 0:
			// Someone registered the name between our read and write.
			if cf.Item != nil {
				if held, derr := decode(cf.Item); derr == nil && !held.PublicKey.Equal(a.PublicKey) {
					return Agent{}, false, nameTaken(a.Name)
				}
			}
			continue // our own key won a racing registration: update it
		default:
			return Agent{}, false, storeError("register agent", err)
		}
	}
	return Agent{}, false, &apierror.Error{Kind: apierror.Unavailable, RetryAfter: RetryAfter,
		Message: "the agent is being changed by concurrent requests; retry"}
}

// keyCondition is the condition on a new registration's key item: absent
// or naming this agent, so that a key registers one name; any for the
// shared key (SharedKey).
func (r *Registry) keyCondition(a Agent) store.Cond {
	if r.shared != nil && a.PublicKey.Equal(r.shared) {
		return store.Or(store.ItemAbsent(), store.Exists(attrKeyID))
	}
	return store.Or(store.ItemAbsent(), store.Eq(attrName, store.S(a.Name)))
}

// SkeletonKey is the key of the skeleton item of name (ident.Skeleton).
func SkeletonKey(name string) store.Key {
	return store.Key{PK: skelPrefix + ident.Skeleton(name), SK: skelSK}
}

// skeletonPut claims a.Name's skeleton for a's keyid: only if no key holds
// it yet or a's key already does (its own name, or, for the SharedKey,
// another of its names).
func skeletonPut(a Agent) store.Action {
	return store.Put(SkeletonKey(a.Name), store.Item{
		attrType:  store.S(TypeSkeleton),
		attrName:  store.S(a.Name),
		attrKeyID: store.S(a.KeyID),
	}).When(store.Or(store.ItemAbsent(), store.Eq(attrKeyID, store.S(a.KeyID)))).OnFailReturn()
}

func nameConfusable(name string, held store.Item) *apierror.Error {
	other := "a name registered to another key"
	if held != nil && held.Str(attrName) != "" {
		other = apierror.Quote(held.Str(attrName)) + ", registered to another key"
	}
	return &apierror.Error{Kind: apierror.Conflict, Code: "name_confusable",
		Message: "the name " + apierror.Quote(name) + " reads the same as " + other + "; choose a name that does not"}
}

// checkReserved refuses a name under ReservedPrefix (or one that reads the
// same) unless a's key is the SharedKey, the network's own.
func (r *Registry) checkReserved(a Agent) error {
	if !strings.HasPrefix(ident.Skeleton(a.Name), reservedSkeleton) {
		return nil
	}
	if r.shared != nil && a.PublicKey.Equal(r.shared) {
		return nil
	}
	return &apierror.Error{Kind: apierror.Forbidden, Code: "name_reserved",
		Message: "names starting with " + apierror.Quote(ReservedPrefix) + " (or reading like it) are reserved for the network's own agents"}
}

// reservedSkeleton is ReservedPrefix's skeleton: "a2avvire-".
var reservedSkeleton = ident.Skeleton(ReservedPrefix)

func nameTaken(name string) *apierror.Error {
	return &apierror.Error{Kind: apierror.Conflict, Code: "name_taken",
		Message: "the name " + apierror.Quote(name) + " is registered to another key"}
}

// rewrite returns the actions writing every item of a (profile first, with
// cond and rev) and deleting the capability items of old that a dropped.
func (r *Registry) rewrite(a Agent, rev int64, old []string, cond store.Cond) []store.Action {
	base := encode(a, rev)
	profile := clone(base)
	profile[attrType] = store.S(TypeProfile)
	profile[store.AttrGSI1PK] = store.S(listPK(a.Status))
	profile[store.AttrGSI1SK] = store.S(a.Name)
	acts := []store.Action{store.Put(ProfileKey(a.Name), profile).When(cond)}
	keep := make(map[string]bool, len(a.Capabilities))
	for _, c := range a.Capabilities {
		keep[c] = true
		it := clone(base)
		it[attrType] = store.S(TypeCapability)
		it[store.AttrGSI1PK] = store.S(capPK(c, a.Status))
		it[store.AttrGSI1SK] = store.S(a.Name)
		acts = append(acts, store.Put(capKey(a.Name, c), it))
	}
	for _, c := range old {
		if !keep[c] {
			acts = append(acts, store.Delete(capKey(a.Name, c)))
		}
	}
	return acts
}

func clone(it store.Item) store.Item {
	out := make(store.Item, len(it)+3)
	for k, v := range it {
		out[k] = v
	}
	return out
}

func encode(a Agent, rev int64) store.Item {
	caps := make([]types.AttributeValue, len(a.Capabilities))
	for i, c := range a.Capabilities {
		caps[i] = store.S(c)
	}
	it := store.Item{
		attrName:         store.S(a.Name),
		attrEndpoint:     store.S(a.Endpoint),
		attrCapabilities: &types.AttributeValueMemberL{Value: caps},
		attrPublicKey:    store.B(a.PublicKey),
		attrKeyID:        store.S(a.KeyID),
		attrStatus:       store.S(string(a.Status)),
		attrRegisteredAt: store.N(a.RegisteredAt.UnixNano()),
		attrUpdatedAt:    store.N(a.UpdatedAt.UnixNano()),
		attrRev:          store.N(rev),
	}
	if a.Description != "" {
		it[attrDescription] = store.S(a.Description)
	}
	return it
}

func decode(it store.Item) (Agent, error) {
	a := Agent{
		Name:        it.Str(attrName),
		Description: it.Str(attrDescription),
		Endpoint:    it.Str(attrEndpoint),
		PublicKey:   ed25519.PublicKey(it.Bytes(attrPublicKey)),
		KeyID:       it.Str(attrKeyID),
		Status:      Status(it.Str(attrStatus)),
	}
	if len(a.PublicKey) != ed25519.PublicKeySize || a.Name == "" || (a.Status != Online && a.Status != Offline) {
		return Agent{}, fmt.Errorf("registry: item %s is not an agent profile", it.Key())
	}
	a.AWNID = auth.AWNID(a.PublicKey)
	if l, ok := it[attrCapabilities].(*types.AttributeValueMemberL); ok {
		a.Capabilities = make([]string, 0, len(l.Value))
		for _, v := range l.Value {
			if s, ok := v.(*types.AttributeValueMemberS); ok {
				a.Capabilities = append(a.Capabilities, s.Value)
			}
		}
	}
	reg, err := it.Int(attrRegisteredAt)
	if err != nil {
		return Agent{}, fmt.Errorf("registry: item %s: %w", it.Key(), err)
	}
	upd, err := it.Int(attrUpdatedAt)
	if err != nil {
		return Agent{}, fmt.Errorf("registry: item %s: %w", it.Key(), err)
	}
	a.RegisteredAt, a.UpdatedAt = time.Unix(0, reg).UTC(), time.Unix(0, upd).UTC()
	return a, nil
}

// read returns name's profile and rev, or a NotFound *apierror.Error.
func (r *Registry) read(ctx context.Context, name string) (Agent, int64, error) {
	it, err := r.store.Get(ctx, ProfileKey(name))
	if errors.Is(err, store.ErrNotFound) {
		return Agent{}, 0, notFound(name)
	}
	if err != nil {
		return Agent{}, 0, storeError("read agent", err)
	}
	a, err := decode(it)
	if err != nil {
		return Agent{}, 0, apierror.Wrap(apierror.Internal, err, "internal error; try again later")
	}
	rev, err := it.Int(attrRev)
	if err != nil {
		return Agent{}, 0, apierror.Wrap(apierror.Internal, fmt.Errorf("registry: profile %q: %w", name, err), "internal error; try again later")
	}
	return a, rev, nil
}

func notFound(name string) *apierror.Error {
	return apierror.New(apierror.NotFound, "no agent is registered as %s", apierror.Quote(name))
}

// Get returns name's profile (1 strongly consistent Get), or NotFound.
func (r *Registry) Get(ctx context.Context, name string) (Agent, error) {
	if !nameShape.Match(name) {
		return Agent{}, notFound(name) // no such name can be registered
	}
	a, _, err := r.read(ctx, name)
	return a, err
}

// Revision is a profile as read, with the revision a change of it is
// conditioned on: what Read returns, so that a read made for another
// check (an owner route's) serves the change that follows
// (SetPresenceFrom, UnregisterFrom).
type Revision struct {
	Agent Agent
	rev   int64
}

// Read is Get with the profile's revision (1 strongly consistent Get).
func (r *Registry) Read(ctx context.Context, name string) (Revision, error) {
	if !nameShape.Match(name) {
		return Revision{}, notFound(name)
	}
	a, rev, err := r.read(ctx, name)
	return Revision{Agent: a, rev: rev}, err
}

// reader is the profile read of a change's attempts: the first takes
// first when it is set (read for the same request), the others read.
func (r *Registry) reader(name string, first *Revision) func(context.Context) (Agent, int64, error) {
	return func(ctx context.Context) (Agent, int64, error) {
		if first != nil {
			f := *first
			first = nil
			return f.Agent, f.rev, nil
		}
		return r.read(ctx, name)
	}
}

// SetPresence sets name's presence; key must be the key that owns the name
// (Forbidden otherwise). Setting the presence it already has writes
// nothing. Cost: 1 Get, plus 1 Write of 1 + capabilities Puts when it
// changes.
func (r *Registry) SetPresence(ctx context.Context, name string, key ed25519.PublicKey, s Status) (Agent, error) {
	return r.setPresence(ctx, name, nil, key, s)
}

// SetPresenceFrom is SetPresence of the profile as read (Read): no Get
// unless the profile changed since, which its write's condition finds.
func (r *Registry) SetPresenceFrom(ctx context.Context, read Revision, key ed25519.PublicKey, s Status) (Agent, error) {
	return r.setPresence(ctx, read.Agent.Name, &read, key, s)
}

func (r *Registry) setPresence(ctx context.Context, name string, first *Revision, key ed25519.PublicKey, s Status) (Agent, error) {
	if s != Online && s != Offline {
		return Agent{}, apierror.New(apierror.Invalid, "status must be \"online\" or \"offline\", not %s", apierror.Quote(string(s)))
	}
	if !nameShape.Match(name) {
		return Agent{}, notFound(name)
	}
	read := r.reader(name, first)
	for range maxAttempts {
		cur, rev, err := read(ctx)
		if err != nil {
			return Agent{}, err
		}
		if len(key) != ed25519.PublicKeySize || !cur.PublicKey.Equal(key) {
			return Agent{}, apierror.New(apierror.Forbidden, "only the key that registered %s may set its presence", apierror.Quote(name))
		}
		if cur.Status == s {
			return cur, nil
		}
		next := cur
		next.Status, next.UpdatedAt = s, r.now().UTC()
		acts := r.rewrite(next, rev+1, nil, store.Eq(attrRev, store.N(rev)))
		if !r.isShared(key) {
			// The key item carries the status too, so that a join reads
			// the name and the presence override with one Get (Subject).
			acts = append(acts, store.Update(KeyKey(cur.KeyID)).SetAttr(attrStatus, store.S(string(s))).When(store.Eq(attrName, store.S(name))))
		}
		_, err = r.store.Write(ctx, acts...)
		if errors.Is(err, store.ErrConditionFailed) {
			continue
		}
		if err != nil {
			return Agent{}, storeError("set presence", err)
		}
		return next, nil
	}
	return Agent{}, &apierror.Error{Kind: apierror.Unavailable, RetryAfter: RetryAfter,
		Message: "the agent is being changed by concurrent requests; retry"}
}

func (r *Registry) isShared(key ed25519.PublicKey) bool {
	return r.shared != nil && key.Equal(r.shared)
}

// Unregister removes name's registration; key must be the key that owns
// it (Forbidden otherwise). Every item of the agent goes in one write —
// profile, capabilities, key item and skeleton — so the name and the key
// are free at once (the SharedKey's key item stays, naming its other
// names). It returns the profile as it was. Cost: 1 Get and 1 Write of
// 3 + capabilities Deletes.
func (r *Registry) Unregister(ctx context.Context, name string, key ed25519.PublicKey) (Agent, error) {
	return r.unregister(ctx, name, nil, key)
}

// UnregisterFrom is Unregister of the profile as read (Read): no Get
// unless the profile changed since, which its write's condition finds.
func (r *Registry) UnregisterFrom(ctx context.Context, read Revision, key ed25519.PublicKey) (Agent, error) {
	return r.unregister(ctx, read.Agent.Name, &read, key)
}

func (r *Registry) unregister(ctx context.Context, name string, first *Revision, key ed25519.PublicKey) (Agent, error) {
	if !nameShape.Match(name) {
		return Agent{}, notFound(name)
	}
	read := r.reader(name, first)
	for range maxAttempts {
		cur, rev, err := read(ctx)
		if err != nil {
			return Agent{}, err
		}
		if len(key) != ed25519.PublicKeySize || !cur.PublicKey.Equal(key) {
			return Agent{}, apierror.New(apierror.Forbidden, "only the key that registered %s may unregister it", apierror.Quote(name))
		}
		acts := []store.Action{store.Delete(ProfileKey(name)).When(store.Eq(attrRev, store.N(rev)))}
		for _, c := range cur.Capabilities {
			acts = append(acts, store.Delete(capKey(name, c)))
		}
		acts = append(acts, store.Delete(SkeletonKey(name)).When(store.Or(store.ItemAbsent(), store.Eq(attrKeyID, store.S(cur.KeyID)))))
		if !r.isShared(key) {
			acts = append(acts, store.Delete(KeyKey(cur.KeyID)))
		}
		_, err = r.store.Write(ctx, acts...)
		if errors.Is(err, store.ErrConditionFailed) {
			continue // changed meanwhile: read again
		}
		if err != nil {
			return Agent{}, storeError("unregister agent", err)
		}
		return cur, nil
	}
	return Agent{}, &apierror.Error{Kind: apierror.Unavailable, RetryAfter: RetryAfter,
		Message: "the agent is being changed by concurrent requests; retry"}
}

// Subject returns the name key registers and whether its registration is
// offline: 1 Get of the key item, which SetPresence keeps the status on.
// None → NotFound, as NameForKey.
func (r *Registry) Subject(ctx context.Context, key ed25519.PublicKey) (string, bool, error) {
	if len(key) != ed25519.PublicKeySize {
		return "", false, apierror.New(apierror.NotFound, "no agent is registered with this key")
	}
	keyID := auth.KeyID(key)
	if !auth.ValidKeyID(keyID) {
		return "", false, apierror.New(apierror.NotFound, "no agent is registered with this key")
	}
	it, err := r.store.Get(ctx, KeyKey(keyID))
	if errors.Is(err, store.ErrNotFound) {
		return "", false, apierror.New(apierror.NotFound, "no agent is registered with this key")
	}
	if err != nil {
		return "", false, storeError("read key", err)
	}
	if !ed25519.PublicKey(it.Bytes(attrPublicKey)).Equal(key) {
		return "", false, apierror.New(apierror.NotFound, "no agent is registered with this key")
	}
	return it.Str(attrName), it.Str(attrStatus) == string(Offline), nil
}

// LookupKey returns the registered public key whose keyid is keyID (the key
// directory, and the key of owner-signed requests): 1 Get, NotFound when
// no registration holds it.
func (r *Registry) LookupKey(ctx context.Context, keyID string) (ed25519.PublicKey, error) {
	pub, _, err := r.key(ctx, keyID)
	return pub, err
}

// NameForKey returns the name key registers: 1 Get, NotFound when it
// registers none.
func (r *Registry) NameForKey(ctx context.Context, key ed25519.PublicKey) (string, error) {
	if len(key) != ed25519.PublicKeySize {
		return "", apierror.New(apierror.NotFound, "no agent is registered with this key")
	}
	pub, name, err := r.key(ctx, auth.KeyID(key))
	if err != nil {
		return "", err
	}
	if !pub.Equal(key) { // a thumbprint collision: cannot happen with SHA-256
		return "", apierror.New(apierror.NotFound, "no agent is registered with this key")
	}
	return name, nil
}

func (r *Registry) key(ctx context.Context, keyID string) (ed25519.PublicKey, string, error) {
	missing := apierror.New(apierror.NotFound, "no registered key has keyid %s", apierror.Quote(keyID))
	if !auth.ValidKeyID(keyID) {
		return nil, "", missing
	}
	it, err := r.store.Get(ctx, KeyKey(keyID))
	if errors.Is(err, store.ErrNotFound) {
		return nil, "", missing
	}
	if err != nil {
		return nil, "", storeError("read key", err)
	}
	pub := it.Bytes(attrPublicKey)
	if len(pub) != ed25519.PublicKeySize {
		return nil, "", apierror.Wrap(apierror.Internal, fmt.Errorf("registry: key item %q holds %d bytes", keyID, len(pub)), "internal error; try again later")
	}
	return ed25519.PublicKey(pub), it.Str(attrName), nil
}

// cursor is a discovery position: the partition (status) and the last
// name listed in it ("" = its start).
type cursor struct {
	S Status `json:"s"`
	N string `json:"n"`
}

const macLen = 16

func (r *Registry) fingerprint(f Filter, status string, payload []byte) []byte {
	h := hmac.New(sha256.New, r.secret)
	for _, s := range []string{f.Capability, status} {
		h.Write([]byte(strconv.Itoa(len(s)) + ":" + s))
	}
	h.Write(payload)
	return h.Sum(nil)[:macLen]
}

func (r *Registry) encodeCursor(f Filter, status string, c cursor) string {
	payload, _ := json.Marshal(c) // strings only: cannot fail
	return base64.RawURLEncoding.EncodeToString(append(payload, r.fingerprint(f, status, payload)...))
}

func (r *Registry) decodeCursor(f Filter, status string) (cursor, error) {
	bad := apierror.New(apierror.Invalid, "cursor is not one this listing returned; start again without it")
	raw, err := base64.RawURLEncoding.DecodeString(f.Cursor)
	if err != nil || len(raw) <= macLen {
		return cursor{}, bad
	}
	payload, mac := raw[:len(raw)-macLen], raw[len(raw)-macLen:]
	if !hmac.Equal(mac, r.fingerprint(f, status, payload)) {
		return cursor{}, bad
	}
	var c cursor
	if err := json.Unmarshal(payload, &c); err != nil {
		return cursor{}, bad
	}
	return c, nil
}

// Discover returns a page of agents, by name within each presence
// partition (status "any": online ones first). Cost: 1 Query on gsi1
// reading at most limit+1 items (status "any": up to 2 Queries, still at
// most limit+1 items in all).
func (r *Registry) Discover(ctx context.Context, f Filter) (Page, error) {
	if f.Capability != "" && !capShape.Match(f.Capability) {
		return Page{}, apierror.New(apierror.Invalid, "capability must be 1–64 characters of a-z, 0-9 and '-', starting with a letter or digit; got %s", apierror.Quote(f.Capability))
	}
	status := f.Status
	if status == "" {
		status = string(Online)
	}
	var parts []Status
	switch status {
	case string(Online):
		parts = []Status{Online}
	case string(Offline):
		parts = []Status{Offline}
	case "any":
		parts = []Status{Online, Offline}
	default:
		return Page{}, apierror.New(apierror.Invalid, "status must be \"online\", \"offline\" or \"any\", not %s", apierror.Quote(f.Status))
	}
	limit := f.Limit
	switch {
	case limit < 0:
		return Page{}, apierror.New(apierror.Invalid, "limit must be between 1 and %d, not %d", MaxLimit, limit)
	case limit == 0:
		limit = DefaultLimit
	case limit > MaxLimit:
		limit = MaxLimit
	}
	at, after := 0, ""
	if f.Cursor != "" {
		c, err := r.decodeCursor(f, status)
		if err != nil {
			return Page{}, err
		}
		at = -1
		for i, p := range parts {
			if p == c.S {
				at = i
			}
		}
		if at < 0 || (c.N != "" && !nameShape.Match(c.N)) {
			return Page{}, apierror.New(apierror.Invalid, "cursor is not one this listing returned; start again without it")
		}
		after = c.N
	}
	out := Page{Agents: []Agent{}}
	need := limit
	for ; at < len(parts); at++ {
		pk := listPK(parts[at])
		if f.Capability != "" {
			pk = capPK(f.Capability, parts[at])
		}
		q := store.Query{Index: store.IndexGSI1, PK: pk, Limit: need + 1}
		if after != "" {
			q.SK = store.SKGT(after)
		}
		page, err := r.store.Query(ctx, q)
		if err != nil {
			return Page{}, storeError("discover", err)
		}
		items := page.Items
		more := len(items) > need
		if more {
			items = items[:need]
		}
		for _, it := range items {
			a, err := decode(it)
			if err != nil {
				return Page{}, apierror.Wrap(apierror.Internal, err, "internal error; try again later")
			}
			out.Agents = append(out.Agents, a)
			after = a.Name
		}
		need -= len(items)
		// A page cut by the 1 MB cap (agents are a few KB, so not in
		// practice) also continues in this partition.
		if more || (page.Cursor != "" && len(page.Items) < q.Limit && len(items) > 0) {
			out.Next = r.encodeCursor(f, status, cursor{S: parts[at], N: after})
			return out, nil
		}
		after = ""
	}
	return out, nil
}

// validate checks a registration, naming the field in words.
func (r *Registry) validate(a *Agent) error {
	invalid := func(format string, args ...any) error { return apierror.New(apierror.Invalid, format, args...) }
	if !nameShape.Match(a.Name) {
		return invalid("name must be 2–63 characters of a-z, 0-9 and '-', starting with a letter or digit; got %s", apierror.Quote(a.Name))
	}
	if !utf8.ValidString(a.Description) {
		return invalid("description must be valid UTF-8")
	}
	if c, bad := ident.UnsafeRune(a.Description); bad {
		return invalid("%s", ident.UnsafeRuneError("description", c))
	}
	if n := utf8.RuneCountInString(a.Description); n > MaxDescriptionLen {
		return invalid("description must be at most %d characters, not %d", MaxDescriptionLen, n)
	}
	if err := r.validEndpoint(a.Endpoint); err != nil {
		return err
	}
	if len(a.Capabilities) == 0 || len(a.Capabilities) > MaxCapabilities {
		return invalid("capabilities must list 1 to %d capabilities, not %d", MaxCapabilities, len(a.Capabilities))
	}
	seen := make(map[string]bool, len(a.Capabilities))
	for _, c := range a.Capabilities {
		if !capShape.Match(c) {
			return invalid("each capability must be 1–64 characters of a-z, 0-9 and '-', starting with a letter or digit; got %s", apierror.Quote(c))
		}
		if seen[c] {
			return invalid("capabilities must be distinct; %s is listed twice", apierror.Quote(c))
		}
		seen[c] = true
	}
	a.Capabilities = append([]string(nil), a.Capabilities...)
	if len(a.PublicKey) != ed25519.PublicKeySize {
		return invalid("public key must be %d bytes, not %d", ed25519.PublicKeySize, len(a.PublicKey))
	}
	if err := auth.CheckPublicKey(a.PublicKey); err != nil {
		return invalid("public key must be a safe Ed25519 public key (not small-order, canonically encoded)")
	}
	a.PublicKey = append(ed25519.PublicKey(nil), a.PublicKey...)
	return nil
}

func (r *Registry) validEndpoint(e string) error {
	if len(e) > MaxEndpointLen {
		return apierror.New(apierror.Invalid, "endpoint must be at most %d characters, not %d", MaxEndpointLen, len(e))
	}
	want := "an absolute https:// URL"
	if r.insecure {
		want = "an absolute https:// or http:// URL"
	}
	if !utf8.ValidString(e) {
		return apierror.New(apierror.Invalid, "endpoint must be valid UTF-8")
	}
	if c, bad := ident.UnsafeRune(e); bad {
		return apierror.New(apierror.Invalid, "%s", ident.UnsafeRuneError("endpoint", c))
	}
	u, err := url.Parse(e)
	if err != nil || !u.IsAbs() || u.Host == "" || u.Opaque != "" {
		return apierror.New(apierror.Invalid, "endpoint must be %s; got %s", want, apierror.Quote(e))
	}
	if u.Scheme != "https" && !(r.insecure && u.Scheme == "http") {
		return apierror.New(apierror.Invalid, "endpoint must be %s; got %s", want, apierror.Quote(e))
	}
	if u.User != nil {
		return apierror.New(apierror.Invalid, "endpoint must not carry a user name or password")
	}
	return nil
}

// storeError maps a store failure: overloaded or out of time → Unavailable
// (retry); anything else → Internal, hidden.
func storeError(op string, err error) *apierror.Error {
	err = fmt.Errorf("registry: %s: %w", op, err)
	if errors.Is(err, store.ErrUnavailable) || errors.Is(err, context.DeadlineExceeded) || errors.Is(err, context.Canceled) {
		return &apierror.Error{Kind: apierror.Unavailable, RetryAfter: RetryAfter,
			Message: "the registry is busy; retry shortly", Err: err}
	}
	return apierror.Wrap(apierror.Internal, err, "internal error; try again later")
}
