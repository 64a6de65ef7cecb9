//go:build unix

package smoke

import (
	"bytes"
	"context"
	"crypto/ed25519"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"net/http"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/a2awire/a2awire/shared/auth"
	"github.com/a2awire/a2awire/shared/store/dynamo"
	"github.com/a2awire/a2awire/shared/store/dynamo/dynamolocal"
	"github.com/a2awire/a2awire/shared/world"
	"github.com/aws/aws-lambda-go/events"
)

// The keys of the world cases: the lobby's owner, a member of it, and a
// key that is no member of anything.
var (
	smokeOwner    = ed25519.NewKeyFromSeed(bytes.Repeat([]byte{41}, ed25519.SeedSize))
	smokeMember   = ed25519.NewKeyFromSeed(bytes.Repeat([]byte{42}, ed25519.SeedSize))
	smokeOutsider = ed25519.NewKeyFromSeed(bytes.Repeat([]byte{43}, ed25519.SeedSize))
)

func smokePub(k ed25519.PrivateKey) ed25519.PublicKey { return k.Public().(ed25519.PublicKey) }

// worldCases runs each world function's main against DynamoDB Local with
// a lobby owned by smokeOwner that smokeMember has joined: every main
// reads (and most write) the table through its own wiring.
func worldCases() []smokeCase {
	member := auth.AWNID(smokePub(smokeMember))
	withKey := func(k ed25519.PrivateKey, rest string) string {
		return fmt.Sprintf(`{"publicKey":%q%s}`, base64.StdEncoding.EncodeToString(smokePub(k)), rest)
	}
	c := func(fn string, invokes ...invocation) smokeCase {
		return smokeCase{function: fn, env: worldEnv, invokes: invokes}
	}
	return []smokeCase{
		c("world-put",
			worldCall(smokeOwner, "PUT", "/v0/worlds/lobby", `{"name":"Lobby","description":"updated by its owner"}`, 200, dataHas("description", "updated by its owner")),
			worldCall(smokeOutsider, "PUT", "/v0/worlds/smoke", withKey(smokeOutsider, `,"name":"Smoke"`), 201, dataHas("worldId", "smoke"))),
		c("world-get",
			worldCall(nil, "GET", "/v0/worlds/lobby", "", 200, dataHas("members", 1.0)),
			worldCall(nil, "GET", "/v0/worlds/nowhere", "", 404, errorCode("NOT_FOUND"))),
		c("world-join",
			worldCall(smokeOutsider, "POST", "/v0/worlds/lobby/join", withKey(smokeOutsider, ""), 201, dataHas("awnId", auth.AWNID(smokePub(smokeOutsider)))),
			worldCall(smokeOutsider, "POST", "/v0/worlds/lobby/join", withKey(smokeOutsider, ""), 200, dataHas("awnId", auth.AWNID(smokePub(smokeOutsider))))),
		c("world-leave",
			worldCall(smokeMember, "POST", "/v0/worlds/lobby/leave", "", 200, dataHas("left", true)),
			worldCall(smokeMember, "POST", "/v0/worlds/lobby/leave", "", 401, errorCode("NOT_JOINED"))),
		c("world-agents",
			worldCall(smokeMember, "GET", "/v0/worlds/lobby/agents", "", 200, dataHas("count", 1.0)),
			worldCall(smokeOutsider, "GET", "/v0/worlds/lobby/agents", "", 401, errorCode("NOT_JOINED"))),
		c("world-send",
			worldCall(smokeMember, "POST", "/v0/worlds/lobby/messages", fmt.Sprintf(`{"to":%q,"content":{"text":"note to self"}}`, member), 201, dataHas("to", member))),
		c("world-messages",
			worldCall(smokeMember, "GET", "/v0/worlds/lobby/messages", "", 200, dataHas("count", 0.0))),
		c("world-ping",
			worldCall(smokeMember, "POST", "/v0/worlds/lobby/ping", fmt.Sprintf(`{"target":%q}`, member), 200, dataHas("reachable", false)),
			worldCall(smokeMember, "POST", "/v0/worlds/lobby/ping", `{"target":"aw:sha256:00"}`, 404, errorCode("NOT_FOUND"))),
		c("world-act",
			worldCall(smokeMember, "POST", "/v0/worlds/lobby/actions", `{"action":"wave","params":{"to":"everyone"}}`, 201, func(t *testing.T, data map[string]any) {
				if id, _ := data["actionId"].(string); len(id) != 26 {
					t.Errorf("actionId %v, want a ULID", data["actionId"])
				}
			})),
		c("world-events",
			worldCall(smokeMember, "GET", "/v0/worlds/lobby/events", "", 200, func(t *testing.T, data map[string]any) {
				evs, _ := data["events"].([]any)
				if len(evs) == 0 || evs[0].(map[string]any)["type"] != world.AgentJoined {
					t.Errorf("events %v, want the member's agent.joined", data)
				}
			})),
		c("world-card",
			worldCall(nil, "GET", "/v0/worlds/lobby/.well-known/agent-card.json", "", 200, nil),
			worldCall(nil, "GET", "/v0/worlds/nowhere/.well-known/agent.json", "", 404, errorCode("NOT_FOUND"))),
		c("world-list",
			worldCall(nil, "GET", "/v0/worlds?sort=newest", "", 200, func(t *testing.T, data map[string]any) {
				ws, _ := data["worlds"].([]any)
				if len(ws) != 1 || ws[0].(map[string]any)["worldId"] != "lobby" {
					t.Errorf("worlds %v, want the lobby", data)
				}
			}),
			worldCall(nil, "GET", "/v0/worlds?sort=oldest", "", 400, errorCode("INVALID_REQUEST"))),
		c("world-close",
			worldCall(smokeMember, "POST", "/v0/worlds/lobby/close", "", 403, errorCode("FORBIDDEN")),
			worldCall(smokeOwner, "POST", "/v0/worlds/lobby/close", "", 200, dataHas("status", "closed"))),
		c("world-reopen",
			worldCall(smokeOwner, "POST", "/v0/worlds/lobby/reopen", "", 200, dataHas("status", "open"))),
		c("world-delete",
			worldCall(smokeMember, "DELETE", "/v0/worlds/lobby", "", 403, errorCode("FORBIDDEN")),
			worldCall(smokeOwner, "DELETE", "/v0/worlds/lobby", "", 202, dataHas("status", "deleting"))),
		{function: "world-deleter", env: worldEnv, invokes: []invocation{{
			// A marker's record for a world with no deletion under way:
			// the round finds nothing to do and reports no failure.
			event: func(*testing.T) any {
				return map[string]any{"Records": []any{map[string]any{"eventID": "1", "eventName": "INSERT", "eventSource": "aws:dynamodb",
					"dynamodb": map[string]any{"SequenceNumber": "100", "Keys": map[string]any{"pk": map[string]any{"S": "WORLDDEL#nowhere"}, "sk": map[string]any{"S": "MARKER"}},
						"NewImage": map[string]any{"pk": map[string]any{"S": "WORLDDEL#nowhere"}, "sk": map[string]any{"S": "MARKER"},
							"type": map[string]any{"S": world.TypeDeletion}, "id": map[string]any{"S": "nowhere"}}}}}}
			},
			checkRaw: func(t *testing.T, raw []byte) {
				var out events.DynamoDBEventResponse
				if err := json.Unmarshal(raw, &out); err != nil || len(out.BatchItemFailures) != 0 {
					t.Errorf("world-deleter answered %s (%v), want no failures", raw, err)
				}
			},
		}}},
	}
}

// worldCall is one API Gateway request, signed by k (nil: unsigned) when
// it is sent rather than when the case is built (a signature lives 300 s;
// the cases before it build binaries for longer). check inspects the
// envelope's data (200/201) or the error.
func worldCall(k ed25519.PrivateKey, method, path, body string, status int, check func(*testing.T, map[string]any)) invocation {
	inv := invocation{method: method, path: path, body: body, status: status}
	inv.event = func(t *testing.T) any {
		ev := apiEvent(inv)
		if k == nil {
			return ev
		}
		s, err := auth.NewSigner(k)
		if err != nil {
			t.Fatal(err)
		}
		h, err := s.Headers(method, &url.URL{Path: path}, ev.Headers["host"], []byte(body))
		if err != nil {
			t.Fatal(err)
		}
		for name, v := range h {
			ev.Headers[strings.ToLower(name)] = v[0]
		}
		return ev
	}
	inv.checkRaw = func(t *testing.T, raw []byte) {
		t.Helper()
		var out events.APIGatewayV2HTTPResponse
		if err := json.Unmarshal(raw, &out); err != nil {
			t.Fatalf("not an API Gateway v2 response: %v: %s", err, raw)
		}
		if out.StatusCode != status {
			t.Errorf("%s %s: status %d, want %d; body %s", method, path, out.StatusCode, status, out.Body)
		}
		if strings.Contains(path, "/.well-known/") && status == http.StatusOK {
			// The Agent Card is the A2A document itself, not an envelope.
			var card map[string]any
			if err := json.Unmarshal([]byte(out.Body), &card); err != nil {
				t.Fatalf("%s %s: card is not JSON: %v: %s", method, path, err, out.Body)
			}
			if skills, _ := card["skills"].([]any); card["name"] == nil || len(skills) == 0 || out.Headers["Etag"] == "" && out.Headers["ETag"] == "" {
				t.Errorf("%s %s: card %v (headers %v), want a name, skills and an ETag", method, path, card, out.Headers)
			}
			return
		}
		var env struct {
			OK    bool           `json:"ok"`
			Data  map[string]any `json:"data"`
			Error map[string]any `json:"error"`
		}
		if err := json.Unmarshal([]byte(out.Body), &env); err != nil {
			t.Fatalf("%s %s: body is not the world envelope: %v: %s", method, path, err, out.Body)
		}
		if env.OK != (status < 300) {
			t.Errorf("%s %s: ok %v with status %d", method, path, env.OK, status)
		}
		switch {
		case check != nil && env.OK:
			check(t, env.Data)
		case check != nil:
			check(t, env.Error)
		}
	}
	return inv
}

// dataHas checks one field of the answer.
func dataHas(key string, want any) func(*testing.T, map[string]any) {
	return func(t *testing.T, data map[string]any) {
		t.Helper()
		if data[key] != want {
			t.Errorf("%s = %v, want %v (data %v)", key, data[key], want, data)
		}
	}
}

// errorCode checks the world error's code and that it has a message.
func errorCode(code string) func(*testing.T, map[string]any) {
	return func(t *testing.T, e map[string]any) {
		t.Helper()
		if e["code"] != code || e["message"] == "" {
			t.Errorf("error %v, want %s with a message", e, code)
		}
	}
}

// worldEnv points a world main at a fresh table in DynamoDB Local holding
// the lobby (owned by smokeOwner) with smokeMember joined.
func worldEnv(t *testing.T) []string {
	t.Helper()
	server, err := dynamolocal.Start()
	if err != nil {
		t.Fatalf("DynamoDB Local: %v", err)
	}
	t.Cleanup(server.Stop)
	const table = "a2awire-smoke-world"
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	client := dynamo.LocalClient(server.Endpoint())
	if err := dynamo.CreateTable(ctx, client, table); err != nil {
		t.Fatalf("create table: %v", err)
	}
	w := world.New(dynamo.New(client, table))
	if _, _, err := w.PutWorld(ctx, world.Manifest{ID: "lobby", Name: "Lobby"}, smokePub(smokeOwner)); err != nil {
		t.Fatalf("create lobby: %v", err)
	}
	if _, _, err := w.Join(ctx, "lobby", smokePub(smokeMember), nil); err != nil {
		t.Fatalf("join lobby: %v", err)
	}
	return []string{
		"TABLE_NAME=" + table,
		"BASE_URL=https://smoke.a2awire.test",
		"AWS_ENDPOINT_URL_DYNAMODB=" + server.Endpoint(),
		"AWS_REGION=us-east-1",
		"AWS_ACCESS_KEY_ID=local",
		"AWS_SECRET_ACCESS_KEY=local",
	}
}
