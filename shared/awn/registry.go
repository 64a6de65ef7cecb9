package awn

import (
	"context"
	"encoding/json"
	"net/http"
	"net/url"
	"strconv"
)

// Profile is an agent's registry profile as the registry answers it: its
// fields are the registry's JSON fields of the same names (docs/registry.md).
type Profile struct {
	Name         string          `json:"name"`
	Description  string          `json:"description"`
	Endpoint     string          `json:"endpoint"`
	Capabilities []string        `json:"capabilities"`
	AWNID        string          `json:"awn_id"`
	KeyID        string          `json:"key_id"`
	Status       string          `json:"status"`
	RegisteredAt string          `json:"registered_at"`
	UpdatedAt    string          `json:"updated_at"`
	Raw          json.RawMessage `json:"-"` // the profile as the server sent it
}

// Registration is what an agent registers: its name (2 to 63 lowercase
// letters, digits and '-'), the http(s) endpoint it is invoked at and the
// capabilities it serves.
type Registration struct {
	Name         string   // the agent's name, unique in the registry
	Endpoint     string   // where it is invoked
	Capabilities []string // what it serves, at least one
	Description  string   // one line about it (optional)
}

// Registered is the answer to Register. Created is false when the
// registration updated the agent's profile (the same key registered the
// same name before).
type Registered struct {
	Profile Profile // the profile as registered
	Created bool    // a new registration, not an update
	// Raw is the whole answer, {"agent": {…}}.
	Raw json.RawMessage
}

// AgentPath is the registry path of one agent.
func AgentPath(name string) string { return "/api/v1/agents/" + url.PathEscape(name) }

// Register binds reg.Name to the client's identity and publishes its
// endpoint and capabilities (signed). A name registered by another key is
// refused with code "name_taken"; one key registers one agent ("key_taken").
func (c *Client) Register(ctx context.Context, reg Registration) (Registered, error) {
	id, err := c.signed("register")
	if err != nil {
		return Registered{}, err
	}
	body := map[string]any{
		"name":         reg.Name,
		"endpoint":     reg.Endpoint,
		"capabilities": reg.Capabilities,
		"public_key":   id.PublicKeyBase64(),
	}
	if reg.Description != "" {
		body["description"] = reg.Description
	}
	r := request{method: http.MethodPost, path: "/api/v1/agents", body: body}
	var doc struct {
		Agent json.RawMessage `json:"agent"`
	}
	rep, err := c.call(ctx, r, &doc)
	if err != nil {
		return Registered{}, err
	}
	out := Registered{Created: rep.Created(), Raw: rep.Raw}
	if err := decode(r, doc.Agent, &out.Profile); err != nil {
		return Registered{}, err
	}
	out.Profile.Raw = doc.Agent
	return out, nil
}

// Agent fetches the registry profile of name (public); an unknown name is
// an *Error with code "not_found".
func (c *Client) Agent(ctx context.Context, name string) (Profile, error) {
	r := request{method: http.MethodGet, path: AgentPath(name)}
	var p Profile
	rep, err := c.call(ctx, r, &p)
	p.Raw = rep.Raw
	return p, err
}

// Discovery selects a page of Discover.
type Discovery struct {
	// Capability keeps agents serving it; "" lists every agent.
	Capability string
	// Status is "" (the server's default, online), "online", "offline" or "any".
	Status string
	// Limit is the most agents on the page (the registry caps it at 100);
	// 0 is the server's default.
	Limit int
	// Cursor continues from the page whose NextCursor it is.
	Cursor string
}

// AgentPage is one page of Discover.
type AgentPage struct {
	// Agents are the page's profiles, in the registry's order.
	Agents []Profile
	// NextCursor continues the listing; "" on the last page.
	NextCursor string
	// Raw is the whole answer, {"agents": […], "next_cursor"}.
	Raw json.RawMessage
}

// Discover lists registered agents, one page at a time (public).
func (c *Client) Discover(ctx context.Context, d Discovery) (AgentPage, error) {
	q := url.Values{}
	if d.Capability != "" {
		q.Set("capability", d.Capability)
	}
	if d.Status != "" {
		q.Set("status", d.Status)
	}
	if d.Limit > 0 {
		q.Set("limit", strconv.Itoa(d.Limit))
	}
	if d.Cursor != "" {
		q.Set("cursor", d.Cursor)
	}
	r := request{method: http.MethodGet, path: "/api/v1/agents", query: q}
	var doc struct {
		Agents     []json.RawMessage `json:"agents"`
		NextCursor string            `json:"next_cursor"`
	}
	rep, err := c.call(ctx, r, &doc)
	if err != nil {
		return AgentPage{}, err
	}
	page := AgentPage{NextCursor: doc.NextCursor, Raw: rep.Raw, Agents: make([]Profile, 0, len(doc.Agents))}
	for _, raw := range doc.Agents {
		var p Profile
		if err := decode(r, raw, &p); err != nil {
			return AgentPage{}, err
		}
		p.Raw = raw
		page.Agents = append(page.Agents, p)
	}
	return page, nil
}

// SetPresence marks the agent name "online" or "offline" (signed by its
// owner). Offline agents are left out of discovery unless asked for.
func (c *Client) SetPresence(ctx context.Context, name, status string) (Reply, error) {
	if _, err := c.signed("set presence"); err != nil {
		return Reply{}, err
	}
	return c.do(ctx, request{method: http.MethodPut, path: AgentPath(name) + "/presence", body: map[string]string{"status": status}, idempotent: true})
}

// Unregister deletes the agent name from the registry (signed by its
// owner). The key stays, and so do its world memberships.
func (c *Client) Unregister(ctx context.Context, name string) (Reply, error) {
	if _, err := c.signed("unregister"); err != nil {
		return Reply{}, err
	}
	return c.do(ctx, request{method: http.MethodDelete, path: AgentPath(name)})
}
