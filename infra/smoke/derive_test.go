//go:build unix

package smoke

import (
	"bytes"
	"crypto/ed25519"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/a2awire/a2awire/shared/auth"
	"github.com/a2awire/a2awire/shared/function"
	"github.com/a2awire/a2awire/shared/routes"
	"github.com/a2awire/a2awire/shared/webhook"
	"github.com/a2awire/a2awire/shared/world"
	"github.com/aws/aws-lambda-go/events"
)

// The keys of the seeded table (newTable): the lobby's and smokeAgent's
// owner, a member of the lobby for the hand-written cases, another for the
// derived requests (so that neither's leave or webhook changes what the
// other expects), and a key that is no member of anything (it signs the
// routes any key may call).
var (
	smokeOwner    = ed25519.NewKeyFromSeed(bytes.Repeat([]byte{41}, ed25519.SeedSize))
	smokeMember   = ed25519.NewKeyFromSeed(bytes.Repeat([]byte{42}, ed25519.SeedSize))
	smokeOutsider = ed25519.NewKeyFromSeed(bytes.Repeat([]byte{43}, ed25519.SeedSize))
	derivedMember = ed25519.NewKeyFromSeed(bytes.Repeat([]byte{45}, ed25519.SeedSize))
	// smokeNetwork is the network's key, for the functions whose table
	// environment names NETWORK_SIGNING_KEY or NETWORK_PUBLIC_KEY.
	smokeNetwork = ed25519.NewKeyFromSeed(bytes.Repeat([]byte{44}, ed25519.SeedSize))
)

func smokePub(k ed25519.PrivateKey) ed25519.PublicKey { return k.Public().(ed25519.PublicKey) }

// sampleWorld and smokeAgent are the world and the registered agent every
// function's table holds (newTable), named by the {world} and {name}
// parameters of the derived requests.
const (
	sampleWorld = "lobby"
	smokeAgent  = "smoke-agent"
)

// sampleParams are the values derived requests give path parameters, by
// name; a parameter not listed gets defaultParam (the route is still
// reached: its function answers for an unknown resource).
var sampleParams = map[string]string{
	"world": sampleWorld,
	"name":  smokeAgent,
	"keyid": auth.KeyID(smokePub(smokeOwner)),
	// An agent's own routes name the agent that signs them: the owner,
	// whose worlds the table holds.
	"awnId": auth.AWNID(smokePub(smokeOwner)),
}

const defaultParam = "smoke"

// sampleEnvValues fills the variables of a function's static environment
// (the route table's Env) that need a value to be exercised; the others
// stay empty, which the table documents as their default.
var sampleEnvValues = map[string]string{
	"BASE_URL":                   "https://smoke.a2awire.test",
	function.NetworkKeyEnv:       base64.StdEncoding.EncodeToString(smokeNetwork.Seed()),
	function.NetworkPublicKeyEnv: base64.StdEncoding.EncodeToString(smokePub(smokeNetwork)),
}

// sampleEnv is the environment a function's main gets on top of the
// table's static one: a sample for each variable that needs one.
func sampleEnv(fn routes.Function) []string {
	// Every queue of the table at a loopback URL where nothing listens, as
	// the deploy sets QUEUE_URL_* (the functions build their SQS clients at
	// start; no sample makes them send, and a send would fail, not hang).
	var env []string
	for _, q := range routes.Queues() {
		env = append(env, routes.QueueURLEnv(q.Name)+"=http://127.0.0.1:9/"+q.Name)
	}
	for k := range fn.Env {
		if v, ok := sampleEnvValues[k]; ok {
			env = append(env, k+"="+v)
		}
	}
	return env
}

// samplePath fills a route's path pattern with sampleParams.
func samplePath(pattern string) string {
	segs := strings.Split(pattern, "/")
	for i, s := range segs {
		if !strings.HasPrefix(s, "{") || !strings.HasSuffix(s, "}") {
			continue
		}
		name := strings.TrimSuffix(strings.TrimSuffix(strings.TrimPrefix(s, "{"), "}"), "+")
		v, ok := sampleParams[name]
		if !ok {
			v = defaultParam
		}
		segs[i] = v
	}
	return strings.Join(segs, "/")
}

// signerFor is the key a derived request of a route of kind a is signed
// with: the one the route's rule admits in the seeded table.
func signerFor(r routes.Route) (ed25519.PrivateKey, error) {
	if strings.Contains(r.Path, "{awnId}") {
		// Signed by the agent the path names (sampleParams).
		return smokeOwner, nil
	}
	if r.Function == "escrows" {
		// The escrow routes admit a registered agent's key (the buyer's,
		// looked up in the registry), not any key named in the body.
		return smokeOwner, nil
	}
	switch r.Auth {
	case routes.Signed:
		return smokeOutsider, nil
	case routes.Member:
		return derivedMember, nil
	case routes.Owner:
		return smokeOwner, nil
	}
	return nil, fmt.Errorf("auth kind %q: the smoke test does not know which key signs it; add it to signerFor in infra/smoke/derive_test.go", r.Auth)
}

// derive returns the invocations the route table implies for the named
// function, so that a new route or function runs under the emulator with
// no edit here:
//
//   - every route gets a request built from its row: its method (ANY is
//     sent as POST, how agents invoke), its path with sampleParams, a JSON
//     body on methods that carry one. A public route is sent unsigned and
//     must be answered (any status below 500, a JSON body, not the
//     access layer's "no route"); any other route is sent unsigned, and
//     must be refused (refused), then signed by the key its auth kind
//     admits (signerFor), and must be answered past 401 (admitted);
//   - every trigger gets its kind's sample event (triggerInvocation).
//
// An auth or trigger kind it does not know is an error, never a function
// left out.
func derive(name string) ([]invocation, error) {
	var out []invocation
	for _, r := range routes.ForFunction(name) {
		method := r.Method
		if method == "ANY" {
			method = http.MethodPost
		}
		path := samplePath(r.Path)
		var body string
		switch method {
		case http.MethodPost, http.MethodPut, http.MethodPatch:
			body = "{}"
			if r.Auth == routes.Signed {
				// A signed route names its signer's key in the body.
				body = fmt.Sprintf(`{"publicKey":%q}`, base64.StdEncoding.EncodeToString(smokePub(smokeOutsider)))
			}
		}
		what := fmt.Sprintf("%s %s (route %s, %s)", method, path, r.Key(), r.Auth)
		if r.Auth == routes.Public && routes.Streamed(name) {
			out = append(out, streamAnswered(what, method, path, body))
			continue
		}
		if r.Auth == routes.Public {
			out = append(out, invocation{what: what, method: method, path: path, body: body, respond: answered(what)})
			continue
		}
		if routes.Streamed(name) {
			// A function URL's streaming answer: only refusals, which
			// come before the stream starts (an admitted stream runs
			// until its function's limit).
			out = append(out, streamRefusals(what, method, path)...)
			continue
		}
		key, err := signerFor(r)
		if err != nil {
			return nil, fmt.Errorf("function %s, route %s: %w", name, r.Key(), err)
		}
		out = append(out,
			invocation{what: what + " unsigned", method: method, path: path, body: body, respond: refused(what+" unsigned", r.Auth)},
			invocation{what: what + " signed", method: method, path: path, body: body, key: key, respond: admitted(what + " signed")})
	}
	for _, tr := range routes.Config(name).Triggers {
		inv, err := triggerInvocation(tr)
		if err != nil {
			return nil, fmt.Errorf("function %s: %w", name, err)
		}
		out = append(out, inv)
	}
	return out, nil
}

// triggerInvocation is the sample event of a trigger's kind and the check
// of the function's answer: the event the kind's source delivers, which
// the function must take without an error.
func triggerInvocation(tr routes.Trigger) (invocation, error) {
	noError := func(t *testing.T, raw []byte) {
		t.Helper()
		var failed struct {
			ErrorMessage string `json:"errorMessage"`
		}
		if err := json.Unmarshal(raw, &failed); err == nil && failed.ErrorMessage != "" {
			t.Errorf("%s event: the function failed: %s", tr.Kind, raw)
		}
	}
	switch tr.Kind {
	case routes.StreamTrigger:
		// A batch of one record that changes no event item: nothing to
		// deliver, so nothing may fail.
		ev := events.DynamoDBEvent{Records: []events.DynamoDBEventRecord{{EventName: "MODIFY", EventSource: "aws:dynamodb", AWSRegion: "us-east-1"}}}
		return invocation{what: "table-stream batch", event: func(*testing.T) any { return ev }, checkRaw: func(t *testing.T, raw []byte) {
			t.Helper()
			noError(t, raw)
			var resp events.DynamoDBEventResponse
			if err := json.Unmarshal(raw, &resp); err != nil || len(resp.BatchItemFailures) != 0 {
				t.Errorf("stream batch: response %s (%v), want no batch item failures", raw, err)
			}
		}}, nil
	case routes.ScheduleTrigger:
		ev := events.EventBridgeEvent{Version: "0", ID: "smoke", DetailType: "Scheduled Event", Source: "aws.events",
			Time: time.Date(2026, 12, 1, 0, 0, 0, 0, time.UTC), Region: "us-east-1", Detail: json.RawMessage(`{}`)}
		return invocation{what: "scheduled event (" + tr.Schedule + ")", event: func(*testing.T) any { return ev }, checkRaw: noError}, nil
	case routes.QueueTrigger:
		// One delivery job for a webhook that does not exist: the worker
		// (or the dead-letter consumer) reads the table, finds no webhook
		// and settles the message; none may be reported failed. (The
		// action queue's consumer gets an action instead, below.)
		job, err := json.Marshal(webhook.Job{
			Event: world.Event{ID: "01JSMOKE0000000000000000000", Type: "message", World: "lobby", Data: json.RawMessage(`{}`),
				Visibility: world.Private, Recipient: "awn_smoke", CreatedAt: time.Date(2026, 12, 1, 0, 0, 0, 0, time.UTC)},
			Recipient: "awn_smoke", Hook: "1", URL: "https://example.invalid/hook",
		})
		if tr.Queue == routes.ActionQueue {
			// A queued action of an agent that is not a member: the
			// committer's member check fails and the action is dropped
			// (acknowledged, not reported failed).
			job, err = json.Marshal(world.QueuedAction{World: "lobby", ActionID: "01KBQ4Q8Y8W2Y8Y8Y8Y8Y8Y8Y8", AWNID: auth.AWNID(make([]byte, 32)),
				Action: "wave", Params: json.RawMessage(`{}`)})
		}
		if err != nil {
			return invocation{}, err
		}
		ev := events.SQSEvent{Records: []events.SQSMessage{{MessageId: "smoke-1", ReceiptHandle: "smoke-1", Body: string(job),
			EventSource: "aws:sqs", AWSRegion: "us-east-1", Attributes: map[string]string{"ApproximateReceiveCount": "1"}}}}
		return invocation{what: "queue batch (" + tr.Queue + ")", event: func(*testing.T) any { return ev }, checkRaw: func(t *testing.T, raw []byte) {
			t.Helper()
			noError(t, raw)
			var resp events.SQSEventResponse
			if err := json.Unmarshal(raw, &resp); err != nil || len(resp.BatchItemFailures) != 0 {
				t.Errorf("queue batch: response %s (%v), want no batch item failures", raw, err)
			}
		}}, nil
	}
	return invocation{}, fmt.Errorf("trigger kind %q has no sample event in the emulator smoke test: add one to triggerInvocation in infra/smoke/derive_test.go", tr.Kind)
}

// answered checks that a route's function answered the request itself: a
// status below 500 with a JSON body, not the access layer's 404 for a
// route the function does not serve.
func answered(what string) func(t *testing.T, out events.APIGatewayV2HTTPResponse) {
	return func(t *testing.T, out events.APIGatewayV2HTTPResponse) {
		t.Helper()
		if out.StatusCode < 200 || out.StatusCode >= 500 {
			t.Errorf("%s: status %d, want an answer below 500; body %s", what, out.StatusCode, out.Body)
		}
		if !json.Valid([]byte(out.Body)) {
			t.Errorf("%s: body is not JSON: %s", what, out.Body)
		}
		if strings.Contains(out.Body, `"no route `) {
			t.Errorf("%s: the function does not serve its own route: %s", what, out.Body)
		}
	}
}

// admitted is answered for a request signed by the key the route's auth
// kind admits: its signature (and, on a member route, the membership the
// function reads from the table) got it past 401.
func admitted(what string) func(t *testing.T, out events.APIGatewayV2HTTPResponse) {
	answer := answered(what)
	return func(t *testing.T, out events.APIGatewayV2HTTPResponse) {
		t.Helper()
		answer(t, out)
		if out.StatusCode == http.StatusUnauthorized {
			t.Errorf("%s: 401 %s; want the signer admitted", what, out.Body)
		}
	}
}

// refused checks that an unsigned request to a route that needs a
// signature does not succeed: 401 on member and owner routes (the caller is
// unknown before anything else is read); a 4xx on signed routes, which
// read the key the body names before they check its signature, so a body
// of another surface's shape is refused as invalid first.
func refused(what string, a routes.Auth) func(t *testing.T, out events.APIGatewayV2HTTPResponse) {
	return func(t *testing.T, out events.APIGatewayV2HTTPResponse) {
		t.Helper()
		ok := out.StatusCode == http.StatusUnauthorized
		if a == routes.Signed {
			ok = out.StatusCode >= 400 && out.StatusCode < 500 && !strings.Contains(out.Body, `"no route `)
		}
		if !ok || !json.Valid([]byte(out.Body)) {
			t.Errorf("%s: status %d, body %s; want a refusal (401 unless the route is %s: 4xx) with a JSON error", what, out.StatusCode, out.Body, routes.Signed)
		}
	}
}

// TestDerive checks the derivation itself, without the emulator: every
// route of the table gets requests that match that very route, signed when
// its auth kind needs it, every trigger an event, and a kind the smoke test
// does not know fails with a message that says where to add it.
func TestDerive(t *testing.T) {
	for _, name := range routes.Functions() {
		invs, err := derive(name)
		if err != nil {
			t.Fatal(err)
		}
		var n int
		for _, inv := range invs {
			if inv.event != nil && (!routes.Streamed(name) || inv.method == "") {
				continue // a trigger's event; a streaming route's is a request
			}
			n++
			r, params, ok := routes.Match(inv.method, inv.path)
			if !ok || r.Function != name {
				t.Errorf("%s: %s matches %+v (%t), want a route of %s", name, inv.name(), r, ok, name)
			}
			for k, v := range params {
				if v != sampleParams[k] && v != defaultParam {
					t.Errorf("%s: %s: parameter %s = %q", name, inv.name(), k, v)
				}
			}
			if (inv.key == nil) != (r.Auth == routes.Public || strings.HasSuffix(inv.what, " unsigned")) {
				t.Errorf("%s: %s signed by %v", name, inv.name(), inv.key)
			}
		}
		want := 0
		for _, r := range routes.ForFunction(name) {
			want += map[bool]int{true: 1, false: 2}[r.Auth == routes.Public]
		}
		if n != want || len(invs)-n != len(routes.Config(name).Triggers) {
			t.Errorf("%s: %d requests and %d events, want %d and %d", name, n, len(invs)-n, want, len(routes.Config(name).Triggers))
		}
	}
	if _, err := triggerInvocation(routes.Trigger{Kind: "sqs-queue"}); err == nil || !strings.Contains(err.Error(), `"sqs-queue" has no sample event`) {
		t.Errorf("an unknown trigger kind: %v, want an error naming it", err)
	}
	if _, err := signerFor(routes.Route{Auth: "admin"}); err == nil || !strings.Contains(err.Error(), `"admin"`) {
		t.Errorf("an unknown auth kind: %v, want an error naming it", err)
	}
	if got := samplePath("/v0/worlds/{world}/things/{thing}/{rest+}"); got != "/v0/worlds/lobby/things/smoke/smoke" {
		t.Errorf("samplePath = %q", got)
	}
}

// streamAnswered is a streaming function's public route invoked as its
// function URL invokes it: lambdaurl's streamed response (a JSON prelude
// with the status, eight NUL bytes, the body) with a status below 500 and
// a JSON body.
func streamAnswered(what, method, path, body string) invocation {
	inv := invocation{what: what, method: method, path: path, body: body}
	inv.event = func(t *testing.T) any { return signedEvent(t, inv) }
	inv.checkRaw = func(t *testing.T, raw []byte) {
		prelude, rest, ok := bytes.Cut(raw, make([]byte, 8))
		var head struct {
			StatusCode int `json:"statusCode"`
		}
		if !ok || json.Unmarshal(prelude, &head) != nil || head.StatusCode < 200 || head.StatusCode >= 500 || !json.Valid(rest) {
			t.Errorf("%s: %q, want a streamed answer below 500 with a JSON body", inv.what, raw)
		}
	}
	return inv
}

// streamRefusals are a streaming function's route invoked as its function
// URL invokes it (the same v2 request shape, which lambdaurl reads), unsigned
// and signed by a non-member: each answer is lambdaurl's streamed response
// (a JSON prelude with the status, eight NUL bytes, the body) carrying the
// world's error.
func streamRefusals(what, method, path string) []invocation {
	refusal := func(who string, key ed25519.PrivateKey, status int, code string) invocation {
		inv := invocation{what: what + " " + who, method: method, path: path, key: key}
		inv.event = func(t *testing.T) any { return signedEvent(t, inv) }
		inv.checkRaw = func(t *testing.T, raw []byte) {
			prelude, body, ok := bytes.Cut(raw, make([]byte, 8))
			var head struct {
				StatusCode int `json:"statusCode"`
			}
			if !ok || json.Unmarshal(prelude, &head) != nil || head.StatusCode != status || !bytes.Contains(body, []byte(`"code":"`+code+`"`)) {
				t.Errorf("%s: %q, want a streamed %d %s", inv.what, raw, status, code)
			}
		}
		return inv
	}
	return []invocation{
		refusal("unsigned", nil, 401, "UNAUTHORIZED"),
		refusal("signed by a non-member", smokeOutsider, 401, "NOT_JOINED"),
	}
}
