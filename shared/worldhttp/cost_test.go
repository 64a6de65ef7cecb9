package worldhttp_test

import (
	"fmt"
	"maps"
	"net/http"
	"net/http/httptest"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/a2awire/a2awire/shared/auth"
	"github.com/a2awire/a2awire/shared/inbox"
	"github.com/a2awire/a2awire/shared/ratelimit"
	"github.com/a2awire/a2awire/shared/store"
	"github.com/a2awire/a2awire/shared/store/dynamo"
	"github.com/a2awire/a2awire/shared/store/dynamo/capacity"
	"github.com/a2awire/a2awire/shared/store/dynamo/dynamolocal"
	"github.com/a2awire/a2awire/shared/store/roundtrips"
	"github.com/a2awire/a2awire/shared/webhook"
	"github.com/a2awire/a2awire/shared/worldhttp"
)

var local *dynamolocal.Server

// maxSequential is the most store round trips one after another a signed
// request may wait for on a warm instance: the member key when this
// instance has not verified it yet, then one call carrying the rest.
const maxSequential = 2

func TestMain(m *testing.M) {
	os.Exit(dynamolocal.Main(m, func(s *dynamolocal.Server) { local = s }))
}

// TestRequestCost pins the DynamoDB calls of one request on each world route
// on DynamoDB Local, auth included (docs/worlds.md's table of calls per
// request), and its sequential round trips (shared/store/roundtrips, each
// call held 50 ms so that calls made side by side overlap): a signed
// request's nonce claim (PutItem), its rate-limit count (UpdateItem) and
// its membership checks ride on its first store call (shared/store/guard),
// so a step fails when it takes a round trip more than pinned, and any
// step past maxSequential fails unless it says why (over; docs/cost.md).
// A step marked cold runs on an instance that has seen no key: its key
// lookup reads the key, and the route's reads ahead (guard.Ahead) go
// beside that read.
func TestRequestCost(t *testing.T) {
	m := capacity.New()
	client, table := dynamolocal.NewTable(t, local, m.Option())
	// Each call held 50 ms: calls a handler starts side by side all start
	// before the first ends even when -race and a loaded machine delay a
	// goroutine's start by tens of milliseconds (15 ms was not enough).
	rt := roundtrips.WithDelay(dynamo.New(client, table), 50*time.Millisecond)
	st := store.Store(rt)
	// build makes every route's handler over deps; a step marked cold
	// runs on handlers over fresh deps: an instance that has seen no key.
	build := func(deps worldhttp.Deps) map[string]http.Handler {
		o := deps.Options
		w := deps.World
		box := inbox.New(deps.Store) // guarded, as the function builds it
		must := func(h http.Handler, err error) http.Handler {
			t.Helper()
			if err != nil {
				t.Fatal(err)
			}
			return h
		}
		return map[string]http.Handler{
			"put":      must(worldhttp.NewPut(fn(o, "world-put"), w)),
			"get":      must(worldhttp.NewGet(fn(o, "world-get"), w)),
			"join":     must(worldhttp.NewJoin(fn(o, "world-join"), w, w)),
			"leave":    must(worldhttp.NewLeave(fn(o, "world-leave"), w)),
			"agents":   must(worldhttp.NewAgents(fn(o, "world-agents"), w)),
			"send":     must(worldhttp.NewSend(fn(o, "world-send"), box)),
			"messages": must(worldhttp.NewMessages(fn(o, "world-messages"), box)),
			"ping":     must(worldhttp.NewPing(fn(o, "world-ping"), w, mustProber(t, deps.Store))),
			"act":      must(worldhttp.NewAct(fn(o, "world-act"), w)),
			"events":   must(worldhttp.NewEvents(fn(o, "world-events"), w)),
			"card":     must(worldhttp.NewCard(fn(o, "world-card"), w)),
			"kick":     must(worldhttp.NewKick(fn(o, "world-kick"), w, w)),
			"ban":      must(worldhttp.NewBan(fn(o, "world-ban"), w, w)),
			"unban":    must(worldhttp.NewUnban(fn(o, "world-unban"), w, w)),
			"bans":     must(worldhttp.NewBans(fn(o, "world-bans"), w, w)),
			"close":    must(worldhttp.NewClose(fn(o, "world-close"), w)),
			"reopen":   must(worldhttp.NewReopen(fn(o, "world-reopen"), w)),
			"delete":   must(worldhttp.NewDelete(fn(o, "world-delete"), w)),
			"view":     must(worldhttp.NewAgentWorlds(fn(o, "agent-worlds"), w, nil)),
		}
	}
	newDeps := func() worldhttp.Deps {
		return worldhttp.NewDeps(st, ratelimit.DefaultLimits(), "https://net.example", nil, nil)
	}
	handlers := build(newDeps())
	cold := false
	call := func(fn string, k []byte, method, path, body string) int {
		t.Helper()
		r := httptest.NewRequest(method, "http://api.test"+path, strings.NewReader(body))
		if k != nil {
			s, err := auth.NewSigner(key(k[0]))
			if err != nil {
				t.Fatal(err)
			}
			out, _ := http.NewRequest(method, "http://api.test"+path, strings.NewReader(body))
			if err := s.Sign(out); err != nil {
				t.Fatal(err)
			}
			for name, v := range out.Header {
				r.Header[name] = v
			}
		}
		rec := httptest.NewRecorder()
		h := handlers[fn]
		if cold {
			h = build(newDeps())[fn]
			m.Take() // building touches nothing, but to be sure
			rt.Take()
		}
		h.ServeHTTP(rec, r)
		return rec.Code
	}
	a, b := []byte{21}, []byte{22}
	joinBody := func(k []byte) string { return fmt.Sprintf(`{"publicKey":%q}`, b64(key(k[0]))) }
	bID := auth.AWNID(pub(key(b[0])))
	c := []byte{24}
	cID := auth.AWNID(pub(key(c[0])))
	m.Take()
	steps := []struct {
		name         string
		fn           string
		k            []byte
		method, path string
		body         string
		status       int
		calls        map[string]int
		sequential   int // round trips one after another (shared/store/roundtrips)
		// over, when set, says why this step may take more than
		// maxSequential (docs/cost.md gives the choice).
		over string
		// cold runs the step on an instance that has seen no key
		// (handlers over fresh deps), the first request of a key in a
		// function.
		cold bool
	}{
		{"create world", "put", a, "PUT", "/v0/worlds/cost", fmt.Sprintf(`{"publicKey":%q,"name":"Cost"}`, b64(key(a[0]))), 201, map[string]int{"GetItem": 1, "PutItem": 1, "TransactWriteItems": 1}, 2, "", false}, // manifest + owner's index item
		{"update world (owner, no publicKey)", "put", a, "PUT", "/v0/worlds/cost", `{"name":"Cost 2"}`, 200, map[string]int{"GetItem": 1, "PutItem": 1, "TransactWriteItems": 1}, 2, "", false},                     // the owner's key known since the create
		{"get world", "get", nil, "GET", "/v0/worlds/cost", "", 200, map[string]int{"GetItem": 1}, 1, "", false},
		{"card", "card", nil, "GET", "/v0/worlds/cost/.well-known/agent-card.json", "", 200, map[string]int{"GetItem": 1}, 1, "", false},
		// A join: first, side by side, the nonce (PutItem) and the
		// world's join window (UpdateItem) beside the member, the
		// registry's key item and the manifest (GetItem ×3), the key's
		// inbox, the players' page (manifest and members) and their
		// webhooks (Query ×3); then one transaction (membership, count,
		// listing, event).
		{"join (new)", "join", a, "POST", "/v0/worlds/cost/join", joinBody(a), 201, map[string]int{"GetItem": 3, "PutItem": 1, "Query": 3, "TransactWriteItems": 1, "UpdateItem": 1}, 2, "", false},
		{"join (new, second agent)", "join", b, "POST", "/v0/worlds/cost/join", joinBody(b), 201, map[string]int{"GetItem": 3, "PutItem": 1, "Query": 3, "TransactWriteItems": 1, "UpdateItem": 1}, 2, "", false},
		{"join (already joined)", "join", b, "POST", "/v0/worlds/cost/join", joinBody(b), 200, map[string]int{"GetItem": 3, "PutItem": 1, "Query": 3, "UpdateItem": 1}, 1, "", false},
		// a's key is known (it created the world): the member key's and
		// the manifest's checks go beside the page's two Queries.
		{"agents (2 members)", "agents", a, "GET", "/v0/worlds/cost/agents", "", 200, map[string]int{"GetItem": 2, "PutItem": 1, "Query": 2, "UpdateItem": 1}, 1, "", false},
		{"agents (not joined)", "agents", []byte{23}, "GET", "/v0/worlds/cost/agents", "", 401, map[string]int{"GetItem": 1}, 1, "", false},
		{"send", "send", a, "POST", "/v0/worlds/cost/messages", fmt.Sprintf(`{"to":%q,"content":{"text":"hi"}}`, bID), 201, map[string]int{"TransactWriteItems": 1}, 1, "", false},
		// a read of messages: the inbox's event head (its shard count)
		// beside shard 0's Query.
		{"messages (peek)", "messages", b, "GET", "/v0/worlds/cost/messages?peek=true", "", 200, map[string]int{"GetItem": 3, "PutItem": 1, "Query": 1, "UpdateItem": 1}, 2, "", false},
		{"messages (consume 1)", "messages", b, "GET", "/v0/worlds/cost/messages", "", 200, map[string]int{"DeleteItem": 1, "GetItem": 3, "PutItem": 1, "Query": 1, "UpdateItem": 1}, 2, "", false},
		// ping: beside the guard (the member key's and the manifest's
		// checks, the nonce, the count), the target, its webhook and the
		// probe's own read of it; then the probe recorded (UpdateItem).
		{"ping", "ping", a, "POST", "/v0/worlds/cost/ping", fmt.Sprintf(`{"target":%q}`, bID), 200, map[string]int{"GetItem": 5, "PutItem": 1, "UpdateItem": 2}, 2, "", false},
		{"act", "act", a, "POST", "/v0/worlds/cost/actions", `{"action":"wave"}`, 201, map[string]int{"GetItem": 3, "PutItem": 1, "TransactWriteItems": 1, "UpdateItem": 1}, 2, "", false},
		// b's first poll: the head, b's member item and its webhook side
		// by side (beside the guard's checks and nonce); the member is
		// not online, so its presence.changed (online) is committed
		// beside the pages.
		{"events (wait=0)", "events", b, "GET", "/v0/worlds/cost/events", "", 200, map[string]int{"GetItem": 5, "PutItem": 1, "Query": 2, "TransactWriteItems": 1}, 2, "", false},
		// b's second poll: nothing changes, the head, the member and its
		// webhook, then the record beside the pages.
		{"events (again)", "events", b, "GET", "/v0/worlds/cost/events", "", 200, map[string]int{"GetItem": 5, "PutItem": 1, "Query": 2, "UpdateItem": 1}, 2, "", false},
		{"leave", "leave", b, "POST", "/v0/worlds/cost/leave", "", 200, map[string]int{"GetItem": 4, "PutItem": 1, "Query": 1, "TransactWriteItems": 1}, 2, "", false},
		{"join (a third agent)", "join", c, "POST", "/v0/worlds/cost/join", joinBody(c), 201, map[string]int{"GetItem": 3, "PutItem": 1, "Query": 3, "TransactWriteItems": 1, "UpdateItem": 1}, 2, "", false},
		// Cold: each on an instance that has not seen the key. The member
		// key is read, and the route's first reads go beside it (read
		// ahead); then the handler's one write carries the guard.
		{"agents (cold)", "agents", a, "GET", "/v0/worlds/cost/agents", "", 200, map[string]int{"GetItem": 2, "PutItem": 1, "Query": 2, "UpdateItem": 1}, 2, "", true},
		{"send (cold)", "send", a, "POST", "/v0/worlds/cost/messages", fmt.Sprintf(`{"to":%q,"content":{"text":"hi"}}`, cID), 201, map[string]int{"GetItem": 1, "TransactWriteItems": 1}, 2, "", true},
		{"messages (peek, cold)", "messages", c, "GET", "/v0/worlds/cost/messages?peek=true", "", 200, map[string]int{"GetItem": 3, "PutItem": 1, "Query": 1, "UpdateItem": 1}, 2, "", true},
		{"ping (cold)", "ping", a, "POST", "/v0/worlds/cost/ping", fmt.Sprintf(`{"target":%q}`, cID), 200, map[string]int{"GetItem": 3, "TransactWriteItems": 1}, 2, "", true},
		{"act (cold)", "act", a, "POST", "/v0/worlds/cost/actions", `{"action":"wave"}`, 201, map[string]int{"GetItem": 2, "TransactWriteItems": 1}, 2, "", true},
		// c's first poll, cold: the member key (showing c announced
		// offline) beside the head, then presence.changed carrying the
		// guard beside the pages.
		{"events (wait=0, cold)", "events", c, "GET", "/v0/worlds/cost/events", "", 200, map[string]int{"GetItem": 2, "Query": 2, "TransactWriteItems": 1}, 2, "", true},
		// A steady poll, cold: the member key beside the head (read
		// ahead), then the record carrying the guard beside the pages.
		{"events (again, cold)", "events", c, "GET", "/v0/worlds/cost/events", "", 200, map[string]int{"GetItem": 2, "Query": 2, "TransactWriteItems": 1}, 2, "", true},
		// c's leave with the message a sent it waiting: the inbox (read
		// beside the transaction) is emptied after it.
		{"leave (cold, a message waiting)", "leave", c, "POST", "/v0/worlds/cost/leave", "", 200, map[string]int{"DeleteItem": 1, "GetItem": 2, "Query": 1, "TransactWriteItems": 1}, 3,
			"the member key with the manifest (1), the transaction beside the inbox's read (2): the inbox's partition needs the awnId the key gave; its messages are deleted after (3), only when there are any", true},
		{"join (again)", "join", c, "POST", "/v0/worlds/cost/join", joinBody(c), 201, map[string]int{"GetItem": 3, "PutItem": 1, "Query": 3, "TransactWriteItems": 1, "UpdateItem": 1}, 2, "", false},
		{"leave (cold)", "leave", c, "POST", "/v0/worlds/cost/leave", "", 200, map[string]int{"GetItem": 2, "Query": 1, "TransactWriteItems": 1}, 2, "", true},
		{"join (again, to be kicked)", "join", c, "POST", "/v0/worlds/cost/join", joinBody(c), 201, map[string]int{"GetItem": 3, "PutItem": 1, "Query": 3, "TransactWriteItems": 1, "UpdateItem": 1}, 2, "", false},
		// Owner routes: the key lookup reads the manifest, which the
		// ownership check then takes from the request's memo and the
		// handler's reads from what was read ahead beside it.
		{"kick (owner)", "kick", a, "POST", "/v0/worlds/cost/members/" + cID + "/kick", "", 200, map[string]int{"GetItem": 2, "Query": 1, "TransactWriteItems": 1}, 2, "", false},
		{"join (again, to be kicked cold)", "join", c, "POST", "/v0/worlds/cost/join", joinBody(c), 201, map[string]int{"GetItem": 3, "PutItem": 1, "Query": 3, "TransactWriteItems": 1, "UpdateItem": 1}, 2, "", false},
		{"kick (owner, cold)", "kick", a, "POST", "/v0/worlds/cost/members/" + cID + "/kick", "", 200, map[string]int{"GetItem": 2, "Query": 1, "TransactWriteItems": 1}, 2, "", true},
		{"join (again, to be banned)", "join", c, "POST", "/v0/worlds/cost/join", joinBody(c), 201, map[string]int{"GetItem": 3, "PutItem": 1, "Query": 3, "TransactWriteItems": 1, "UpdateItem": 1}, 2, "", false},
		{"ban (owner, a member)", "ban", a, "PUT", "/v0/worlds/cost/bans/" + cID, `{"reason":"spam"}`, 201, map[string]int{"GetItem": 3, "Query": 1, "TransactWriteItems": 1}, 2, "", true},
		{"ban (owner, banned already)", "ban", a, "PUT", "/v0/worlds/cost/bans/" + cID, "", 200, map[string]int{"GetItem": 3, "PutItem": 1, "Query": 1}, 2, "", false},
		{"bans (owner)", "bans", a, "GET", "/v0/worlds/cost/bans", "", 200, map[string]int{"GetItem": 1, "PutItem": 1, "Query": 1}, 2, "", false},
		{"unban (owner)", "unban", a, "DELETE", "/v0/worlds/cost/bans/" + cID, "", 200, map[string]int{"GetItem": 2, "TransactWriteItems": 1}, 2, "", true},
		{"ban (owner, not a member)", "ban", a, "PUT", "/v0/worlds/cost/bans/" + cID, "", 201, map[string]int{"GetItem": 3, "Query": 1, "TransactWriteItems": 1}, 2, "", false},
		{"close (owner)", "close", a, "POST", "/v0/worlds/cost/close", "", 200, map[string]int{"GetItem": 1, "TransactWriteItems": 1}, 2, "", true},
		{"reopen (owner)", "reopen", a, "POST", "/v0/worlds/cost/reopen", "", 200, map[string]int{"GetItem": 1, "TransactWriteItems": 1}, 2, "", false},
		{"update world (owner, no publicKey, cold)", "put", a, "PUT", "/v0/worlds/cost", `{"name":"Cost 3"}`, 200, map[string]int{"GetItem": 1, "TransactWriteItems": 1}, 2, "", true},
		// The agent's own view, its key known: the index beside the
		// nonce, then each world's items; cold, the index's page is read
		// ahead beside the key's.
		{"agent's worlds", "view", a, "GET", "/v0/agents/" + auth.AWNID(pub(key(a[0]))) + "/worlds", "", 200, map[string]int{"GetItem": 3, "PutItem": 1, "Query": 1}, 2, "", false},
		{"agent's worlds (cold)", "view", a, "GET", "/v0/agents/" + auth.AWNID(pub(key(a[0]))) + "/worlds", "", 200, map[string]int{"GetItem": 3, "PutItem": 1, "Query": 2}, 2, "", true},
		{"delete world (owner)", "delete", a, "DELETE", "/v0/worlds/cost", "", 202, map[string]int{"GetItem": 1, "TransactWriteItems": 1}, 2, "", true},
	}
	for _, s := range steps {
		cold = s.cold
		if got := call(s.fn, s.k, s.method, s.path, s.body); got != s.status {
			t.Fatalf("%s: status %d, want %d", s.name, got, s.status)
		}
		use, depth := m.Take(), rt.Take()
		t.Logf("%-36s %d sequential  %v", s.name, depth, use.Calls())
		if !maps.Equal(use.Calls(), s.calls) {
			t.Errorf("%s: calls %v, want %v", s.name, use.Calls(), s.calls)
		}
		if depth != s.sequential {
			t.Errorf("%s: %d sequential round trips, want %d", s.name, depth, s.sequential)
		}
		if depth > maxSequential && s.over == "" {
			t.Errorf("%s: %d sequential round trips, over the %d a signed route may take", s.name, depth, maxSequential)
		}
	}
}

// mustProber is world-ping's live probe as its main builds it (the target
// here has no webhook: one GetItem, no POST).
func mustProber(t *testing.T, st store.Store) worldhttp.Prober {
	t.Helper()
	d, err := webhook.NewDispatcher(webhook.Config{Store: st})
	if err != nil {
		t.Fatal(err)
	}
	return d
}
