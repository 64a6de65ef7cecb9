package main

import (
	"encoding/json"
	"testing"

	"github.com/a2awire/a2awire/shared/routes"
)

// TestBudgetAllows: a cost row is ok only when every call is within its
// budget, a call the budget does not name is over it, and the one-of
// group (the inbox's single write request) counts its members together.
func TestBudgetAllows(t *testing.T) {
	read := budget{calls: with(true, map[string]int{"Query": 1}), oneOf: []string{"DeleteItem", "TransactWriteItems"}, oneOfMax: 1}
	for _, c := range []struct {
		name  string
		b     budget
		calls map[string]int
		want  bool
	}{
		{"exact", read, map[string]int{"Query": 1, "TransactWriteItems": 1, "PutItem": 1, "GetItem": 1, "UpdateItem": 1}, true},
		{"under (peek: no write)", read, map[string]int{"Query": 1, "PutItem": 1, "GetItem": 1, "UpdateItem": 1}, true},
		{"the other member of the group", read, map[string]int{"Query": 1, "DeleteItem": 1, "PutItem": 1, "GetItem": 1, "UpdateItem": 1}, true},
		{"both members of the group", read, map[string]int{"Query": 1, "DeleteItem": 1, "TransactWriteItems": 1}, false},
		{"a second Query", read, map[string]int{"Query": 2}, false},
		{"a call it does not name", read, map[string]int{"Scan": 1}, false},
		{"no calls", budget{}, map[string]int{}, true},
		{"limited route without the UpdateItem budget", budget{calls: with(false, nil)}, map[string]int{"PutItem": 1, "GetItem": 1, "UpdateItem": 1}, false},
	} {
		if got := c.b.allows(c.calls); got != c.want {
			t.Errorf("%s: allows(%v) = %v, want %v", c.name, c.calls, got, c.want)
		}
	}
}

// TestColdIDs: every cold-start row has its own id and none is the sizes
// row's.
func TestColdIDs(t *testing.T) {
	seen := map[string]bool{sizesID: true}
	for i := range 80 {
		id := coldID(i)
		if seen[id] {
			t.Fatalf("coldID(%d) = %q, already taken", i, id)
		}
		seen[id] = true
	}
	if coldID(0) != "3a" || coldID(25) != "3z" || coldID(26) != "3a2" {
		t.Errorf("coldID(0), coldID(25), coldID(26) = %q, %q, %q; want 3a, 3z, 3a2", coldID(0), coldID(25), coldID(26))
	}
}

// TestFirstPayload: each cold start's first invocation is the event the
// function's trigger sends: an HTTP route's API Gateway event with its
// path parameters filled (route key still the template), an empty stream
// batch, a scheduled event, a custom resource's Delete to the local
// response URL.
func TestFirstPayload(t *testing.T) {
	payload := func(name string) map[string]any {
		t.Helper()
		raw, err := firstPayload(coldTarget{name: name, fn: routes.Config(name), cfnURL: "http://127.0.0.1:1/cfn"})
		if err != nil {
			t.Fatal(err)
		}
		var v map[string]any
		if err := json.Unmarshal(raw, &v); err != nil {
			t.Fatalf("%s: %v: %s", name, err, raw)
		}
		return v
	}
	send := payload("world-send")
	if send["rawPath"] != "/v0/worlds/bench-cold/messages" || send["routeKey"] != "POST /v0/worlds/{world}/messages" {
		t.Errorf("world-send: rawPath %v, routeKey %v", send["rawPath"], send["routeKey"])
	}
	if p, _ := send["pathParameters"].(map[string]any); p["world"] != "bench-cold" {
		t.Errorf("world-send: pathParameters %v", send["pathParameters"])
	}
	if r, ok := payload("webhook-dispatcher")["Records"].([]any); !ok || len(r) != 0 {
		t.Errorf("webhook-dispatcher: Records %v, want an empty batch", r)
	}
	if d := payload("webhook-retry")["detail-type"]; d != "Scheduled Event" {
		t.Errorf("webhook-retry: detail-type %v", d)
	}
	if seed := payload("registry-seed"); seed["RequestType"] != "Delete" || seed["ResponseURL"] != "http://127.0.0.1:1/cfn" {
		t.Errorf("registry-seed: %v", seed)
	}
}
