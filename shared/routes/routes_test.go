package routes_test

import (
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/a2awire/a2awire/shared/routes"
)

// repoRoot finds the module root so the test can look at functions/.
func repoRoot(t *testing.T) string {
	t.Helper()
	dir, err := os.Getwd()
	if err != nil {
		t.Fatal(err)
	}
	for {
		if _, err := os.Stat(filepath.Join(dir, "go.mod")); err == nil {
			return dir
		}
		parent := filepath.Dir(dir)
		if parent == dir {
			t.Fatal("go.mod not found above the test")
		}
		dir = parent
	}
}

func TestEveryRouteFunctionExists(t *testing.T) {
	root := repoRoot(t)
	for _, fn := range routes.Functions() {
		if _, err := os.Stat(filepath.Join(root, "functions", fn, "main.go")); err != nil {
			t.Errorf("function %q is in the route table but functions/%s/main.go is missing", fn, fn)
		}
	}
}

func TestNoTwoRoutesCollide(t *testing.T) {
	seen := map[string]routes.Route{}
	for _, r := range routes.All() {
		if !strings.HasPrefix(r.Path, "/") || strings.HasSuffix(r.Path, "/") && r.Path != "/" {
			t.Errorf("%s: path must start with / and not end with one", r.Key())
		}
		shape := routes.Shape(r.Path)
		for _, m := range []string{r.Method, "ANY"} {
			if other, ok := seen[m+" "+shape]; ok {
				t.Errorf("%s collides with %s", r.Key(), other.Key())
			}
		}
		if r.Method == "ANY" {
			for k, other := range seen {
				if strings.HasSuffix(k, " "+shape) {
					t.Errorf("%s collides with %s", r.Key(), other.Key())
				}
			}
		}
		seen[r.Method+" "+shape] = r
		switch r.Auth {
		case routes.Public, routes.Signed, routes.Member, routes.Owner:
		default:
			t.Errorf("%s: unknown auth %q", r.Key(), r.Auth)
		}
		switch r.Method {
		case "ANY", "GET", "POST", "PUT", "DELETE", "PATCH":
		default:
			t.Errorf("%s: unsupported method", r.Key())
		}
	}
}

func TestEveryRouteMatchesItself(t *testing.T) {
	for _, r := range routes.All() {
		path := strings.NewReplacer("{", "", "}", "", "+", "").Replace(r.Path)
		method := r.Method
		if method == "ANY" {
			method = "POST"
		}
		got, _, ok := routes.Match(method, path)
		if !ok || got.Key() != r.Key() {
			t.Errorf("Match(%s %s) = %v %v, want %s", method, path, got.Key(), ok, r.Key())
		}
	}
}

func TestMatchSpecificity(t *testing.T) {
	tests := []struct {
		method, path, pattern string
		params                map[string]string
	}{
		{"GET", "/a/b", "/a/b", nil},
		{"GET", "/a/x", "/a/{id}", map[string]string{"id": "x"}},
		{"GET", "/a/x/y/z", "/a/{rest+}", map[string]string{"rest": "x/y/z"}},
		{"GET", "/a/x/c", "/a/{id}/c", map[string]string{"id": "x"}},
	}
	table := []string{"/a/b", "/a/{id}", "/a/{rest+}", "/a/{id}/c"}
	for _, tt := range tests {
		got, params := matchIn(table, tt.path)
		if got != tt.pattern {
			t.Errorf("%s matched %q, want %q", tt.path, got, tt.pattern)
		}
		for k, v := range tt.params {
			if params[k] != v {
				t.Errorf("%s: param %s = %q, want %q", tt.path, k, params[k], v)
			}
		}
	}
	if _, _, ok := routes.Match("GET", "/no/such/route"); ok {
		t.Error("unknown path matched")
	}
}

// matchIn checks matching against a private table by going through Shape
// and a brute-force ranking equal to the package's rule.
func matchIn(patterns []string, path string) (string, map[string]string) {
	type cand struct {
		pattern string
		params  map[string]string
		score   int
	}
	var cands []cand
	for _, p := range patterns {
		if params, score, ok := routes.MatchPattern(p, path); ok {
			cands = append(cands, cand{p, params, score})
		}
	}
	if len(cands) == 0 {
		return "", nil
	}
	best := slices.MaxFunc(cands, func(a, b cand) int { return a.score - b.score })
	return best.pattern, best.params
}

func TestTableAccessIsUnionOfRoutes(t *testing.T) {
	for _, fn := range routes.Functions() {
		want := routes.Config(fn).Table
		for _, r := range routes.ForFunction(fn) {
			want = max(want, r.Table)
		}
		if got := routes.TableAccess(fn); got != want {
			t.Errorf("%s: TableAccess = %v, want %v", fn, got, want)
		}
		limit := 29
		if routes.Config(fn).Streaming {
			limit = 900 // a function URL, not API Gateway: Lambda's own cap
		}
		if c := routes.Config(fn); c.MemoryMB < 128 || c.TimeoutSeconds < 1 || c.TimeoutSeconds > limit {
			t.Errorf("%s: implausible config %+v (API Gateway caps integrations at 30 s, Lambda at 900)", fn, c)
		}
	}
}

// TestWorldRoutes: each world route reaches its own function, the world
// cards' /.well-known paths below a world never land on the network card
// or on a {world} route, and the long poll's function outlives a 20 s wait
// within API Gateway's 30 s.
func TestWorldRoutes(t *testing.T) {
	for _, c := range []struct{ method, path, fn string }{
		{"PUT", "/v0/worlds/lobby", "world-put"},
		{"GET", "/v0/worlds/lobby", "world-get"},
		{"POST", "/v0/worlds/lobby/join", "world-join"},
		{"POST", "/v0/worlds/lobby/leave", "world-leave"},
		{"GET", "/v0/worlds/lobby/agents", "world-agents"},
		{"POST", "/v0/worlds/lobby/messages", "world-send"},
		{"GET", "/v0/worlds/lobby/messages", "world-messages"},
		{"POST", "/v0/worlds/lobby/ping", "world-ping"},
		{"POST", "/v0/worlds/lobby/actions", "world-act"},
		{"GET", "/v0/worlds/lobby/events", "world-events"},
		{"GET", "/v0/worlds/lobby/.well-known/agent-card.json", "world-card"},
		{"GET", "/v0/worlds/lobby/.well-known/agent.json", "world-card"},
		{"GET", "/.well-known/agent-card.json", "registry"},
		{"GET", "/v0/worlds/.well-known", "world-get"},
		{"GET", "/v0/worlds", "world-list"},
		{"POST", "/v0/worlds/lobby/close", "world-close"},
		{"POST", "/v0/worlds/lobby/reopen", "world-reopen"},
		{"DELETE", "/v0/worlds/lobby", "world-delete"},
	} {
		r, params, ok := routes.Match(c.method, c.path)
		if !ok || r.Function != c.fn {
			t.Errorf("%s %s → %q (%v), want %s", c.method, c.path, r.Function, ok, c.fn)
		}
		if strings.HasPrefix(c.path, "/v0/worlds/lobby") && params["world"] != "lobby" {
			t.Errorf("%s %s: world = %q", c.method, c.path, params["world"])
		}
	}
	if _, _, ok := routes.Match("PATCH", "/v0/worlds/lobby"); ok {
		t.Error("PATCH /v0/worlds/lobby matched a route")
	}
	if ev := routes.Config("world-events").TimeoutSeconds; ev <= 21 || ev >= 30 {
		t.Errorf("world-events timeout %d s, want above a 20 s wait and below API Gateway's 30 s", ev)
	}
}
