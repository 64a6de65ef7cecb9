package agentcard_test

import (
	"context"
	"net/http"
	"net/http/httptest"
	"testing"

	"github.com/a2aproject/a2a-go/v2/a2a"
	a2acard "github.com/a2aproject/a2a-go/v2/a2aclient/agentcard"

	"github.com/a2awire/a2awire/shared/agentcard"
)

func sample(base string) agentcard.Card {
	return agentcard.Card{
		Name: "sample", Description: "a sample card", Version: "1.0.0",
		SupportedInterfaces: []agentcard.Interface{{URL: base, ProtocolBinding: agentcard.BindingJSONRPC, ProtocolVersion: agentcard.ProtocolVersion}},
		Provider:            agentcard.Provider{Organization: "a2awire", URL: base},
		Capabilities:        agentcard.Capabilities{Extensions: []agentcard.Extension{agentcard.SigningExtension(base)}},
		DefaultInputModes:   agentcard.JSONModes(), DefaultOutputModes: agentcard.JSONModes(),
		Skills:          []agentcard.Skill{{ID: "s", Name: "s", Description: "d", Tags: []string{"t"}, InputModes: agentcard.JSONModes(), OutputModes: agentcard.JSONModes()}},
		SecuritySchemes: agentcard.SecuritySchemes(),
	}
}

// TestServeCaching: 200 with ETag and max-age, then 304 without a body for
// the same tag (alone, listed, weak or *), 200 for another tag.
func TestServeCaching(t *testing.T) {
	serve := func(inm string) *httptest.ResponseRecorder {
		r := httptest.NewRequest("GET", "http://x.test/card", nil)
		if inm != "" {
			r.Header.Set("If-None-Match", inm)
		}
		w := httptest.NewRecorder()
		if err := agentcard.Serve(w, r, sample("https://x.test")); err != nil {
			t.Fatal(err)
		}
		return w
	}
	first := serve("")
	etag := first.Header().Get("ETag")
	if first.Code != 200 || etag == "" || first.Header().Get("Cache-Control") != "max-age=300" || first.Header().Get("Content-Type") != "application/json" {
		t.Fatalf("%d %v", first.Code, first.Header())
	}
	for _, inm := range []string{etag, `"a", ` + etag, "W/" + etag, "*"} {
		if w := serve(inm); w.Code != http.StatusNotModified || w.Body.Len() != 0 || w.Header().Get("ETag") != etag {
			t.Errorf("If-None-Match %s: %d %q", inm, w.Code, w.Body)
		}
	}
	if w := serve(`"stale"`); w.Code != 200 {
		t.Errorf("stale tag: %d", w.Code)
	}
}

// TestParseBaseURL: the configured URL is taken without its trailing
// slash; an empty one, or one that is not an absolute http(s) URL with
// nothing after its path, is an error.
func TestParseBaseURL(t *testing.T) {
	for in, want := range map[string]string{
		"https://api.example/": "https://api.example", "http://127.0.0.1:8080": "http://127.0.0.1:8080",
		"https://abc.execute-api.eu-west-1.amazonaws.com/": "https://abc.execute-api.eu-west-1.amazonaws.com",
		"https://api.example/prod/":                        "https://api.example/prod",
	} {
		if got, err := agentcard.ParseBaseURL(in); err != nil || got != want {
			t.Errorf("%q: %q %v, want %q", in, got, err, want)
		}
	}
	for _, in := range []string{"", "api.example", "/relative", "ftp://api.example", "https://", "https://u:p@api.example",
		"https://api.example/?q=1", "https://api.example/#f", "https://api.example/a b", "javascript:alert(1)"} {
		if got, err := agentcard.ParseBaseURL(in); err == nil {
			t.Errorf("%q accepted as %q", in, got)
		}
	}
}

// TestResolverParses: a2a-go's resolver reads a card Serve wrote, with the
// awn scheme as an HTTP auth scheme.
func TestResolverParses(t *testing.T) {
	var srv *httptest.Server
	srv = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_ = agentcard.Serve(w, r, sample(srv.URL))
	}))
	t.Cleanup(srv.Close)
	card, err := a2acard.NewResolver(srv.Client()).Resolve(context.Background(), srv.URL)
	if err != nil {
		t.Fatal(err)
	}
	if s, ok := card.SecuritySchemes["awn"].(a2a.HTTPAuthSecurityScheme); !ok || s.Scheme != "Signature" || card.Name != "sample" {
		t.Errorf("%+v", card)
	}
}
