package inbox_test

import (
	"context"
	"encoding/json"
	"fmt"
	"maps"
	"testing"
	"time"

	"github.com/a2awire/a2awire/shared/apierror"
	"github.com/a2awire/a2awire/shared/inbox"
	"github.com/a2awire/a2awire/shared/store"
	"github.com/a2awire/a2awire/shared/store/dynamo"
	"github.com/a2awire/a2awire/shared/store/dynamo/capacity"
	"github.com/a2awire/a2awire/shared/store/dynamo/dynamolocal"
	"github.com/a2awire/a2awire/shared/store/storetest"
)

// TestCost pins the DynamoDB calls of every inbox operation on DynamoDB Local
// (docs/storage.md's cost table), measured by the capacity meter, and the
// item API calls behind them.
func TestCost(t *testing.T) {
	m := capacity.New()
	client, table := dynamolocal.NewTable(t, local, m.Option())
	st := &storetest.Counting{Store: dynamo.New(client, table)}
	join(t, st, lobby, alice, bob)
	c := &clock{now: t0}
	b := inbox.New(st, inbox.WithClock(c.Now))
	ctx := context.Background()
	m.Take()
	st.Take()

	// expect pins the calls an operation makes. failed names the calls
	// that are meant to fail (a refused condition). Any other failed call
	// is DynamoDB Local refusing a request under load (a throttle or an
	// internal error), which the store retries, as it would in AWS: the
	// retry is the same call sent again, so it is logged and not counted,
	// and the pin stays the operation's own calls.
	expect := func(what string, calls map[string]int, items [3]int64, failed ...string) {
		t.Helper()
		use := m.Take()
		t.Logf("%s:\n%v", what, use)
		got := map[string]int{}
		for op, u := range use {
			meant := 0
			for _, f := range failed {
				if f == op {
					meant++
				}
			}
			if u.Errors < meant {
				t.Fatalf("%s: %d %s calls failed, want %d", what, u.Errors, op, meant)
			}
			if retried := u.Errors - meant; retried > 0 {
				t.Logf("%s: %d %s calls refused by DynamoDB Local and retried by the store", what, retried, op)
			}
			got[op] = u.Calls - (u.Errors - meant)
		}
		if !maps.Equal(got, calls) {
			t.Fatalf("%s made DynamoDB calls %v, want %v", what, got, calls)
		}
		if got := st.Take(); got != items {
			t.Fatalf("%s made item API calls %v (gets, queries, writes), want %v", what, got, items)
		}
	}
	sendN := func(n int) {
		t.Helper()
		for i := range n {
			send(t, b, alice, bob, fmt.Sprintf(`{"n":%d}`, i))
			c.Advance(time.Millisecond)
		}
		m.Take()
		st.Take()
	}

	send(t, b, alice, bob, `{"text":"hello"}`)
	expect("send", map[string]int{"TransactWriteItems": 1}, [3]int64{0, 0, 1})
	_, err := b.Send(ctx, lobby, alice, carol, json.RawMessage(`1`), "")
	wantKind(t, err, apierror.NotFound)
	// The refused write, then the read of the recipient's member item that
	// tells a non-member from a membership older than the agent's index
	// of worlds (world.RestoreIndexEntry): a refusal's cost, not a send's.
	expect("send to a non-member", map[string]int{"TransactWriteItems": 1, "GetItem": 1}, [3]int64{1, 0, 1}, "TransactWriteItems")

	// Every read Gets the event head beside its Query, for the inbox's
	// count of shards (1 here).
	read(t, b, bob, inbox.ReadOptions{Peek: true})
	expect("peek", map[string]int{"GetItem": 1, "Query": 1}, [3]int64{1, 1, 0})
	if got := read(t, b, bob, inbox.ReadOptions{}); len(got) != 1 {
		t.Fatalf("read 1: %d messages", len(got))
	}
	expect("read 1", map[string]int{"GetItem": 1, "Query": 1, "DeleteItem": 1}, [3]int64{1, 1, 1})
	read(t, b, bob, inbox.ReadOptions{})
	expect("read of an empty inbox", map[string]int{"GetItem": 1, "Query": 1}, [3]int64{1, 1, 0})

	sendN(3)
	if got := read(t, b, bob, inbox.ReadOptions{}); len(got) != 3 {
		t.Fatalf("read 3: %d messages", len(got))
	}
	expect("read 3", map[string]int{"GetItem": 1, "Query": 1, "TransactWriteItems": 1}, [3]int64{1, 1, 1})

	sendN(100)
	if got := read(t, b, bob, inbox.ReadOptions{Limit: 100}); len(got) != 100 {
		t.Fatalf("read 100: %d messages", len(got))
	}
	expect("read 100 of a full inbox", map[string]int{"GetItem": 1, "Query": 1, "TransactWriteItems": 1}, [3]int64{1, 1, 1})

	// 250 messages: 150 dropped. The consuming read deletes them first:
	// a Query and a Write per 100, then its own Write.
	sendN(250)
	read(t, b, bob, inbox.ReadOptions{Peek: true})
	expect("peek of an overflowed inbox", map[string]int{"GetItem": 1, "Query": 1}, [3]int64{1, 1, 0})
	if got := read(t, b, bob, inbox.ReadOptions{Limit: 10}); len(got) != 10 {
		t.Fatalf("read 10 of an overflowed inbox: %d messages", len(got))
	}
	expect("read 10 with 150 dropped", map[string]int{"GetItem": 1, "Query": 3, "TransactWriteItems": 3}, [3]int64{1, 3, 3})
	if got := read(t, b, bob, inbox.ReadOptions{Limit: 100}); len(got) != 90 {
		t.Fatalf("read the rest: %d messages, want 90", len(got))
	}
	expect("read the remaining 90", map[string]int{"GetItem": 1, "Query": 1, "TransactWriteItems": 1}, [3]int64{1, 1, 1})
}

// The item API calls are the same on every engine.
func TestCostEveryEngine(t *testing.T) {
	everyEngine(t, func(t *testing.T, raw store.Store) {
		st := &storetest.Counting{Store: raw}
		join(t, st, lobby, alice, bob)
		b := inbox.New(st)
		st.Take()
		send(t, b, alice, bob, `1`)
		send(t, b, alice, bob, `2`)
		if got := st.Take(); got != [3]int64{0, 0, 2} {
			t.Fatalf("2 sends: calls %v, want 2 writes", got)
		}
		read(t, b, bob, inbox.ReadOptions{Peek: true})
		if got := st.Take(); got != [3]int64{1, 1, 0} {
			t.Fatalf("peek: calls %v, want 1 get (the head) and 1 query", got)
		}
		read(t, b, bob, inbox.ReadOptions{})
		if got := st.Take(); got != [3]int64{1, 1, 1} {
			t.Fatalf("read 2: calls %v, want 1 get, 1 query and 1 write", got)
		}
	})
}
