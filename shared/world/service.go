package world

import (
	"bytes"
	"context"
	"crypto/ed25519"
	"encoding/json"
	"errors"
	"fmt"
	"time"
	"unicode/utf8"

	"github.com/a2awire/a2awire/shared/apierror"
	"github.com/a2awire/a2awire/shared/auth"
	"github.com/a2awire/a2awire/shared/ident"
	"github.com/a2awire/a2awire/shared/protocol"
	"github.com/a2awire/a2awire/shared/store"
)

// Limits of manifests, joins, actions and polls.
const (
	MaxNameLen              = 100 // characters
	MaxDescriptionLen       = 1024
	MaxCategoryLen          = 64
	MaxActions              = 64
	MaxActionDescriptionLen = 512
	// MaxMetadataBytes bounds the metadata an agent passes at join.
	MaxMetadataBytes = 4 << 10
	// MaxMembersCap is the largest maxMembers a manifest may set.
	MaxMembersCap = 1_000_000
	// MaxParamsBytes bounds the params of one action.
	MaxParamsBytes = 64 << 10

	DefaultEventLimit = 50
	MaxEventLimit     = 100
	// MaxWait is the longest long poll; a Lambda behind API Gateway has
	// 30 s, so 20 s leaves room for the last query and the response.
	MaxWait = 20 * time.Second
	// PollInterval is the pause between two checks of a long poll: at
	// most ~4 Query pairs a second per waiting agent.
	PollInterval = 250 * time.Millisecond
	// ReachableWithin is how recently a member must have polled events to
	// count as reachable (and online).
	ReachableWithin = 30 * time.Second
	// deadlineMargin is the time a long poll leaves before its context's
	// deadline, so a Lambda answers before it is killed.
	deadlineMargin = time.Second
)

// Shapes of ids, the network's one rule for each (package ident); the
// tests hold each to its expression.
var (
	// worldIDShape: ^[a-z0-9][a-z0-9-]{0,62}$.
	worldIDShape = ident.WorldID
	// actionNameShape: ^[a-z0-9][a-z0-9._-]{0,63}$.
	actionNameShape = ident.ActionName
)

// Attributes of manifest and member items (event attributes are in event.go).
const (
	attrID          = "id"
	attrName        = "name"
	attrDescription = "description"
	attrCategory    = "category"
	attrActions     = "actions"
	attrOwnerKey    = "ownerKey"
	attrOwnerKeyID  = "ownerKeyId"
	// attrMembers is the member count; attrSlots the slot counter (the
	// last slot handed out). Both change by UpdateItem ADD only.
	attrMembers   = "members"
	attrSlots     = "slots"
	attrUpdatedAt = "updatedAt"
	// attrEventShards is the manifest's copy of the head's shards (what
	// the world shows); the head's is the one readers and writers use.
	attrEventShards = "eventShards"
	// attrBatchActions is Manifest.BatchActions (absent: false).
	attrBatchActions = "batchActions"
	// attrBatchMessages is Manifest.BatchMessages (absent: false).
	attrBatchMessages = "batchMessages"

	attrAWNID      = "awnId"
	attrKeyID      = "keyId"
	attrPublicKey  = "publicKey"
	attrSlot       = "slot"
	attrSubjectID  = "subjectId"
	attrMetadata   = "metadata"
	attrJoinedAt   = "joinedAt"
	attrLastPollAt = "lastPollAt"
)

// Subjects looks up the registry name bound to a public key: a joining
// agent's subjectId. *registry.Registry satisfies it. An error of kind
// NotFound means the key registers no name.
type Subjects interface {
	NameForKey(ctx context.Context, key ed25519.PublicKey) (string, error)
}

// Service is the world domain over a store. It holds no state of the
// domain: IDs orders ids, and its Log batches the process's commits and
// remembers how far ahead of this clock the event heads run; one Service
// serves any number of concurrent requests.
type Service struct {
	store    store.Store
	now      func() time.Time
	ids      *IDs
	subjects Subjects
	// actionQueue takes the actions of worlds that batch them (queued.go);
	// nil: every action commits at once.
	actionQueue ActionQueue
	// queuedMessage makes a queued direct message's event (package inbox's
	// Inbox.QueuedEvent); nil: queued messages cannot commit here.
	queuedMessage func(QueuedAction, time.Time) (Event, error)
	log           *Log
	wait          WaitClock
	// agentParts names other packages' per-agent partitions the deleter
	// empties (WithAgentPartitions).
	agentParts PartitionsOf
	// keys are the member keys this instance has verified (MemberKey):
	// self-certifying, so a hit needs no read, only the membership
	// check the request's guard carries.
	keys *auth.KeyCache
}

// WaitClock is the clock a long poll waits on: the real one by default
// (context deadlines run on it too), a fake one in tests.
type WaitClock interface {
	Now() time.Time
	// After returns a channel that receives once d has passed.
	After(d time.Duration) <-chan time.Time
}

type realClock struct{}

func (realClock) Now() time.Time                         { return time.Now() }
func (realClock) After(d time.Duration) <-chan time.Time { return time.After(d) }

// Option configures a Service.
type Option func(*Service)

// WithClock replaces time.Now for every timestamp the service writes or
// compares (createdAt, joinedAt, lastPollAt, expiry, presence, event ids).
// Long-poll waiting runs on the wait clock (WithWaitClock).
func WithClock(now func() time.Time) Option {
	return func(s *Service) {
		if now != nil {
			s.now = now
		}
	}
}

// WithIDs sets the ULID source (one per process keeps its ids ordered).
func WithIDs(ids *IDs) Option {
	return func(s *Service) {
		if ids != nil {
			s.ids = ids
		}
	}
}

// WithWaitClock replaces the real clock a long poll waits on; a context
// deadline is still measured on the real one and converted once.
func WithWaitClock(c WaitClock) Option {
	return func(s *Service) {
		if c != nil {
			s.wait = c
		}
	}
}

// WithSubjects sets the registry lookup of subjectIds; without it every
// member's subjectId is null.
func WithSubjects(sub Subjects) Option { return func(s *Service) { s.subjects = sub } }

// New returns a Service over st.
func New(st store.Store, opts ...Option) *Service {
	if st == nil {
		panic("world: nil store")
	}
	s := &Service{store: st, now: time.Now, ids: NewIDs(), wait: realClock{}, keys: auth.NewKeyCache(0)}
	for _, o := range opts {
		o(s)
	}
	s.log = NewLog(st, s.ids, s.now)
	return s
}

func invalid(format string, args ...any) error {
	return apierror.New(apierror.Invalid, format, args...)
}

func internal(err error) error {
	return apierror.Wrap(apierror.Internal, err, "internal error; try again later")
}

func worldNotFound(world string) error {
	return apierror.New(apierror.NotFound, "no world is named %s", apierror.Quote(world))
}

// validateManifest checks m, naming the field in words, and fills the
// default name.
func validateManifest(m *Manifest) error {
	if !worldIDShape.Match(m.ID) {
		return invalid("world id must be 1–63 characters of a-z, 0-9 and '-', starting with a letter or digit; got %s", apierror.Quote(m.ID))
	}
	if m.Name == "" {
		m.Name = m.ID
	}
	for _, f := range []struct {
		field, v string
		max      int
	}{{"name", m.Name, MaxNameLen}, {"description", m.Description, MaxDescriptionLen}, {"category", m.Category, MaxCategoryLen}} {
		if !utf8.ValidString(f.v) {
			return invalid("%s must be valid UTF-8", f.field)
		}
		if n := utf8.RuneCountInString(f.v); n > f.max {
			return invalid("%s must be at most %d characters, not %d", f.field, f.max, n)
		}
		if c, bad := ident.UnsafeRune(f.v); bad {
			return invalid("%s", ident.UnsafeRuneError(f.field, c))
		}
	}
	if m.EventShards < 0 || m.EventShards > MaxEventShards {
		return invalid("eventShards must be between 1 and %d (or absent), not %d", MaxEventShards, m.EventShards)
	}
	if m.MaxMembers < 0 || m.MaxMembers > MaxMembersCap {
		return invalid("maxMembers must be between 1 and %d (or absent for no cap), not %d", MaxMembersCap, m.MaxMembers)
	}
	if len(m.Actions) > MaxActions {
		return invalid("actions must list at most %d actions, not %d", MaxActions, len(m.Actions))
	}
	seen := make(map[string]bool, len(m.Actions))
	for _, a := range m.Actions {
		if !actionNameShape.Match(a.Name) {
			return invalid("each action name must be 1–64 characters of a-z, 0-9, '.', '_' and '-', starting with a letter or digit; got %s", apierror.Quote(a.Name))
		}
		if seen[a.Name] {
			return invalid("action names must be distinct; %s is listed twice", apierror.Quote(a.Name))
		}
		seen[a.Name] = true
		if !utf8.ValidString(a.Description) {
			return invalid("the description of action %s must be valid UTF-8", apierror.Quote(a.Name))
		}
		if n := utf8.RuneCountInString(a.Description); n > MaxActionDescriptionLen {
			return invalid("the description of action %s must be at most %d characters, not %d", apierror.Quote(a.Name), MaxActionDescriptionLen, n)
		}
		if c, bad := ident.UnsafeRune(a.Description); bad {
			return invalid("%s", ident.UnsafeRuneError("the description of action "+apierror.Quote(a.Name), c))
		}
	}
	m.Actions = append([]ActionSpec{}, m.Actions...)
	return nil
}

func encodeActions(as []ActionSpec) string {
	raw, _ := json.Marshal(as) // strings only: cannot fail
	return string(raw)
}

func decodeManifest(it store.Item) (Manifest, error) {
	m := Manifest{
		ID:          it.Str(attrID),
		Name:        it.Str(attrName),
		Description: it.Str(attrDescription),
		Category:    it.Str(attrCategory),
		OwnerKey:    ed25519.PublicKey(it.Bytes(attrOwnerKey)),
		OwnerKeyID:  it.Str(attrOwnerKeyID),
	}
	if it.Str(AttrType) != TypeWorld || m.ID == "" || len(m.OwnerKey) != ed25519.PublicKeySize {
		return Manifest{}, fmt.Errorf("world: item %s is not a manifest", it.Key())
	}
	if err := json.Unmarshal([]byte(it.Str(attrActions)), &m.Actions); err != nil {
		return Manifest{}, fmt.Errorf("world: manifest %s actions: %w", it.Key(), err)
	}
	if m.Actions == nil {
		m.Actions = []ActionSpec{}
	}
	var err error
	if m.Members, err = it.Int(attrMembers); err != nil {
		return Manifest{}, fmt.Errorf("world: manifest %s: %w", it.Key(), err)
	}
	created, err := it.Int(attrCreatedAt)
	if err != nil {
		return Manifest{}, fmt.Errorf("world: manifest %s: %w", it.Key(), err)
	}
	updated, err := it.Int(attrUpdatedAt)
	if err != nil {
		return Manifest{}, fmt.Errorf("world: manifest %s: %w", it.Key(), err)
	}
	m.CreatedAt, m.UpdatedAt = time.Unix(0, created).UTC(), time.Unix(0, updated).UTC()
	m.OwnerAWNID, m.Status = auth.AWNID(m.OwnerKey), orOpen(it.Str(attrStatus))
	if _, ok := it[attrMaxMember]; ok {
		if m.MaxMembers, err = it.Int(attrMaxMember); err != nil {
			return Manifest{}, fmt.Errorf("world: manifest %s: %w", it.Key(), err)
		}
	}
	m.BatchActions = it.BoolAttr(attrBatchActions)
	m.BatchMessages = it.BoolAttr(attrBatchMessages)
	m.EventShards = 1
	if _, ok := it[attrEventShards]; ok {
		n, err := it.Int(attrEventShards)
		if err != nil {
			return Manifest{}, fmt.Errorf("world: manifest %s: %w", it.Key(), err)
		}
		m.EventShards = int(n)
	}
	return m, nil
}

// PutWorld creates world m.ID owned by signer (created=true, 201) or updates
// it when signer is its owner (false, 200); another key → Forbidden. A
// world whose deletion is under way → Conflict (the name is free once the
// deletion finishes). Validation → Invalid naming the field. Cost: 1
// GetItem, then 1 TransactWriteItems: create puts the manifest and its
// listing items and checks the deletion marker is absent; update sets the
// manifest's fields (the member and slot counters and the status are left
// alone) and rewrites its listing items, conditioned on the listing
// version it read (a racing refresh of the count makes it read again).
func (s *Service) PutWorld(ctx context.Context, m Manifest, signer ed25519.PublicKey) (Manifest, bool, error) {
	return s.putWorld(ctx, m, signer, true)
}

// UpdateWorld is PutWorld for an existing world only: a world that does
// not exist is Invalid ("publicKey is required to create a world"), as
// an owner's update without publicKey answers.
func (s *Service) UpdateWorld(ctx context.Context, m Manifest, signer ed25519.PublicKey) (Manifest, error) {
	out, _, err := s.putWorld(ctx, m, signer, false)
	return out, err
}

// KnownKey returns the key of keyID when this instance has verified it
// before (a member's, or a world owner's): a keyid is its key's
// thumbprint, so the key is right, and nothing more is known of it.
func (s *Service) KnownKey(keyID string) (ed25519.PublicKey, bool) { return s.keys.Get(keyID) }

// RememberKey keeps pub as a key this instance verified (KnownKey).
func (s *Service) RememberKey(pub ed25519.PublicKey) { s.keys.Put(pub) }

func (s *Service) putWorld(ctx context.Context, m Manifest, signer ed25519.PublicKey, create bool) (Manifest, bool, error) {
	if err := validateManifest(&m); err != nil {
		return Manifest{}, false, err
	}
	if len(signer) != ed25519.PublicKeySize {
		return Manifest{}, false, invalid("publicKey must be %d bytes, not %d", ed25519.PublicKeySize, len(signer))
	}
	if err := auth.CheckPublicKey(signer); err != nil {
		return Manifest{}, false, invalid("publicKey must be a safe Ed25519 public key (not small-order, canonically encoded)")
	}
	keyID := auth.KeyID(signer)
	forbidden := apierror.New(apierror.Forbidden, "world %s belongs to another key; only its owner may change it", apierror.Quote(m.ID))
	// Rounds: a create that loses a race to another create reads the
	// winner and updates (same key) or is refused (another key); an update
	// that loses to a refresh of the listing reads again.
	for range 3 {
		cur, err := s.store.Get(ctx, ManifestKey(m.ID))
		switch {
		case errors.Is(err, store.ErrNotFound) && !create:
			return Manifest{}, false, invalid("publicKey is required to create a world")
		case errors.Is(err, store.ErrNotFound):
			now := s.now().UTC()
			it := store.Item{
				AttrType:       store.S(TypeWorld),
				attrID:         store.S(m.ID),
				attrName:       store.S(m.Name),
				attrActions:    store.S(encodeActions(m.Actions)),
				attrOwnerKey:   store.B(signer),
				attrOwnerKeyID: store.S(keyID),
				attrStatus:     store.S(StatusOpen),
				attrMembers:    store.N(0),
				attrSlots:      store.N(0),
				attrCreatedAt:  store.N(now.UnixNano()),
				attrUpdatedAt:  store.N(now.UnixNano()),
			}
			if m.Description != "" {
				it[attrDescription] = store.S(m.Description)
			}
			if m.Category != "" {
				it[attrCategory] = store.S(m.Category)
			}
			if m.MaxMembers > 0 {
				it[attrMaxMember] = store.N(m.MaxMembers)
			}
			m.EventShards = max(m.EventShards, 1)
			if m.EventShards > 1 {
				it[attrEventShards] = store.N(int64(m.EventShards))
			}
			if m.BatchActions {
				it[attrBatchActions] = store.Bool(true)
			}
			if m.BatchMessages {
				it[attrBatchMessages] = store.Bool(true)
			}
			m.OwnerKey, m.OwnerKeyID = append(ed25519.PublicKey(nil), signer...), keyID
			m.OwnerAWNID, m.Status = auth.AWNID(signer), StatusOpen
			m.Members, m.CreatedAt, m.UpdatedAt = 0, now, now
			acts := append([]store.Action{
				store.Put(ManifestKey(m.ID), it).When(store.ItemAbsent()),
				store.Check(DeletionKey(m.ID), store.ItemAbsent()),
			}, listingPuts(m, 0)...)
			// The owner's index item (the agent's own view) last, so the
			// deletion check stays action 1.
			acts = append(acts, ownedIndexPut(m.ID, signer, now))
			if m.EventShards > 1 {
				acts = append(acts, RaiseShards(m.ID, m.EventShards))
			}
			_, err := s.store.Write(ctx, acts...)
			var cf *store.ConditionFailedError
			if errors.As(err, &cf) && cf.Action == 1 {
				return Manifest{}, false, deleting(m.ID)
			}
			if errors.Is(err, store.ErrConditionFailed) {
				continue
			}
			if err != nil {
				return Manifest{}, false, apierror.FromStore("create world", err)
			}
			s.keys.Put(signer) // the owner's next update need not read its key
			s.log.shards.learn(m.ID, m.EventShards)
			return m, true, nil
		case err != nil:
			return Manifest{}, false, apierror.FromStore("read world", err)
		}
		if cur.Str(attrOwnerKeyID) != keyID {
			return Manifest{}, false, forbidden
		}
		old, err := decodeManifest(cur)
		if err != nil {
			return Manifest{}, false, internal(err)
		}
		ver, _ := cur.Int(attrListVer) // absent: 0
		shards := old.EventShards
		switch {
		case m.EventShards == 0:
			// absent: as it is
		case m.EventShards < old.EventShards:
			return Manifest{}, false, apierror.New(apierror.Conflict,
				"eventShards can only grow: world %s writes its events across %d partitions, not fewer", apierror.Quote(m.ID), old.EventShards)
		default:
			shards = m.EventShards
		}
		now := s.now().UTC()
		up := store.Update(ManifestKey(m.ID)).
			SetAttr(attrName, store.S(m.Name)).
			SetAttr(attrActions, store.S(encodeActions(m.Actions))).
			SetAttr(attrUpdatedAt, store.N(now.UnixNano()))
		var drop []string
		for _, f := range []struct{ attr, v string }{{attrDescription, m.Description}, {attrCategory, m.Category}} {
			if f.v != "" {
				up = up.SetAttr(f.attr, store.S(f.v))
			} else {
				drop = append(drop, f.attr)
			}
		}
		if m.MaxMembers > 0 {
			up = up.SetAttr(attrMaxMember, store.N(m.MaxMembers))
		} else {
			drop = append(drop, attrMaxMember)
		}
		if m.BatchActions {
			up = up.SetAttr(attrBatchActions, store.Bool(true))
		} else {
			drop = append(drop, attrBatchActions)
		}
		if m.BatchMessages {
			up = up.SetAttr(attrBatchMessages, store.Bool(true))
		} else {
			drop = append(drop, attrBatchMessages)
		}
		if len(drop) > 0 {
			up = up.Del(drop...)
		}
		listed := store.Eq(attrListVer, store.N(ver))
		if _, ok := cur[attrListVer]; !ok {
			listed = store.NotExists(attrListVer)
		}
		if shards > old.EventShards {
			up = up.SetAttr(attrEventShards, store.N(int64(shards)))
		}
		out := old
		out.Name, out.Description, out.Category, out.Actions, out.MaxMembers, out.UpdatedAt = m.Name, m.Description, m.Category, m.Actions, m.MaxMembers, now
		out.EventShards, out.BatchActions, out.BatchMessages = shards, m.BatchActions, m.BatchMessages
		acts := append([]store.Action{up.When(store.And(store.Eq(attrOwnerKeyID, store.S(keyID)), listed))}, listingPuts(out, ver)...)
		if shards > old.EventShards {
			// The head, with the manifest: the next commit of the world
			// writes across the new shards.
			acts = append(acts, RaiseShards(m.ID, shards))
		}
		if out.Category == "" {
			for _, l := range listingSlots {
				if l.category {
					acts = append(acts, store.Delete(l.key(m.ID)))
				}
			}
		}
		_, err = s.store.Write(ctx, acts...)
		if errors.Is(err, store.ErrConditionFailed) {
			continue // another owner key (read again: forbidden) or a refresh came first
		}
		if err != nil {
			return Manifest{}, false, apierror.FromStore("update world", err)
		}
		s.log.shards.learn(m.ID, shards)
		return out, false, nil
	}
	return Manifest{}, false, &apierror.Error{Kind: apierror.Unavailable, RetryAfter: apierror.StoreRetryAfter,
		Message: "the world is being changed by concurrent requests; retry"}
}

// GetWorld returns the manifest with its member count (1 GetItem);
// NotFound when absent.
func (s *Service) GetWorld(ctx context.Context, world string) (Manifest, error) {
	if !worldIDShape.Match(world) {
		return Manifest{}, worldNotFound(world)
	}
	it, err := s.store.Get(ctx, ManifestKey(world))
	if errors.Is(err, store.ErrNotFound) {
		return Manifest{}, worldNotFound(world)
	}
	if err != nil {
		return Manifest{}, apierror.FromStore("read world", err)
	}
	m, err := decodeManifest(it)
	if err != nil {
		return Manifest{}, internal(err)
	}
	return m, nil
}

// jsonObject checks that raw is nil, JSON null, or a JSON object of at most
// max bytes, and returns it compacted (nil for nil or null). The size is
// that of the compact text as the client wrote it: json.Compact drops only
// the whitespace between tokens and escapes nothing, so "<" counts one byte
// and "\u003c" six, whichever was sent. A number beyond a 64-bit float's
// range is refused by name: the world forwards the object to agents, and
// encoding/json, JavaScript and most other readers cannot hold it.
func jsonObject(field string, raw json.RawMessage, max int) (json.RawMessage, error) {
	if raw == nil {
		return nil, nil
	}
	var b bytes.Buffer
	if err := json.Compact(&b, raw); err != nil {
		return nil, invalid("%s must be a JSON object", field)
	}
	c := b.Bytes()
	switch {
	case string(c) == "null":
		return nil, nil
	case len(c) == 0 || c[0] != '{':
		return nil, invalid("%s must be a JSON object", field)
	case len(c) > max:
		return nil, invalid("%s must be at most %d bytes of JSON, not %d", field, max, len(c))
	}
	if path, ok := protocol.NumberOutOfRange(c); ok {
		return nil, invalid("%s is a number beyond the range of a 64-bit float (about ±1.8e308); send it as a string",
			apierror.Quote(field+path))
	}
	return json.RawMessage(c), nil
}
