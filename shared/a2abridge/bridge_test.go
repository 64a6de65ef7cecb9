package a2abridge_test

import (
	"context"
	"crypto/ed25519"
	"encoding/json"
	"errors"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/a2aproject/a2a-go/v2/a2a"
	"github.com/a2aproject/a2a-go/v2/a2aclient"
	a2acard "github.com/a2aproject/a2a-go/v2/a2aclient/agentcard"

	"github.com/a2awire/a2awire/functions/fixture-clean/clean"
	"github.com/a2awire/a2awire/functions/fixture-ledger/ledger"
	"github.com/a2awire/a2awire/functions/fixture-messy/messy"
	"github.com/a2awire/a2awire/functions/fixture-punctual/punctual"
	"github.com/a2awire/a2awire/functions/fixture-translator/llm"
	"github.com/a2awire/a2awire/functions/fixture-translator/translator"
	"github.com/a2awire/a2awire/functions/registry/registryapi"
	"github.com/a2awire/a2awire/shared/a2abridge"
	"github.com/a2awire/a2awire/shared/egress"
	"github.com/a2awire/a2awire/shared/fixtures"
	"github.com/a2awire/a2awire/shared/fixtures/seed"
	"github.com/a2awire/a2awire/shared/registry"
	"github.com/a2awire/a2awire/shared/store"
	"github.com/a2awire/a2awire/shared/store/memory"
	"github.com/a2awire/a2awire/shared/world"
	"github.com/a2awire/a2awire/shared/worldhttp"
)

// network is the five fixtures, the registry (with the network card), a
// world card and the bridge on one test server, as the harness mounts
// them.
type network struct {
	srv   *httptest.Server
	mux   *http.ServeMux
	st    store.Store
	owner ed25519.PublicKey
	// extra handlers by path, for providers a test registers.
	extra map[string]http.Handler
}

var discard = slog.New(slog.DiscardHandler)

type fakeWorlds struct{}

func (fakeWorlds) GetWorld(_ context.Context, id string) (world.Manifest, error) {
	return world.Manifest{ID: id, Name: "Lobby", Description: "Where agents meet.", Actions: []world.ActionSpec{{Name: "wave"}}}, nil
}

func newNetwork(t *testing.T) *network {
	t.Helper()
	n := &network{mux: http.NewServeMux(), st: memory.New(), extra: map[string]http.Handler{}}
	n.srv = httptest.NewServer(n.mux)
	t.Cleanup(n.srv.Close)
	pub, _, err := ed25519.GenerateKey(nil)
	if err != nil {
		t.Fatal(err)
	}
	n.owner = pub
	n.mux.Handle(fixtures.Path("a2awire-punctual"), punctual.New(discard))
	n.mux.Handle(fixtures.Path("a2awire-clean"), clean.New(discard))
	n.mux.Handle(fixtures.Path("a2awire-messy"), messy.New(discard))
	n.mux.Handle(fixtures.Path("a2awire-translator"), translator.New(discard, llm.Config{}, nil))
	n.mux.Handle(fixtures.Path("a2awire-ledger"), ledger.New(discard, n.st))
	ctx := context.Background()
	if _, err := seed.Seed(ctx, seed.OverStore(n.st, registry.AllowInsecureEndpoints())(pub), n.srv.URL, pub); err != nil {
		t.Fatal(err)
	}
	bridge, err := a2abridge.New(a2abridge.Options{
		Store:   n.st,
		Egress:  egress.Options{AllowHTTP: true, AllowLoopback: true},
		Backoff: func(int) time.Duration { return 0 },
	})
	if err != nil {
		t.Fatal(err)
	}
	n.mux.Handle("/a2a/", bridge)
	reg, err := registryapi.New(registryapi.Options{Store: n.st, BaseURL: n.srv.URL, NetworkKey: pub, AllowInsecureEndpoints: true})
	if err != nil {
		t.Fatal(err)
	}
	n.mux.Handle("/.well-known/", reg)
	cards, err := worldhttp.NewCard(worldhttp.Options{BaseURL: n.srv.URL, Function: "world-card"}, fakeWorlds{})
	if err != nil {
		t.Fatal(err)
	}
	n.mux.Handle("/v0/worlds/", cards)
	n.mux.HandleFunc("/other/", func(w http.ResponseWriter, r *http.Request) {
		if h, ok := n.extra[r.URL.Path]; ok {
			h.ServeHTTP(w, r)
			return
		}
		http.NotFound(w, r)
	})
	return n
}

// register puts a provider of its own key at path on the test server.
func (n *network) register(t *testing.T, name, path string, caps []string, h http.Handler) {
	t.Helper()
	n.extra[path] = h
	pub, _, _ := ed25519.GenerateKey(nil)
	_, _, err := registry.New(n.st, registry.AllowInsecureEndpoints()).Register(context.Background(),
		registry.Agent{Name: name, Endpoint: n.srv.URL + path, Capabilities: caps, PublicKey: pub})
	if err != nil {
		t.Fatal(err)
	}
}

// client resolves name's card through the bridge with a2a-go's resolver and
// opens an a2a-go client on it.
func (n *network) client(t *testing.T, name string) (*a2a.AgentCard, *a2aclient.Client) {
	t.Helper()
	ctx := context.Background()
	card, err := a2acard.NewResolver(n.srv.Client()).Resolve(ctx, n.srv.URL+"/a2a/"+name)
	if err != nil {
		t.Fatalf("resolve %s: %v", name, err)
	}
	c, err := a2aclient.NewFromCard(ctx, card, a2aclient.WithJSONRPCTransport(n.srv.Client()))
	if err != nil {
		t.Fatalf("client for %s: %v", name, err)
	}
	return card, c
}

func dataMessage(id, task string, input any) *a2a.SendMessageRequest {
	m := a2a.NewMessage(a2a.MessageRoleUser, a2a.NewDataPart(map[string]any{"task": task, "input": input}))
	if id != "" {
		m.ID = id
	}
	return &a2a.SendMessageRequest{Message: m}
}

func completed(t *testing.T, c *a2aclient.Client, req *a2a.SendMessageRequest) *a2a.Task {
	t.Helper()
	res, err := c.SendMessage(context.Background(), req)
	if err != nil {
		t.Fatal(err)
	}
	task, ok := res.(*a2a.Task)
	if !ok {
		t.Fatalf("result %T, want a Task", res)
	}
	if task.Status.State != a2a.TaskStateCompleted || len(task.Artifacts) != 1 || len(task.Artifacts[0].Parts) != 1 {
		t.Fatalf("task %+v, want completed with one artifact", task)
	}
	return task
}

func output(t *testing.T, task *a2a.Task) map[string]any {
	t.Helper()
	out, ok := task.Artifacts[0].Parts[0].Data().(map[string]any)
	if !ok {
		t.Fatalf("artifact part %+v is not a data object", task.Artifacts[0].Parts[0])
	}
	return out
}

// TestHireEveryFixture: a2a-go's client resolves each fixture's card
// through the bridge and hires it — messy through SendStreamingMessage —
// and each answer is the provider's output in a completed Task whose
// artifact metadata is the provider's metadata.
func TestHireEveryFixture(t *testing.T) {
	n := newNetwork(t)
	ctx := context.Background()

	_, c := n.client(t, "a2awire-punctual")
	task := completed(t, c, dataMessage("", "ping", map[string]any{"echo": "hi"}))
	if out := output(t, task); out["pong"] != true || out["echo"] != "hi" {
		t.Errorf("punctual output %v", out)
	}
	if md := task.Artifacts[0].Metadata; md["agent"] != "a2awire-punctual" || md["capability"] != "ping" {
		t.Errorf("artifact metadata %v", md)
	}

	// A text part goes to the first capability as input.text.
	_, c = n.client(t, "a2awire-clean")
	text := &a2a.SendMessageRequest{Message: a2a.NewMessage(a2a.MessageRoleUser, a2a.NewTextPart("one two three"))}
	if out := output(t, completed(t, c, text)); out["words"] != float64(3) {
		t.Errorf("clean output %v", out)
	}

	_, c = n.client(t, "a2awire-translator")
	out := output(t, completed(t, c, dataMessage("", "translation", map[string]any{"text": "hello", "target_lang": "es", "source_lang": "en"})))
	if s, _ := out["text"].(string); s == "" {
		if s, _ = out["translation"].(string); s == "" {
			t.Errorf("translator output %v", out)
		}
	}

	_, c = n.client(t, "a2awire-ledger")
	if out := output(t, completed(t, c, dataMessage("", "record-entry", map[string]any{"account": "hire", "amount_cents": 7}))); out["balance_cents"] != float64(7) {
		t.Errorf("ledger output %v", out)
	}

	card, c := n.client(t, "a2awire-messy")
	if !card.Capabilities.Streaming {
		t.Fatal("messy's card does not advertise streaming")
	}
	var kinds []string
	var final *a2a.TaskStatusUpdateEvent
	for ev, err := range c.SendStreamingMessage(ctx, dataMessage("", "messy-echo", map[string]any{"k": "v"})) {
		if err != nil {
			t.Fatal(err)
		}
		switch e := ev.(type) {
		case *a2a.Task:
			kinds = append(kinds, "task:"+string(e.Status.State))
		case *a2a.TaskArtifactUpdateEvent:
			kinds = append(kinds, "artifact")
			if echo, _ := e.Artifact.Parts[0].Data().(map[string]any)["echo"].(map[string]any); echo["k"] != "v" {
				t.Errorf("streamed artifact %v", e.Artifact.Parts[0].Data())
			}
		case *a2a.TaskStatusUpdateEvent:
			kinds = append(kinds, "status:"+string(e.Status.State))
			final = e
		}
	}
	if strings.Join(kinds, ",") != "task:TASK_STATE_WORKING,artifact,status:TASK_STATE_COMPLETED" || final == nil {
		t.Errorf("stream %v, want a working task, the artifact and the completed status", kinds)
	}
}

// TestLedgerOnceForOneMessageID: the same message sent twice through the
// bridge books one entry; the second Task says the provider replayed.
func TestLedgerOnceForOneMessageID(t *testing.T) {
	n := newNetwork(t)
	_, c := n.client(t, "a2awire-ledger")
	first := completed(t, c, dataMessage("book-once-1", "record-entry", map[string]any{"account": "once", "amount_cents": 500}))
	second := completed(t, c, dataMessage("book-once-1", "record-entry", map[string]any{"account": "once", "amount_cents": 500}))
	if first.ID != "book-once-1" || second.ID != first.ID {
		t.Errorf("task ids %q %q, want the message id", first.ID, second.ID)
	}
	if first.Metadata["replayed"] != false || second.Metadata["replayed"] != true {
		t.Errorf("replayed %v then %v, want false then true", first.Metadata["replayed"], second.Metadata["replayed"])
	}
	bal := output(t, completed(t, c, dataMessage("", "balance", map[string]any{"account": "once"})))
	if bal["balance_cents"] != float64(500) || bal["entries"] != float64(1) {
		t.Errorf("balance %v, want 500 in one entry", bal)
	}
}

// TestTasks: GetTask returns the stored Task (history cut by
// historyLength), CancelTask is task-not-cancelable, an unknown id is
// task-not-found for both.
func TestTasks(t *testing.T) {
	n := newNetwork(t)
	ctx := context.Background()
	_, c := n.client(t, "a2awire-punctual")
	sent := completed(t, c, dataMessage("get-me", "ping", map[string]any{}))
	got, err := c.GetTask(ctx, &a2a.GetTaskRequest{ID: sent.ID})
	if err != nil || got.Status.State != a2a.TaskStateCompleted || got.ID != "get-me" || len(got.History) != 1 || output(t, got)["pong"] != true {
		t.Fatalf("GetTask: %+v %v", got, err)
	}
	zero := 0
	if got, err := c.GetTask(ctx, &a2a.GetTaskRequest{ID: sent.ID, HistoryLength: &zero}); err != nil || len(got.History) != 0 {
		t.Errorf("historyLength 0: %+v %v", got, err)
	}
	if _, err := c.CancelTask(ctx, &a2a.CancelTaskRequest{ID: sent.ID}); !errors.Is(err, a2a.ErrTaskNotCancelable) {
		t.Errorf("CancelTask: %v, want task not cancelable", err)
	}
	if _, err := c.GetTask(ctx, &a2a.GetTaskRequest{ID: "never-sent"}); !errors.Is(err, a2a.ErrTaskNotFound) {
		t.Errorf("GetTask unknown: %v", err)
	}
	if _, err := c.CancelTask(ctx, &a2a.CancelTaskRequest{ID: "never-sent"}); !errors.Is(err, a2a.ErrTaskNotFound) {
		t.Errorf("CancelTask unknown: %v", err)
	}
	// Another agent's task id is not this agent's.
	_, other := n.client(t, "a2awire-clean")
	if _, err := other.GetTask(ctx, &a2a.GetTaskRequest{ID: sent.ID}); !errors.Is(err, a2a.ErrTaskNotFound) {
		t.Errorf("GetTask through another agent: %v", err)
	}
}

// TestProviderErrors: a 400 is invalid params carrying the provider's
// {error, message}; a 5xx is a failed Task with the reason, stored for
// GetTask; an answer the verifier refuses is a failed Task too.
func TestProviderErrors(t *testing.T) {
	n := newNetwork(t)
	ctx := context.Background()
	_, c := n.client(t, "a2awire-clean")
	_, err := c.SendMessage(ctx, dataMessage("", "word-count", map[string]any{}))
	var ae *a2a.Error
	if !errors.Is(err, a2a.ErrInvalidParams) || !errors.As(err, &ae) || ae.Details["error"] != "invalid_input" || ae.Details["message"] == "" {
		t.Errorf("bad input: %v %+v", err, ae)
	}
	_, err = c.SendMessage(ctx, dataMessage("", "no-such-capability", map[string]any{}))
	if !errors.As(err, &ae) || ae.Details["error"] != "unsupported_capability" {
		t.Errorf("unknown capability: %v", err)
	}

	_, c = n.client(t, "a2awire-messy")
	res, err := c.SendMessage(ctx, dataMessage("fails-502", "messy-echo", map[string]any{"simulate": "upstream_error"}))
	task, _ := res.(*a2a.Task)
	if err != nil || task == nil || task.Status.State != a2a.TaskStateFailed || task.Status.Message == nil ||
		!strings.Contains(task.Status.Message.Parts[0].Text(), "502 upstream_error") {
		t.Fatalf("5xx: %+v %v", res, err)
	}
	if got, err := c.GetTask(ctx, &a2a.GetTaskRequest{ID: "fails-502"}); err != nil || got.Status.State != a2a.TaskStateFailed {
		t.Errorf("GetTask of the failed task: %+v %v", got, err)
	}

	// 200 with an error inside the output: the verifier refuses it.
	n.register(t, "liar-provider", "/other/liar", []string{"lie"}, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		_, _ = w.Write([]byte(`{"output":{"error":"oops","message":"no"},"metadata":{"agent":"liar-provider","capability":"lie","duration_ms":1}}`))
	}))
	_, c = n.client(t, "liar-provider")
	res, err = c.SendMessage(ctx, dataMessage("", "lie", map[string]any{}))
	task, _ = res.(*a2a.Task)
	if err != nil || task == nil || task.Status.State != a2a.TaskStateFailed || !strings.Contains(task.Status.Message.Parts[0].Text(), "verifier") {
		t.Errorf("verifier refusal: %+v %v", res, err)
	}
}

// TestEgressPolicy: under the cloud's policy (no loopback, no http) a
// provider on loopback is never called and its Task fails saying why.
func TestEgressPolicy(t *testing.T) {
	n := newNetwork(t)
	called := false
	n.register(t, "loopback-provider", "/other/lo", []string{"x"}, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { called = true }))
	strict, err := a2abridge.New(a2abridge.Options{Store: n.st, Egress: egress.Options{}})
	if err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer(strict)
	t.Cleanup(srv.Close)
	body := `{"jsonrpc":"2.0","id":"1","method":"SendMessage","params":{"message":{"messageId":"m1","role":"ROLE_USER","parts":[{"data":{"task":"x"}}]}}}`
	r := rpc(t, srv.URL+"/a2a/loopback-provider", body, "1.0")
	if called || !strings.Contains(r, "TASK_STATE_FAILED") || !strings.Contains(r, "egress policy") {
		t.Errorf("called %v, answer %s", called, r)
	}
}

// rpc posts body as a JSON-RPC request with A2A-Version v ("" sends none)
// and returns the answer's body.
func rpc(t *testing.T, url, body, v string) string {
	t.Helper()
	req, _ := http.NewRequest("POST", url, strings.NewReader(body))
	req.Header.Set("Content-Type", "application/json")
	if v != "" {
		req.Header.Set("A2A-Version", v)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var b strings.Builder
	buf := make([]byte, 4096)
	for {
		k, err := resp.Body.Read(buf)
		b.Write(buf[:k])
		if err != nil {
			break
		}
	}
	return b.String()
}

// TestJSONRPCErrors: each malformed request gets its JSON-RPC error code
// with the request's id when it could be read.
func TestJSONRPCErrors(t *testing.T) {
	n := newNetwork(t)
	url := n.srv.URL + "/a2a/a2awire-punctual"
	msg := `"params":{"message":{"messageId":"m","role":"ROLE_USER","parts":[{"data":{"task":"ping"}}]}}`
	for _, tc := range []struct {
		name, body, version string
		code                int
		id                  any
	}{
		{"not JSON", `{`, "1.0", -32700, nil},
		{"duplicate key", `{"jsonrpc":"2.0","id":1,"id":2,"method":"GetTask"}`, "1.0", -32700, nil},
		{"batch", `[{"jsonrpc":"2.0","id":1,"method":"GetTask"}]`, "1.0", -32600, nil},
		{"wrong jsonrpc", `{"jsonrpc":"1.0","id":"a","method":"GetTask"}`, "1.0", -32600, "a"},
		{"notification", `{"jsonrpc":"2.0","method":"GetTask"}`, "1.0", -32600, nil},
		{"unknown member", `{"jsonrpc":"2.0","id":"a","method":"GetTask","extra":1}`, "1.0", -32600, "a"},
		{"unknown method", `{"jsonrpc":"2.0","id":"a","method":"message/send",` + msg + `}`, "1.0", -32601, "a"},
		{"no version header is 0.3", `{"jsonrpc":"2.0","id":"a","method":"SendMessage",` + msg + `}`, "", -32009, "a"},
		{"version 2.0", `{"jsonrpc":"2.0","id":"a","method":"SendMessage",` + msg + `}`, "2.0", -32009, "a"},
		{"params not an object", `{"jsonrpc":"2.0","id":7,"method":"GetTask","params":[1]}`, "1.0", -32602, float64(7)},
		{"no message", `{"jsonrpc":"2.0","id":"a","method":"SendMessage","params":{}}`, "1.0", -32602, "a"},
		{"agent role", `{"jsonrpc":"2.0","id":"a","method":"SendMessage","params":{"message":{"messageId":"m","role":"ROLE_AGENT","parts":[{"text":"x"}]}}}`, "1.0", -32602, "a"},
		{"message id not a task id", `{"jsonrpc":"2.0","id":"a","method":"SendMessage","params":{"message":{"messageId":"a\u0001b","role":"ROLE_USER","parts":[{"text":"x"}]}}}`, "1.0", -32602, "a"},
		{"data part without task", `{"jsonrpc":"2.0","id":"a","method":"SendMessage","params":{"message":{"messageId":"m","role":"ROLE_USER","parts":[{"data":{"input":{}}}]}}}`, "1.0", -32602, "a"},
		{"input not an object", `{"jsonrpc":"2.0","id":"a","method":"SendMessage","params":{"message":{"messageId":"m","role":"ROLE_USER","parts":[{"data":{"task":"ping","input":[]}}]}}}`, "1.0", -32602, "a"},
		{"no usable part", `{"jsonrpc":"2.0","id":"a","method":"SendMessage","params":{"message":{"messageId":"m","role":"ROLE_USER","parts":[{"url":"https://x.example/f"}]}}}`, "1.0", -32602, "a"},
		{"continuing a task", `{"jsonrpc":"2.0","id":"a","method":"SendMessage","params":{"message":{"messageId":"m","taskId":"nope","role":"ROLE_USER","parts":[{"text":"x"}]}}}`, "1.0", -32001, "a"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var got struct {
				JSONRPC string
				ID      any
				Error   struct {
					Code    int
					Message string
				}
			}
			raw := rpc(t, url, tc.body, tc.version)
			if err := json.Unmarshal([]byte(raw), &got); err != nil {
				t.Fatalf("%s: %v", raw, err)
			}
			if got.JSONRPC != "2.0" || got.Error.Code != tc.code || got.ID != tc.id || got.Error.Message == "" {
				t.Errorf("%s, want code %d id %v", raw, tc.code, tc.id)
			}
		})
	}
	if r := rpc(t, n.srv.URL+"/a2a/nobody-here", `{"jsonrpc":"2.0","id":"a","method":"GetTask","params":{"id":"x"}}`, "1.0"); !strings.Contains(r, "no agent is registered") {
		t.Errorf("unknown agent: %s", r)
	}
}
