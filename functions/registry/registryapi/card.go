package registryapi

import (
	"crypto/sha256"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"net/http"
	"strings"

	"github.com/a2awire/a2awire/shared/auth"
	"github.com/a2awire/a2awire/shared/fixtures"
	"github.com/a2awire/a2awire/shared/lambdahttp"
)

// CardMaxAge is the Agent Card's Cache-Control max-age in seconds (DESIGN §6).
const CardMaxAge = 300

// SigningExtensionURI names the request-signing profile in the card's
// capabilities.extensions: the IETF Web Bot Auth protocol draft, which §7
// profiles.
const SigningExtensionURI = "https://datatracker.ietf.org/doc/draft-ietf-webbotauth-httpsig-protocol/"

// The card's JSON, written out here rather than borrowed from an A2A
// library so the function links nothing it does not serve; a test parses it
// with a2a-go's resolver.
type (
	agentCard struct {
		Name                string                    `json:"name"`
		Description         string                    `json:"description"`
		Version             string                    `json:"version"`
		SupportedInterfaces []agentInterface          `json:"supportedInterfaces"`
		Provider            agentProvider             `json:"provider"`
		Capabilities        agentCapabilities         `json:"capabilities"`
		DefaultInputModes   []string                  `json:"defaultInputModes"`
		DefaultOutputModes  []string                  `json:"defaultOutputModes"`
		Skills              []agentSkill              `json:"skills"`
		SecuritySchemes     map[string]securityScheme `json:"securitySchemes"`
	}
	agentInterface struct {
		URL             string `json:"url"`
		ProtocolBinding string `json:"protocolBinding"`
		ProtocolVersion string `json:"protocolVersion"`
	}
	agentProvider struct {
		Organization string `json:"organization"`
		URL          string `json:"url"`
	}
	agentCapabilities struct {
		Streaming         bool             `json:"streaming"`
		PushNotifications bool             `json:"pushNotifications"`
		Extensions        []agentExtension `json:"extensions"`
	}
	agentExtension struct {
		URI         string         `json:"uri"`
		Description string         `json:"description"`
		Required    bool           `json:"required"`
		Params      map[string]any `json:"params"`
	}
	agentSkill struct {
		ID          string   `json:"id"`
		Name        string   `json:"name"`
		Description string   `json:"description"`
		Tags        []string `json:"tags"`
		InputModes  []string `json:"inputModes"`
		OutputModes []string `json:"outputModes"`
	}
	// securityScheme is A2A v1.0's one-of form: exactly one member naming
	// the scheme's kind.
	securityScheme struct {
		HTTPAuth *httpAuthScheme `json:"httpAuthSecurityScheme,omitempty"`
	}
	httpAuthScheme struct {
		Scheme      string `json:"scheme"`
		Description string `json:"description"`
	}
)

// CardVersion is the network card's version.
const CardVersion = "1.0.0"

// networkCard is the network's Agent Card below base: the fixtures'
// capabilities as skills, the signing profile as a security scheme and an
// extension.
func networkCard(base string) agentCard {
	jsonModes := []string{"application/json"}
	var skills []agentSkill
	for _, f := range fixtures.All() {
		for _, c := range f.Capabilities {
			skills = append(skills, agentSkill{
				ID:          f.Name + "/" + c,
				Name:        c,
				Description: fmt.Sprintf("%s Invoke with POST %s and {\"task\": %q, \"input\": {...}}.", f.Description, fixtures.Endpoint(base, f.Name), c),
				Tags:        []string{c, f.Name, "fixture"},
				InputModes:  jsonModes,
				OutputModes: jsonModes,
			})
		}
	}
	const signing = "AWN-Ed25519: HTTP Message Signatures (RFC 9421) in the IETF Web Bot Auth profile, " +
		"with a required nonce and the body covered by Content-Digest."
	return agentCard{
		Name:        "a2awire",
		Description: "The a2awire agent network: a registry of agents discoverable by capability, the A2AWire invocation protocol, and five fixture providers.",
		Version:     CardVersion,
		SupportedInterfaces: []agentInterface{
			{URL: base, ProtocolBinding: "HTTP+JSON", ProtocolVersion: "1.0"},
		},
		Provider: agentProvider{Organization: "a2awire", URL: base},
		Capabilities: agentCapabilities{
			Streaming:         false,
			PushNotifications: true,
			Extensions: []agentExtension{{
				URI:         SigningExtensionURI,
				Description: signing,
				Required:    false,
				Params: map[string]any{
					"alg":                   auth.Alg,
					"tag":                   auth.Tag,
					"keyid":                 "RFC 7638 JWK SHA-256 thumbprint",
					"components":            []string{"@method", "@authority", "@path", "@query", "content-digest"},
					"maxValiditySeconds":    int(auth.MaxValidity.Seconds()),
					"keyDirectory":          base + "/api/v1/keys/{keyid}",
					"networkKeyDirectory":   base + "/.well-known/http-message-signatures-directory",
					"nonceLength":           fmt.Sprintf("%d-%d", auth.MinNonce, auth.MaxNonce),
					"directoryMediaType":    auth.DirectoryMediaType,
					"signatureAgentCovered": true,
				},
			}},
		},
		DefaultInputModes:  jsonModes,
		DefaultOutputModes: jsonModes,
		Skills:             skills,
		SecuritySchemes: map[string]securityScheme{
			"awn": {HTTPAuth: &httpAuthScheme{Scheme: "Signature", Description: signing}},
		},
	}
}

// card serves the network card with an ETag, Cache-Control and 304 on a
// matching If-None-Match.
func (h *handler) card(w http.ResponseWriter, r *http.Request) error {
	body, err := json.Marshal(networkCard(h.base(r)))
	if err != nil {
		return fmt.Errorf("encode agent card: %w", err)
	}
	sum := sha256.Sum256(body)
	etag := `"` + base64.RawURLEncoding.EncodeToString(sum[:18]) + `"`
	hd := w.Header()
	hd.Set("ETag", etag)
	hd.Set("Cache-Control", fmt.Sprintf("max-age=%d", CardMaxAge))
	if inm, ok := lambdahttp.RawHeader(r, "If-None-Match"); ok && etagMatches(inm, etag) {
		w.WriteHeader(http.StatusNotModified)
		return nil
	}
	hd.Set("Content-Type", "application/json")
	w.WriteHeader(http.StatusOK)
	_, _ = w.Write(append(body, '\n'))
	return nil
}

// etagMatches is If-None-Match's weak comparison (RFC 9110 §13.1.2): "*"
// or any listed tag equal to etag, W/ prefixes ignored.
func etagMatches(header, etag string) bool {
	for _, t := range strings.Split(header, ",") {
		t = strings.TrimSpace(t)
		if t == "*" || strings.TrimPrefix(t, "W/") == etag {
			return true
		}
	}
	return false
}

// base is the network's public URL: Options.BaseURL, else the scheme the
// client used (X-Forwarded-Proto, as API Gateway and proxies set it; http
// on a loopback Host) and the Host it addressed. A Host that is not a plain host[:port] falls back
// to localhost so the card never echoes injected text.
func (h *handler) base(r *http.Request) string {
	if h.baseURL != "" {
		return h.baseURL
	}
	proto := "https"
	if p, ok := lambdahttp.RawHeader(r, "X-Forwarded-Proto"); ok {
		p = strings.ToLower(strings.TrimSpace(strings.Split(p, ",")[0]))
		if p == "http" || p == "https" {
			proto = p
		}
	} else if r.TLS == nil {
		proto = "http"
	}
	host, ok := lambdahttp.RawHeader(r, "Host")
	if !ok || host == "" {
		host = r.Host
	}
	if !plainHost(host) {
		host = "localhost"
	}
	host = strings.ToLower(host)
	if loopback(host) {
		// Only the local harness answers on a loopback address, and it
		// serves plain http while forwarding "https" as API Gateway does.
		proto = "http"
	}
	return proto + "://" + host
}

// loopback reports whether host[:port] names this machine.
func loopback(host string) bool {
	h := host
	if i := strings.LastIndexByte(h, ':'); i >= 0 && !strings.HasSuffix(h, "]") {
		h = h[:i]
	}
	h = strings.Trim(h, "[]")
	return h == "localhost" || h == "::1" || strings.HasPrefix(h, "127.")
}

func plainHost(h string) bool {
	if h == "" || len(h) > 255 {
		return false
	}
	for i := 0; i < len(h); i++ {
		c := h[i]
		if !(c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '.' || c == '-' || c == ':' || c == '[' || c == ']') {
			return false
		}
	}
	return true
}
