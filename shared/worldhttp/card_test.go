package worldhttp_test

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

	"github.com/a2awire/a2awire/shared/worldhttp"
)

// TestAgentCardServes (US-005): both paths serve the same valid card —
// name, description, version, no A2A interface, neither streaming nor push
// capabilities with the signing extension, one skill per manifest action
// plus world interaction, the awn scheme and no securityRequirements —
// with max-age=300 and an ETag that answers 304.
func TestAgentCardServes(t *testing.T) {
	a := newAPI(t, newFake(), func(o *worldhttp.Options) { o.BaseURL = "https://net.example/" })
	r := a.do(nil, "GET", "/v0/worlds/lobby/.well-known/agent-card.json", "")
	etag := r.header.Get("ETag")
	if r.status != 200 || etag == "" || r.header.Get("Cache-Control") != "max-age=300" || r.header.Get("Content-Type") != "application/json" {
		t.Fatalf("%d %v %s", r.status, r.header, r.body)
	}
	var card map[string]any
	if err := json.Unmarshal(r.body, &card); err != nil {
		t.Fatal(err)
	}
	want := []string{"capabilities", "defaultInputModes", "defaultOutputModes", "description", "name", "provider", "securitySchemes", "skills", "supportedInterfaces", "version"}
	if got := keysOf(card); !slices.Equal(got, want) {
		t.Errorf("card fields %v, want %v", got, want)
	}
	if card["name"] != "Lobby" || card["description"] != "Where agents meet." {
		t.Errorf("name/description %v %v", card["name"], card["description"])
	}
	// The world's routes are not an A2A binding: no interface, and
	// neither streaming nor push is claimed (its card is honest).
	if ifaces, ok := card["supportedInterfaces"].([]any); !ok || len(ifaces) != 0 {
		t.Errorf("interfaces %v, want an empty list", card["supportedInterfaces"])
	}
	caps := card["capabilities"].(map[string]any)
	if caps["streaming"] != false || caps["pushNotifications"] != false || len(caps["extensions"].([]any)) != 1 {
		t.Errorf("capabilities %v", caps)
	}
	var skills []string
	for _, s := range card["skills"].([]any) {
		skills = append(skills, s.(map[string]any)["id"].(string))
	}
	if !slices.Equal(skills, []string{worldhttp.InteractionSkill, "action/wave"}) {
		t.Errorf("skills %v", skills)
	}
	legacy := a.do(nil, "GET", "/v0/worlds/lobby/.well-known/agent.json", "")
	if legacy.status != 200 || string(legacy.body) != string(r.body) || legacy.header.Get("ETag") != etag {
		t.Errorf("agent.json differs: %d %s", legacy.status, legacy.body)
	}
	if nm := a.do(nil, "GET", "/v0/worlds/lobby/.well-known/agent-card.json", "", "If-None-Match", etag); nm.status != http.StatusNotModified || len(nm.body) != 0 {
		t.Errorf("If-None-Match: %d %q", nm.status, nm.body)
	}
	expectError(t, a.do(nil, "GET", "/v0/worlds/nowhere/.well-known/agent-card.json", ""), 404, "NOT_FOUND", "")
}

// TestWorldCardIgnoresHost: the world card's URLs are the configured base
// URL's whatever Host and X-Forwarded-Proto a request carries, so the one
// copy a cache keeps for 300 s is right for everyone; NewCard without a
// base URL, or with one that is not an absolute http(s) URL, fails.
func TestWorldCardIgnoresHost(t *testing.T) {
	a := newAPI(t, newFake(), nil)
	plain := a.do(nil, "GET", "/v0/worlds/lobby/.well-known/agent-card.json", "")
	evil := a.do(nil, "GET", "/v0/worlds/lobby/.well-known/agent-card.json", "", "Host", "evil.example", "X-Forwarded-Proto", "http")
	if plain.status != 200 || evil.status != 200 || string(evil.body) != string(plain.body) || strings.Contains(string(evil.body), "evil.example") {
		t.Errorf("Host evil.example: %d %s", evil.status, evil.body)
	}
	if !strings.Contains(string(plain.body), `POST https://net.example/v0/worlds/lobby/join`) {
		t.Errorf("card %s does not name the configured base URL", plain.body)
	}
	for _, base := range []string{"", "net.example", "https://net.example/?x=1"} {
		if _, err := worldhttp.NewCard(worldhttp.Options{Function: "world-card", Table: testTable, BaseURL: base}, newFake()); err == nil {
			t.Errorf("NewCard accepted base URL %q", base)
		}
	}
}

// TestAgentCardNoAuth (US-005): the card is public — no signature needed,
// and a signature by a stranger changes nothing.
func TestAgentCardNoAuth(t *testing.T) {
	f := newFake()
	a := newAPI(t, f, nil)
	unsigned := a.do(nil, "GET", "/v0/worlds/lobby/.well-known/agent.json", "")
	signed := a.do(outsider, "GET", "/v0/worlds/lobby/.well-known/agent.json", "")
	if unsigned.status != 200 || signed.status != 200 || string(unsigned.body) != string(signed.body) {
		t.Errorf("unsigned %d, signed by a stranger %d", unsigned.status, signed.status)
	}
	if f.Calls("MemberKey") != 0 {
		t.Errorf("the public card looked up keys")
	}
}

// TestWorldCardParsesWithA2AGo: a2a-go's resolver fetches and parses a
// world's card from a server, on both paths.
func TestWorldCardParsesWithA2AGo(t *testing.T) {
	h, err := worldhttp.NewCard(worldhttp.Options{Function: "world-card", Table: testTable, BaseURL: "https://net.example"}, newFake())
	if err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer(h)
	t.Cleanup(srv.Close)
	for _, path := range []string{"/v0/worlds/lobby/.well-known/agent-card.json", "/v0/worlds/lobby/.well-known/agent.json"} {
		card, err := agentcard.NewResolver(srv.Client()).Resolve(context.Background(), srv.URL, agentcard.WithPath(path))
		if err != nil {
			t.Fatalf("a2a-go resolver on %s: %v", path, err)
		}
		if card.Name != "Lobby" || len(card.Skills) != 2 || card.Skills[1].Name != "wave" {
			t.Errorf("card %+v", card)
		}
		if len(card.SupportedInterfaces) != 0 {
			t.Errorf("interfaces %+v, want none", card.SupportedInterfaces)
		}
		if card.Capabilities.Streaming || card.Capabilities.PushNotifications || len(card.Capabilities.Extensions) != 1 {
			t.Errorf("capabilities %+v", card.Capabilities)
		}
		if s, ok := card.SecuritySchemes["awn"].(a2a.HTTPAuthSecurityScheme); !ok || s.Scheme != "Signature" || card.SecurityRequirements != nil {
			t.Errorf("security %#v %v", card.SecuritySchemes, card.SecurityRequirements)
		}
	}
}
