package harness_test

import (
	"context"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"testing"

	"github.com/a2awire/a2awire/local/harness"
	"github.com/a2awire/a2awire/shared/logging"
	"github.com/a2awire/a2awire/shared/store/memory"
)

// TestSeedFixturesServedByTheRegistry seeds a harness a test serves itself
// and reads a fixture back through the registry's route, twice seeded.
func TestSeedFixturesServedByTheRegistry(t *testing.T) {
	st := memory.New()
	t.Cleanup(func() { _ = st.Close() })
	h := mustHarness(t, harness.Options{Log: logging.Discard(), Store: st})
	srv := httptest.NewServer(h)
	t.Cleanup(srv.Close)
	for range 2 {
		if _, err := harness.SeedFixtures(context.Background(), st, srv.URL, h.NetworkKey()); err != nil {
			t.Fatal(err)
		}
	}
	resp, err := http.Get(srv.URL + "/api/v1/agents/a2awire-clean")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var p struct {
		Agent    struct{ Endpoint string } `json:"agent"`
		Endpoint string
	}
	if err := json.NewDecoder(resp.Body).Decode(&p); err != nil || resp.StatusCode != 200 {
		t.Fatalf("%d %v", resp.StatusCode, err)
	}
	got := p.Endpoint + p.Agent.Endpoint
	if got != srv.URL+"/agents/a2awire-clean/invoke" {
		t.Errorf("endpoint %q", got)
	}
}
