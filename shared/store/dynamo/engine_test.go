package dynamo_test

import (
	"context"
	"errors"
	"maps"
	"strings"
	"testing"

	"github.com/aws/aws-sdk-go-v2/service/dynamodb"

	"github.com/a2awire/a2awire/shared/store"
	"github.com/a2awire/a2awire/shared/store/dynamo"
	"github.com/a2awire/a2awire/shared/store/dynamo/capacity"
	"github.com/a2awire/a2awire/shared/store/dynamo/dynamolocal"
	"github.com/a2awire/a2awire/shared/store/storetest"
)

// newStore returns an engine on a fresh DynamoDB Local table, its metered
// client (set-up calls already taken off the meter) and the table name.
func newStore(t *testing.T, opts ...dynamo.Option) (*dynamo.Store, *capacity.Meter, *dynamodb.Client, string) {
	t.Helper()
	m := capacity.New()
	client, table := dynamolocal.NewTable(t, local, m.Option())
	m.Reset()
	return dynamo.New(client, table, opts...), m, client, table
}

func mustGet(t *testing.T, s store.Store, k store.Key) store.Item {
	t.Helper()
	it, err := s.Get(context.Background(), k)
	if err != nil {
		t.Fatal(err)
	}
	return it
}

// condFailed asserts err is a condition failure of action i carrying want
// (nil: no item).
func condFailed(t *testing.T, err error, i int, want store.Item) {
	t.Helper()
	var cf *store.ConditionFailedError
	if !errors.As(err, &cf) || !errors.Is(err, store.ErrConditionFailed) {
		t.Fatalf("error %v, want a condition failure", err)
	}
	if cf.Action != i {
		t.Errorf("failed action %d, want %d", cf.Action, i)
	}
	if (want == nil) != (cf.Item == nil) || (want != nil && !store.EqualItems(cf.Item, want)) {
		t.Errorf("item in the way %v, want %v", cf.Item, want)
	}
}

func TestConditionFailedSingle(t *testing.T) {
	s, _, _, _ := newStore(t)
	ctx := context.Background()
	k := store.Key{PK: "p", SK: "a"}
	storetest.MustWrite(t, s, store.Put(k, store.Item{"v": store.N(1)}))
	old := mustGet(t, s, k)

	_, err := s.Write(ctx, store.Put(k, store.Item{"v": store.N(2)}).When(store.ItemAbsent()).OnFailReturn())
	condFailed(t, err, 0, old)
	_, err = s.Write(ctx, store.Put(k, store.Item{"v": store.N(2)}).When(store.ItemAbsent()))
	condFailed(t, err, 0, nil) // not asked for
	_, err = s.Write(ctx, store.Update(k).AddNum("v", 1).When(store.Eq("v", store.N(7))).OnFailReturn())
	condFailed(t, err, 0, old)
	_, err = s.Write(ctx, store.Delete(k).When(store.Lt("v", store.N(1))).OnFailReturn())
	condFailed(t, err, 0, old)
	// No item at all: the failure carries none even when asked.
	_, err = s.Write(ctx, store.Update(store.Key{PK: "p", SK: "missing"}).SetAttr("x", store.S("y")).When(store.ItemExists()).OnFailReturn())
	condFailed(t, err, 0, nil)
	if got := mustGet(t, s, k); !store.EqualItems(got, old) {
		t.Fatalf("failed writes changed the item: %v", got)
	}
}

func TestConditionFailedTransaction(t *testing.T) {
	s, m, _, _ := newStore(t)
	ctx := context.Background()
	a, b, c := store.Key{PK: "p", SK: "a"}, store.Key{PK: "p", SK: "b"}, store.Key{PK: "q", SK: "c"}
	storetest.MustWrite(t, s, store.Put(b, store.Item{"n": store.N(5)}))
	old := mustGet(t, s, b)
	m.Reset()

	_, err := s.Write(ctx,
		store.Put(a, store.Item{"x": store.S("1")}),
		store.Update(b).AddNum("n", 1).When(store.Gt("n", store.N(5))).OnFailReturn(),
		store.Put(c, store.Item{"x": store.S("3")}).When(store.ItemAbsent()),
	)
	condFailed(t, err, 1, old)
	if got := m.Take().Calls(); !maps.Equal(got, map[string]int{"TransactWriteItems": 1}) {
		t.Errorf("calls %v, want one TransactWriteItems", got)
	}
	for _, k := range []store.Key{a, c} {
		if _, err := s.Get(ctx, k); !errors.Is(err, store.ErrNotFound) {
			t.Errorf("%s after a cancelled transaction: %v", k, err)
		}
	}
	// A lone ConditionCheck is a transaction too; it fails on a missing item.
	_, err = s.Write(ctx, store.Check(c, store.ItemExists()).OnFailReturn())
	condFailed(t, err, 0, nil)
	_, err = s.Write(ctx, store.Put(a, nil), store.Check(b, store.Eq("n", store.N(6))).OnFailReturn())
	condFailed(t, err, 1, old)
	// Several failed conditions: the first is reported.
	_, err = s.Write(ctx, store.Put(b, nil).When(store.ItemAbsent()).OnFailReturn(), store.Put(c, nil).When(store.ItemExists()))
	condFailed(t, err, 0, old)
}

// TestInvalidFromDynamoDB checks what only DynamoDB can tell (the item
// after an update, the type of a stored value) maps to ErrInvalid, for a
// single action and inside a transaction, and writes nothing.
func TestInvalidFromDynamoDB(t *testing.T) {
	s, _, _, _ := newStore(t)
	ctx := context.Background()
	k, other := store.Key{PK: "p", SK: "a"}, store.Key{PK: "p", SK: "b"}
	big := strings.Repeat("x", 300<<10)
	storetest.MustWrite(t, s, store.Put(k, store.Item{"s": store.S("text"), "big": store.S(big)}))
	for name, actions := range map[string][]store.Action{
		"ADD onto a string":          {store.Update(k).AddNum("s", 1)},
		"ADD onto a string in a tx":  {store.Put(other, nil), store.Update(k).AddNum("s", 1)},
		"update over 400 KB":         {store.Update(k).SetAttr("big2", store.S(big)).Returning()},
		"update over 400 KB in a tx": {store.Put(other, nil), store.Update(k).SetAttr("big2", store.S(big))},
	} {
		_, err := s.Write(ctx, actions...)
		if !errors.Is(err, store.ErrInvalid) || errors.Is(err, store.ErrUnavailable) {
			t.Errorf("%s: %v, want ErrInvalid", name, err)
		}
	}
	if _, err := s.Get(ctx, other); !errors.Is(err, store.ErrNotFound) {
		t.Errorf("an invalid transaction wrote: %v", err)
	}
	if got := mustGet(t, s, k); len(got) != 4 {
		t.Errorf("item changed: %d attributes", len(got))
	}
}

// TestAttributeNames: names the expression builder would read as paths or
// DynamoDB as reserved words are plain top-level attributes.
func TestAttributeNames(t *testing.T) {
	s, _, _, _ := newStore(t)
	ctx := context.Background()
	k := store.Key{PK: "p", SK: "a"}
	odd := []string{"a.b", "c[0]", "size", "#x", ":y", "name with spaces", "ünï"}
	u := store.Update(k)
	for i, n := range odd {
		u = u.SetAttr(n, store.N(int64(i)))
	}
	got := storetest.MustWrite(t, s, u.AddNum("count", 2).Returning())[0]
	for i, n := range odd {
		if !store.Equal(got[n], store.N(int64(i))) {
			t.Errorf("%q = %v", n, got[n])
		}
	}
	conds := make([]store.Cond, len(odd))
	for i, n := range odd {
		conds[i] = store.Eq(n, store.N(int64(i)))
	}
	storetest.MustWrite(t, s, store.Update(k).Del(odd...).When(store.And(conds...)))
	if got := mustGet(t, s, k); len(got) != 3 {
		t.Errorf("after REMOVE: %v", got)
	}
	_, err := s.Write(ctx, store.Update(k).SetAttr("z", store.N(1)).When(store.Or(store.Exists("a.b"), store.Exists("c[0]"))))
	condFailed(t, err, 0, nil)
}

// TestCosts pins the DynamoDB calls per item-API operation (the package
// comment's table) and logs the units DynamoDB Local reports.
func TestCosts(t *testing.T) {
	s, m, _, _ := newStore(t)
	ctx := context.Background()
	k := store.Key{PK: "p", SK: "a"}
	step := func(name string, want map[string]int, wantErrors int) {
		t.Helper()
		r := m.Take()
		t.Logf("%-34s %s", name, strings.ReplaceAll(strings.TrimSpace(r.String()), "\n", "; "))
		if got := r.Calls(); !maps.Equal(got, want) {
			t.Errorf("%s: calls %v, want %v", name, got, want)
		}
		tot := r.Total()
		if tot.Errors != wantErrors {
			t.Errorf("%s: %d failed calls, want %d", name, tot.Errors, wantErrors)
		}
		if tot.Calls > tot.Errors && tot.Units <= 0 {
			t.Errorf("%s: no consumed capacity reported", name)
		}
	}
	_, err := s.Get(ctx, k)
	if !errors.Is(err, store.ErrNotFound) {
		t.Fatal(err)
	}
	step("Get miss", map[string]int{"GetItem": 1}, 0)
	storetest.MustWrite(t, s, store.Put(k, store.Item{"n": store.N(1)}).When(store.ItemAbsent()))
	step("Put", map[string]int{"PutItem": 1}, 0)
	mustGet(t, s, k)
	step("Get hit", map[string]int{"GetItem": 1}, 0)
	if got := storetest.MustWrite(t, s, store.Update(k).AddNum("n", 1).Returning())[0]; !store.Equal(got["n"], store.N(2)) {
		t.Fatalf("ReturnNew: %v", got)
	}
	step("Update returning the new item", map[string]int{"UpdateItem": 1}, 0)
	_, err = s.Write(ctx, store.Update(k).AddNum("n", 1).When(store.Eq("n", store.N(0))).OnFailReturn())
	condFailed(t, err, 0, store.Item{"pk": store.S("p"), "sk": store.S("a"), "n": store.N(2)})
	step("Update, condition failed", map[string]int{"UpdateItem": 1}, 1)
	storetest.MustWrite(t, s, store.Put(store.Key{PK: "p", SK: "b"}, nil), store.Update(k).AddNum("n", 1), store.Check(store.Key{PK: "p", SK: "c"}, store.ItemAbsent()))
	step("Write of 3 actions", map[string]int{"TransactWriteItems": 1}, 0)
	storetest.MustWrite(t, s, store.Check(k, store.ItemExists()))
	step("lone ConditionCheck", map[string]int{"TransactWriteItems": 1}, 0)
	page, err := s.Query(ctx, store.Query{PK: "p"})
	if err != nil || len(page.Items) != 2 || page.Cursor != "" {
		t.Fatalf("query: %d items, cursor %q, %v", len(page.Items), page.Cursor, err)
	}
	step("Query (one page)", map[string]int{"Query": 1}, 0)
	storetest.MustWrite(t, s, store.Delete(k))
	step("Delete", map[string]int{"DeleteItem": 1}, 0)
	// Refused before any call.
	if _, err := s.Query(ctx, store.Query{PK: "p", Cursor: "bm90IGEgY3Vyc29y"}); !errors.Is(err, store.ErrBadCursor) {
		t.Fatalf("bad cursor: %v", err)
	}
	if _, err := s.Write(ctx); !errors.Is(err, store.ErrInvalid) {
		t.Fatalf("empty write: %v", err)
	}
	step("refused input", map[string]int{}, 0)
}

// TestQueryCursors checks the cursor rule on DynamoDB's own
// LastEvaluatedKey, on the table and on gsi1, and that a cursor is bound
// to its query.
func TestQueryCursors(t *testing.T) {
	s, _, _, _ := newStore(t)
	ctx := context.Background()
	for _, sk := range []string{"a", "b", "c", "d"} {
		storetest.MustWrite(t, s, store.Put(store.Key{PK: "p", SK: sk}, store.Item{"gsi1pk": store.S("g"), "gsi1sk": store.S("x" + sk)}))
	}
	for _, c := range []struct {
		name  string
		q     store.Query
		keys  string
		pages int
	}{
		// A page cut by the limit carries a cursor even when nothing
		// follows; the empty page after it ends the query.
		{"table", store.Query{PK: "p", Limit: 2}, "a b c d", 3},
		{"backward", store.Query{PK: "p", Limit: 2, Backward: true}, "d c b a", 3},
		{"gsi1", store.Query{PK: "g", Index: store.IndexGSI1, Limit: 2}, "a b c d", 3},
		{"short last page", store.Query{PK: "p", Limit: 3}, "a b c d", 2},
		// Ranges ending on an inclusive bound (DynamoDB Local omits the
		// LastEvaluatedKey there and refuses it as a start key).
		{"between", store.Query{PK: "p", SK: store.SKBetween("b", "d"), Limit: 3}, "b c d", 2},
		{"between by 1", store.Query{PK: "p", SK: store.SKBetween("b", "c"), Limit: 1}, "b c", 3},
		{"<=", store.Query{PK: "p", SK: store.SKLE("c"), Limit: 1}, "a b c", 4},
		{"< ", store.Query{PK: "p", SK: store.SKLT("c"), Limit: 1}, "a b", 3},
		{">= backward", store.Query{PK: "p", SK: store.SKGE("b"), Limit: 1, Backward: true}, "d c b", 4},
		{"between backward", store.Query{PK: "p", SK: store.SKBetween("b", "c"), Limit: 1, Backward: true}, "c b", 3},
		{"prefix", store.Query{PK: "p", SK: store.SKPrefix("c"), Limit: 1}, "c", 2},
		{"=", store.Query{PK: "p", SK: store.SKEq("c"), Limit: 1}, "c", 2},
		{"gsi1 <=", store.Query{PK: "g", Index: store.IndexGSI1, SK: store.SKLE("xc"), Limit: 1}, "a b c", 4},
	} {
		q := c.q
		var keys []string
		pages := 0
		for {
			page, err := s.Query(ctx, q)
			if err != nil {
				t.Fatalf("%s: %v", c.name, err)
			}
			pages++
			for _, it := range page.Items {
				keys = append(keys, it.Str("sk"))
			}
			if page.Cursor == "" {
				break
			}
			q.Cursor = page.Cursor
		}
		if strings.Join(keys, " ") != c.keys || pages != c.pages {
			t.Errorf("%s: %v in %d pages, want %s in %d", c.name, keys, pages, c.keys, c.pages)
		}
	}
	page, err := s.Query(ctx, store.Query{PK: "p", Limit: 1})
	if err != nil || page.Cursor == "" {
		t.Fatal(page, err)
	}
	for _, q := range []store.Query{
		{PK: "q", Limit: 1, Cursor: page.Cursor},
		{PK: "p", Limit: 1, Backward: true, Cursor: page.Cursor},
		{PK: "p", Index: store.IndexGSI1, Cursor: page.Cursor},
		{PK: "p", Cursor: page.Cursor[:len(page.Cursor)-2] + "AA"},
	} {
		if _, err := s.Query(ctx, q); !errors.Is(err, store.ErrBadCursor) {
			t.Errorf("%+v: %v, want ErrBadCursor", q, err)
		}
	}
	// Another secret refuses the cursor.
	other := dynamo.New(nil, "unused", dynamo.WithCursorSecret([]byte("other")))
	if _, err := other.Query(ctx, store.Query{PK: "p", Limit: 1, Cursor: page.Cursor}); !errors.Is(err, store.ErrBadCursor) {
		t.Errorf("cursor under another secret: %v", err)
	}
}
