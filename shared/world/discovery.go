package world

import (
	"context"
	"crypto/sha256"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"hash/fnv"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"
	"unicode/utf8"

	"github.com/a2awire/a2awire/shared/apierror"
	"github.com/a2awire/a2awire/shared/auth"
	"github.com/a2awire/a2awire/shared/ident"
	"github.com/a2awire/a2awire/shared/store"
)

// World discovery (GET /v0/worlds) reads listing items from the sparse
// index gsi1, never the worlds themselves: a page costs the same at 100
// worlds and at 100,000.
//
// Every world has two or four listing items in its own partition (so they
// go with it), each a copy of what a listing shows (id, name, description,
// category, status, member count, createdAt, owner):
//
//	item                   pk              sk              gsi1pk                        gsi1sk
//	newest, all worlds     WORLD#<world>   LIST#new#all    WORLDS#new#*#<n>              <createdAt>#<world>
//	newest, its category   WORLD#<world>   LIST#new#cat    WORLDS#new#c:<category>#<n>   <createdAt>#<world>
//	by members, all        WORLD#<world>   LIST#mem#all    WORLDS#mem#*#<n>              <members>#<createdAt>#<world>
//	by members, category   WORLD#<world>   LIST#mem#cat    WORLDS#mem#c:<category>#<n>   <members>#<createdAt>#<world>
//
// (category items only when the manifest names a category, lowercased in
// the key; numbers zero-padded so string order is number order). Each
// listing is write-sharded: <n> is the world's shard, 0 to
// ListingShards-1, from a hash of its id, so the joins and leaves of every
// world (each rewrites the member count, and moves the by-members sort
// key) spread over ListingShards gsi1 partitions instead of landing on one
// (docs/scale.md: at 1,000 a second one partition would take 2,000 write
// units). A page reads the listing's shards backward (newest or most
// members first) and merges them by sort key, taking the greatest head
// each time; sort keys end in the world id and a world is in one shard,
// so the merge is the one order the unsharded partition had. A category
// filter costs nothing extra. Status and the text query q are checked on
// each item read. A page's first ListingShards Queries (one per shard,
// made at once, each of limit+1 items, or of max(limit+1, 25) with q) are
// often the whole page: without q a page is ListingShards Queries, more
// only while closed worlds hide open ones; a shard whose items the merge
// used up is read on, up to discoveryQueries×ListingShards Queries in all,
// after which the page answers what matched with a cursor to read on.
//
// The cursor is the gsi1sk of the last world examined, bound to the
// listing's filter by a fingerprint: sort keys end in the world id, so
// they are unique across a listing's shards and the next page is the Query
// "sort key below the cursor" in every shard. Paging a listing that does
// not change meanwhile returns every world exactly once; a world whose
// member count changes while a client pages by members moves in that order
// and may be seen twice or not at all (the newest order never moves). A
// cursor is a position in a public listing and nothing more: it is not
// sealed, only checked to belong to the same filter.
//
// Writes: a world's create and owner update write its listing items in
// the same transaction as the manifest; close and reopen update their
// status in theirs; delete removes them in its own. A join or leave writes
// the new count into them in its own transaction too, setting the
// manifest's listing version one up from the one it read, conditioned on
// the manifest being unchanged since (members.go). Only a join or leave
// that lost that condition twice refreshes the count after its
// transaction (refreshListing): 1 UpdateItem bumping the manifest's
// listing version (returning the count) and 1 Write of the listing items
// conditioned on an older version, so of racing refreshes the newest count
// wins. A refresh that fails leaves the listing's count behind until the
// world's next join or leave.

// Listing sorts.
const (
	SortMembers = "members"
	SortNewest  = "newest"
)

// Status filters of a listing besides StatusOpen and StatusClosed.
const StatusAny = "any"

// Limits of a listing.
const (
	DefaultDiscoveryLimit = 20
	MaxDiscoveryLimit     = 100
	MaxQueryLen           = 100 // characters of q
	// discoveryQueries×ListingShards bounds the Queries of one page;
	// discoveryScan is the items the first round of a page reads in all
	// (discoveryScan/ListingShards a shard) when a filter may skip many (q).
	discoveryQueries = 4
	discoveryScan    = 100
)

// ListingShards is how many gsi1 partitions each listing is written across.
// Four keep the registry's joins and leaves at 1,000 a second to half a
// partition's write throughput on each (docs/scale.md); a page costs a
// Query per shard.
const ListingShards = 4

// listingShard is world's shard of every listing: FNV-1a of its id, so it
// never changes while the world exists.
func listingShard(world string) int {
	h := fnv.New32a()
	_, _ = h.Write([]byte(world)) // a hash never fails
	return int(h.Sum32() % ListingShards)
}

// TypeListing is the type attribute of a world's listing items.
const TypeListing = "worldlist"

const (
	listPrefix    = "LIST#"
	worldsPrefix  = "WORLDS#"
	attrStatus    = "status"
	attrMaxMember = "maxMembers"
	// attrListVer orders the refreshes of the listing's member count.
	attrListVer    = "listVer"
	attrOwnerAWNID = "ownerAwnId"
	sortKeyNew     = "new"
	sortKeyMem     = "mem"
)

// listingSlot is one of a world's listing items.
type listingSlot struct {
	sort     string // sortKeyNew or sortKeyMem
	category bool   // the category partition, not the all-worlds one
}

var listingSlots = []listingSlot{{sortKeyNew, false}, {sortKeyNew, true}, {sortKeyMem, false}, {sortKeyMem, true}}

func (l listingSlot) key(world string) store.Key {
	scope := "all"
	if l.category {
		scope = "cat"
	}
	return store.Key{PK: WorldPK(world), SK: listPrefix + l.sort + "#" + scope}
}

// listingPK is the gsi1 partition of a sort and category ("" for all) in
// shard n.
func listingPK(sort, category string, n int) string {
	if category == "" {
		return worldsPrefix + sort + "#*#" + strconv.Itoa(n)
	}
	return worldsPrefix + sort + "#c:" + strings.ToLower(category) + "#" + strconv.Itoa(n)
}

func listingSK(sort string, members int64, created time.Time, world string) string {
	if sort == sortKeyMem {
		return fmt.Sprintf("%010d#%019d#%s", members, created.UnixNano(), world)
	}
	return fmt.Sprintf("%019d#%s", created.UnixNano(), world)
}

// slotsOf are the listing items a manifest has.
func slotsOf(m Manifest) []listingSlot {
	var out []listingSlot
	for _, l := range listingSlots {
		if !l.category || m.Category != "" {
			out = append(out, l)
		}
	}
	return out
}

// listingPuts writes every listing item of m at listing version ver.
func listingPuts(m Manifest, ver int64) []store.Action {
	var out []store.Action
	for _, l := range slotsOf(m) {
		cat := ""
		if l.category {
			cat = m.Category
		}
		it := store.Item{
			AttrType:         store.S(TypeListing),
			attrID:           store.S(m.ID),
			attrName:         store.S(m.Name),
			attrStatus:       store.S(orOpen(m.Status)),
			attrMembers:      store.N(m.Members),
			attrCreatedAt:    store.N(m.CreatedAt.UnixNano()),
			attrOwnerAWNID:   store.S(auth.AWNID(m.OwnerKey)),
			attrListVer:      store.N(ver),
			store.AttrGSI1PK: store.S(listingPK(l.sort, cat, listingShard(m.ID))),
			store.AttrGSI1SK: store.S(listingSK(l.sort, m.Members, m.CreatedAt, m.ID)),
		}
		if m.Description != "" {
			it[attrDescription] = store.S(m.Description)
		}
		if m.Category != "" {
			it[attrCategory] = store.S(m.Category)
		}
		out = append(out, store.Put(l.key(m.ID), it))
	}
	return out
}

// listingDeletes removes every listing item a world may have.
func listingDeletes(world string) []store.Action {
	out := make([]store.Action, len(listingSlots))
	for i, l := range listingSlots {
		out[i] = store.Delete(l.key(world))
	}
	return out
}

func orOpen(status string) string {
	if status == "" {
		return StatusOpen
	}
	return status
}

// refreshListing brings the listing items' member count to the manifest's
// (see the package doc of discovery above): best effort, after the write
// that changed the count.
func (s *Service) refreshListing(ctx context.Context, world string) {
	ctx = context.WithoutCancel(ctx)
	res, err := s.store.Write(ctx, store.Update(ManifestKey(world)).AddNum(attrListVer, 1).When(store.ItemExists()).Returning())
	if err != nil {
		return // the world is gone, or the store refused: the next change refreshes
	}
	m, err := decodeManifest(res[0])
	if err != nil {
		return
	}
	ver, err := res[0].Int(attrListVer)
	if err != nil {
		return
	}
	var ups []store.Action
	for _, l := range slotsOf(m) {
		cat := ""
		if l.category {
			cat = m.Category
		}
		// The partition too, though it never changes while the world
		// exists: a listing item written before the listings were sharded
		// moves to its shard with the world's next join or leave.
		up := store.Update(l.key(world)).SetAttr(attrMembers, store.N(m.Members)).SetAttr(attrListVer, store.N(ver)).
			SetAttr(store.AttrGSI1PK, store.S(listingPK(l.sort, cat, listingShard(world))))
		if l.sort == sortKeyMem {
			up = up.SetAttr(store.AttrGSI1SK, store.S(listingSK(sortKeyMem, m.Members, m.CreatedAt, world)))
		}
		ups = append(ups, up.When(store.And(store.ItemExists(), store.Lt(attrListVer, store.N(ver)))))
	}
	_, _ = s.store.Write(ctx, ups...) // a newer refresh got there first, or the next one will
}

// Filter selects and orders a listing of worlds.
type Filter struct {
	// Category keeps the worlds of one category (compared ignoring case).
	Category string
	// Query keeps the worlds whose name or description contains it,
	// ignoring case.
	Query string
	// Sort is SortMembers (the default) or SortNewest.
	Sort string
	// Status is StatusOpen (the default), StatusClosed or StatusAny.
	Status string
	// Limit is the most worlds per page: DefaultDiscoveryLimit when 0, at
	// most MaxDiscoveryLimit.
	Limit int
	// Cursor continues the listing after the page that returned it.
	Cursor string
}

// Summary is one world of a listing.
type Summary struct {
	ID          string
	Name        string
	Description string
	Category    string
	Status      string
	Members     int64
	CreatedAt   time.Time
	OwnerAWNID  string
}

// Listing is one page of worlds.
type Listing struct {
	Worlds []Summary
	// Cursor continues the listing; "" at its end.
	Cursor string
}

// validListingSK reports whether sk has listingSK's form for sort: for
// members 10 digits, '#', then 19 digits, '#', a world id; for newest the
// last two alone.
func validListingSK(sort, sk string) bool {
	widths := []int{19}
	if sort == sortKeyMem {
		widths = []int{10, 19}
	}
	for _, w := range widths {
		if len(sk) <= w || sk[w] != '#' || countDigits(sk[:w]) != w {
			return false
		}
		sk = sk[w+1:]
	}
	return worldIDShape.Match(sk)
}

func countDigits(s string) int {
	n := 0
	for n < len(s) && s[n] >= '0' && s[n] <= '9' {
		n++
	}
	return n
}

// listingCursor is a cursor's content: the last sort key examined and the
// fingerprint of its filter.
type listingCursor struct {
	SK string `json:"k"`
	F  string `json:"f"`
}

func fingerprint(f Filter) string {
	sum := sha256.Sum256([]byte(strings.Join([]string{f.Sort, strings.ToLower(f.Category), f.Status, strings.ToLower(f.Query)}, "\x00")))
	return base64.RawURLEncoding.EncodeToString(sum[:9])
}

func encodeListingCursor(f Filter, sk string) string {
	raw, _ := json.Marshal(listingCursor{SK: sk, F: fingerprint(f)}) // strings: cannot fail
	return base64.RawURLEncoding.EncodeToString(raw)
}

func decodeListingCursor(f Filter, sortKey string) (string, error) {
	bad := invalid("cursor is not one this listing returned; start again without it")
	raw, err := base64.RawURLEncoding.DecodeString(f.Cursor)
	if err != nil || len(raw) > 256 {
		return "", bad
	}
	var c listingCursor
	if err := json.Unmarshal(raw, &c); err != nil || c.F != fingerprint(f) || !validListingSK(sortKey, c.SK) {
		return "", bad
	}
	return c.SK, nil
}

// normalize checks f and fills its defaults.
func (f *Filter) normalize() error {
	switch f.Sort {
	case "":
		f.Sort = SortMembers
	case SortMembers, SortNewest:
	default:
		return invalid("sort must be %q or %q", SortMembers, SortNewest)
	}
	switch f.Status {
	case "":
		f.Status = StatusOpen
	case StatusOpen, StatusClosed, StatusAny:
	default:
		return invalid("status must be %q, %q or %q", StatusOpen, StatusClosed, StatusAny)
	}
	switch {
	case f.Limit == 0:
		f.Limit = DefaultDiscoveryLimit
	case f.Limit < 1 || f.Limit > MaxDiscoveryLimit:
		return invalid("limit must be between 1 and %d", MaxDiscoveryLimit)
	}
	for _, p := range []struct {
		field, v string
		max      int
	}{{"category", f.Category, MaxCategoryLen}, {"q", f.Query, MaxQueryLen}} {
		if !utf8.ValidString(p.v) {
			return invalid("%s must be valid UTF-8", p.field)
		}
		if n := utf8.RuneCountInString(p.v); n > p.max {
			return invalid("%s must be at most %d characters, not %d", p.field, p.max, n)
		}
		if c, bad := ident.UnsafeRune(p.v); bad {
			return invalid("%s", ident.UnsafeRuneError(p.field, c))
		}
	}
	return nil
}

// Discover lists worlds (see the package's discovery doc above for its
// items and costs): ListingShards gsi1 Queries per page without q unless
// closed worlds hide open ones, at most discoveryQueries×ListingShards
// with q. Bad filters and cursors are Invalid.
func (s *Service) Discover(ctx context.Context, f Filter) (Listing, error) {
	if err := f.normalize(); err != nil {
		return Listing{}, err
	}
	sortKey := sortKeyMem
	if f.Sort == SortNewest {
		sortKey = sortKeyNew
	}
	var below string
	if f.Cursor != "" {
		after, err := decodeListingCursor(f, sortKey)
		if err != nil {
			return Listing{}, err
		}
		below = after
	}
	shards := make([]listingReader, ListingShards)
	for n := range shards {
		q := store.Query{Index: store.IndexGSI1, PK: listingPK(sortKey, f.Category, n), Backward: true, Limit: f.Limit + 1}
		if f.Query != "" {
			q.Limit = max(q.Limit, discoveryScan/ListingShards)
		}
		if below != "" {
			q.SK = store.SKLT(below)
		}
		shards[n] = listingReader{q: q}
	}
	// The first round at once: a page's latency is one Query's.
	var wg sync.WaitGroup
	errs := make([]error, len(shards))
	for n := range shards {
		wg.Go(func() { errs[n] = shards[n].read(ctx, s.store) })
	}
	wg.Wait()
	for _, err := range errs {
		if err != nil {
			return Listing{}, apierror.FromStore("list worlds", err)
		}
	}
	queries := len(shards)
	needle := strings.ToLower(f.Query)
	out := Listing{Worlds: []Summary{}}
	var last string // sort key of the last item examined
	for {
		if len(out.Worlds) == f.Limit && slices.ContainsFunc(shards, func(r listingReader) bool { return len(r.items) > 0 }) {
			// A world beyond the page exists, whichever it is: no Query
			// more to find the greatest.
			out.Cursor = encodeListingCursor(f, last)
			return out, nil
		}
		// Every shard with items left shows its next one before the
		// merge picks, so the pick is the greatest sort key of all.
		for n := range shards {
			for len(shards[n].items) == 0 && !shards[n].done {
				if queries == discoveryQueries*ListingShards {
					// The page's Queries are spent: continue after what was examined.
					out.Cursor = encodeListingCursor(f, last)
					return out, nil
				}
				if err := shards[n].read(ctx, s.store); err != nil {
					return Listing{}, apierror.FromStore("list worlds", err)
				}
				queries++
			}
		}
		pick := -1
		for n := range shards {
			if len(shards[n].items) > 0 && (pick < 0 || shards[n].head() > shards[pick].head()) {
				pick = n
			}
		}
		if pick < 0 {
			return out, nil // every shard read to its end
		}
		if len(out.Worlds) == f.Limit {
			// A world beyond the page exists: continue after the last one shown.
			out.Cursor = encodeListingCursor(f, last)
			return out, nil
		}
		it := shards[pick].items[0]
		shards[pick].items = shards[pick].items[1:]
		last = it.Str(store.AttrGSI1SK)
		w, err := decodeSummary(it)
		if err != nil {
			return Listing{}, internal(err)
		}
		if f.Status != StatusAny && w.Status != f.Status {
			continue
		}
		if needle != "" && !strings.Contains(strings.ToLower(w.Name), needle) && !strings.Contains(strings.ToLower(w.Description), needle) {
			continue
		}
		out.Worlds = append(out.Worlds, w)
	}
}

// listingReader is one shard of a listing as a page reads it: the items
// read and not yet merged, and where its Query goes on.
type listingReader struct {
	q     store.Query
	items []store.Item
	done  bool // the shard has no items beyond those read
}

// read reads the shard's next page of items.
func (r *listingReader) read(ctx context.Context, st store.Store) error {
	page, err := st.Query(ctx, r.q)
	if err != nil {
		return err
	}
	r.items = append(r.items, page.Items...)
	r.q.Cursor = page.Cursor
	r.done = page.Cursor == ""
	return nil
}

func (r *listingReader) head() string { return r.items[0].Str(store.AttrGSI1SK) }

func decodeSummary(it store.Item) (Summary, error) {
	w := Summary{
		ID:          it.Str(attrID),
		Name:        it.Str(attrName),
		Description: it.Str(attrDescription),
		Category:    it.Str(attrCategory),
		Status:      orOpen(it.Str(attrStatus)),
		OwnerAWNID:  it.Str(attrOwnerAWNID),
	}
	if it.Str(AttrType) != TypeListing || w.ID == "" {
		return Summary{}, fmt.Errorf("world: item %s is not a listing", it.Key())
	}
	var err error
	if w.Members, err = it.Int(attrMembers); err != nil {
		return Summary{}, fmt.Errorf("world: listing %s: %w", it.Key(), err)
	}
	created, err := it.Int(attrCreatedAt)
	if err != nil {
		return Summary{}, fmt.Errorf("world: listing %s: %w", it.Key(), err)
	}
	w.CreatedAt = time.Unix(0, created).UTC()
	return w, nil
}
