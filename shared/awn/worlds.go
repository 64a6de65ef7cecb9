package awn

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"strconv"
	"strings"

	"github.com/a2awire/a2awire/shared/auth"
	"github.com/a2awire/a2awire/shared/world"
)

// WorldPath is the path of world id, or of a route under it
// (WorldPath("lobby", "events") is "/v0/worlds/lobby/events").
func WorldPath(id string, sub ...string) string {
	p := "/v0/worlds/" + url.PathEscape(id)
	for _, s := range sub {
		p += "/" + s
	}
	return p
}

// ValidWorld reports whether id has a world name's shape (1 to 63
// lowercase letters, digits and '-', not starting with '-'), as the server
// checks it: a typo need not cost a round trip.
func ValidWorld(id string) bool { return world.ValidID(id) }

// AWNIDPrefix starts every awnId.
const AWNIDPrefix = auth.AWNIDPrefix

// ValidAgentID reports whether id has an awnId's shape: "aw:sha256:" and
// 64 lowercase hex digits.
func ValidAgentID(id string) bool { return world.ValidAWNID(id) }

// ActionSpec is one action of a world's manifest: its name and what it does.
type ActionSpec = world.ActionSpec

// WorldSpec is a world as its owner describes it to CreateWorld.
type WorldSpec struct {
	// Name, Description and Category are shown in discovery.
	Name, Description, Category string
	// Actions are the actions members may submit; none means any.
	Actions []world.ActionSpec
	// EventShards writes the world's events across this many partitions
	// (1–16, only growing; 0 sends none: 1 at creation, unchanged at an
	// update). For a world expecting more than about 500 events a second.
	EventShards int
	// BatchActions queues the world's actions and commits them many to a
	// transaction (Act answers 202): for a world expecting more than a
	// few hundred actions a second. Every create or update sets it.
	BatchActions bool
	// BatchMessages queues the world's direct messages the same way (Send
	// answers 202, Message.Queued): for an inbox expecting more than a few
	// hundred messages a second, with EventShards. Every create or update
	// sets it.
	BatchMessages bool
}

// Manifest is a world's public document; its fields are the server's JSON
// fields of the same names (docs/worlds.md).
type Manifest struct {
	WorldID       string             `json:"worldId"`
	Name          string             `json:"name"`
	Description   string             `json:"description"`
	Category      string             `json:"category"`
	Actions       []world.ActionSpec `json:"actions"`
	OwnerKeyID    string             `json:"ownerKeyId"`
	OwnerAWNID    string             `json:"ownerAwnId"`
	Status        string             `json:"status"`
	MaxMembers    *int64             `json:"maxMembers"`
	EventShards   int                `json:"eventShards"`
	BatchActions  bool               `json:"batchActions"`
	BatchMessages bool               `json:"batchMessages"`
	MemberCount   int64              `json:"memberCount"`
	CreatedAt     string             `json:"createdAt"`
	UpdatedAt     string             `json:"updatedAt"`
	CardURL       string             `json:"cardUrl"`
	// Reply is the answer: Created on a new world, Raw as sent.
	Reply Reply `json:"-"` // the answer: its status, and its JSON as sent
}

// world sends one world-surface request and decodes its data into v.
func (c *Client) world(ctx context.Context, method, path string, q url.Values, body, v any) (Reply, error) {
	return c.call(ctx, request{method: method, path: path, query: q, body: body, surface: WorldSurface}, v)
}

func (c *Client) manifest(ctx context.Context, method, path string, body any) (Manifest, error) {
	var m Manifest
	rep, err := c.world(ctx, method, path, nil, body, &m)
	m.Reply = rep
	return m, err
}

// CreateWorld creates world id owned by the client's identity, or updates
// it when the identity owns it already (Manifest.Reply.Created tells which).
func (c *Client) CreateWorld(ctx context.Context, id string, spec WorldSpec) (Manifest, error) {
	me, err := c.signed("create world")
	if err != nil {
		return Manifest{}, err
	}
	// An action without a description is sent without one.
	type action struct {
		Name        string `json:"name"`
		Description string `json:"description,omitempty"`
	}
	actions := make([]action, 0, len(spec.Actions))
	for _, a := range spec.Actions {
		actions = append(actions, action(a))
	}
	body := map[string]any{"publicKey": me.PublicKeyBase64(), "actions": actions}
	if spec.EventShards != 0 {
		body["eventShards"] = spec.EventShards
	}
	if spec.BatchActions {
		body["batchActions"] = true
	}
	if spec.BatchMessages {
		body["batchMessages"] = true
	}
	for k, v := range map[string]string{"name": spec.Name, "description": spec.Description, "category": spec.Category} {
		if v != "" {
			body[k] = v
		}
	}
	return c.manifest(ctx, http.MethodPut, WorldPath(id), body)
}

// World fetches world id's manifest (public).
func (c *Client) World(ctx context.Context, id string) (Manifest, error) {
	return c.manifest(ctx, http.MethodGet, WorldPath(id), nil)
}

// CloseWorld closes a world the identity owns: joins are refused until it
// is reopened; members may still read, act and leave.
func (c *Client) CloseWorld(ctx context.Context, id string) (Manifest, error) {
	return c.manifest(ctx, http.MethodPost, WorldPath(id, "close"), nil)
}

// ReopenWorld reopens a closed world the identity owns.
func (c *Client) ReopenWorld(ctx context.Context, id string) (Manifest, error) {
	return c.manifest(ctx, http.MethodPost, WorldPath(id, "reopen"), nil)
}

// DeleteWorld deletes a world the identity owns: it is gone at once, and
// what was in it is removed in the background.
func (c *Client) DeleteWorld(ctx context.Context, id string) (Reply, error) {
	return c.world(ctx, http.MethodDelete, WorldPath(id), nil, nil, nil)
}

// WorldFilter selects a page of Worlds.
type WorldFilter struct {
	// Category keeps one category; Query searches names and descriptions.
	Category, Query string
	// Sort is "members" (the default) or "newest"; Status "open" (the
	// default), "closed" or "any".
	Sort, Status string
	Limit        int
	Cursor       string
}

// WorldSummary is one world of a discovery page (the server's JSON fields
// of the same names).
type WorldSummary struct {
	WorldID     string `json:"worldId"`
	Name        string `json:"name"`
	Category    string `json:"category"`
	Status      string `json:"status"`
	MemberCount int64  `json:"memberCount"`
	CreatedAt   string `json:"createdAt"`
}

// WorldPage is one page of Worlds.
type WorldPage struct {
	Worlds []WorldSummary `json:"worlds"`
	// Cursor continues the listing; nil on the last page.
	Cursor *string `json:"cursor"`
	Reply  Reply   `json:"-"` // the answer: its status, and its JSON as sent
}

// Worlds lists public worlds, one page at a time (public).
func (c *Client) Worlds(ctx context.Context, f WorldFilter) (WorldPage, error) {
	q := url.Values{}
	for k, v := range map[string]string{"category": f.Category, "q": f.Query, "sort": f.Sort, "status": f.Status, "cursor": f.Cursor} {
		if v != "" {
			q.Set(k, v)
		}
	}
	if f.Limit > 0 {
		q.Set("limit", strconv.Itoa(f.Limit))
	}
	var p WorldPage
	rep, err := c.world(ctx, http.MethodGet, "/v0/worlds", q, nil, &p)
	p.Reply = rep
	return p, err
}

// Membership is the identity's membership of a world, as Join answers it:
// its awnId, its slot (a small number unique in the world) and when it
// joined.
type Membership struct {
	AWNID    string `json:"awnId"`
	Slot     int64  `json:"slot"`
	JoinedAt string `json:"joinedAt"`
	// Players is the first page of the world's members; nil when the
	// server could not read it after the join.
	Players *MemberPage `json:"players"`
	// Reply.Created is false when the identity was a member already
	// (the same slot is answered).
	Reply Reply `json:"-"` // the answer: its status, and its JSON as sent
}

// Join makes the identity a member of world. metadata, when not nil, is a
// JSON object the other members see beside it.
func (c *Client) Join(ctx context.Context, worldID string, metadata json.RawMessage) (Membership, error) {
	me, err := c.signed("join")
	if err != nil {
		return Membership{}, err
	}
	body := map[string]any{"publicKey": me.PublicKeyBase64()}
	if metadata != nil {
		body["metadata"] = metadata
	}
	var m Membership
	rep, err := c.call(ctx, request{method: http.MethodPost, path: WorldPath(worldID, "join"), body: body, surface: WorldSurface, idempotent: true}, &m)
	m.Reply = rep
	return m, err
}

// Leave ends the identity's membership of world (and its webhook there).
func (c *Client) Leave(ctx context.Context, worldID string) (Reply, error) {
	return c.world(ctx, http.MethodPost, WorldPath(worldID, "leave"), nil, map[string]any{}, nil)
}

// MemberInfo is one member of a world, as the agents list shows it (the
// server's JSON fields of the same names).
type MemberInfo struct {
	AWNID string `json:"awnId"`
	// SubjectID is the registry name bound to the member's key, if any.
	SubjectID *string         `json:"subjectId"`
	Slot      int64           `json:"slot"`
	JoinedAt  string          `json:"joinedAt"`
	Presence  json.RawMessage `json:"presence"`
	Metadata  json.RawMessage `json:"metadata"`
}

// MemberPage is one page of a world's members.
type MemberPage struct {
	Agents []MemberInfo `json:"agents"`
	Count  int          `json:"count"`
	// Cursor continues the listing; nil on the last page.
	Cursor *string `json:"cursor"`
	Reply  Reply   `json:"-"` // the answer: its status, and its JSON as sent
}

// Agents lists a page of world's members (signed by a member); limit 0 is
// the server's default, cursor "" the first page.
func (c *Client) Agents(ctx context.Context, worldID string, limit int, cursor string) (MemberPage, error) {
	var p MemberPage
	rep, err := c.world(ctx, http.MethodGet, WorldPath(worldID, "agents"), pageQuery(limit, cursor), nil, &p)
	p.Reply = rep
	return p, err
}

func pageQuery(limit int, cursor string) url.Values {
	q := url.Values{}
	if limit > 0 {
		q.Set("limit", strconv.Itoa(limit))
	}
	if cursor != "" {
		q.Set("cursor", cursor)
	}
	return q
}

// Message is a direct message, as the server stores it (its JSON fields
// of the same names).
type Message struct {
	MessageID   string          `json:"messageId"`
	From        string          `json:"from"`
	To          string          `json:"to"`
	Content     json.RawMessage `json:"content"`
	ContentType string          `json:"contentType"`
	SentAt      string          `json:"sentAt"`
	// Queued: Send's message was queued in a world that batches its
	// messages (202); it reaches the inbox within about a second.
	Queued bool  `json:"queued,omitempty"`
	Reply  Reply `json:"-"` // the answer: its status, and its JSON as sent
}

// Text is the message's content as text: a JSON string's value, or the
// JSON itself.
func (m Message) Text() string {
	var s string
	if json.Unmarshal(m.Content, &s) == nil {
		return s
	}
	return string(m.Content)
}

// Send sends a direct message to member to (an awnId) of world. content is
// any JSON; contentType "" is the server's default (application/json).
func (c *Client) Send(ctx context.Context, worldID, to string, content json.RawMessage, contentType string) (Message, error) {
	body := map[string]any{"to": to, "content": content}
	if contentType != "" {
		body["contentType"] = contentType
	}
	var m Message
	rep, err := c.world(ctx, http.MethodPost, WorldPath(worldID, "messages"), nil, body, &m)
	m.Reply = rep
	return m, err
}

// SendText sends a plain-text direct message.
func (c *Client) SendText(ctx context.Context, worldID, to, text string) (Message, error) {
	b, err := json.Marshal(text)
	if err != nil {
		return Message{}, err
	}
	return c.Send(ctx, worldID, to, b, "text/plain")
}

// MessageQuery selects the messages Messages reads.
type MessageQuery struct {
	// Peek leaves the messages in the inbox; without it reading consumes
	// them (each message is handed out once).
	Peek bool
	// Since (RFC 3339) keeps the messages sent after it.
	Since string
	Limit int
}

// MessagePage is the identity's inbox in a world.
type MessagePage struct {
	Messages []Message `json:"messages"`
	Count    int       `json:"count"`
	Reply    Reply     `json:"-"` // the answer: its status, and its JSON as sent
}

// Messages reads the identity's direct messages in world (signed by a member).
func (c *Client) Messages(ctx context.Context, worldID string, mq MessageQuery) (MessagePage, error) {
	q := url.Values{}
	if mq.Peek {
		q.Set("peek", "true")
	}
	if mq.Since != "" {
		q.Set("since", mq.Since)
	}
	if mq.Limit > 0 {
		q.Set("limit", strconv.Itoa(mq.Limit))
	}
	var p MessagePage
	rep, err := c.world(ctx, http.MethodGet, WorldPath(worldID, "messages"), q, nil, &p)
	p.Reply = rep
	return p, err
}

// Act submits action with params (a JSON object; nil is {}) in world and
// returns the action's id. In a world that batches its actions the answer
// is 202 (Reply.Status) and the action.submitted event follows within
// about a second.
func (c *Client) Act(ctx context.Context, worldID, action string, params json.RawMessage) (string, Reply, error) {
	if params == nil {
		params = json.RawMessage(`{}`)
	}
	var out struct {
		ActionID string `json:"actionId"`
	}
	rep, err := c.world(ctx, http.MethodPost, WorldPath(worldID, "actions"), nil, map[string]any{"action": action, "params": params}, &out)
	return out.ActionID, rep, err
}

// PingResult says whether a member (Target) is reachable now.
type PingResult struct {
	Target    string `json:"target"`
	Reachable bool   `json:"reachable"`
	// LatencyMs is the round trip of a live probe through the member's
	// webhook; nil when it was found reachable by its recent polls.
	LatencyMs *float64 `json:"latencyMs"`
	Reply     Reply    `json:"-"` // the answer: its status, and its JSON as sent
}

// Ping asks whether member target (an awnId) of world is reachable: it
// answers a live probe through its webhook, or polled events recently.
func (c *Client) Ping(ctx context.Context, worldID, target string) (PingResult, error) {
	var p PingResult
	rep, err := c.world(ctx, http.MethodPost, WorldPath(worldID, "ping"), nil, map[string]string{"target": target}, &p)
	p.Reply = rep
	return p, err
}

// Kick removes member agent from a world the identity owns; it may join again.
func (c *Client) Kick(ctx context.Context, worldID, agent string) (Reply, error) {
	return c.world(ctx, http.MethodPost, WorldPath(worldID, "members", url.PathEscape(agent), "kick"), nil, nil, nil)
}

// Ban removes agent from a world the identity owns and refuses its joins
// until Unban. Reply.Created is false when it was banned already.
func (c *Client) Ban(ctx context.Context, worldID, agent, reason string) (Reply, error) {
	body := map[string]string{}
	if reason != "" {
		body["reason"] = reason
	}
	return c.call(ctx, request{method: http.MethodPut, path: WorldPath(worldID, "bans", url.PathEscape(agent)), body: body, surface: WorldSurface, idempotent: true}, nil)
}

// Unban lifts agent's ban from a world the identity owns.
func (c *Client) Unban(ctx context.Context, worldID, agent string) (Reply, error) {
	// Not retried: a second unban of a lifted ban is refused (404).
	return c.world(ctx, http.MethodDelete, WorldPath(worldID, "bans", url.PathEscape(agent)), nil, nil, nil)
}

// BanInfo is one ban of a world: who, why and when.
type BanInfo struct {
	AWNID    string `json:"awnId"`
	Reason   string `json:"reason,omitempty"`
	BannedAt string `json:"bannedAt"`
}

// BanPage is one page of a world's bans.
type BanPage struct {
	Bans   []BanInfo `json:"bans"`
	Cursor *string   `json:"cursor"`
	Reply  Reply     `json:"-"` // the answer: its status, and its JSON as sent
}

// Bans lists a page of the bans of a world the identity owns.
func (c *Client) Bans(ctx context.Context, worldID string, limit int, cursor string) (BanPage, error) {
	var p BanPage
	rep, err := c.world(ctx, http.MethodGet, WorldPath(worldID, "bans"), pageQuery(limit, cursor), nil, &p)
	p.Reply = rep
	return p, err
}

// AgentWorldPage is one page of the identity's own worlds: those it joined
// or owns, each a JSON object {worldId, role, slot, presence, webhook, …}.
type AgentWorldPage struct {
	Worlds []json.RawMessage `json:"worlds"`
	Cursor *string           `json:"cursor"`
	Reply  Reply             `json:"-"` // the answer: its status, and its JSON as sent
}

// MyWorlds lists a page of the worlds the identity joined or owns (signed).
func (c *Client) MyWorlds(ctx context.Context, limit int, cursor string) (AgentWorldPage, error) {
	me, err := c.signed("my worlds")
	if err != nil {
		return AgentWorldPage{}, err
	}
	var p AgentWorldPage
	rep, err := c.world(ctx, http.MethodGet, "/v0/agents/"+url.PathEscape(me.AWNID())+"/worlds", pageQuery(limit, cursor), nil, &p)
	p.Reply = rep
	return p, err
}

// ErrNoSuchMember is wrapped by ResolveMember's error when no member of the
// world has the slot or name asked for.
var ErrNoSuchMember = errors.New("no such member")

// ResolveMember returns the awnId of the member of world that ref names: an
// awnId (returned as it is), a slot number ("3"), or the registry name the
// agents list shows for it ("scout", or "@scout"). Slots and names are
// looked up in the agents list, which only a member may read.
func (c *Client) ResolveMember(ctx context.Context, worldID, ref string) (string, error) {
	if ValidAgentID(ref) {
		return ref, nil
	}
	slot, err := strconv.ParseInt(ref, 10, 64)
	bySlot := err == nil
	name := strings.TrimPrefix(ref, "@")
	for cursor := ""; ; {
		p, err := c.Agents(ctx, worldID, MaxPage, cursor)
		if err != nil {
			return "", err
		}
		for _, m := range p.Agents {
			if (bySlot && m.Slot == slot) || (!bySlot && m.SubjectID != nil && *m.SubjectID == name) {
				return m.AWNID, nil
			}
		}
		if p.Cursor == nil || *p.Cursor == "" || *p.Cursor == cursor {
			return "", fmt.Errorf("%w: no member of %s has the %s %q", ErrNoSuchMember, worldID, map[bool]string{true: "slot", false: "name"}[bySlot], name)
		}
		cursor = *p.Cursor
	}
}
