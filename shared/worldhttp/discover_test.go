package worldhttp_test

import (
	"fmt"
	"net/url"
	"strings"
	"testing"
)

// TestDiscoverThroughHarness: GET /v0/worlds through the harness pages the
// worlds newest first with cursors, shows the listing's fields, keeps a
// category, hides a closed world unless asked, and answers every bad
// parameter 400 INVALID_REQUEST naming it.
func TestDiscoverThroughHarness(t *testing.T) {
	srv, _, _ := harnessServer(t)
	owner := newAgent(t, srv.URL, 20)
	for i, cat := range []string{"games", "chat", "games"} {
		owner.call("PUT", fmt.Sprintf("/v0/worlds/d%d", i), fmt.Sprintf(`{"publicKey":%q,"name":"D %d","category":%q,"maxMembers":10}`, b64(owner.key), i, cat), 201)
	}
	var got []string
	path := "/v0/worlds?sort=newest&limit=2"
	for range 5 {
		page := owner.call("GET", path, "", 200)
		for _, w := range page["worlds"].([]any) {
			w := w.(map[string]any)
			got = append(got, w["worldId"].(string))
			if w["status"] != "open" || w["ownerAwnId"] != owner.awnID() || w["memberCount"] != float64(0) || w["createdAt"] == "" ||
				!strings.HasSuffix(w["cardUrl"].(string), "/v0/worlds/"+w["worldId"].(string)+"/.well-known/agent-card.json") {
				t.Fatalf("listed %v", w)
			}
		}
		c, _ := page["cursor"].(string)
		if c == "" {
			break
		}
		path = "/v0/worlds?sort=newest&limit=2&cursor=" + url.QueryEscape(c)
	}
	if fmt.Sprint(got) != "[d2 d1 d0]" {
		t.Fatalf("paged %v, want [d2 d1 d0]", got)
	}
	if games := owner.call("GET", "/v0/worlds?category=games&sort=newest", "", 200)["worlds"].([]any); len(games) != 2 {
		t.Fatalf("games: %v", games)
	}
	m := owner.call("GET", "/v0/worlds/d1", "", 200)
	if m["status"] != "open" || m["memberCount"] != float64(0) || m["maxMembers"] != float64(10) || m["ownerAwnId"] != owner.awnID() {
		t.Fatalf("manifest %v", m)
	}
	for _, bad := range []string{"sort=oldest", "status=gone", "limit=0", "limit=101", "cursor=xyz", "q=" + url.QueryEscape("\x00"), "sort=newest&sort=members"} {
		e := owner.call("GET", "/v0/worlds?"+bad, "", 400)
		if e["code"] != "INVALID_REQUEST" {
			t.Errorf("%s: %v", bad, e)
		}
	}
}
