package world

import (
	"context"
	"fmt"
	"maps"
	"strings"
	"sync"

	"github.com/a2awire/a2awire/shared/apierror"
	"github.com/a2awire/a2awire/shared/store"
)

// MemberRow is one member on a page of the agents list, with its presence
// by the rule.
type MemberRow struct {
	Member
	Presence string
}

// PageOptions shape a page of the agents list.
type PageOptions struct {
	// Limit is the most members (1..MaxListLimit, 0 = DefaultListLimit).
	Limit int
	// Cursor continues from the page that returned it ("" = the first).
	Cursor string
	// Size, when set, measures a row as the answer carries it, and
	// MaxBytes bounds their sum: the page ends before the row that would
	// pass it, so no answer outgrows what its transport can carry.
	Size     func(MemberRow) int
	MaxBytes int
}

// MemberPage is one page of a world's members, by awnId.
type MemberPage struct {
	Members []MemberRow
	// Cursor continues the listing ("" on the last page).
	Cursor string
}

// MembersPage lists world's members after o.Cursor, by awnId, with their
// presence (webhooks and registry presence included). Unknown world →
// NotFound. A page ends at o.Limit members or before the member that
// would pass o.MaxBytes, with a cursor; paging with the cursors returns
// every member that stays joined throughout exactly once.
//
// Cost: 1 round trip. Side by side: the first page 1 Query of the manifest
// and at most limit+1 member items (a later page 1 GetItem of the manifest
// and 1 Query of at most limit+1 member items), and 1 Query of at most
// limit webhook items from the page's first awnId on. Webhook items exist
// only for members, so that Query holds the page's webhooks unless it was
// cut short (1 MB, or a webhook left behind a race): only then 1 more
// Query reads the rest of the page's range.
func (s *Service) MembersPage(ctx context.Context, world string, o PageOptions) (MemberPage, error) {
	limit, lo, err := listArgs(o.Limit, o.Cursor, memberPrefix)
	if err != nil {
		return MemberPage{}, err
	}
	if !worldIDShape.Match(world) {
		return MemberPage{}, worldNotFound(world)
	}
	var page, hookPage store.Page
	var perr, merr, herr error
	var hooksWG sync.WaitGroup
	// The webhooks beside the members: the page's members are the first
	// limit from the same bound, and each webhook is a member's.
	hooksWG.Go(func() {
		hookPage, herr = s.store.Query(ctx, store.Query{PK: WorldPK(world),
			SK: store.SKBetween(webhookPrefix+strings.TrimPrefix(lo, memberPrefix), webhookEnd), Limit: limit})
	})
	defer hooksWG.Wait()
	if o.Cursor == "" {
		// The first page's range starts at the manifest, which sorts
		// right before the member items: the world's existence costs no
		// call of its own.
		page, perr = s.store.Query(ctx, store.Query{PK: WorldPK(world), SK: store.SKBetween(manifestSK, membersEnd), Limit: limit + 2})
		if perr == nil && (len(page.Items) == 0 || page.Items[0].Str(AttrType) != TypeWorld) {
			merr = worldNotFound(world)
		}
		if len(page.Items) > 0 {
			page.Items = page.Items[1:]
		}
	} else {
		var wg sync.WaitGroup
		wg.Go(func() { _, merr = s.GetWorld(ctx, world) })
		page, perr = s.store.Query(ctx, store.Query{PK: WorldPK(world), SK: store.SKBetween(lo, membersEnd), Limit: limit + 1})
		wg.Wait()
	}
	if perr != nil {
		return MemberPage{}, apierror.FromStore("list members", perr)
	}
	if merr != nil {
		return MemberPage{}, merr
	}
	items := page.Items
	// More follow when the Query found more than limit, or when the store
	// cut the page (its 1 MB) before limit+1.
	more := len(items) > limit || (page.Cursor != "" && len(items) > 0)
	if len(items) > limit {
		items = items[:limit]
	}
	rows := make([]MemberRow, 0, len(items))
	for _, it := range items {
		m, err := decodeMember(world, it)
		if err != nil {
			return MemberPage{}, internal(err)
		}
		rows = append(rows, MemberRow{Member: m})
	}
	hooksWG.Wait()
	if herr != nil {
		return MemberPage{}, apierror.FromStore("read webhooks", herr)
	}
	hooks := map[string]Hook{}
	last := ""
	for _, it := range hookPage.Items {
		last = strings.TrimPrefix(it.Key().SK, webhookPrefix)
		hooks[last] = decodeHook(it)
	}
	if len(rows) > 0 && (hookPage.Cursor != "" || len(hookPage.Items) == limit) && last < rows[len(rows)-1].AWNID {
		// Cut short before the page's last member: read the rest.
		rest, err := s.hooksBetween(ctx, world, []MemberRow{{Member: Member{AWNID: last}}, rows[len(rows)-1]})
		if err != nil {
			return MemberPage{}, err
		}
		maps.Copy(hooks, rest)
	}
	now := s.now()
	out := MemberPage{Members: make([]MemberRow, 0, len(rows))}
	used := 0
	for i := range rows {
		rows[i].Presence = PresenceOf(rows[i].Member, hooks[rows[i].AWNID], now)
		if o.Size != nil {
			n := o.Size(rows[i])
			if used+n > o.MaxBytes {
				if i == 0 {
					return MemberPage{}, internal(fmt.Errorf("world: member %s of %s alone is over the answer's %d bytes", rows[i].AWNID, world, o.MaxBytes))
				}
				more = true
				break
			}
			used += n
		}
		out.Members = append(out.Members, rows[i])
	}
	if more {
		out.Cursor = out.Members[len(out.Members)-1].AWNID
	}
	return out, nil
}

// webhookEnd bounds a Query of a world's webhook items ("WEBHOOK$" sorts
// right after every "WEBHOOK#…").
const webhookEnd = "WEBHOOK$"

// hooksBetween reads the webhook items of the rows' members: one Query of
// the webhook range from the first row's awnId to the last's.
func (s *Service) hooksBetween(ctx context.Context, world string, rows []MemberRow) (map[string]Hook, error) {
	out := map[string]Hook{}
	if len(rows) == 0 {
		return out, nil
	}
	q := store.Query{PK: WorldPK(world), SK: store.SKBetween(webhookPrefix+rows[0].AWNID, webhookPrefix+rows[len(rows)-1].AWNID)}
	for {
		page, err := s.store.Query(ctx, q)
		if err != nil {
			return nil, apierror.FromStore("read webhooks", err)
		}
		for _, it := range page.Items {
			out[strings.TrimPrefix(it.Key().SK, webhookPrefix)] = decodeHook(it)
		}
		if page.Cursor == "" {
			return out, nil
		}
		q.Cursor = page.Cursor
	}
}
