package worldhttp

import (
	"context"
	"crypto/ed25519"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"net/http"
	"slices"
	"sort"
	"strings"
	"time"

	"github.com/a2awire/a2awire/shared/access"
	"github.com/a2awire/a2awire/shared/agentcard"
	"github.com/a2awire/a2awire/shared/apierror"
	"github.com/a2awire/a2awire/shared/auth"
	"github.com/a2awire/a2awire/shared/lambdahttp"
	"github.com/a2awire/a2awire/shared/store/guard"
	"github.com/a2awire/a2awire/shared/world"
)

// WorldReader reads a world's manifest; unknown is NotFound.
type WorldReader interface {
	GetWorld(ctx context.Context, world string) (world.Manifest, error)
}

// WorldWriter creates or updates a world (created reports which) and
// reads it, for the owner's key when an update omits publicKey.
type WorldWriter interface {
	WorldReader
	PutWorld(ctx context.Context, m world.Manifest, signer ed25519.PublicKey) (world.Manifest, bool, error)
}

// Joiner makes a key a member of a world, or returns its membership.
type Joiner interface {
	Join(ctx context.Context, world string, pub ed25519.PublicKey, metadata json.RawMessage) (world.Member, bool, error)
}

// manifestOut is a manifest as clients see it.
type manifestOut struct {
	WorldID     string             `json:"worldId"`
	Name        string             `json:"name"`
	Description string             `json:"description"`
	Category    string             `json:"category"`
	Actions     []world.ActionSpec `json:"actions"`
	OwnerKeyID  string             `json:"ownerKeyId"`
	OwnerAWNID  string             `json:"ownerAwnId"`
	Status      string             `json:"status"`
	// MaxMembers is null when the world has no cap.
	MaxMembers *int64 `json:"maxMembers"`
	// EventShards is how many partitions the world's events are written
	// across (1 unless its owner raised it).
	EventShards int `json:"eventShards"`
	// BatchActions: the world's actions are queued and committed in
	// batches (POST …/actions answers 202).
	BatchActions bool `json:"batchActions"`
	// BatchMessages: the world's direct messages are queued the same way
	// (POST …/messages answers 202).
	BatchMessages bool `json:"batchMessages"`
	// Members is memberCount under its first name, kept for clients
	// that read it.
	Members     int64  `json:"members"`
	MemberCount int64  `json:"memberCount"`
	CreatedAt   string `json:"createdAt"`
	UpdatedAt   string `json:"updatedAt"`
	CardURL     string `json:"cardUrl"`
}

// manifestJSON renders m; base is the network's URL its cardUrl is below
// ("" gives the path alone).
func manifestJSON(m world.Manifest, base string) manifestOut {
	actions := m.Actions
	if actions == nil {
		actions = []world.ActionSpec{}
	}
	out := manifestOut{
		WorldID: m.ID, Name: m.Name, Description: m.Description, Category: m.Category, Actions: actions,
		OwnerKeyID: m.OwnerKeyID, OwnerAWNID: m.OwnerAWNID, Status: m.Status, EventShards: max(m.EventShards, 1), BatchActions: m.BatchActions, BatchMessages: m.BatchMessages, Members: m.Members, MemberCount: m.Members,
		CreatedAt: timestamp(m.CreatedAt), UpdatedAt: timestamp(m.UpdatedAt), CardURL: cardURL(base, m.ID),
	}
	if m.MaxMembers > 0 {
		out.MaxMembers = &m.MaxMembers
	}
	return out
}

// baseOf is o's BaseURL checked, "" when unset.
func baseOf(o Options) (string, error) {
	if o.BaseURL == "" {
		return "", nil
	}
	base, err := agentcard.ParseBaseURL(o.BaseURL)
	if err != nil {
		return "", fmt.Errorf("worldhttp: %s: %w", o.Function, err)
	}
	return base, nil
}

// putBody is the body of PUT /v0/worlds/{world}.
type putBody struct {
	PublicKey   *string            `json:"publicKey"`
	Name        string             `json:"name"`
	Description string             `json:"description"`
	Category    string             `json:"category"`
	Actions     []world.ActionSpec `json:"actions"`
	// MaxMembers caps the members (absent or null: no cap).
	MaxMembers *int64 `json:"maxMembers"`
	// EventShards writes the world's events across this many partitions
	// (1–16; absent or null: 1 at creation, unchanged at an update). It
	// only grows: fewer than the world has is 409.
	EventShards *int `json:"eventShards"`
	// BatchActions queues the world's actions and commits them in batches
	// (absent: false).
	BatchActions bool `json:"batchActions"`
	// BatchMessages does the same for its direct messages.
	BatchMessages bool `json:"batchMessages"`
}

// putKey is the BodyKey of PUT /v0/worlds/{world}: the body's publicKey;
// absent, access.ErrNoBodyKey (an update by the owner may omit it). The
// body is decoded here, once: the handler's access.Decode takes the value.
func putKey(r *http.Request) (ed25519.PublicKey, error) {
	var in putBody
	if err := access.DecodeKey(r, &in, "publicKey"); err != nil {
		return nil, err
	}
	return bodyKey(in.PublicKey)
}

// bodyKey reads publicKey (standard base64 of 32 bytes); absent is
// access.ErrNoBodyKey.
func bodyKey(publicKey *string) (ed25519.PublicKey, error) {
	if publicKey == nil {
		return nil, access.ErrNoBodyKey
	}
	pub, err := auth.DecodePublicKey(*publicKey)
	if errors.Is(err, auth.ErrUnsafeKey) {
		return nil, apierror.New(apierror.Invalid, "publicKey must be a safe Ed25519 public key (not small-order, canonically encoded)")
	}
	if err != nil {
		return nil, apierror.New(apierror.Invalid, "publicKey must be the standard base64 of a 32-byte Ed25519 public key")
	}
	return pub, nil
}

// NewPut serves PUT /v0/worlds/{world}: create (201, publicKey in the body
// is the owner) or update by the owner (200; publicKey may be omitted, then
// the owner's stored key verifies the signature).
func NewPut(o Options, worlds WorldWriter) (http.Handler, error) {
	if worlds == nil {
		return nil, errors.New("worldhttp: no world service")
	}
	base, err := baseOf(o)
	if err != nil {
		return nil, err
	}
	known, _ := worlds.(knownKeys)
	updater, _ := worlds.(worldUpdater)
	ownerKey := func(ctx context.Context, params map[string]string, keyID string) (ed25519.PublicKey, error) {
		if known != nil && updater != nil && guard.Active(ctx) {
			// A key this instance verified before is its keyid's: the
			// update's own read of the manifest (beside the request's
			// guard) then decides ownership, and no read is spent here.
			if pub, ok := known.KnownKey(keyID); ok {
				return pub, nil
			}
		}
		m, err := worlds.GetWorld(ctx, params["world"])
		if apierror.KindOf(err) == apierror.NotFound {
			return nil, apierror.New(apierror.Invalid, "publicKey is required to create a world")
		}
		if err != nil {
			return nil, fmt.Errorf("worldhttp: owner key: %w", err)
		}
		if keyID != m.OwnerKeyID {
			return nil, notOwnerKey()
		}
		if known != nil {
			known.RememberKey(m.OwnerKey)
		}
		return m.OwnerKey, nil
	}
	return serve(o, ownerKey, func(w http.ResponseWriter, r *http.Request) error {
		id, ok := access.IdentityFrom(r.Context())
		if !ok {
			return errors.New("worldhttp: no identity on a signed route")
		}
		var in putBody
		if err := access.Decode(r, &in); err != nil {
			return err
		}
		want := world.Manifest{
			ID: access.Param(r, "world"), Name: in.Name, Description: in.Description, Category: in.Category, Actions: in.Actions,
			BatchActions: in.BatchActions, BatchMessages: in.BatchMessages,
		}
		if in.MaxMembers != nil {
			if *in.MaxMembers < 1 {
				return apierror.New(apierror.Invalid, "maxMembers must be between 1 and %d (or absent for no cap)", world.MaxMembersCap)
			}
			want.MaxMembers = *in.MaxMembers
		}
		if in.EventShards != nil {
			if *in.EventShards < 1 || *in.EventShards > world.MaxEventShards {
				return apierror.New(apierror.Invalid, "eventShards must be between 1 and %d (or absent)", world.MaxEventShards)
			}
			want.EventShards = *in.EventShards
		}
		var (
			m     world.Manifest
			isNew bool
			err   error
		)
		if in.PublicKey == nil && updater != nil {
			// Signed by a stored key: an update only, by the owner alone
			// (a key known to this instance is not the owner's → 401, as
			// when the owner's key is read).
			m, err = updater.UpdateWorld(r.Context(), want, id.PublicKey)
			if apierror.KindOf(err) == apierror.Forbidden {
				return notOwnerKey()
			}
		} else {
			m, isNew, err = worlds.PutWorld(r.Context(), want, id.PublicKey)
		}
		if err != nil {
			return fmt.Errorf("worldhttp: put world: %w", err)
		}
		return reply(w, created(isNew), manifestJSON(m, base))
	}, putKey, readAhead(func(*http.Request) []guard.Read {
		// Nothing named: the manifest the owner's key is read from (an
		// update without publicKey) is kept for the update's own read.
		return nil
	}))
}

// knownKeys are the keys this instance verified before
// (world.Service.KnownKey), self-certifying by their keyid.
type knownKeys interface {
	KnownKey(keyID string) (ed25519.PublicKey, bool)
	RememberKey(pub ed25519.PublicKey)
}

// worldUpdater updates an existing world only (world.Service.UpdateWorld).
type worldUpdater interface {
	UpdateWorld(ctx context.Context, m world.Manifest, signer ed25519.PublicKey) (world.Manifest, error)
}

func notOwnerKey() error {
	return apierror.New(apierror.Unauthorized, "unknown key: without publicKey only the world's owner may sign")
}

// NewGet serves GET /v0/worlds/{world} (public): the manifest and its
// member count.
func NewGet(o Options, worlds WorldReader) (http.Handler, error) {
	if worlds == nil {
		return nil, errors.New("worldhttp: no world service")
	}
	base, err := baseOf(o)
	if err != nil {
		return nil, err
	}
	return serve(o, nil, func(w http.ResponseWriter, r *http.Request) error {
		m, err := worlds.GetWorld(r.Context(), access.Param(r, "world"))
		if err != nil {
			return fmt.Errorf("worldhttp: get world: %w", err)
		}
		return reply(w, http.StatusOK, manifestJSON(m, base))
	}, nil)
}

// joinBody is the body of POST /v0/worlds/{world}/join.
type joinBody struct {
	PublicKey *string         `json:"publicKey"`
	Metadata  json.RawMessage `json:"metadata"`
}

// joinOut is a membership as join answers it, with the world's current
// players (the first page of the agents list).
type joinOut struct {
	AWNID    string    `json:"awnId"`
	Slot     int64     `json:"slot"`
	JoinedAt string    `json:"joinedAt"`
	Players  agentsOut `json:"players"`
}

// joinNoPlayers is joinOut when the players could not be read.
type joinNoPlayers struct {
	AWNID    string  `json:"awnId"`
	Slot     int64   `json:"slot"`
	JoinedAt string  `json:"joinedAt"`
	Players  *string `json:"players"`
}

// WorldLimiter admits one request of op in world whoever makes it
// (ratelimit.Limiter.AllowWorld): the join limit, which a flood of fresh
// keys cannot evade.
type WorldLimiter interface {
	AllowWorld(ctx context.Context, world string, op RateOp) error
}

// NewJoin serves POST /v0/worlds/{world}/join, signed by the key in the
// body: 201 for a new membership, 200 with the same slot when already
// joined; players is the first page of the agents list ({agents, count,
// cursor}, within what Lambda can return), or null when it could not be
// read after the membership was written. Every join request counts toward
// the world's join limit (o.Limiter, when it limits per world: 429
// RATE_LIMITED beyond it), checked before the domain reads anything, so a
// refused flood costs one conditional write a request.
func NewJoin(o Options, joiner Joiner, players MemberLister) (http.Handler, error) {
	if joiner == nil || players == nil {
		return nil, errors.New("worldhttp: no world service")
	}
	limiter, _ := o.Limiter.(WorldLimiter)
	joinKey := func(r *http.Request) (ed25519.PublicKey, error) {
		var in joinBody
		if err := access.DecodeKey(r, &in, "publicKey"); err != nil {
			return nil, err
		}
		pub, err := bodyKey(in.PublicKey)
		if errors.Is(err, access.ErrNoBodyKey) {
			return nil, apierror.New(apierror.Invalid, "publicKey is required")
		}
		return pub, err
	}
	return serve(o, nil, func(w http.ResponseWriter, r *http.Request) error {
		id, ok := access.IdentityFrom(r.Context())
		if !ok {
			return errors.New("worldhttp: no identity on a signed route")
		}
		var in joinBody
		if err := access.Decode(r, &in); err != nil {
			return err
		}
		worldID := access.Param(r, "world")
		if limiter != nil {
			if err := limiter.AllowWorld(r.Context(), worldID, OpJoin); err != nil {
				return fmt.Errorf("worldhttp: join limit: %w", err)
			}
		}
		// The players are read beside the join, not after it (a round
		// trip less): the page shows the world as it was, and the new
		// member is put into it. The join's own fields and the new row,
		// at their widest, come out of the page's budget.
		reserve := joinReserve(id.PublicKey, in.Metadata)
		var page agentsOut
		var perr error
		sent := w.Header().Clone()
		done := make(chan struct{})
		go func() {
			defer close(done)
			page, perr = agentsPage(r.Context(), players, sent, worldID, DefaultLimit, "", reserve)
		}()
		// The world checks metadata (a JSON object or null, its size, its
		// numbers): once, in the domain.
		m, isNew, err := joiner.Join(r.Context(), worldID, id.PublicKey, in.Metadata)
		<-done
		if err != nil {
			return fmt.Errorf("worldhttp: join: %w", err)
		}
		out := joinOut{AWNID: m.AWNID, Slot: m.Slot, JoinedAt: timestamp(m.JoinedAt)}
		// The membership is written: a page that could not be read (a
		// busy store) leaves players null rather than fail the join,
		// whose retry would answer 200.
		if perr != nil {
			o.logger().WarnContext(r.Context(), "join: players not read", "world", worldID, "err", perr)
			return reply(w, created(isNew), joinNoPlayers{AWNID: out.AWNID, Slot: out.Slot, JoinedAt: out.JoinedAt})
		}
		now := time.Now
		if o.Now != nil {
			now = o.Now
		}
		out.Players = withMember(page, agentJSON(world.MemberRow{Member: m, Presence: world.Presence(m, now())}), DefaultLimit)
		return reply(w, created(isNew), out)
	}, joinKey)
}

// joinReserve is what a join's answer holds besides its players page, at
// its widest: the join's own fields and the new member's row (which
// withMember may add to the page), each as the proxy response escapes it.
func joinReserve(pub ed25519.PublicKey, metadata json.RawMessage) int {
	widest := timestamp(time.Date(2999, 12, 31, 23, 59, 59, 999999999, time.UTC))
	own, _ := json.Marshal(joinOut{AWNID: auth.AWNID(pub), Slot: math.MaxInt64, JoinedAt: widest})
	name := strings.Repeat("x", 256) // wider than any registry name
	row, _ := json.Marshal(agentOut{AWNID: auth.AWNID(pub), SubjectID: &name, Slot: math.MaxInt64, JoinedAt: widest,
		Presence: world.PresenceOffline, Metadata: json.RawMessage("{}")})
	return 2*len(own) + lambdahttp.EscapedLen(row) + 2*len(metadata) + len(",")
}

// withMember is page with row in its place by awnId, when it is not
// there yet and falls within the page: a row past a page that has a
// cursor belongs to a later page. A page grown past limit gives up its
// last row, and its cursor then points before that row.
func withMember(page agentsOut, row agentOut, limit int) agentsOut {
	for _, a := range page.Agents {
		if a.AWNID == row.AWNID {
			return page
		}
	}
	i := sort.Search(len(page.Agents), func(i int) bool { return page.Agents[i].AWNID > row.AWNID })
	if page.Cursor != nil && i == len(page.Agents) {
		return page
	}
	page.Agents = slices.Insert(page.Agents, i, row)
	if len(page.Agents) > limit {
		page.Agents = page.Agents[:limit]
		last := page.Agents[limit-1].AWNID
		page.Cursor = &last
	}
	page.Count = len(page.Agents)
	return page
}
