package registryapi_test

import (
	"context"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"testing"

	"github.com/a2aproject/a2a-go/v2/a2a"
	"github.com/a2aproject/a2a-go/v2/a2aclient/agentcard"

	"github.com/a2awire/a2awire/functions/registry/registryapi"
	"github.com/a2awire/a2awire/shared/fixtures"
	"github.com/a2awire/a2awire/shared/store/memory"
)

// TestCardCaching: both paths serve the same card with an ETag and
// max-age=300; If-None-Match with that tag (or in a list, or weak) is 304
// without a body; another tag is 200.
func TestCardCaching(t *testing.T) {
	a := newAPI(t, nil)
	first := a.do(nil, "GET", "/.well-known/agent-card.json", "")
	etag := first.header.Get("ETag")
	if first.status != 200 || etag == "" || first.header.Get("Cache-Control") != "max-age=300" || first.header.Get("Content-Type") != "application/json" {
		t.Fatalf("card: %d %v", first.status, first.header)
	}
	legacy := a.do(nil, "GET", "/.well-known/agent.json", "")
	if legacy.status != 200 || string(legacy.body) != string(first.body) || legacy.header.Get("ETag") != etag {
		t.Errorf("agent.json differs from agent-card.json")
	}
	for _, inm := range []string{etag, `"other", ` + etag, "W/" + etag, "*"} {
		r := a.do(nil, "GET", "/.well-known/agent-card.json", "", "If-None-Match", inm)
		if r.status != http.StatusNotModified || len(r.body) != 0 || r.header.Get("ETag") != etag {
			t.Errorf("If-None-Match %s: %d %q", inm, r.status, r.body)
		}
	}
	if r := a.do(nil, "GET", "/.well-known/agent-card.json", "", "If-None-Match", `"stale"`); r.status != 200 {
		t.Errorf("stale If-None-Match: %d", r.status)
	}
	// The URLs are the configured base URL's, whatever Host and
	// X-Forwarded-Proto the request carries: one card for every client.
	card := first.json(t)
	if ifaces, ok := card["supportedInterfaces"].([]any); !ok || len(ifaces) != 0 {
		t.Errorf("interfaces %v, want an empty list: the network answers no A2A binding", card["supportedInterfaces"])
	}
	if skills := card["skills"].([]any); !strings.Contains(skills[0].(map[string]any)["description"].(string), "https://api.a2awire.test/a2a/a2awire-punctual/.well-known/agent-card.json") {
		t.Errorf("skill %v does not name the fixture's A2A card below the configured URL", skills[0])
	}
	for _, host := range []string{"evil.example", "127.0.0.1:8080", "evil\"host"} {
		r := a.do(nil, "GET", "/.well-known/agent-card.json", "", "Host", host, "X-Forwarded-Proto", "http")
		if string(r.body) != string(first.body) || r.header.Get("ETag") != etag {
			t.Errorf("Host %s: another card %s", host, r.body)
		}
	}
}

// TestCardParsesWithA2AGo is the must-show: a2a-go's card resolver fetches
// and parses the network card from a server, and finds the fixtures'
// capabilities as skills and the signing scheme in the v1.0 one-of form.
func TestCardParsesWithA2AGo(t *testing.T) {
	st := memory.New()
	t.Cleanup(func() { _ = st.Close() })
	h, err := registryapi.New(registryapi.Options{Store: st, BaseURL: "https://api.a2awire.test"})
	if err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer(h)
	t.Cleanup(srv.Close)

	for _, path := range []string{"/.well-known/agent-card.json", "/.well-known/agent.json"} {
		card, err := agentcard.NewResolver(srv.Client()).Resolve(context.Background(), srv.URL, agentcard.WithPath(path))
		if err != nil {
			t.Fatalf("a2a-go resolver on %s: %v", path, err)
		}
		if card.Name != "a2awire" || card.Version == "" || card.Description == "" {
			t.Errorf("card %+v", card)
		}
		if len(card.SupportedInterfaces) != 0 {
			t.Errorf("interfaces %+v, want none", card.SupportedInterfaces)
		}
		if card.Capabilities.PushNotifications || card.Capabilities.Streaming || len(card.Capabilities.Extensions) != 1 ||
			card.Capabilities.Extensions[0].URI != registryapi.SigningExtensionURI {
			t.Errorf("capabilities %+v", card.Capabilities)
		}
		if !slices.Equal(card.DefaultInputModes, []string{"application/json"}) || !slices.Equal(card.DefaultOutputModes, []string{"application/json"}) {
			t.Errorf("modes %v %v", card.DefaultInputModes, card.DefaultOutputModes)
		}
		scheme, ok := card.SecuritySchemes["awn"].(a2a.HTTPAuthSecurityScheme)
		if !ok || scheme.Scheme != "Signature" {
			t.Errorf("securitySchemes %#v, want awn as an HTTP auth scheme Signature", card.SecuritySchemes)
		}
		if card.SecurityRequirements != nil {
			t.Errorf("securityRequirements %v, want none", card.SecurityRequirements)
		}
		var skills []string
		for _, s := range card.Skills {
			skills = append(skills, s.Name)
		}
		for _, f := range fixtures.All() {
			for _, c := range f.Capabilities {
				if !slices.Contains(skills, c) {
					t.Errorf("skill %s of %s missing from %v", c, f.Name, skills)
				}
			}
		}
	}

	// The raw JSON has exactly the one-of member and no securityRequirements.
	resp, err := srv.Client().Get(srv.URL + "/.well-known/agent-card.json")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var raw map[string]json.RawMessage
	if err := json.NewDecoder(resp.Body).Decode(&raw); err != nil {
		t.Fatal(err)
	}
	if _, ok := raw["securityRequirements"]; ok {
		t.Error("the card carries securityRequirements")
	}
	var schemes map[string]map[string]json.RawMessage
	if err := json.Unmarshal(raw["securitySchemes"], &schemes); err != nil || len(schemes["awn"]) != 1 || schemes["awn"]["httpAuthSecurityScheme"] == nil {
		t.Errorf("securitySchemes %s, want {\"awn\": {\"httpAuthSecurityScheme\": ...}}", raw["securitySchemes"])
	}
}

// TestCardNeedsConfiguredBaseURL: without a configured base URL the
// registry serves no card (404) rather than one built from the request's
// Host; a base URL that is not an absolute http(s) URL stops New.
func TestCardNeedsConfiguredBaseURL(t *testing.T) {
	st := memory.New()
	t.Cleanup(func() { _ = st.Close() })
	h, err := registryapi.New(registryapi.Options{Store: st})
	if err != nil {
		t.Fatal(err)
	}
	r := httptest.NewRequest("GET", "/.well-known/agent-card.json", nil)
	r.Host = "evil.example"
	w := httptest.NewRecorder()
	h.ServeHTTP(w, r)
	if w.Code != 404 || strings.Contains(w.Body.String(), "evil.example") {
		t.Errorf("unconfigured: %d %s", w.Code, w.Body)
	}
	if _, err := registryapi.New(registryapi.Options{Store: st, BaseURL: "evil.example"}); err == nil {
		t.Error("a base URL without a scheme was accepted")
	}
}
