package a2abridge

import (
	"fmt"
	"net/http"
	"net/url"
	"strings"

	"github.com/a2awire/a2awire/shared/agentcard"
	"github.com/a2awire/a2awire/shared/apierror"
	"github.com/a2awire/a2awire/shared/lambdahttp"
	"github.com/a2awire/a2awire/shared/registry"
)

// CardVersion is the version a provider's card declares.
const CardVersion = "1.0.0"

// TextMode is the input mode of the first capability, which takes a text
// part as input.text.
const TextMode = "text/plain"

// Path is the path of a provider's JSON-RPC endpoint on the bridge.
func Path(name string) string { return "/a2a/" + url.PathEscape(name) }

// CardPath is the path of a provider's Agent Card on the bridge.
func CardPath(name string) string { return Path(name) + "/.well-known/agent-card.json" }

// providerCard is a's A2A card with its interface below origin: one skill
// per capability, the JSON-RPC binding at /a2a/{name}, streaming (the
// bridge serves SendStreamingMessage) and no push (it serves no push
// config). It needs no security scheme: the bridge, like the providers'
// own endpoints, is public.
func providerCard(a registry.Agent, origin, network string) agentcard.Card {
	endpoint := origin + Path(a.Name)
	var skills []agentcard.Skill
	for i, c := range a.Capabilities {
		desc := fmt.Sprintf("The capability %s of %s. Send a message with a data part {\"task\": %q, \"input\": {...}}.", c, a.Name, c)
		in := agentcard.JSONModes()
		if i == 0 {
			desc += " A message with only a text part is taken as {\"text\": <the text>} for this capability."
			in = append(in, TextMode)
		}
		skills = append(skills, agentcard.Skill{
			ID: c, Name: c, Description: desc, Tags: []string{c, a.Name},
			InputModes: in, OutputModes: agentcard.JSONModes(),
		})
	}
	desc := a.Description
	if desc == "" {
		desc = "The provider " + a.Name + "."
	}
	desc += " Registered on the a2awire network and reached through its A2A bridge: each message is one A2AWire invocation of the provider's endpoint, the message id its task id."
	return agentcard.Card{
		Name:        a.Name,
		Description: desc,
		Version:     CardVersion,
		SupportedInterfaces: []agentcard.Interface{
			{URL: endpoint, ProtocolBinding: agentcard.BindingJSONRPC, ProtocolVersion: agentcard.ProtocolVersion},
		},
		Provider:           agentcard.Provider{Organization: "a2awire", URL: network},
		Capabilities:       agentcard.Capabilities{Streaming: true},
		DefaultInputModes:  append(agentcard.JSONModes(), TextMode),
		DefaultOutputModes: agentcard.JSONModes(),
		Skills:             skills,
	}
}

// origin is the scheme and host the card's interface URL is below: the
// configured A2A_BASE_URL, or else the request's own. The bridge's
// function URL cannot be handed to the function by the deploy (the URL
// exists only once the function does, so naming it in the function's own
// environment is a cycle), and the request that fetched the card reached
// exactly that origin: Lambda routes a function URL by its host name, and
// API Gateway by its domain, so a Host naming another origin never reaches
// the function through either. The scheme is X-Forwarded-Proto's (which
// both set to https), else the connection's. A host that is not a plain
// host[:port] is refused (400).
func (b *bridge) origin(r *http.Request) (string, error) {
	if b.base != "" {
		return b.base, nil
	}
	host := r.Host
	if h, ok := lambdahttp.RawHeader(r, "Host"); ok && h != "" {
		host = h
	}
	if !validHost(host) {
		return "", apierror.New(apierror.Invalid, "the Host header is not a host name")
	}
	scheme := "http"
	if r.TLS != nil {
		scheme = "https"
	}
	if p, ok := lambdahttp.RawHeader(r, "X-Forwarded-Proto"); ok {
		p = strings.ToLower(strings.TrimSpace(strings.Split(p, ",")[0]))
		if p == "https" || p == "http" {
			scheme = p
		}
	}
	return scheme + "://" + strings.ToLower(host), nil
}

// validHost accepts a DNS name or IPv4 address with an optional port, or a
// bracketed IPv6 address with one: the bytes a URL's authority may carry
// without escaping, nothing else.
func validHost(h string) bool {
	if h == "" || len(h) > 255 {
		return false
	}
	name, port := h, ""
	if strings.HasPrefix(h, "[") {
		end := strings.IndexByte(h, ']')
		if end < 0 {
			return false
		}
		for _, c := range h[1:end] {
			if !(c == ':' || c == '.' || c >= '0' && c <= '9' || c >= 'a' && c <= 'f' || c >= 'A' && c <= 'F') {
				return false
			}
		}
		rest := h[end+1:]
		if rest == "" {
			return end > 1
		}
		if rest[0] != ':' {
			return false
		}
		name, port = "x", rest[1:]
	} else if i := strings.LastIndexByte(h, ':'); i >= 0 {
		name, port = h[:i], h[i+1:]
		if port == "" {
			return false
		}
	}
	for _, c := range port {
		if c < '0' || c > '9' {
			return false
		}
	}
	if len(port) > 5 || name == "" {
		return false
	}
	for _, c := range name {
		if !(c == '-' || c == '.' || c >= '0' && c <= '9' || c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z') {
			return false
		}
	}
	return true
}
