package worldhttp

import (
	"errors"
	"fmt"
	"net/http"
	"net/url"

	"github.com/a2awire/a2awire/shared/access"
	"github.com/a2awire/a2awire/shared/agentcard"
	"github.com/a2awire/a2awire/shared/world"
)

// CardVersion is the version a world's card declares.
const CardVersion = "1.0.0"

// InteractionSkill is the id of the skill every world card lists besides
// its manifest's actions.
const InteractionSkill = "world-interaction"

// worldCard is the A2A Agent Card of world m below the network's base URL:
// one skill per manifest action plus world interaction, the signing
// profile as the security scheme and an extension. It names no interface
// and claims neither streaming nor push: the world's routes are its own
// HTTP API, not an A2A binding, its event stream is not A2A's
// SendStreamingMessage and its webhooks are not A2A push configs, so an
// A2A client reading the card is told the truth — there is no A2A
// operation to call here — and the skills say which routes to use.
func worldCard(m world.Manifest, base string) agentcard.Card {
	worldURL := base + "/v0/worlds/" + url.PathEscape(m.ID)
	tags := []string{"world", m.ID}
	if m.Category != "" {
		tags = append(tags, m.Category)
	}
	skills := []agentcard.Skill{{
		ID:   InteractionSkill,
		Name: "World Interaction",
		Description: fmt.Sprintf("Join, act in and leave the world %s: POST %s/join with your publicKey, then list agents, "+
			"send and read messages, submit actions and poll events, every request signed with AWN-Ed25519.", m.ID, worldURL),
		Tags:        tags,
		InputModes:  agentcard.JSONModes(),
		OutputModes: agentcard.JSONModes(),
	}}
	for _, a := range m.Actions {
		desc := a.Description
		if desc == "" {
			desc = "The world action " + a.Name + "."
		}
		skills = append(skills, agentcard.Skill{
			ID:          "action/" + a.Name,
			Name:        a.Name,
			Description: fmt.Sprintf("%s Submit with POST %s/actions and {\"action\": %q, \"params\": {...}}.", desc, worldURL, a.Name),
			Tags:        append([]string{"action"}, tags...),
			InputModes:  agentcard.JSONModes(),
			OutputModes: agentcard.JSONModes(),
		})
	}
	name := m.Name
	if name == "" {
		name = m.ID
	}
	desc := m.Description
	if desc == "" {
		desc = "An a2awire world: " + m.ID + "."
	}
	return agentcard.Card{
		Name:                name,
		Description:         desc,
		Version:             CardVersion,
		SupportedInterfaces: []agentcard.Interface{},
		Provider:            agentcard.Provider{Organization: "a2awire", URL: base},
		Capabilities: agentcard.Capabilities{
			Extensions: []agentcard.Extension{agentcard.SigningExtension(base)},
		},
		DefaultInputModes:  agentcard.JSONModes(),
		DefaultOutputModes: agentcard.JSONModes(),
		Skills:             skills,
		SecuritySchemes:    agentcard.SecuritySchemes(),
	}
}

// NewCard serves GET /v0/worlds/{world}/.well-known/agent-card.json and
// agent.json (public, the same document): the world's Agent Card with
// Cache-Control max-age=300, an ETag and 304 on If-None-Match. An unknown
// world is 404 NOT_FOUND. Its URLs are below o.BaseURL, which must be set
// (agentcard.ParseBaseURL): never the request's Host.
func NewCard(o Options, worlds WorldReader) (http.Handler, error) {
	if worlds == nil {
		return nil, errors.New("worldhttp: no world service")
	}
	base, err := agentcard.ParseBaseURL(o.BaseURL)
	if err != nil {
		return nil, fmt.Errorf("worldhttp: %s: %w", o.Function, err)
	}
	card := func(w http.ResponseWriter, r *http.Request) error {
		m, err := worlds.GetWorld(r.Context(), access.Param(r, "world"))
		if err != nil {
			return fmt.Errorf("worldhttp: card: %w", err)
		}
		return agentcard.Serve(w, r, worldCard(m, base))
	}
	return serve(o, nil, card, nil)
}
