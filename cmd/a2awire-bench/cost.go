package main

import (
	"context"
	"fmt"
	"maps"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"

	"github.com/a2awire/a2awire/functions/fixture-ledger/ledger"
	"github.com/a2awire/a2awire/shared/logging"
	"github.com/a2awire/a2awire/shared/protocol"
	"github.com/a2awire/a2awire/shared/store/dynamo"
	"github.com/a2awire/a2awire/shared/store/dynamo/capacity"
	"github.com/a2awire/a2awire/shared/store/dynamo/dynamolocal"
)

// costStep is one ledger request whose DynamoDB calls are metered.
type costStep struct {
	id, name     string
	taskID, task string
	input        string
	status       int
	target       map[string]int // the calls of docs/storage.md's cost table
}

// costRows is row 4: DynamoDB calls and consumed units per operation,
// through the whole a2awire-ledger handler (provider kit, idempotency
// guard, ledger) on DynamoDB Local, from the capacity meter; then the
// registry's (4e, 4f) and the world functions' (4g–4l) through their
// Lambda entries, and webhook delivery (4m) through the dispatcher's.
func costRows(ctx context.Context, server *dynamolocal.Server, table string) []Row {
	method := "a2awire-ledger's handler (provider kit + idempotency guard + ledger) on DynamoDB Local; calls and units from shared/store/dynamo/capacity; target = the cost table of docs/storage.md"
	steps := []costStep{
		{"4a", "idempotent invoke, first (record-entry with a new task id, end to end)", "bench-1", "record-entry", `{"account":"bench","amount_cents":10}`, 200,
			map[string]int{"GetItem": 2, "PutItem": 1, "TransactWriteItems": 1, "UpdateItem": 1}},
		{"4b", "idempotent invoke, replay (same task id)", "bench-1", "record-entry", `{"account":"bench","amount_cents":10}`, 200,
			map[string]int{"GetItem": 1}},
		{"4c", "ledger append (record-entry without a task id)", "", "record-entry", `{"account":"bench","amount_cents":5}`, 200,
			map[string]int{"GetItem": 1, "TransactWriteItems": 1}},
		{"4d", "ledger balance", "", "balance", `{"account":"bench"}`, 200,
			map[string]int{"GetItem": 1}},
	}
	m := capacity.New()
	h := ledger.New(logging.Discard(), dynamo.New(server.Client(m.Option()), table))
	var rows []Row
	for _, s := range steps {
		row := Row{ID: s.id, Name: "DynamoDB cost: " + s.name, Target: callsString(s.target) + " per request", Method: method}
		m.Reset()
		body := fmt.Sprintf(`{"task":%q,"input":%s}`, s.task, s.input)
		r := httptest.NewRequestWithContext(ctx, http.MethodPost, "/agents/a2awire-ledger/invoke", strings.NewReader(body))
		r.Header.Set("Content-Type", "application/json")
		if s.taskID != "" {
			r.Header.Set(protocol.TaskIDHeader, s.taskID)
		}
		w := httptest.NewRecorder()
		h.ServeHTTP(w, r)
		if w.Code != s.status {
			rows = append(rows, failed(row, fmt.Errorf("status %d, want %d: %s", w.Code, s.status, w.Body.String())))
			continue
		}
		got := m.Take()
		calls := got.Calls()
		ok := true
		for op, n := range calls {
			ok = ok && n <= s.target[op]
		}
		t := got.Total()
		row.Status = within(ok)
		row.Result = fmt.Sprintf("%s; %g read + %g write units", callsString(calls), t.ReadUnits, t.WriteUnits)
		row.Values = map[string]float64{"calls": float64(t.Calls), "read_units": t.ReadUnits, "write_units": t.WriteUnits}
		rows = append(rows, row)
	}
	rows = append(rows, registryRows(ctx, server, table)...)
	rows = append(rows, worldRows(ctx, server, table)...)
	rows = append(rows, webhookCostRow(ctx, server, table))
	return rows
}

// callsString renders calls per operation, sorted: "2 GetItem + 1 PutItem".
func callsString(calls map[string]int) string {
	if len(calls) == 0 {
		return "no calls"
	}
	var parts []string
	for _, op := range slices.Sorted(maps.Keys(calls)) {
		parts = append(parts, fmt.Sprintf("%d %s", calls[op], op))
	}
	return strings.Join(parts, " + ")
}
