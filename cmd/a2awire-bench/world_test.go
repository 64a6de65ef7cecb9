package main

import "testing"

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
	for i := range 40 {
		id := coldID(i)
		if seen[id] {
			t.Fatalf("coldID(%d) = %q, already taken", i, id)
		}
		seen[id] = true
	}
	if coldID(0) != "3a" || coldID(18) != "3s" {
		t.Errorf("coldID(0), coldID(18) = %q, %q; want 3a, 3s", coldID(0), coldID(18))
	}
}
