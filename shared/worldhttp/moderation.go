package worldhttp

import (
	"bytes"
	"context"
	"crypto/ed25519"
	"errors"
	"fmt"
	"net/http"

	"github.com/a2awire/a2awire/shared/access"
	"github.com/a2awire/a2awire/shared/apierror"
	"github.com/a2awire/a2awire/shared/auth"
	"github.com/a2awire/a2awire/shared/store/guard"
	"github.com/a2awire/a2awire/shared/world"
)

// Moderator is the world's moderation by its owner (world.Service).
type Moderator interface {
	Kick(ctx context.Context, world, target string) (world.Member, error)
	Ban(ctx context.Context, world, target, reason string) (world.Ban, bool, error)
	Unban(ctx context.Context, world, target string) (world.Ban, error)
	Bans(ctx context.Context, world string, limit int, cursor string) (world.BanPage, error)
}

// owner is the auth of owner routes: the signing key is the world's owner
// (its stored key), or a member's (found within the world, so that the
// signature verifies and the member is told 403 FORBIDDEN); any other key
// is 401 UNAUTHORIZED. An unknown world is 404.
type owner struct {
	worlds  WorldReader
	members MemberKeys
}

// ownerManifest keys the manifest an owner route's key lookup read in the
// request's memo (access.Remember), so that its ownership check reads no
// more.
type ownerManifest struct{ world string }

func (a owner) key(ctx context.Context, params map[string]string, keyID string) (ed25519.PublicKey, error) {
	m, err := a.worlds.GetWorld(ctx, params["world"])
	if err != nil {
		return nil, fmt.Errorf("worldhttp: owner key: %w", err)
	}
	access.Remember(ctx, ownerManifest{params["world"]}, m)
	if keyID == m.OwnerKeyID {
		return m.OwnerKey, nil
	}
	pub, _, err := a.members.MemberKey(ctx, params["world"], keyID)
	if apierror.KindOf(err) == apierror.NotJoined {
		return nil, apierror.New(apierror.Unauthorized, "only the owner of world %s may do this; this key is not even a member", apierror.Quote(params["world"]))
	}
	if err != nil {
		return nil, fmt.Errorf("worldhttp: owner key: %w", err)
	}
	return pub, nil
}

func (a owner) owns(ctx context.Context, params map[string]string, id access.Identity) (bool, error) {
	if v, ok := access.Recall(ctx, ownerManifest{params["world"]}); ok {
		// The key lookup read it in this request: the owner's keyid
		// never changes for a world of this name while it exists.
		return id.KeyID == v.(world.Manifest).OwnerKeyID, nil
	}
	m, err := a.worlds.GetWorld(ctx, params["world"])
	if err != nil {
		return false, fmt.Errorf("worldhttp: owner: %w", err)
	}
	return id.KeyID == m.OwnerKeyID, nil
}

// serveOwner is serve for an owner route of the world in the path.
// more sets more of the route (its reads ahead: the manifest the owner's
// key is read from is kept for the handler without naming it).
func serveOwner(o Options, worlds WorldReader, f handlerFunc, more ...func(*access.Route)) (http.Handler, error) {
	if worlds == nil {
		return nil, errors.New("worldhttp: no world service")
	}
	if err := needMembers(o); err != nil {
		return nil, err
	}
	a := owner{worlds: worlds, members: o.Members}
	// Armed with nothing named, the manifest the key lookup reads is
	// kept for the handler (its change reads it again otherwise).
	keep := readAhead(func(*http.Request) []guard.Read { return nil })
	return serve(o, a.key, f, nil, append([]func(*access.Route){keep, func(r *access.Route) { r.Owns = a.owns }}, more...)...)
}

// targetReads reads ahead what reads(world, awnId in the path) names.
func targetReads(reads func(world, target string) []guard.Read) func(*access.Route) {
	return readAhead(func(r *http.Request) []guard.Read { return reads(access.Param(r, "world"), access.Param(r, "awnId")) })
}

// target reads the awnId in the path; malformed → 404 (no such member or
// ban can exist).
func target(r *http.Request) (string, error) {
	id := access.Param(r, "awnId")
	if !world.ValidAWNID(id) {
		return "", apierror.New(apierror.NotFound, "%s is not an awnId (aw:sha256: and 64 lowercase hex digits)", apierror.Quote(id))
	}
	return id, nil
}

// memberOut is a membership as the owner routes answer it.
type memberOut struct {
	AWNID     string  `json:"awnId"`
	SubjectID *string `json:"subjectId"`
	Slot      int64   `json:"slot"`
	JoinedAt  string  `json:"joinedAt"`
}

// banOut is a ban as clients see it.
type banOut struct {
	AWNID    string `json:"awnId"`
	Reason   string `json:"reason,omitempty"`
	BannedAt string `json:"bannedAt"`
}

func banJSON(b world.Ban) banOut {
	return banOut{AWNID: b.AWNID, Reason: b.Reason, BannedAt: timestamp(b.BannedAt)}
}

func subject(s string) *string {
	if s == "" {
		return nil
	}
	return &s
}

// NewKick serves POST /v0/worlds/{world}/members/{awnId}/kick (owner): the
// membership ends as a leave does and agent.kicked is announced; 200 with
// the membership that ended; no such member → 404.
func NewKick(o Options, worlds WorldReader, mod Moderator) (http.Handler, error) {
	if mod == nil {
		return nil, errors.New("worldhttp: no moderation")
	}
	return serveOwner(o, worlds, func(w http.ResponseWriter, r *http.Request) error {
		id, err := target(r)
		if err != nil {
			return err
		}
		if err := emptyBody(r); err != nil {
			return err
		}
		m, err := mod.Kick(r.Context(), access.Param(r, "world"), id)
		if err != nil {
			return fmt.Errorf("worldhttp: kick: %w", err)
		}
		return reply(w, http.StatusOK, memberOut{AWNID: m.AWNID, SubjectID: subject(m.SubjectID), Slot: m.Slot, JoinedAt: timestamp(m.JoinedAt)})
	}, targetReads(world.KickReads))
}

// NewBan serves PUT /v0/worlds/{world}/bans/{awnId} (owner), body {} or
// {"reason"}: 201 with the ban, 200 with the ban as it was when the key
// was banned already. A member is kicked in the same write.
func NewBan(o Options, worlds WorldReader, mod Moderator) (http.Handler, error) {
	if mod == nil {
		return nil, errors.New("worldhttp: no moderation")
	}
	return serveOwner(o, worlds, func(w http.ResponseWriter, r *http.Request) error {
		id, err := target(r)
		if err != nil {
			return err
		}
		var in struct {
			Reason string `json:"reason"`
		}
		if len(bytes.TrimSpace(access.Body(r))) > 0 {
			if err := access.Decode(r, &in); err != nil {
				return err
			}
		}
		b, isNew, err := mod.Ban(r.Context(), access.Param(r, "world"), id, in.Reason)
		if err != nil {
			return fmt.Errorf("worldhttp: ban: %w", err)
		}
		return reply(w, created(isNew), banJSON(b))
	}, targetReads(world.BanReads))
}

// NewUnban serves DELETE /v0/worlds/{world}/bans/{awnId} (owner): 200 with
// the ban lifted; not banned → 404.
func NewUnban(o Options, worlds WorldReader, mod Moderator) (http.Handler, error) {
	if mod == nil {
		return nil, errors.New("worldhttp: no moderation")
	}
	return serveOwner(o, worlds, func(w http.ResponseWriter, r *http.Request) error {
		id, err := target(r)
		if err != nil {
			return err
		}
		b, err := mod.Unban(r.Context(), access.Param(r, "world"), id)
		if err != nil {
			return fmt.Errorf("worldhttp: unban: %w", err)
		}
		return reply(w, http.StatusOK, banJSON(b))
	}, targetReads(world.UnbanReads))
}

// NewBans serves GET /v0/worlds/{world}/bans?limit=&cursor= (owner):
// {bans: [{awnId, reason?, bannedAt}], count, cursor}, by awnId. A page is
// at most 100 bans of at most ~3.6 KB escaped each (a 512-character reason
// of the widest characters): well under the 6 MB a Lambda can answer.
func NewBans(o Options, worlds WorldReader, mod Moderator) (http.Handler, error) {
	if mod == nil {
		return nil, errors.New("worldhttp: no moderation")
	}
	return serveOwner(o, worlds, func(w http.ResponseWriter, r *http.Request) error {
		q := newQuery(r.URL.RawQuery)
		limit := q.intIn("limit", 1, MaxLimit, DefaultLimit)
		cursor, _ := q.get("cursor")
		if q.err != nil {
			return q.err
		}
		page, err := mod.Bans(r.Context(), access.Param(r, "world"), limit, cursor)
		if err != nil {
			return fmt.Errorf("worldhttp: bans: %w", err)
		}
		out := make([]banOut, 0, len(page.Bans))
		for _, b := range page.Bans {
			out = append(out, banJSON(b))
		}
		return reply(w, http.StatusOK, map[string]any{"bans": out, "count": len(out), "cursor": nullable(page.Cursor)})
	})
}

// nullable is s, or JSON null for "" (a last page's cursor).
func nullable(s string) *string {
	if s == "" {
		return nil
	}
	return &s
}

// AgentViewer is the agent's own view (world.Service).
type AgentViewer interface {
	AgentWorlds(ctx context.Context, awnID string, limit int, cursor string) (world.AgentWorldPage, error)
	AgentKey(ctx context.Context, awnID, keyID string) (ed25519.PublicKey, error)
}

// RegisteredKeys finds a registered key by keyid (registry.Registry).
type RegisteredKeys interface {
	LookupKey(ctx context.Context, keyID string) (ed25519.PublicKey, error)
}

// hookOut is a member's webhook health in the agent's view.
type hookOut struct {
	URL           string  `json:"url"`
	Enabled       bool    `json:"enabled"`
	Healthy       bool    `json:"healthy"`
	Delivered     int64   `json:"delivered"`
	Failed        int64   `json:"failed"`
	LastError     string  `json:"lastError,omitempty"`
	LastSuccessAt *string `json:"lastSuccessAt"`
	LastErrorAt   *string `json:"lastErrorAt"`
}

// agentWorldOut is one row of the agent's view.
type agentWorldOut struct {
	WorldID  string   `json:"worldId"`
	Role     string   `json:"role"`
	Slot     *int64   `json:"slot,omitempty"`
	JoinedAt string   `json:"joinedAt,omitempty"`
	Presence string   `json:"presence,omitempty"`
	Webhook  *hookOut `json:"webhook,omitempty"`
	Name     string   `json:"name,omitempty"`
	Members  *int64   `json:"members,omitempty"`
}

func optTime(h world.Hook, ok bool) *string {
	t := h.LastErrorAt
	if ok {
		t = h.LastSuccessAt
	}
	if t.IsZero() {
		return nil
	}
	s := timestamp(t)
	return &s
}

func agentWorldJSON(r world.AgentWorld) agentWorldOut {
	out := agentWorldOut{WorldID: r.World, Role: r.Role}
	switch r.Role {
	case world.RoleMember:
		slot := r.Member.Slot
		out.Slot, out.JoinedAt, out.Presence = &slot, timestamp(r.Member.JoinedAt), r.Presence
		if r.Hook.Set {
			out.Webhook = &hookOut{URL: r.Hook.URL, Enabled: r.Hook.Enabled, Healthy: world.Answered(r.Member, r.Hook),
				Delivered: r.Hook.Delivered, Failed: r.Hook.Failed, LastError: r.Hook.LastError,
				LastSuccessAt: optTime(r.Hook, true), LastErrorAt: optTime(r.Hook, false)}
		}
	case world.RoleOwner:
		n := r.Manifest.Members
		out.Name, out.Members = r.Manifest.Name, &n
	}
	return out
}

// NewAgentWorlds serves GET /v0/agents/{awnId}/worlds?limit=&cursor=,
// signed by that agent: {awnId, worlds: [{worldId, role: "member"|"owner",
// …}], count, cursor}. Its key is found in its own index of worlds, else in
// the registry; a key that has joined, owns and registers nothing is 401
// (there is nothing to show). Another agent's view is 403. A page is at
// most 100 rows of at most ~12 KB escaped (an owned world's 100-character
// name; a webhook's 2 KB URL and 512-character error): far under 6 MB.
func NewAgentWorlds(o Options, viewer AgentViewer, registered RegisteredKeys) (http.Handler, error) {
	if viewer == nil {
		return nil, errors.New("worldhttp: no world service")
	}
	keys := func(ctx context.Context, params map[string]string, keyID string) (ed25519.PublicKey, error) {
		awnID := params["awnId"]
		pub, err := viewer.AgentKey(ctx, awnID, keyID)
		if err == nil {
			return pub, nil
		}
		if apierror.KindOf(err) != apierror.NotFound {
			return nil, err
		}
		if registered != nil {
			pub, err := registered.LookupKey(ctx, keyID)
			if err == nil && auth.AWNID(pub) == awnID {
				return pub, nil
			}
			if err != nil && apierror.KindOf(err) != apierror.NotFound {
				return nil, err
			}
		}
		return nil, fmt.Errorf("worldhttp: agent key: %w", auth.ErrUnknownKey)
	}
	return serve(o, keys, func(w http.ResponseWriter, r *http.Request) error {
		id, ok := access.IdentityFrom(r.Context())
		if !ok {
			return errors.New("worldhttp: no identity on a signed route")
		}
		awnID := access.Param(r, "awnId")
		if id.AWNID != awnID {
			return apierror.New(apierror.Forbidden, "an agent's worlds are shown to that agent only")
		}
		q := newQuery(r.URL.RawQuery)
		limit := q.intIn("limit", 1, MaxLimit, DefaultLimit)
		cursor, _ := q.get("cursor")
		if q.err != nil {
			return q.err
		}
		page, err := viewer.AgentWorlds(r.Context(), awnID, limit, cursor)
		if err != nil {
			return fmt.Errorf("worldhttp: agent worlds: %w", err)
		}
		out := make([]agentWorldOut, 0, len(page.Worlds))
		for _, row := range page.Worlds {
			out = append(out, agentWorldJSON(row))
		}
		return reply(w, http.StatusOK, map[string]any{"awnId": awnID, "worlds": out, "count": len(out), "cursor": nullable(page.Cursor)})
	}, nil, readAhead(func(r *http.Request) []guard.Read {
		// The page as the handler will ask for it (a bad limit or
		// cursor names nothing: the handler refuses it).
		q := newQuery(r.URL.RawQuery)
		limit := q.intIn("limit", 1, MaxLimit, DefaultLimit)
		cursor, _ := q.get("cursor")
		if q.err != nil {
			return nil
		}
		return world.AgentWorldsReads(access.Param(r, "awnId"), limit, cursor)
	}))
}
