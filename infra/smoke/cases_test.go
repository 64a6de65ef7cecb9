//go:build unix

package smoke

import (
	"context"
	"crypto/ed25519"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/a2awire/a2awire/shared/auth"
	"github.com/a2awire/a2awire/shared/world"
	"github.com/aws/aws-lambda-go/events"
	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"

	"github.com/a2awire/a2awire/shared/store/dynamo"
)

// handWritten holds, by function, the invocations the table cannot imply:
// answers a main must give for the system's must-shows (the ledger's task
// ids under the emulator, a webhook URL held to https in Lambda, the
// registration custom resource). They run before the derived ones, on the
// function's freshly seeded table (nil for a function without table
// access). A function needs none: derive covers every route and trigger.
var handWritten = withWorldCases(map[string]func(t *testing.T, tab *smokeTable) []invocation{
	"fixture-punctual": func(*testing.T, *smokeTable) []invocation {
		return []invocation{
			{
				method: "POST", path: "/agents/a2awire-punctual/invoke",
				body:   `{"task":"ping","input":{"echo":"hi"}}`,
				status: http.StatusOK,
				check: func(t *testing.T, body map[string]any) {
					out, _ := body["output"].(map[string]any)
					if out["pong"] != true || out["echo"] != "hi" {
						t.Errorf("output %v, want pong true and echo hi", body["output"])
					}
					checkMetadata(t, body, "a2awire-punctual", "ping")
				},
			},
			{
				// The provider itself answers a non-POST, which is why its
				// route is ANY.
				method: "GET", path: "/agents/a2awire-punctual/invoke",
				status: http.StatusMethodNotAllowed,
				check:  checkError("method_not_allowed"),
			},
		}
	},
	"fixture-clean": func(*testing.T, *smokeTable) []invocation {
		return []invocation{{
			method: "POST", path: "/agents/a2awire-clean/invoke",
			body:   `{"task":"word-count","input":{"text":"a b\nc"}}`,
			status: http.StatusOK,
			check: func(t *testing.T, body map[string]any) {
				out, _ := body["output"].(map[string]any)
				if out["words"] != 3.0 || out["characters"] != 5.0 || out["lines"] != 2.0 {
					t.Errorf("output %v, want 3 words, 5 characters, 2 lines", body["output"])
				}
				checkMetadata(t, body, "a2awire-clean", "word-count")
			},
		}}
	},
	"fixture-messy": func(*testing.T, *smokeTable) []invocation {
		return []invocation{
			{
				method: "POST", path: "/agents/a2awire-messy/invoke",
				body:   `{"task":"messy-echo","input":{"n":7}}`,
				status: http.StatusOK,
				check: func(t *testing.T, body map[string]any) {
					out, _ := body["output"].(map[string]any)
					echo, _ := out["echo"].(map[string]any)
					if echo["n"] != 7.0 {
						t.Errorf("output %v, want echo {n: 7}", body["output"])
					}
					checkMetadata(t, body, "a2awire-messy", "messy-echo")
				},
			},
			{
				method: "POST", path: "/agents/a2awire-messy/invoke",
				body:   `{"task":"messy-echo","input":{"simulate":"unavailable"}}`,
				status: http.StatusServiceUnavailable,
				check:  checkError("unavailable"),
			},
			{
				method: "POST", path: "/agents/a2awire-messy/invoke",
				body:   `{"task":"messy-echo","input":{"simulate":"upstream_error"}}`,
				status: http.StatusBadGateway,
				check:  checkError("upstream_error"),
			},
		}
	},
	// No TRANSLATOR_LLM_URL: the main serves from its dictionary.
	"fixture-translator": func(*testing.T, *smokeTable) []invocation {
		return []invocation{{
			method: "POST", path: "/agents/a2awire-translator/invoke",
			body:   `{"task":"translation","input":{"text":"good morning","target_lang":"es"}}`,
			status: http.StatusOK,
			check: func(t *testing.T, body map[string]any) {
				out, _ := body["output"].(map[string]any)
				if tr, _ := out["translation"].(string); tr == "" || out["target_lang"] != "es" {
					t.Errorf("output %v, want a Spanish translation", body["output"])
				}
				md, _ := body["metadata"].(map[string]any)
				if md["engine"] != "fallback" {
					t.Errorf("metadata.engine %v, want fallback (no LLM configured)", md["engine"])
				}
				checkMetadata(t, body, "a2awire-translator", "translation")
			},
		}}
	},
	"fixture-ledger": ledgerCase,
	"registry":       registryCase,
	"registry-seed":  registrySeedCase,
})

// ledgerCase is the stateful fixture against DynamoDB Local: a
// record-entry, its replay, task ids that differ only after a comma or by a
// space (three tasks: ids are taken exactly as sent), and the balance that
// proves each appended once; after the case the entries are in the table,
// not somewhere else the main might have fallen back to.
func ledgerCase(t *testing.T, tab *smokeTable) []invocation {
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		defer cancel()
		out, err := dynamo.LocalClient(tab.endpoint).Scan(ctx, &dynamodb.ScanInput{TableName: aws.String(tab.name), Select: "COUNT"})
		if err != nil {
			t.Errorf("scan %s: %v", tab.name, err)
		} else if out.Count < 4 {
			t.Errorf("%s holds %d items after 4 appends", tab.name, out.Count)
		}
	})
	return []invocation{
		ledgerEntry("smoke-1", http.StatusOK, false, 0, 500, 1),
		ledgerEntry("smoke-1", http.StatusOK, true, 1, 500, 1),
		ledgerEntry("x,a", http.StatusOK, false, 0, 1000, 2),
		ledgerEntry("x,b", http.StatusOK, false, 0, 1500, 3),
		ledgerEntry("x, b", http.StatusOK, false, 0, 2000, 4),
		ledgerEntry("x,a", http.StatusOK, true, 3, 1000, 2),
		{
			method: "POST", path: "/agents/a2awire-ledger/invoke",
			body:   `{"task":"balance","input":{"account":"smoke"}}`,
			status: http.StatusOK,
			check: func(t *testing.T, body map[string]any) {
				out, _ := body["output"].(map[string]any)
				if out["balance_cents"] != 2000.0 || out["entries"] != 4.0 {
					t.Errorf("balance %v, want 2000 cents in 4 entries (each task appended once)", body["output"])
				}
				checkMetadata(t, body, "a2awire-ledger", "balance")
			},
		},
	}
}

// ledgerEntry is a record-entry of 500 cents to account "smoke" under task
// id; a replay must repeat invocation sameAs's body with the Replayed header.
func ledgerEntry(id string, status int, replayed bool, sameAs int, balance, sequence float64) invocation {
	return invocation{
		method: "POST", path: "/agents/a2awire-ledger/invoke",
		body:     `{"task":"record-entry","input":{"account":"smoke","amount_cents":500}}`,
		header:   map[string]string{"x-a2awire-task-id": id},
		status:   status,
		replayed: replayed,
		sameAs:   sameAs,
		check: func(t *testing.T, body map[string]any) {
			out, _ := body["output"].(map[string]any)
			if out["account"] != "smoke" || out["balance_cents"] != balance || out["sequence"] != sequence {
				t.Errorf("task id %q: output %v, want account smoke, balance %v, sequence %v", id, body["output"], balance, sequence)
			}
			checkMetadata(t, body, "a2awire-ledger", "record-entry")
		},
	}
}

// registryCase: the network card, a profile lookup that reads the table,
// and discovery of a table holding the one seeded agent.
func registryCase(*testing.T, *smokeTable) []invocation {
	return []invocation{
		{
			method: "GET", path: "/.well-known/agent-card.json",
			status: http.StatusOK,
			check: func(t *testing.T, body map[string]any) {
				if skills, _ := body["skills"].([]any); body["name"] != "a2awire" || len(skills) == 0 {
					t.Errorf("card %v, want a2awire with skills", body)
				}
			},
		},
		{
			method: "GET", path: "/api/v1/agents/nobody",
			status: http.StatusNotFound,
			check:  checkError("not_found"),
		},
		{
			method: "GET", path: "/api/v1/agents",
			status: http.StatusOK,
			check: func(t *testing.T, body map[string]any) {
				agents, _ := body["agents"].([]any)
				if len(agents) != 1 || agents[0].(map[string]any)["name"] != smokeAgent {
					t.Errorf("discovery %v, want %s alone", body, smokeAgent)
				}
			},
		},
	}
}

// The world and webhook route functions' answers on the seeded lobby
// (owned by smokeOwner, smokeMember and derivedMember joined): every main reads, and most
// write, the table through its own wiring.
var (
	member      = auth.AWNID(smokePub(smokeMember))
	outsiderKey = func(rest string) string {
		return fmt.Sprintf(`{"publicKey":%q%s}`, base64.StdEncoding.EncodeToString(smokePub(smokeOutsider)), rest)
	}
)

func withWorldCases(handWritten map[string]func(*testing.T, *smokeTable) []invocation) map[string]func(*testing.T, *smokeTable) []invocation {
	handWritten["world-put"] = calls(
		worldCall(smokeOwner, "PUT", "/v0/worlds/lobby", `{"name":"Lobby","description":"updated by its owner"}`, 200, dataHas("description", "updated by its owner")),
		worldCall(smokeOutsider, "PUT", "/v0/worlds/smoke", outsiderKey(`,"name":"Smoke"`), 201, dataHas("worldId", "smoke")))
	handWritten["world-get"] = calls(
		worldCall(nil, "GET", "/v0/worlds/lobby", "", 200, dataHas("members", 2.0)),
		worldCall(nil, "GET", "/v0/worlds/nowhere", "", 404, errorCode("NOT_FOUND")))
	handWritten["world-join"] = calls(
		worldCall(smokeOutsider, "POST", "/v0/worlds/lobby/join", outsiderKey(""), 201, dataHas("awnId", auth.AWNID(smokePub(smokeOutsider)))),
		worldCall(smokeOutsider, "POST", "/v0/worlds/lobby/join", outsiderKey(""), 200, dataHas("awnId", auth.AWNID(smokePub(smokeOutsider)))))
	handWritten["world-leave"] = calls(
		worldCall(smokeMember, "POST", "/v0/worlds/lobby/leave", "", 200, dataHas("left", true)),
		worldCall(smokeMember, "POST", "/v0/worlds/lobby/leave", "", 401, errorCode("NOT_JOINED")))
	handWritten["world-agents"] = calls(
		worldCall(smokeMember, "GET", "/v0/worlds/lobby/agents", "", 200, dataHas("count", 2.0)),
		worldCall(smokeOutsider, "GET", "/v0/worlds/lobby/agents", "", 401, errorCode("NOT_JOINED")))
	handWritten["world-send"] = calls(
		worldCall(smokeMember, "POST", "/v0/worlds/lobby/messages", fmt.Sprintf(`{"to":%q,"content":{"text":"note to self"}}`, member), 201, dataHas("to", member)))
	handWritten["world-messages"] = calls(
		worldCall(smokeMember, "GET", "/v0/worlds/lobby/messages", "", 200, dataHas("count", 0.0)))
	handWritten["world-ping"] = calls(
		worldCall(smokeMember, "POST", "/v0/worlds/lobby/ping", fmt.Sprintf(`{"target":%q}`, member), 200, dataHas("reachable", false)),
		worldCall(smokeMember, "POST", "/v0/worlds/lobby/ping", `{"target":"aw:sha256:00"}`, 404, errorCode("NOT_FOUND")))
	handWritten["world-act"] = calls(
		worldCall(smokeMember, "POST", "/v0/worlds/lobby/actions", `{"action":"wave","params":{"to":"everyone"}}`, 201, func(t *testing.T, data map[string]any) {
			if id, _ := data["actionId"].(string); len(id) != 26 {
				t.Errorf("actionId %v, want a ULID", data["actionId"])
			}
		}))
	handWritten["world-events"] = calls(
		worldCall(smokeMember, "GET", "/v0/worlds/lobby/events", "", 200, func(t *testing.T, data map[string]any) {
			evs, _ := data["events"].([]any)
			if len(evs) == 0 || evs[0].(map[string]any)["type"] != world.AgentJoined {
				t.Errorf("events %v, want the member's agent.joined", data)
			}
		}))
	handWritten["world-card"] = calls(
		worldCall(nil, "GET", "/v0/worlds/lobby/.well-known/agent-card.json", "", 200, nil),
		worldCall(nil, "GET", "/v0/worlds/nowhere/.well-known/agent.json", "", 404, errorCode("NOT_FOUND")))
	// A webhook URL is held to https and public addresses in Lambda.
	handWritten["world-webhook-set"] = calls(
		worldCall(smokeMember, "PUT", "/v0/worlds/lobby/webhook", `{"url":"https://hooks.example/a2awire"}`, 200, dataHas("url", "https://hooks.example/a2awire")),
		worldCall(smokeMember, "PUT", "/v0/worlds/lobby/webhook", `{"url":"http://127.0.0.1/"}`, 400, errorCode("INVALID_REQUEST")),
		worldCall(smokeOutsider, "PUT", "/v0/worlds/lobby/webhook", `{"url":"https://hooks.example/"}`, 401, errorCode("NOT_JOINED")))
	handWritten["world-webhook-show"] = calls(
		worldCall(smokeMember, "GET", "/v0/worlds/lobby/webhook", "", 404, errorCode("NOT_FOUND")))
	handWritten["world-webhook-remove"] = calls(worldCall(smokeMember, "DELETE", "/v0/worlds/lobby/webhook", "", 404, errorCode("NOT_FOUND")))
	handWritten["world-webhook-replay"] = calls(worldCall(smokeMember, "POST", "/v0/worlds/lobby/webhook/replay", `{"since":"2026-01-01T00:00:00Z"}`, 404, errorCode("NOT_FOUND")))
	return handWritten
}

// calls is a hand-written case of fixed invocations.
func calls(invs ...invocation) func(*testing.T, *smokeTable) []invocation {
	return func(*testing.T, *smokeTable) []invocation { return invs }
}

// worldCall is one API Gateway request, signed by k (nil: unsigned) when
// it is sent. check inspects the envelope's data (2xx) or the error.
func worldCall(k ed25519.PrivateKey, method, path, body string, status int, check func(*testing.T, map[string]any)) invocation {
	return invocation{method: method, path: path, body: body, key: k, respond: func(t *testing.T, out events.APIGatewayV2HTTPResponse) {
		t.Helper()
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
	}}
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
