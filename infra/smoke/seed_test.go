//go:build unix

package smoke

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"testing"
	"time"

	"github.com/a2awire/a2awire/shared/fixtures"
	"github.com/a2awire/a2awire/shared/fixtures/seed"
	"github.com/a2awire/a2awire/shared/registry"
	"github.com/a2awire/a2awire/shared/world"
)

// registrySeedCase runs the custom-resource main against DynamoDB Local as
// CloudFormation drives it: a Create registers the fixtures and creates
// the lobby (both read back from the table) and answers SUCCESS at the
// response URL; a Delete answers SUCCESS and leaves them.
func registrySeedCase(t *testing.T, tab *smokeTable) []invocation {
	answers := make(chan map[string]any, 2)
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		b, _ := io.ReadAll(r.Body)
		var m map[string]any
		_ = json.Unmarshal(b, &m)
		answers <- m
	}))
	t.Cleanup(srv.Close)
	respURL := srv.URL + "/cfn-response"
	// The smoke table's lobby is owned by smokeOwner: as the network key,
	// the seeding keeps it (another key's lobby fails the deploy).
	pub := smokePub(smokeOwner)
	event := func(kind string) func(t *testing.T) any {
		return func(t *testing.T) any {
			return map[string]any{
				"RequestType": kind, "ResponseURL": respURL, "StackId": "arn:aws:cloudformation:us-east-1:123456789012:stack/a2awire-dev/x",
				"RequestId": "req-" + kind, "ResourceType": "Custom::FixtureRegistrations", "LogicalResourceId": "FixtureRegistrations",
				"PhysicalResourceId": seed.PhysicalID,
				"ResourceProperties": map[string]any{"ServiceToken": "arn", seed.PropAPIURL: "https://abc.execute-api.us-east-1.amazonaws.com/",
					seed.PropNetworkPublicKey: base64.StdEncoding.EncodeToString(pub)},
			}
		}
	}
	answered := func(t *testing.T, raw []byte) {
		t.Helper()
		select {
		case a := <-answers:
			if a["Status"] != "SUCCESS" || a["PhysicalResourceId"] != seed.PhysicalID {
				t.Errorf("CloudFormation was answered %v", a)
			}
		case <-time.After(invokeTimeout):
			t.Fatalf("no answer at the response URL; the function returned %s", raw)
		}
	}
	return []invocation{
		{
			what:  "CloudFormation Create",
			event: event("Create"),
			checkRaw: func(t *testing.T, raw []byte) {
				answered(t, raw)
				reg := registry.New(tab.store)
				for _, f := range fixtures.All() {
					a, err := reg.Get(context.Background(), f.Name)
					if err != nil || a.Endpoint != fixtures.Endpoint("https://abc.execute-api.us-east-1.amazonaws.com", f.Name) {
						t.Errorf("%s after Create: %+v, %v", f.Name, a, err)
					}
				}
				// The network's lobby, owned by the network key.
				if m, err := world.New(tab.store).GetWorld(context.Background(), seed.LobbyWorld); err != nil || !m.OwnerKey.Equal(pub) {
					t.Errorf("lobby after Create: %+v, %v", m, err)
				}
			},
		},
		{what: "CloudFormation Delete", event: event("Delete"), checkRaw: answered},
	}
}
