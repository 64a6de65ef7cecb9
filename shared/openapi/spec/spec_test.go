package spec_test

import (
	"bytes"
	"flag"
	"os"
	"strings"
	"sync"
	"testing"

	"github.com/a2awire/a2awire/shared/openapi/spec"
	"github.com/a2awire/a2awire/shared/routes"
)

var update = flag.Bool("update", false, "rewrite docs/openapi.json and shared/openapi/openapi.json from the route table")

// committed is the document package openapi embeds and serves; published
// is the same bytes where readers and API tools find it. Both are
// generated, both are checked.
const (
	committed = "../openapi.json"
	published = "../../../docs/openapi.json"
)

// checkers holds one Checker per document: building the validator's
// model is most of a checking test's CPU under -race (about 2 s each), and
// a Checker keeps no state between Checks, so a test given a cached one
// sees what a fresh one would. The committed document is the generated
// one (TestCommittedDocumentIsCurrent), so in a passing run one model
// serves every test.
var checkers = struct {
	sync.Mutex
	m map[string]*spec.Checker
}{m: map[string]*spec.Checker{}}

// checkerOf is the cached Checker of doc.
func checkerOf(t *testing.T, doc []byte) *spec.Checker {
	t.Helper()
	checkers.Lock()
	defer checkers.Unlock()
	if c := checkers.m[string(doc)]; c != nil {
		return c
	}
	c, err := spec.NewChecker(doc)
	if err != nil {
		t.Fatal(err)
	}
	checkers.m[string(doc)] = c
	return c
}

// generatedChecker is the Checker of the document the route table makes.
func generatedChecker(t *testing.T) *spec.Checker {
	t.Helper()
	doc, err := spec.Generate()
	if err != nil {
		t.Fatal(err)
	}
	return checkerOf(t, doc)
}

// TestEveryRouteHasAnOp: each route of the table has its entry in ops,
// and each entry names a route; the failure says what to add.
func TestEveryRouteHasAnOp(t *testing.T) {
	if m := spec.Missing(routes.All()); len(m) > 0 {
		t.Errorf("routes with no entry in shared/openapi/spec/ops.go; add to the ops map:\n\t%s\nthen run make openapi", strings.Join(m, "\n\t"))
	}
	if s := spec.Stale(routes.All()); len(s) > 0 {
		t.Errorf("entries of shared/openapi/spec/ops.go name no route of the table; remove them: %q", s)
	}
}

// TestMissingNamesTheLine: a route without an entry is named with the
// line to add, keyed by its route key.
func TestMissingNamesTheLine(t *testing.T) {
	m := spec.Missing([]routes.Route{{Method: "GET", Path: "/v0/escrows/{id}", Function: "escrow-get", Auth: routes.Signed}})
	if len(m) != 1 || !strings.HasPrefix(m[0], `"GET /v0/escrows/{id}": {Summary:`) {
		t.Fatalf("Missing = %q", m)
	}
}

// TestCommittedDocumentIsCurrent fails when docs/openapi.json or
// shared/openapi/openapi.json is not what the route table and types give
// now (make openapi, or go generate ./shared/openapi, rewrites both).
func TestCommittedDocumentIsCurrent(t *testing.T) {
	doc, err := spec.Generate()
	if err != nil {
		t.Fatal(err)
	}
	for path, name := range map[string]string{committed: "shared/openapi/openapi.json", published: "docs/openapi.json"} {
		if *update {
			if err := os.WriteFile(path, doc, 0o644); err != nil {
				t.Fatal(err)
			}
		}
		got, err := os.ReadFile(path)
		if err != nil {
			t.Fatal(err)
		}
		if !bytes.Equal(got, doc) {
			t.Errorf("%s is stale: run make openapi (go generate ./shared/openapi) and commit it", name)
		}
	}
}

// TestDocumentIsValidOpenAPI31: libopenapi-validator checks the committed
// document against the OpenAPI 3.1 schema.
func TestDocumentIsValidOpenAPI31(t *testing.T) {
	doc, err := os.ReadFile(committed)
	if err != nil {
		t.Fatal(err)
	}
	c := checkerOf(t, doc)
	if err := c.Document(); err != nil {
		t.Fatalf("the document is not valid OpenAPI 3.1:\n\t%v", err)
	}
	t.Logf("libopenapi-validator: valid OpenAPI 3.1 (%d bytes, %d routes)", len(doc), len(routes.All()))
}

// TestCheckerRefusesADriftedAnswer: an answer with a field the document
// does not name, or a world error in the registry's shape, fails.
func TestCheckerRefusesADriftedAnswer(t *testing.T) {
	c := generatedChecker(t)
	json := func() map[string][]string { return map[string][]string{"Content-Type": {"application/json"}} }
	good := spec.Exchange{Method: "GET", URL: "http://x/v0/worlds/lobby", Header: json(), Status: 404, RespHeader: json(),
		RespBody: []byte(`{"ok":false,"error":{"code":"NOT_FOUND","message":"no such world"}}`)}
	if err := c.Check(good); err != nil {
		t.Fatalf("a world 404 in the world shape: %v", err)
	}
	for name, body := range map[string]string{
		"registry shape on a world route": `{"error":"not_found","message":"no such world"}`,
		"lower-case world code":           `{"ok":false,"error":{"code":"not_found","message":"x"}}`,
	} {
		x := good
		x.RespBody = []byte(body)
		if err := c.Check(x); err == nil {
			t.Errorf("%s: accepted", name)
		}
	}
	ok := spec.Exchange{Method: "GET", URL: "http://x/api/v1/agents", Header: json(), Status: 200, RespHeader: json(),
		RespBody: []byte(`{"agents":[],"next_cursor":null}`)}
	if err := c.Check(ok); err != nil {
		t.Fatalf("an empty agent list: %v", err)
	}
	ok.RespBody = []byte(`{"agents":[],"next_cursor":null,"extra":1}`)
	if err := c.Check(ok); err == nil {
		t.Error("an answer with a field the document lacks: accepted")
	}
}

// TestUnexercisedNamesTheRoutes: a route no exchange reached is named by
// its key; one that was reached is not.
func TestUnexercisedNamesTheRoutes(t *testing.T) {
	table := []routes.Route{
		{Method: "GET", Path: "/v0/worlds/{world}", Function: "world-get", Auth: routes.Public},
		{Method: "POST", Path: "/v0/escrows", Function: "escrow-open", Auth: routes.Signed},
	}
	got := spec.Unexercised(table, map[string]int{"GET /v0/worlds/{world}": 3})
	if len(got) != 1 || got[0] != "POST /v0/escrows" {
		t.Fatalf("Unexercised = %q", got)
	}
}

// TestCheckerRefusesABadRequest: a success whose request breaks the
// document — a body missing a required field, a signed route called
// without its signature headers — fails.
func TestCheckerRefusesABadRequest(t *testing.T) {
	c := generatedChecker(t)
	hdr := func(kv ...string) map[string][]string {
		h := map[string][]string{"Content-Type": {"application/json"}}
		for i := 0; i+1 < len(kv); i += 2 {
			h[kv[i]] = []string{kv[i+1]}
		}
		return h
	}
	signed := hdr("Signature", "sig1=:AAAA:", "Signature-Input", `sig1=("@method");keyid="k"`, "Content-Digest", "sha-256=:AAAA:")
	ok := spec.Exchange{Method: "POST", URL: "http://x/v0/worlds/arena/actions", Header: signed, Body: []byte(`{"action":"move"}`),
		Status: 201, RespHeader: hdr(), RespBody: []byte(`{"ok":true,"data":{"actionId":"a1"}}`)}
	if err := c.Check(ok); err != nil {
		t.Fatalf("a valid action: %v", err)
	}
	noAction := ok
	noAction.Body = []byte(`{"params":{}}`)
	if err := c.Check(noAction); err == nil {
		t.Error("a body without its required field: accepted")
	}
	unsigned := ok
	unsigned.Header = hdr()
	if err := c.Check(unsigned); err == nil {
		t.Error("a member route without its signature headers: accepted")
	}
}

// TestCheckerRefusesDriftOnTheBridgeAndTheStream: the JSON-RPC route's
// answers are a result or a JSON-RPC error object (not the registry's
// shape), and the event stream's success must be text/event-stream.
func TestCheckerRefusesDriftOnTheBridgeAndTheStream(t *testing.T) {
	c := generatedChecker(t)
	ct := func(v string) map[string][]string { return map[string][]string{"Content-Type": {v}} }
	rpc := spec.Exchange{Method: "POST", URL: "http://x/a2a/p", Header: ct("application/json"), Status: 404, RespHeader: ct("application/json"),
		RespBody: []byte(`{"jsonrpc":"2.0","id":1,"error":{"code":-32600,"message":"no agent","data":[{"@type":"type.googleapis.com/google.rpc.ErrorInfo"}]}}`)}
	if err := c.Check(rpc); err != nil {
		t.Fatalf("a JSON-RPC 404: %v", err)
	}
	for name, body := range map[string]string{
		"registry shape on the JSON-RPC 404": `{"error":"not_found","message":"no agent"}`,
		"JSON-RPC error without data":        `{"jsonrpc":"2.0","id":1,"error":{"code":-32600,"message":"no agent"}}`,
	} {
		x := rpc
		x.RespBody = []byte(body)
		if err := c.Check(x); err == nil {
			t.Errorf("%s: accepted", name)
		}
	}
	body := []byte(`{"jsonrpc":"2.0","id":1,"method":"GetTask","params":{"id":"t"}}`)
	ok := rpc
	ok.Status, ok.Body = 200, body
	ok.RespBody = []byte(`{"jsonrpc":"2.0","id":1,"result":{"id":"t"}}`)
	if err := c.Check(ok); err != nil {
		t.Fatalf("a JSON-RPC result: %v", err)
	}
	ok.RespBody = []byte(`{"jsonrpc":"2.0","id":1,"result":{"id":"t"},"error":{"code":-32001,"message":"x","data":[]}}`)
	if err := c.Check(ok); err == nil {
		t.Error("a result and an error together: accepted")
	}
	stream := spec.Exchange{Method: "GET", URL: "http://x/v0/worlds/lobby/events/stream", Header: map[string][]string{"Signature": {"sig"}, "Signature-Input": {"s"}, "Content-Digest": {"d"}},
		Status: 200, RespHeader: ct("text/event-stream; charset=utf-8"), RespBody: []byte(": hi\n\n")}
	if err := c.Check(stream); err != nil {
		t.Fatalf("an event stream: %v", err)
	}
	stream.RespHeader = ct("application/json")
	stream.RespBody = []byte(`{"ok":true,"data":{}}`)
	if err := c.Check(stream); err == nil {
		t.Error("a JSON answer on the event stream: accepted")
	}
}
