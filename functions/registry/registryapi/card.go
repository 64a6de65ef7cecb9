package registryapi

import (
	"fmt"
	"net/http"

	"github.com/a2awire/a2awire/shared/agentcard"
	"github.com/a2awire/a2awire/shared/apierror"
	"github.com/a2awire/a2awire/shared/fixtures"
)

// CardMaxAge is the Agent Card's Cache-Control max-age in seconds.
const CardMaxAge = agentcard.MaxAge

// SigningExtensionURI names the request-signing profile in the card's
// capabilities.extensions.
const SigningExtensionURI = agentcard.SigningExtensionURI

// CardVersion is the network card's version.
const CardVersion = "1.0.0"

// networkCard is the network's Agent Card below base: the fixtures'
// capabilities as skills, the signing profile as a security scheme and an
// extension. The network itself answers no A2A binding, so the card names
// no interface and claims neither streaming nor push; each skill says
// where the fixture's own card is, at the A2A bridge below a2aBase, whose
// JSON-RPC interface any A2A client can hire it through.
func networkCard(base, a2aBase string) agentcard.Card {
	var skills []agentcard.Skill
	for _, f := range fixtures.All() {
		for _, c := range f.Capabilities {
			skills = append(skills, agentcard.Skill{
				ID:   f.Name + "/" + c,
				Name: c,
				Description: fmt.Sprintf("%s Invoke with POST %s and {\"task\": %q, \"input\": {...}}, or hire it with any A2A client through its card at %s/a2a/%s/.well-known/agent-card.json.",
					f.Description, fixtures.Endpoint(base, f.Name), c, a2aBase, f.Name),
				Tags:        []string{c, f.Name, "fixture"},
				InputModes:  agentcard.JSONModes(),
				OutputModes: agentcard.JSONModes(),
			})
		}
	}
	return agentcard.Card{
		Name:                "a2awire",
		Description:         "The a2awire agent network: a registry of agents discoverable by capability, the A2AWire invocation protocol, and five fixture providers.",
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

// card serves the network card with an ETag, Cache-Control and 304 on a
// matching If-None-Match.
func (h *handler) card(w http.ResponseWriter, r *http.Request) error {
	if h.baseURL == "" {
		return apierror.New(apierror.NotFound, "this deployment has no public URL configured for its Agent Card")
	}
	a2aBase := h.a2aBaseURL
	if a2aBase == "" {
		a2aBase = h.baseURL
	}
	return agentcard.Serve(w, r, networkCard(h.baseURL, a2aBase))
}
