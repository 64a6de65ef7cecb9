// Package agentcard writes A2A v1.0 Agent Cards: the network's (served by
// the registry), each world's (served by world-card) and each registered
// provider's (served by the A2A bridge, package a2abridge). The card's JSON
// is written out here rather than borrowed from an A2A library so a
// function links nothing it does not serve; the tests of every card parse
// them with a2a-go's resolver.
//
// A card advertises only what answers: an interface names a URL that
// serves the binding it names (only the bridge's cards have one: the
// JSON-RPC binding at /a2a/{name}), streaming is true only where
// SendStreamingMessage is served, and pushNotifications is never true, as
// no function serves A2A push-notification configs (webhooks are not A2A
// push).
//
// Both cards share the parts written once here: the request-signing
// profile as a security scheme in the v1.0 one-of form and as a capability
// extension, the check of the configured base URL a card names, and the
// HTTP caching of a card (Cache-Control max-age, a strong ETag of the body,
// 304 on a matching If-None-Match). Nothing in a card comes from the
// request, so one cached copy is right for every client.
package agentcard

import (
	"crypto/sha256"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"strings"

	"github.com/a2awire/a2awire/shared/auth"
	"github.com/a2awire/a2awire/shared/lambdahttp"
)

// MaxAge is a card's Cache-Control max-age in seconds.
const MaxAge = 300

// SigningExtensionURI names the request-signing profile in a card's
// capabilities.extensions: the IETF Web Bot Auth protocol draft, which the
// AWN-Ed25519 signatures profile.
const SigningExtensionURI = "https://datatracker.ietf.org/doc/draft-ietf-webbotauth-httpsig-protocol/"

// BindingJSONRPC and ProtocolVersion are what the one kind of interface
// our cards declare says: A2A's JSON-RPC 2.0 binding of protocol 1.0.
const (
	BindingJSONRPC  = "JSONRPC"
	ProtocolVersion = "1.0"
)

// jsonModes is the input and output modes of every card and skill.
var jsonModes = []string{"application/json"}

// JSONModes returns ["application/json"], a fresh slice each call.
func JSONModes() []string { return append([]string(nil), jsonModes...) }

// The card's JSON.
type (
	// Card is an A2A v1.0 Agent Card.
	Card struct {
		Name        string `json:"name"`
		Description string `json:"description"`
		Version     string `json:"version"`
		// SupportedInterfaces is empty, never null, on a card no A2A
		// binding answers for (the network's, a world's).
		SupportedInterfaces []Interface               `json:"supportedInterfaces"`
		Provider            Provider                  `json:"provider"`
		Capabilities        Capabilities              `json:"capabilities"`
		DefaultInputModes   []string                  `json:"defaultInputModes"`
		DefaultOutputModes  []string                  `json:"defaultOutputModes"`
		Skills              []Skill                   `json:"skills"`
		SecuritySchemes     map[string]SecurityScheme `json:"securitySchemes,omitempty"`
	}
	// Interface is one URL the agent answers on, with its binding.
	Interface struct {
		URL             string `json:"url"`
		ProtocolBinding string `json:"protocolBinding"`
		ProtocolVersion string `json:"protocolVersion"`
	}
	// Provider names who runs the agent.
	Provider struct {
		Organization string `json:"organization"`
		URL          string `json:"url"`
	}
	// Capabilities are the optional protocol features.
	Capabilities struct {
		Streaming         bool        `json:"streaming"`
		PushNotifications bool        `json:"pushNotifications"`
		Extensions        []Extension `json:"extensions,omitempty"`
	}
	// Extension is a protocol extension the agent supports.
	Extension struct {
		URI         string         `json:"uri"`
		Description string         `json:"description"`
		Required    bool           `json:"required"`
		Params      map[string]any `json:"params"`
	}
	// Skill is one thing the agent does.
	Skill struct {
		ID          string   `json:"id"`
		Name        string   `json:"name"`
		Description string   `json:"description"`
		Tags        []string `json:"tags"`
		InputModes  []string `json:"inputModes"`
		OutputModes []string `json:"outputModes"`
	}
	// SecurityScheme is A2A v1.0's one-of form: exactly one member naming
	// the scheme's kind (a2a-go refuses any other key).
	SecurityScheme struct {
		HTTPAuth *HTTPAuthScheme `json:"httpAuthSecurityScheme,omitempty"`
	}
	// HTTPAuthScheme is an HTTP authentication scheme.
	HTTPAuthScheme struct {
		Scheme      string `json:"scheme"`
		Description string `json:"description"`
	}
)

// SigningDescription says in one sentence how requests are signed.
const SigningDescription = "AWN-Ed25519: HTTP Message Signatures (RFC 9421) in the IETF Web Bot Auth profile, " +
	"with a required nonce and the body covered by Content-Digest."

// SigningExtension is the signing profile as a capability extension, with
// the key directories below the network's base URL.
func SigningExtension(networkBase string) Extension {
	return Extension{
		URI:         SigningExtensionURI,
		Description: SigningDescription,
		Required:    false,
		Params: map[string]any{
			"alg":                   auth.Alg,
			"tag":                   auth.Tag,
			"keyid":                 "RFC 7638 JWK SHA-256 thumbprint",
			"components":            []string{"@method", "@authority", "@path", "@query", "content-digest"},
			"maxValiditySeconds":    int(auth.MaxValidity.Seconds()),
			"keyDirectory":          networkBase + "/api/v1/keys/{keyid}",
			"networkKeyDirectory":   networkBase + "/.well-known/http-message-signatures-directory",
			"nonceLength":           fmt.Sprintf("%d-%d", auth.MinNonce, auth.MaxNonce),
			"directoryMediaType":    auth.DirectoryMediaType,
			"signatureAgentCovered": true,
		},
	}
}

// SecuritySchemes is the signing profile as the card's one security
// scheme, "awn". Cards carry no securityRequirements: client libraries
// disagree on its JSON form.
func SecuritySchemes() map[string]SecurityScheme {
	return map[string]SecurityScheme{
		"awn": {HTTPAuth: &HTTPAuthScheme{Scheme: "Signature", Description: SigningDescription}},
	}
}

// Serve writes card with Cache-Control max-age=MaxAge and an ETag of its
// body, or 304 without a body when If-None-Match names that tag.
func Serve(w http.ResponseWriter, r *http.Request, card Card) error {
	body, err := json.Marshal(card)
	if err != nil {
		return fmt.Errorf("agentcard: encode: %w", err)
	}
	sum := sha256.Sum256(body)
	etag := `"` + base64.RawURLEncoding.EncodeToString(sum[:18]) + `"`
	hd := w.Header()
	hd.Set("ETag", etag)
	hd.Set("Cache-Control", fmt.Sprintf("max-age=%d", MaxAge))
	if inm, ok := lambdahttp.RawHeader(r, "If-None-Match"); ok && ETagMatches(inm, etag) {
		w.WriteHeader(http.StatusNotModified)
		return nil
	}
	hd.Set("Content-Type", "application/json")
	w.WriteHeader(http.StatusOK)
	_, _ = w.Write(append(body, '\n'))
	return nil
}

// ETagMatches is If-None-Match's weak comparison (RFC 9110 §13.1.2): "*"
// or any listed tag equal to etag, W/ prefixes ignored.
func ETagMatches(header, etag string) bool {
	for _, t := range strings.Split(header, ",") {
		t = strings.TrimSpace(t)
		if t == "*" || strings.TrimPrefix(t, "W/") == etag {
			return true
		}
	}
	return false
}

// ParseBaseURL checks the network's public URL a card names, as the deploy
// configures it (BASE_URL, the HTTP API's URL; the harness's listen
// address): an absolute http or https URL with a host and nothing after
// its path. It returns it without a trailing slash. The URL never comes
// from a request: a card built from the Host header would let anyone who
// sends "Host: evil.example" have the network's cached card (max-age 300,
// the same for every client) name evil.example's key directory and
// endpoints.
func ParseBaseURL(s string) (string, error) {
	if s == "" {
		return "", errors.New("agentcard: no base URL configured (BASE_URL, the API's public URL)")
	}
	u, err := url.Parse(s)
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" || u.User != nil ||
		u.Opaque != "" || u.RawQuery != "" || u.Fragment != "" || u.ForceQuery || strings.ContainsAny(s, " \t\r\n\"<>") {
		return "", fmt.Errorf("agentcard: base URL %q is not an absolute http(s) URL without query or fragment", s)
	}
	return strings.TrimRight(s, "/"), nil
}
