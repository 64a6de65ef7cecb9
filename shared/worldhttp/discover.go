package worldhttp

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"net/url"

	"github.com/a2awire/a2awire/shared/function"
	"github.com/a2awire/a2awire/shared/world"
)

// Discoverer lists worlds (world.Service.Discover).
type Discoverer interface {
	Discover(ctx context.Context, f world.Filter) (world.Listing, error)
}

// summaryOut is one world of a listing as clients see it.
type summaryOut struct {
	WorldID     string `json:"worldId"`
	Name        string `json:"name"`
	Description string `json:"description"`
	Category    string `json:"category"`
	Status      string `json:"status"`
	MemberCount int64  `json:"memberCount"`
	CreatedAt   string `json:"createdAt"`
	OwnerAWNID  string `json:"ownerAwnId"`
	CardURL     string `json:"cardUrl"`
}

// cardURL is the URL of world's Agent Card below base ("" gives the path
// alone).
func cardURL(base, id string) string {
	return base + "/v0/worlds/" + url.PathEscape(id) + "/.well-known/agent-card.json"
}

// NewDiscover serves GET /v0/worlds (public): world discovery, filtered by
// category, q (name or description) and status (open by default, closed,
// any), sorted by members (default) or newest, limit (1–100, default 20)
// worlds a page and a cursor to the next. Every bad parameter is 400
// naming it. A page of 100 worlds at their largest manifests is well under
// Lambda's response limit (each world's text is at most ~1.2 KB).
func NewDiscover(o Options, lister Discoverer) (http.Handler, error) {
	if lister == nil {
		return nil, errors.New("worldhttp: no world service")
	}
	base, err := baseOf(o)
	if err != nil {
		return nil, err
	}
	return serve(o, nil, func(w http.ResponseWriter, r *http.Request) error {
		q := newQuery(r.URL.RawQuery)
		f := world.Filter{Limit: q.intIn("limit", 1, world.MaxDiscoveryLimit, world.DefaultDiscoveryLimit)}
		f.Category, _ = q.get("category")
		f.Query, _ = q.get("q")
		f.Sort, _ = q.get("sort")
		f.Status, _ = q.get("status")
		f.Cursor, _ = q.get("cursor")
		if q.err != nil {
			return q.err
		}
		l, err := lister.Discover(r.Context(), f)
		if err != nil {
			return fmt.Errorf("worldhttp: discover: %w", err)
		}
		out := make([]summaryOut, 0, len(l.Worlds))
		for _, s := range l.Worlds {
			out = append(out, summaryOut{WorldID: s.ID, Name: s.Name, Description: s.Description, Category: s.Category,
				Status: s.Status, MemberCount: s.Members, CreatedAt: timestamp(s.CreatedAt), OwnerAWNID: s.OwnerAWNID,
				CardURL: cardURL(base, s.ID)})
		}
		var cursor *string
		if l.Cursor != "" {
			cursor = &l.Cursor
		}
		return reply(w, http.StatusOK, map[string]any{"worlds": out, "cursor": cursor})
	}, nil)
}

// BuildDiscover builds world-list (BASE_URL names the cards' URLs; empty
// gives their paths).
func BuildDiscover(env function.Env) (any, error) {
	return build(env, func(d Deps) (http.Handler, error) { return NewDiscover(d.Options, d.World) })
}
