package ledger_test

import (
	"maps"
	"testing"

	"github.com/a2awire/a2awire/functions/fixture-ledger/ledger"
	"github.com/a2awire/a2awire/shared/logging"
	"github.com/a2awire/a2awire/shared/store/dynamo"
	"github.com/a2awire/a2awire/shared/store/dynamo/capacity"
	"github.com/a2awire/a2awire/shared/store/dynamo/dynamolocal"
)

// TestInvocationCosts pins the DynamoDB calls of whole invocations through
// the provider kit, idempotency guard and ledger, against DynamoDB Local: the
// numbers a deploy pays per request.
func TestInvocationCosts(t *testing.T) {
	m := capacity.New()
	client, table := dynamolocal.NewTable(t, local, m.Option())
	h := ledger.New(logging.Discard(), dynamo.New(client, table))
	m.Reset()

	steps := []struct {
		name         string
		taskID, task string
		input        string
		status       int
		replayed     bool
		calls        map[string]int
	}{
		{"first record-entry with a task id", "cost-1", "record-entry", `{"account":"c","amount_cents":10}`, 200, false,
			// guard read + claim, ledger read + transaction, completion
			map[string]int{"GetItem": 2, "PutItem": 1, "TransactWriteItems": 1, "UpdateItem": 1}},
		{"replay of the same task id", "cost-1", "record-entry", `{"account":"c","amount_cents":10}`, 200, true,
			map[string]int{"GetItem": 1}},
		{"same task id, other body", "cost-1", "record-entry", `{"account":"c","amount_cents":11}`, 409, false,
			map[string]int{"GetItem": 1}},
		{"record-entry without a task id", "", "record-entry", `{"account":"c","amount_cents":5}`, 200, false,
			map[string]int{"GetItem": 1, "TransactWriteItems": 1}},
		{"balance", "", "balance", `{"account":"c"}`, 200, false,
			map[string]int{"GetItem": 1}},
		{"invalid input costs nothing", "", "record-entry", `{"account":"c","amount_cents":0}`, 400, false,
			map[string]int{}},
	}
	for _, s := range steps {
		r := call(t, h, s.taskID, s.task, s.input)
		if r.status != s.status || r.replayed != s.replayed {
			t.Fatalf("%s: %d replayed=%v, want %d replayed=%v (%s)", s.name, r.status, r.replayed, s.status, s.replayed, r.body)
		}
		got := m.Take()
		t.Logf("%-36s %v", s.name, got.Calls())
		if calls := got.Calls(); !maps.Equal(calls, s.calls) && !(len(calls) == 0 && len(s.calls) == 0) {
			t.Errorf("%s: calls %v, want %v", s.name, calls, s.calls)
		}
	}
}
