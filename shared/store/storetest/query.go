package storetest

import (
	"bytes"
	"fmt"
	"slices"
	"sort"
	"strings"
	"testing"

	"github.com/a2awire/a2awire/shared/store"
)

var queryCases = []testCase{
	{"Query/Order", testQueryOrder},
	{"Query/SortConditions", testQuerySortConds},
	{"Query/LimitAndCursorRule", testQueryLimit},
	{"Query/Paging", testQueryPaging},
	{"Query/Index", testQueryIndex},
	{"Query/IndexPaging", testQueryIndexPaging},
	{"Query/PageCap", testQueryPageCap},
	{"Query/BadCursor", testQueryBadCursor},
	{"Query/Invalid", testQueryInvalid},
}

func query(t *testing.T, s store.Store, q store.Query) store.Page {
	t.Helper()
	p, err := s.Query(t.Context(), q)
	if err != nil {
		t.Fatalf("Query(%+v): %v", q, err)
	}
	return p
}

// queryAll follows cursors to the end and returns every item, checking
// each page's size and that no item repeats.
func queryAll(t *testing.T, s store.Store, q store.Query) []store.Item {
	t.Helper()
	var all []store.Item
	seen := map[store.Key]bool{}
	for pages := 0; ; pages++ {
		if pages > 1000 {
			t.Fatalf("Query(%+v) still has a cursor after 1000 pages", q)
		}
		p := query(t, s, q)
		if q.Limit > 0 && len(p.Items) > q.Limit {
			t.Fatalf("page of %d items, over the limit %d", len(p.Items), q.Limit)
		}
		for _, it := range p.Items {
			if seen[it.Key()] {
				t.Errorf("Query(%+v): item %s returned twice", q, it.Key())
			}
			seen[it.Key()] = true
		}
		all = append(all, p.Items...)
		if p.Cursor == "" {
			return all
		}
		q.Cursor = p.Cursor
	}
}

func sks(items []store.Item) []string {
	out := make([]string, len(items))
	for i, it := range items {
		out[i] = it.Str(store.AttrSK)
	}
	return out
}

func wantSKs(t *testing.T, what string, items []store.Item, want []string) {
	t.Helper()
	if got := sks(items); !slices.Equal(got, want) {
		t.Errorf("%s: sort keys\n got  %q\n want %q", what, got, want)
	}
}

func reversed(s []string) []string {
	out := slices.Clone(s)
	slices.Reverse(out)
	return out
}

// byteOrder sorts as DynamoDB does: UTF-8 bytes (Go's string order).
func byteOrder(s []string) []string {
	out := slices.Clone(s)
	sort.Strings(out)
	return out
}

// orderSKs are sort keys whose UTF-8 byte order differs from a naive or a
// UTF-16 order.
var orderSKs = []string{"a", "b", "aa", "B", "é", "😀", "\uFFFD", "z", "a#1", "a#10", "a#2", "~", "0", "a b"}

func testQueryOrder(t *testing.T, s store.Store) {
	for _, sk := range orderSKs {
		put(t, s, key("q", sk), item("v", S(sk)))
	}
	// Neighbouring partitions must not leak in.
	put(t, s, key("q2", "a"), nil)
	put(t, s, key("Q", "a"), nil)
	put(t, s, key("q ", "a"), nil)

	want := byteOrder(orderSKs)
	p := query(t, s, store.Query{PK: "q"})
	wantSKs(t, "forward", p.Items, want)
	if p.Cursor != "" {
		t.Errorf("a page that reached the end has cursor %q", p.Cursor)
	}
	for _, it := range p.Items {
		if !sameItem(it, stored(it.Key(), item("v", S(it.Str("sk"))))) {
			t.Errorf("item %s", show(it))
		}
	}
	p = query(t, s, store.Query{PK: "q", Backward: true})
	wantSKs(t, "backward", p.Items, reversed(want))

	p = query(t, s, store.Query{PK: "nothing here"})
	if len(p.Items) != 0 || p.Cursor != "" {
		t.Errorf("empty partition: %d items, cursor %q", len(p.Items), p.Cursor)
	}
}

func testQuerySortConds(t *testing.T, s store.Store) {
	var all []string
	for i := range 20 {
		all = append(all, fmt.Sprintf("k%02d", i))
	}
	all = append(all, "j", "k", "k1", "l", "k1\xc3\xa9", "k2~")
	for _, sk := range all {
		put(t, s, key("q", sk), nil)
	}
	all = byteOrder(all)
	filter := func(f func(string) bool) []string {
		var out []string
		for _, sk := range all {
			if f(sk) {
				out = append(out, sk)
			}
		}
		return out
	}
	for _, tc := range []struct {
		name string
		c    store.SortCond
		want []string
	}{
		{"all", store.SortCond{}, all},
		{"eq", store.SKEq("k05"), []string{"k05"}},
		{"eq none", store.SKEq("k5"), nil},
		{"lt", store.SKLT("k03"), filter(func(s string) bool { return s < "k03" })},
		{"le", store.SKLE("k03"), filter(func(s string) bool { return s <= "k03" })},
		{"gt", store.SKGT("k17"), filter(func(s string) bool { return s > "k17" })},
		{"ge", store.SKGE("k17"), filter(func(s string) bool { return s >= "k17" })},
		{"gt past the end", store.SKGT("z"), nil},
		{"between", store.SKBetween("k04", "k08"), filter(func(s string) bool { return "k04" <= s && s <= "k08" })},
		{"between one", store.SKBetween("k04", "k04"), []string{"k04"}},
		{"between gaps", store.SKBetween("k", "k1~"), filter(func(s string) bool { return "k" <= s && s <= "k1~" })},
		{"prefix", store.SKPrefix("k1"), filter(func(s string) bool { return strings.HasPrefix(s, "k1") })},
		{"prefix exact", store.SKPrefix("l"), []string{"l"}},
		{"prefix none", store.SKPrefix("m"), nil},
		{"prefix multibyte", store.SKPrefix("k1é"), []string{"k1é"}},
	} {
		p := query(t, s, store.Query{PK: "q", SK: tc.c})
		wantSKs(t, tc.name+" forward", p.Items, tc.want)
		if p.Cursor != "" {
			t.Errorf("%s: cursor %q on a complete page", tc.name, p.Cursor)
		}
		p = query(t, s, store.Query{PK: "q", SK: tc.c, Backward: true})
		wantSKs(t, tc.name+" backward", p.Items, reversed(tc.want))
	}
}

// testQueryLimit checks the cursor rule (DynamoDB's): a page cut by Limit
// has a cursor even when nothing follows; a page that reached the end has
// none.
func testQueryLimit(t *testing.T, s store.Store) {
	var all []string
	for i := range 10 {
		sk := fmt.Sprintf("s%d", i)
		all = append(all, sk)
		put(t, s, key("q", sk), nil)
	}
	p := query(t, s, store.Query{PK: "q", Limit: 3})
	wantSKs(t, "limit 3", p.Items, all[:3])
	if p.Cursor == "" {
		t.Fatal("limit 3 of 10: no cursor")
	}
	p = query(t, s, store.Query{PK: "q", Limit: 3, Cursor: p.Cursor})
	wantSKs(t, "limit 3, page 2", p.Items, all[3:6])

	p = query(t, s, store.Query{PK: "q", Limit: 10})
	wantSKs(t, "limit 10 of 10", p.Items, all)
	if p.Cursor == "" {
		t.Fatal("a page cut by Limit has no cursor although nothing follows (DynamoDB returns LastEvaluatedKey)")
	}
	p = query(t, s, store.Query{PK: "q", Limit: 10, Cursor: p.Cursor})
	if len(p.Items) != 0 || p.Cursor != "" {
		t.Errorf("page after the last: %q, cursor %q; want none and no cursor", sks(p.Items), p.Cursor)
	}
	p = query(t, s, store.Query{PK: "q", Limit: 11})
	wantSKs(t, "limit 11 of 10", p.Items, all)
	if p.Cursor != "" {
		t.Errorf("limit 11 of 10: cursor %q on a page that reached the end", p.Cursor)
	}
	p = query(t, s, store.Query{PK: "q", Limit: 4, Backward: true, SK: store.SKLE("s5")})
	wantSKs(t, "backward limit 4 from s5", p.Items, []string{"s5", "s4", "s3", "s2"})
	p = query(t, s, store.Query{PK: "q", Limit: 4, Backward: true, SK: store.SKLE("s5"), Cursor: p.Cursor})
	wantSKs(t, "backward page 2", p.Items, []string{"s1", "s0"})
	if p.Cursor != "" {
		t.Errorf("backward page 2: cursor %q", p.Cursor)
	}
	// A cursor is bound to its query, not to its limit.
	p = query(t, s, store.Query{PK: "q", Limit: 2})
	p = query(t, s, store.Query{PK: "q", Limit: 5, Cursor: p.Cursor})
	wantSKs(t, "limit changed between pages", p.Items, all[2:7])
}

func testQueryPaging(t *testing.T, s store.Store) {
	var all []string
	for i := range 25 {
		sk := fmt.Sprintf("p%03d", i*7%25) // written out of order
		all = append(all, sk)
		put(t, s, key("q", sk), item("i", N(fmt.Sprint(i))))
	}
	all = byteOrder(all)
	for _, limit := range []int{1, 2, 4, 7, 24, 25, 26} {
		for _, back := range []bool{false, true} {
			want := all
			if back {
				want = reversed(all)
			}
			got := queryAll(t, s, store.Query{PK: "q", Limit: limit, Backward: back})
			wantSKs(t, fmt.Sprintf("limit %d backward %v", limit, back), got, want)
		}
	}
	// With a sort condition.
	cond := store.SKBetween("p005", "p019")
	var want []string
	for _, sk := range all {
		if cond.Matches(sk) {
			want = append(want, sk)
		}
	}
	wantSKs(t, "between, paged by 4", queryAll(t, s, store.Query{PK: "q", SK: cond, Limit: 4}), want)
	wantSKs(t, "between, paged by 4, backward", queryAll(t, s, store.Query{PK: "q", SK: cond, Limit: 4, Backward: true}), reversed(want))
	// Items written between pages are seen when they sort after the cursor.
	p := query(t, s, store.Query{PK: "q", Limit: 5})
	put(t, s, key("q", "p000a"), nil) // before the cursor: not seen
	put(t, s, key("q", "p024a"), nil) // after it: seen
	rest := queryAll(t, s, store.Query{PK: "q", Limit: 5, Cursor: p.Cursor})
	wantSKs(t, "pages around concurrent writes", append(p.Items, rest...), append(slices.Clone(all), "p024a"))
}

func indexItem(gpk, gsk string, kv ...any) store.Item {
	it := item(kv...)
	it[store.AttrGSI1PK] = S(gpk)
	it[store.AttrGSI1SK] = S(gsk)
	return it
}

func testQueryIndex(t *testing.T, s store.Store) {
	// Items of several table partitions in one index partition, in an
	// order of their own.
	put(t, s, key("a", "1"), indexItem("g", "c", "v", S("a1")))
	put(t, s, key("b", "1"), indexItem("g", "a", "v", S("b1")))
	put(t, s, key("b", "2"), indexItem("g", "é", "v", S("b2")))
	put(t, s, key("c", "1"), indexItem("g", "b", "v", S("c1")))
	put(t, s, key("c", "2"), indexItem("other", "a"))
	// Sparse: an item lacking gsi1sk, gsi1pk or both is not in the index.
	put(t, s, key("d", "1"), item("gsi1pk", S("g")))
	put(t, s, key("d", "2"), item("gsi1sk", S("d")))
	put(t, s, key("d", "3"), item("v", S("plain")))

	vals := func(items []store.Item) []string {
		var out []string
		for _, it := range items {
			out = append(out, it.Str("v"))
		}
		return out
	}
	p := query(t, s, store.Query{Index: store.IndexGSI1, PK: "g"})
	if got, want := vals(p.Items), []string{"b1", "c1", "a1", "b2"}; !slices.Equal(got, want) {
		t.Errorf("index partition g: %q, want %q", got, want)
	}
	if p.Cursor != "" {
		t.Errorf("complete index page has cursor %q", p.Cursor)
	}
	// Whole items come back (projection ALL).
	if len(p.Items) > 0 && !sameItem(p.Items[0], stored(key("b", "1"), indexItem("g", "a", "v", S("b1")))) {
		t.Errorf("index item %s", show(p.Items[0]))
	}
	p = query(t, s, store.Query{Index: store.IndexGSI1, PK: "g", Backward: true, SK: store.SKGE("b")})
	if got, want := vals(p.Items), []string{"b2", "a1", "c1"}; !slices.Equal(got, want) {
		t.Errorf("index backward gsi1sk >= b: %q, want %q", got, want)
	}
	p = query(t, s, store.Query{Index: store.IndexGSI1, PK: "g", SK: store.SKPrefix("é")})
	if got, want := vals(p.Items), []string{"b2"}; !slices.Equal(got, want) {
		t.Errorf("index prefix é: %q, want %q", got, want)
	}
	// The table partition is not the index partition.
	p = query(t, s, store.Query{Index: store.IndexGSI1, PK: "a"})
	if len(p.Items) != 0 {
		t.Errorf("index partition a (a table pk) has %d items", len(p.Items))
	}

	// Updates move items in and out of the index.
	MustWrite(t, s, store.Update(key("a", "1")).Del(store.AttrGSI1SK))
	MustWrite(t, s, store.Update(key("d", "1")).SetAttr(store.AttrGSI1SK, S("0")).SetAttr("v", S("d1")))
	MustWrite(t, s, store.Update(key("c", "1")).SetAttr(store.AttrGSI1PK, S("other")))
	MustWrite(t, s, store.Delete(key("b", "2")))
	p = query(t, s, store.Query{Index: store.IndexGSI1, PK: "g"})
	if got, want := vals(p.Items), []string{"d1", "b1"}; !slices.Equal(got, want) {
		t.Errorf("index partition g after updates: %q, want %q", got, want)
	}
	p = query(t, s, store.Query{Index: store.IndexGSI1, PK: "other"})
	if got := len(p.Items); got != 2 {
		t.Errorf("index partition other: %d items, want 2", got)
	}
}

func testQueryIndexPaging(t *testing.T, s store.Store) {
	// 20 items over 5 table partitions; two pairs share a gsi1sk.
	var want []string
	for i := range 20 {
		gsk := fmt.Sprintf("g%02d", i)
		if i == 7 || i == 13 {
			gsk = fmt.Sprintf("g%02d", i-1)
		}
		pk := fmt.Sprintf("t%d", i%5)
		sk := fmt.Sprintf("s%02d", i)
		put(t, s, key(pk, sk), indexItem("idx", gsk))
		want = append(want, pk+"/"+sk)
	}
	put(t, s, key("t0", "outside"), indexItem("idx2", "g00"))
	ids := func(items []store.Item) []string {
		var out []string
		for _, it := range items {
			out = append(out, it.Str("pk")+"/"+it.Str("sk"))
		}
		return out
	}
	gsks := func(items []store.Item) []string {
		var out []string
		for _, it := range items {
			out = append(out, it.Str(store.AttrGSI1SK))
		}
		return out
	}
	for _, limit := range []int{1, 3, 6, 20} {
		for _, back := range []bool{false, true} {
			got := queryAll(t, s, store.Query{Index: store.IndexGSI1, PK: "idx", Limit: limit, Backward: back})
			g := gsks(got)
			ordered := slices.IsSorted(g)
			if back {
				ordered = slices.IsSorted(reversed(g))
			}
			if !ordered {
				t.Errorf("index, limit %d, backward %v: gsi1sk out of order: %q", limit, back, g)
			}
			if a, b := byteOrder(ids(got)), byteOrder(want); !slices.Equal(a, b) {
				t.Errorf("index, limit %d, backward %v: items\n got  %q\n want %q", limit, back, a, b)
			}
		}
	}
	got := queryAll(t, s, store.Query{Index: store.IndexGSI1, PK: "idx", Limit: 2, SK: store.SKBetween("g05", "g10")})
	if g := gsks(got); !slices.Equal(g, []string{"g05", "g06", "g06", "g08", "g09", "g10"}) {
		t.Errorf("index between g05 and g10, paged by 2: %q", g)
	}
}

// testQueryPageCap: a page holds at most about 1 MB. DynamoDB Local's rule,
// which every engine follows: items are added while the page totals under
// MaxPageBytes (store.ItemSize); once it reaches that and another item
// matches, the page ends with a cursor.
func testQueryPageCap(t *testing.T, s store.Store) {
	const count, blob = 30, 100 * 1024
	var items []store.Item
	for i := range count {
		k := key("big", fmt.Sprintf("%02d", i))
		it := item("b", Bin(bytes.Repeat([]byte{byte(i)}, blob)))
		put(t, s, k, it)
		items = append(items, stored(k, it))
	}
	wantFirst := firstPageLen(items)
	if wantFirst >= count || wantFirst < 2 {
		t.Fatalf("test setup: first page would hold %d of %d items", wantFirst, count)
	}
	for _, back := range []bool{false, true} {
		p := query(t, s, store.Query{PK: "big", Backward: back})
		if len(p.Items) != wantFirst || p.Cursor == "" {
			t.Errorf("first page of %d × %d KB items (backward %v): %d items, cursor %v; want %d items and a cursor",
				count, blob/1024, back, len(p.Items), p.Cursor != "", wantFirst)
		}
		all := queryAll(t, s, store.Query{PK: "big", Backward: back})
		want := sks(items)
		if back {
			want = reversed(want)
		}
		wantSKs(t, fmt.Sprintf("all pages (backward %v)", back), all, want)
		for _, it := range all {
			if !sameItem(it, items[mustAtoi(t, it.Str("sk"))]) {
				t.Errorf("item %s came back changed", it.Key())
			}
		}
	}
	// The index pages by the same rule.
	for i, it := range items {
		k := it.Key()
		MustWrite(t, s, store.Update(k).SetAttr(store.AttrGSI1PK, S("bigidx")).SetAttr(store.AttrGSI1SK, S(fmt.Sprintf("%02d", count-i))))
		items[i] = stored(k, it.Clone())
		items[i][store.AttrGSI1PK], items[i][store.AttrGSI1SK] = S("bigidx"), S(fmt.Sprintf("%02d", count-i))
	}
	slices.Reverse(items) // gsi1sk order
	wantFirst = firstPageLen(items)
	p := query(t, s, store.Query{Index: store.IndexGSI1, PK: "bigidx"})
	if len(p.Items) != wantFirst || p.Cursor == "" {
		t.Errorf("first index page of big items: %d items, cursor %v; want %d items and a cursor", len(p.Items), p.Cursor != "", wantFirst)
	}
	if got := queryAll(t, s, store.Query{Index: store.IndexGSI1, PK: "bigidx"}); len(got) != count {
		t.Errorf("all index pages: %d items, want %d", len(got), count)
	}

	// With a Limit under the cap, the limit decides.
	p = query(t, s, store.Query{PK: "big", Limit: 3})
	if len(p.Items) != 3 || p.Cursor == "" {
		t.Errorf("limit 3 of big items: %d items, cursor %v", len(p.Items), p.Cursor != "")
	}

	// Exactly 1 MB with nothing after: one page, no cursor; one more item:
	// the same page, now with a cursor.
	const exact = 8 // items of 128 KB each, ItemSize included
	for i := range exact {
		k := key("exact", fmt.Sprintf("%02d", i))
		it := item("b", Bin(nil))
		pad := store.MaxPageBytes/exact - store.ItemSize(stored(k, it))
		it["b"] = Bin(bytes.Repeat([]byte{1}, pad))
		if store.ItemSize(stored(k, it)) != store.MaxPageBytes/exact {
			t.Fatalf("test setup: item size %d", store.ItemSize(stored(k, it)))
		}
		put(t, s, k, it)
	}
	p = query(t, s, store.Query{PK: "exact"})
	if len(p.Items) != exact || p.Cursor != "" {
		t.Errorf("%d items of exactly 1 MB in all: %d items, cursor %v; want all and no cursor", exact, len(p.Items), p.Cursor != "")
	}
	put(t, s, key("exact", "99"), nil)
	p = query(t, s, store.Query{PK: "exact"})
	if len(p.Items) != exact || p.Cursor == "" {
		t.Errorf("1 MB then one more item: %d items, cursor %v; want %d and a cursor", len(p.Items), p.Cursor != "", exact)
	}
	p = query(t, s, store.Query{PK: "exact", Cursor: p.Cursor})
	wantSKs(t, "after the 1 MB page", p.Items, []string{"99"})
	if p.Cursor != "" {
		t.Errorf("last page has cursor %q", p.Cursor)
	}
}

// firstPageLen applies the page rule to items in order.
func firstPageLen(items []store.Item) int {
	total := 0
	for i, it := range items {
		if total >= store.MaxPageBytes {
			return i
		}
		total += store.ItemSize(it)
	}
	return len(items)
}

func mustAtoi(t *testing.T, s string) int {
	t.Helper()
	var n int
	if _, err := fmt.Sscanf(s, "%d", &n); err != nil {
		t.Fatalf("sort key %q: %v", s, err)
	}
	return n
}

func testQueryBadCursor(t *testing.T, s store.Store) {
	for i := range 6 {
		sk := fmt.Sprintf("s%d", i)
		put(t, s, key("q", sk), indexItem("g", sk))
		put(t, s, key("q2", sk), indexItem("g2", sk))
	}
	base := store.Query{PK: "q", Limit: 2}
	p := query(t, s, base)
	cur := p.Cursor
	if cur == "" {
		t.Fatal("no cursor")
	}
	// The genuine cursor works.
	q := base
	q.Cursor = cur
	wantSKs(t, "genuine cursor", query(t, s, q).Items, []string{"s2", "s3"})

	flip := func(c string, i int) string {
		b := []byte(c)
		if b[i] == 'A' {
			b[i] = 'B'
		} else {
			b[i] = 'A'
		}
		return string(b)
	}
	idx := store.Query{Index: store.IndexGSI1, PK: "g", Limit: 2}
	idxCur := query(t, s, idx).Cursor
	for name, tc := range map[string]store.Query{
		"tampered at the start":  {PK: "q", Limit: 2, Cursor: flip(cur, 0)},
		"tampered in the middle": {PK: "q", Limit: 2, Cursor: flip(cur, len(cur)/2)},
		"tampered near the end":  {PK: "q", Limit: 2, Cursor: flip(cur, len(cur)-3)},
		"truncated":              {PK: "q", Limit: 2, Cursor: cur[:len(cur)-4]},
		"truncated to one char":  {PK: "q", Limit: 2, Cursor: cur[:1]},
		"extended":               {PK: "q", Limit: 2, Cursor: cur + "AAAA"},
		"garbage":                {PK: "q", Limit: 2, Cursor: "not a cursor!"},
		"JSON":                   {PK: "q", Limit: 2, Cursor: `{"p":"q","s":"s1"}`},
		"another partition":      {PK: "q2", Limit: 2, Cursor: cur},
		"backward":               {PK: "q", Limit: 2, Backward: true, Cursor: cur},
		"another sort condition": {PK: "q", Limit: 2, SK: store.SKGE("s"), Cursor: cur},
		"the index":              {Index: store.IndexGSI1, PK: "q", Limit: 2, Cursor: cur},
		"index cursor on table":  {PK: "g", Limit: 2, Cursor: idxCur},
		"other index partition":  {Index: store.IndexGSI1, PK: "g2", Limit: 2, Cursor: idxCur},
	} {
		p, err := s.Query(t.Context(), tc)
		wantErr(t, "cursor "+name, err, store.ErrBadCursor)
		if len(p.Items) != 0 {
			t.Errorf("cursor %s: %d items returned with the error", name, len(p.Items))
		}
	}
}

func testQueryInvalid(t *testing.T, s store.Store) {
	for name, q := range map[string]store.Query{
		"empty partition key":    {},
		"unknown index":          {Index: "gsi2", PK: "p"},
		"negative limit":         {PK: "p", Limit: -1},
		"between upside down":    {PK: "p", SK: store.SKBetween("b", "a")},
		"empty eq":               {PK: "p", SK: store.SKEq("")},
		"empty prefix":           {PK: "p", SK: store.SKPrefix("")},
		"unknown sort operator":  {PK: "p", SK: store.SortCond{Op: 99, Value: "a"}},
		"invalid UTF-8 pk":       {PK: "p\xff"},
		"invalid UTF-8 sort key": {PK: "p", SK: store.SKGE("\xff")},
		"pk over 2048 bytes":     {PK: strings.Repeat("p", store.MaxPKBytes+1)},
		"sort key over 1024":     {PK: "p", SK: store.SKLT(strings.Repeat("s", store.MaxSKBytes+1))},
	} {
		_, err := s.Query(t.Context(), q)
		wantErr(t, "Query with "+name, err, store.ErrInvalid)
	}
}
