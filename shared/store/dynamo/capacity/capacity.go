// Package capacity meters what a DynamoDB client costs: calls and consumed
// capacity units per operation, measured by an aws-sdk-go-v2 middleware.
//
// Tests use it to pin the cost of every store operation (a regression that
// adds a read to the hot path fails a test instead of showing up on the
// bill), and the benchmarks report it. Capacity is taken from the responses'
// ConsumedCapacity, which DynamoDB returns only when the request sets
// ReturnConsumedCapacity (the dynamo adapter always asks for TOTAL). Calls
// are counted once per operation, not per SDK retry attempt, and failed
// calls (a conditional check that failed, a cancelled transaction) count as
// calls and as errors: DynamoDB bills them too, but does not report their
// capacity.
//
//	meter := capacity.New()
//	client := dynamodb.New(base.Options(), meter.Option())
//	... use client ...
//	meter.Snapshot() // map[GetItem:{Calls:1 ...} TransactWriteItems:{...}]
package capacity

import (
	"context"
	"fmt"
	"maps"
	"slices"
	"strings"
	"sync"

	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
	"github.com/aws/smithy-go/middleware"
)

// Usage is what one operation cost in total.
type Usage struct {
	Calls  int
	Errors int
	// Units is the total capacity units DynamoDB reported; ReadUnits and
	// WriteUnits split it when DynamoDB breaks it down (it does for
	// transactions and on-demand tables, not always elsewhere).
	Units      float64
	ReadUnits  float64
	WriteUnits float64
}

func (u Usage) add(v Usage) Usage {
	return Usage{
		Calls: u.Calls + v.Calls, Errors: u.Errors + v.Errors, Units: u.Units + v.Units,
		ReadUnits: u.ReadUnits + v.ReadUnits, WriteUnits: u.WriteUnits + v.WriteUnits,
	}
}

// Report is usage by operation name (GetItem, PutItem, TransactWriteItems…).
type Report map[string]Usage

// Calls returns the number of calls per operation, the form tests assert.
func (r Report) Calls() map[string]int {
	out := make(map[string]int, len(r))
	for op, u := range r {
		out[op] = u.Calls
	}
	return out
}

// Total sums every operation.
func (r Report) Total() Usage {
	var t Usage
	for _, u := range r {
		t = t.add(u)
	}
	return t
}

// String renders the report one operation per line, sorted, for logs.
func (r Report) String() string {
	var b strings.Builder
	for _, op := range slices.Sorted(maps.Keys(r)) {
		u := r[op]
		fmt.Fprintf(&b, "%s: calls=%d errors=%d units=%g read=%g write=%g\n", op, u.Calls, u.Errors, u.Units, u.ReadUnits, u.WriteUnits)
	}
	return b.String()
}

// Meter accumulates usage. It is safe for concurrent use; one meter may be
// attached to several clients.
type Meter struct {
	mu    sync.Mutex
	usage Report
}

// New returns an empty meter.
func New() *Meter { return &Meter{usage: Report{}} }

// Option attaches the meter to a client:
// dynamodb.New(opts, meter.Option()) or dynamodb.NewFromConfig(cfg, meter.Option()).
func (m *Meter) Option() func(*dynamodb.Options) {
	return func(o *dynamodb.Options) { o.APIOptions = append(o.APIOptions, m.AddTo) }
}

// AddTo adds the metering middleware to an operation's stack. It sits in
// the initialize step, outside the retry loop, so one call counts once.
func (m *Meter) AddTo(stack *middleware.Stack) error {
	return stack.Initialize.Add(middleware.InitializeMiddlewareFunc("a2awire/capacity", m.handle), middleware.Before)
}

func (m *Meter) handle(ctx context.Context, in middleware.InitializeInput, next middleware.InitializeHandler) (
	middleware.InitializeOutput, middleware.Metadata, error,
) {
	out, md, err := next.HandleInitialize(ctx, in)
	op := middleware.GetOperationName(ctx)
	u := Usage{Calls: 1}
	if err != nil {
		u.Errors = 1
	} else {
		for _, c := range consumed(out.Result) {
			u.Units += deref(c.CapacityUnits)
			if c.ReadCapacityUnits == nil && c.WriteCapacityUnits == nil {
				// TOTAL often reports only CapacityUnits; the operation
				// says which kind they are.
				switch kindOf(op) {
				case read:
					u.ReadUnits += deref(c.CapacityUnits)
				case write:
					u.WriteUnits += deref(c.CapacityUnits)
				}
				continue
			}
			u.ReadUnits += deref(c.ReadCapacityUnits)
			u.WriteUnits += deref(c.WriteCapacityUnits)
		}
	}
	m.mu.Lock()
	m.usage[op] = m.usage[op].add(u)
	m.mu.Unlock()
	return out, md, err
}

// Snapshot returns a copy of the usage so far.
func (m *Meter) Snapshot() Report {
	m.mu.Lock()
	defer m.mu.Unlock()
	return maps.Clone(m.usage)
}

// Reset clears the usage, so a test can measure one operation at a time.
func (m *Meter) Reset() {
	m.mu.Lock()
	defer m.mu.Unlock()
	clear(m.usage)
}

// Take returns the usage so far and resets the meter.
func (m *Meter) Take() Report {
	m.mu.Lock()
	defer m.mu.Unlock()
	r := m.usage
	m.usage = Report{}
	return r
}

type kind int

const (
	unknown kind = iota
	read
	write
)

// kindOf classifies operations whose units are all of one kind. PartiQL
// statements can be either and stay unclassified (counted in Units only).
func kindOf(op string) kind {
	switch op {
	case "GetItem", "Query", "Scan", "BatchGetItem", "TransactGetItems":
		return read
	case "PutItem", "UpdateItem", "DeleteItem", "BatchWriteItem", "TransactWriteItems":
		return write
	}
	return unknown
}

func deref(p *float64) float64 {
	if p == nil {
		return 0
	}
	return *p
}

// consumed extracts ConsumedCapacity from every DynamoDB output that can
// carry it. The SDK's outputs share no interface, hence the type switch.
func consumed(result any) []types.ConsumedCapacity {
	one := func(c *types.ConsumedCapacity) []types.ConsumedCapacity {
		if c == nil {
			return nil
		}
		return []types.ConsumedCapacity{*c}
	}
	switch o := result.(type) {
	case *dynamodb.GetItemOutput:
		return one(o.ConsumedCapacity)
	case *dynamodb.PutItemOutput:
		return one(o.ConsumedCapacity)
	case *dynamodb.UpdateItemOutput:
		return one(o.ConsumedCapacity)
	case *dynamodb.DeleteItemOutput:
		return one(o.ConsumedCapacity)
	case *dynamodb.QueryOutput:
		return one(o.ConsumedCapacity)
	case *dynamodb.ScanOutput:
		return one(o.ConsumedCapacity)
	case *dynamodb.ExecuteStatementOutput:
		return one(o.ConsumedCapacity)
	case *dynamodb.BatchGetItemOutput:
		return o.ConsumedCapacity
	case *dynamodb.BatchWriteItemOutput:
		return o.ConsumedCapacity
	case *dynamodb.TransactGetItemsOutput:
		return o.ConsumedCapacity
	case *dynamodb.TransactWriteItemsOutput:
		return o.ConsumedCapacity
	case *dynamodb.BatchExecuteStatementOutput:
		return o.ConsumedCapacity
	case *dynamodb.ExecuteTransactionOutput:
		return o.ConsumedCapacity
	}
	return nil
}
