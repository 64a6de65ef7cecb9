package world_test

import (
	"context"
	"encoding/json"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/a2awire/a2awire/shared/apierror"
	"github.com/a2awire/a2awire/shared/auth"
	"github.com/a2awire/a2awire/shared/store"
	"github.com/a2awire/a2awire/shared/store/storetest"
	"github.com/a2awire/a2awire/shared/world"
)

// wantCode is wantKind for an error that also carries a surface code.
func wantCode(t *testing.T, err error, kind apierror.Kind, code string) {
	t.Helper()
	wantKind(t, err, kind)
	if got := apierror.From(err).Code; got != code {
		t.Fatalf("error %v has code %q, want %q", err, got, code)
	}
}

func countEvents(evs []world.Event, typ string) int {
	n := 0
	for _, e := range evs {
		if e.Type == typ {
			n++
		}
	}
	return n
}

// TestKickAndBan: a kick ends the membership as a leave does (count,
// agents list, the agent's view) and is announced as agent.kicked; a ban
// of a member kicks it in the same write; a banned key's join is 403
// BANNED until it is unbanned; bans list by page.
func TestKickAndBan(t *testing.T) {
	everyEngine(t, func(t *testing.T, st store.Store) {
		ctx := context.Background()
		c := &clock{now: t0}
		s := newWorld(t, st, c, "arena")
		a, b, o := join(t, s, "arena", 1), join(t, s, "arena", 2), join(t, s, "arena", 3)

		kicked, err := s.Kick(ctx, "arena", a.AWNID)
		if err != nil || kicked.AWNID != a.AWNID {
			t.Fatalf("kick: %+v, %v", kicked, err)
		}
		_, err = s.Kick(ctx, "arena", a.AWNID)
		wantKind(t, err, apierror.NotFound)
		if _, err := s.Member(ctx, "arena", a.AWNID); apierror.KindOf(err) != apierror.NotFound {
			t.Fatalf("a kicked member is still one: %v", err)
		}
		view, err := s.AgentWorlds(ctx, a.AWNID, 0, "")
		if err != nil || len(view.Worlds) != 0 {
			t.Fatalf("the kicked agent's view: %+v, %v", view, err)
		}
		// A kicked agent may join again.
		join(t, s, "arena", 1)

		ban, created, err := s.Ban(ctx, "arena", b.AWNID, "spam")
		if err != nil || !created || ban.Reason != "spam" {
			t.Fatalf("ban a member: %+v %v %v", ban, created, err)
		}
		if _, err := s.Member(ctx, "arena", b.AWNID); apierror.KindOf(err) != apierror.NotFound {
			t.Fatalf("a banned member is still one: %v", err)
		}
		if _, created, err := s.Ban(ctx, "arena", b.AWNID, "again"); err != nil || created {
			t.Fatalf("ban again: created %v, %v; want the ban as it was", created, err)
		}
		_, _, err = s.Join(ctx, "arena", key(2), nil)
		wantCode(t, err, apierror.Forbidden, "banned")
		m, err := s.GetWorld(ctx, "arena")
		if err != nil || m.Members != 2 {
			t.Fatalf("member count %d, %v; want 2 (a rejoined, o)", m.Members, err)
		}

		// A key that never joined can be banned too.
		stranger := auth.AWNID(key(4))
		if _, created, err := s.Ban(ctx, "arena", stranger, ""); err != nil || !created {
			t.Fatalf("ban a stranger: %v %v", created, err)
		}
		_, err = s.Unban(ctx, "arena", auth.AWNID(key(5)))
		wantKind(t, err, apierror.NotFound)
		_, _, err = s.Ban(ctx, "arena", "aw:sha256:nope", "")
		wantKind(t, err, apierror.Invalid, "awnId")
		_, _, err = s.Ban(ctx, "nowhere", stranger, "")
		wantKind(t, err, apierror.NotFound)

		p1, err := s.Bans(ctx, "arena", 1, "")
		if err != nil || len(p1.Bans) != 1 || p1.Cursor == "" {
			t.Fatalf("bans page 1: %+v, %v", p1, err)
		}
		p2, err := s.Bans(ctx, "arena", 1, p1.Cursor)
		if err != nil || len(p2.Bans) != 1 || p2.Bans[0].AWNID == p1.Bans[0].AWNID || p2.Cursor != "" {
			t.Fatalf("bans page 2: %+v, %v; want the other ban, the last page", p2, err)
		}

		if _, err := s.Unban(ctx, "arena", b.AWNID); err != nil {
			t.Fatal(err)
		}
		join(t, s, "arena", 2)

		evs := eventsOf(t, s, "arena", o.AWNID)
		if n := countEvents(evs, world.AgentKicked); n != 2 {
			t.Fatalf("%d agent.kicked events, want 2 (the kick, the ban of a member)", n)
		}
		for _, e := range evs {
			if e.Type == world.AgentKicked && e.Visibility != world.Public {
				t.Fatalf("agent.kicked is %s, want public", e.Visibility)
			}
		}
	})
}

// TestBanRacingJoin forces both orders of a ban and a join of one key:
// the join committing between the ban's read and its write (the ban's
// condition fails and it kicks the new member), and the ban committing
// between the join's slot and its write (the join's ban check fails: 403,
// and the count is given back).
func TestBanRacingJoin(t *testing.T) {
	everyEngine(t, func(t *testing.T, st store.Store) {
		ctx := context.Background()
		c := &clock{now: t0}
		s := newWorld(t, st, c, "arena")
		target := auth.AWNID(key(1))

		joinFirst := &storetest.BeforeWrite{Store: st, Hook: func() { join(t, s, "arena", 1) }}
		if _, created, err := world.New(joinFirst, world.WithClock(c.Now), world.WithIDs(testIDs)).Ban(ctx, "arena", target, ""); err != nil || !created {
			t.Fatalf("ban racing a join: %v %v", created, err)
		}
		if _, err := s.Member(ctx, "arena", target); apierror.KindOf(err) != apierror.NotFound {
			t.Fatalf("the join that raced the ban left a banned member: %v", err)
		}
		if _, err := s.Unban(ctx, "arena", target); err != nil {
			t.Fatal(err)
		}

		var banErr error
		banFirst := &storetest.BeforeWrite{Store: st, Hook: func() { _, _, banErr = s.Ban(ctx, "arena", target, "") }}
		_, _, err := world.New(banFirst, world.WithClock(c.Now), world.WithIDs(testIDs)).Join(ctx, "arena", key(1), nil)
		if banErr != nil {
			t.Fatal(banErr)
		}
		wantCode(t, err, apierror.Forbidden, "banned")
		if m, err := s.GetWorld(ctx, "arena"); err != nil || m.Members != 0 {
			t.Fatalf("member count %d, %v; want 0", m.Members, err)
		}
	})
}

// TestBanJoinPairs: 40 ban/join pairs of one key, each pair's two calls
// racing: once both have returned, the key is banned and not a member, on
// every engine. The pairs run in 8 worlds at once (5 rounds each) to bound
// the run time on DynamoDB Local; every round races one join against one
// ban of the same key in the same world, and is unbanned before the next.
// Each round is an independent race (the unban resets it), so 40 show
// both orders (join first then banned out, ban first then join refused)
// as 200 did; the test logs how many rounds went each way.
func TestBanJoinPairs(t *testing.T) {
	everyEngine(t, func(t *testing.T, st store.Store) {
		ctx := context.Background()
		s := world.New(st, world.WithIDs(testIDs))
		const worlds, rounds = 8, 5
		target := auth.AWNID(key(1))
		var wg sync.WaitGroup
		var joined, refused atomic.Int64
		errs := make(chan error, worlds)
		for w := range worlds {
			id := fmt.Sprintf("race-%d", w)
			if _, _, err := s.PutWorld(ctx, manifest(id), key(0)); err != nil {
				t.Fatal(err)
			}
			wg.Go(func() {
				for r := range rounds {
					var jerr, berr error
					var pair sync.WaitGroup
					pair.Go(func() { _, _, jerr = s.Join(ctx, id, key(1), nil) })
					pair.Go(func() { _, _, berr = s.Ban(ctx, id, target, "") })
					pair.Wait()
					if berr != nil {
						errs <- fmt.Errorf("%s round %d: ban: %w", id, r, berr)
						return
					}
					if jerr != nil && apierror.From(jerr).Code != "banned" {
						errs <- fmt.Errorf("%s round %d: join: %w", id, r, jerr)
						return
					}
					if jerr == nil {
						joined.Add(1)
					} else {
						refused.Add(1)
					}
					if _, err := s.Member(ctx, id, target); apierror.KindOf(err) != apierror.NotFound {
						errs <- fmt.Errorf("%s round %d: the banned key is a member (%v)", id, r, err)
						return
					}
					if _, err := s.Unban(ctx, id, target); err != nil {
						errs <- fmt.Errorf("%s round %d: unban: %w", id, r, err)
						return
					}
				}
			})
		}
		wg.Wait()
		close(errs)
		for err := range errs {
			t.Error(err)
		}
		t.Logf("%d rounds joined before the ban, %d refused the join", joined.Load(), refused.Load())
		for w := range worlds {
			if m, err := s.GetWorld(ctx, fmt.Sprintf("race-%d", w)); err != nil || m.Members != 0 {
				t.Errorf("race-%d: member count %d, %v; want 0", w, m.Members, err)
			}
		}
	})
}

// TestAgentWorlds: the agent's view lists the worlds it joined (with its
// presence and webhook) and those it owns, by page; leaving removes the
// row; an agent with no world gets an empty page.
func TestAgentWorlds(t *testing.T) {
	everyEngine(t, func(t *testing.T, st store.Store) {
		ctx := context.Background()
		c := &clock{now: t0}
		s := newWorld(t, st, c, "alpha")
		if _, _, err := s.PutWorld(ctx, manifest("beta"), key(1)); err != nil {
			t.Fatal(err)
		}
		me := join(t, s, "alpha", 1)
		if _, _, err := s.Join(ctx, "beta", key(1), nil); err != nil {
			t.Fatal(err)
		}
		if err := s.MarkPolled(ctx, "alpha", me.AWNID); err != nil {
			t.Fatal(err)
		}
		var rows []world.AgentWorld
		cursor := ""
		for range 4 {
			page, err := s.AgentWorlds(ctx, me.AWNID, 1, cursor)
			if err != nil {
				t.Fatal(err)
			}
			rows = append(rows, page.Worlds...)
			if cursor = page.Cursor; cursor == "" {
				break
			}
		}
		got := map[string]world.AgentWorld{}
		for _, r := range rows {
			got[r.Role+" "+r.World] = r
		}
		if len(rows) != 3 || len(got) != 3 {
			t.Fatalf("view rows %+v, want member of alpha and beta, owner of beta", rows)
		}
		if r := got["member alpha"]; r.Presence != world.PresenceOnline || r.Member.Slot != 1 {
			t.Fatalf("alpha: %+v, want online, slot 1", r)
		}
		if r := got["member beta"]; r.Presence != world.PresenceOffline {
			t.Fatalf("beta: %+v, want offline (never polled there)", r)
		}
		if r := got["owner beta"]; r.Manifest.ID != "beta" || r.Manifest.Members != 1 {
			t.Fatalf("owned beta: %+v", r)
		}
		if err := s.Leave(ctx, "alpha", me.AWNID); err != nil {
			t.Fatal(err)
		}
		page, err := s.AgentWorlds(ctx, me.AWNID, 0, "")
		if err != nil || len(page.Worlds) != 2 {
			t.Fatalf("after leaving alpha: %+v, %v", page, err)
		}
		if page, err := s.AgentWorlds(ctx, auth.AWNID(key(7)), 0, ""); err != nil || len(page.Worlds) != 0 {
			t.Fatalf("an agent of no world: %+v, %v", page, err)
		}
		_, err = s.AgentWorlds(ctx, me.AWNID, 0, "JOINED#../x")
		wantKind(t, err, apierror.Invalid, "cursor")
		_, err = s.AgentWorlds(ctx, me.AWNID, 101, "")
		wantKind(t, err, apierror.Invalid, "limit")
	})
}

// TestMembersPageBudget: paging the agents list returns every member once,
// and a byte budget cuts a page before the member that would pass it.
// 24 members, a limit of 10 and a budget of 6 make the same 4 pages, each
// cut by the budget below its limit, as 120 members did with 50 and 30:
// the cut and the cursor past it do not depend on the count.
func TestMembersPageBudget(t *testing.T) {
	everyEngine(t, func(t *testing.T, st store.Store) {
		ctx := context.Background()
		c := &clock{now: t0}
		s := newWorld(t, st, c, "crowd")
		const n, budget = 24, 6
		meta := json.RawMessage(`{"bio":"` + string(make([]byte, 0)) + `0123456789"}`)
		for i := 1; i <= n; i++ {
			if _, _, err := s.Join(ctx, "crowd", key(i), meta); err != nil {
				t.Fatal(err)
			}
		}
		size := func(world.MemberRow) int { return 100 }
		seen := map[string]bool{}
		cursor, pages := "", 0
		for {
			p, err := s.MembersPage(ctx, "crowd", world.PageOptions{Limit: 10, Cursor: cursor, Size: size, MaxBytes: budget * 100})
			if err != nil {
				t.Fatal(err)
			}
			pages++
			if len(p.Members) > budget {
				t.Fatalf("a page of %d members passed its budget of %d", len(p.Members), budget)
			}
			for _, m := range p.Members {
				if seen[m.AWNID] {
					t.Fatalf("%s listed twice", m.AWNID)
				}
				seen[m.AWNID] = true
			}
			if cursor = p.Cursor; cursor == "" {
				break
			}
		}
		if len(seen) != n || pages != 4 {
			t.Fatalf("%d members in %d pages, want %d in 4", len(seen), pages, n)
		}
		_, err := s.MembersPage(ctx, "nowhere", world.PageOptions{})
		wantKind(t, err, apierror.NotFound)
		_, err = s.MembersPage(ctx, "crowd", world.PageOptions{Cursor: "MEMBER#zzz"})
		wantKind(t, err, apierror.Invalid, "cursor")
	})
}

// TestPresenceChanged: a first poll announces online; a poll after a
// silence announces the offline it missed (since: when it went stale),
// then online; a registration set offline overrides polls in every world
// and is announced, and online again is announced too; agents events are
// seen from the join onward, the public feed needs no membership.
func TestPresenceChanged(t *testing.T) {
	everyEngine(t, func(t *testing.T, st store.Store) {
		ctx := context.Background()
		c := &clock{now: t0}
		s := newWorld(t, st, c, "lobby")
		a, b := join(t, s, "lobby", 1), join(t, s, "lobby", 2)
		presences := func() []string {
			var out []string
			for _, e := range eventsOf(t, s, "lobby", b.AWNID) {
				if e.Type != world.PresenceChanged {
					continue
				}
				var d struct{ AWNID, Presence, Since string }
				if err := json.Unmarshal(e.Data, &d); err != nil {
					t.Fatal(err)
				}
				if d.AWNID == a.AWNID {
					out = append(out, d.Presence+"@"+d.Since)
				}
			}
			return out
		}
		if err := s.MarkPolled(ctx, "lobby", a.AWNID); err != nil {
			t.Fatal(err)
		}
		c.Advance(10 * time.Second)
		if err := s.MarkPolled(ctx, "lobby", a.AWNID); err != nil { // steady: nothing to announce
			t.Fatal(err)
		}
		c.Advance(45 * time.Second)
		if err := s.MarkPolled(ctx, "lobby", a.AWNID); err != nil {
			t.Fatal(err)
		}
		stale := t0.Add(40 * time.Second).Format(time.RFC3339Nano)
		if got, want := fmt.Sprint(presences()), fmt.Sprint([]string{"online@", "offline@" + stale, "online@"}); got != want {
			t.Fatalf("presence.changed of a: %s, want %s", got, want)
		}
		if err := s.SetRegistryPresence(ctx, a.AWNID, true); err != nil {
			t.Fatal(err)
		}
		if ok, err := s.Reachable(ctx, "lobby", a.AWNID); err != nil || ok {
			t.Fatalf("a registered offline agent that just polled: reachable %v, %v", ok, err)
		}
		if _, p, err := s.PresenceIn(ctx, "lobby", a.AWNID); err != nil || p != world.PresenceOffline {
			t.Fatalf("presence %q, %v; want offline", p, err)
		}
		if err := s.MarkPolled(ctx, "lobby", a.AWNID); err != nil { // polling does not undo it
			t.Fatal(err)
		}
		if err := s.SetRegistryPresence(ctx, a.AWNID, false); err != nil {
			t.Fatal(err)
		}
		if got, want := fmt.Sprint(presences()), fmt.Sprint([]string{"online@", "offline@" + stale, "online@", "offline@", "online@"}); got != want {
			t.Fatalf("presence.changed of a: %s, want %s", got, want)
		}

		// Agents events are a member's from its join onward.
		c.Advance(time.Minute)
		if _, err := s.SubmitAction(ctx, "lobby", a.AWNID, "wave", nil); err != nil {
			t.Fatal(err)
		}
		c.Advance(time.Minute)
		late := join(t, s, "lobby", 3)
		if n := countEvents(eventsOf(t, s, "lobby", late.AWNID), world.ActionSubmitted); n != 0 {
			t.Fatalf("a new member sees %d action.submitted from before its join", n)
		}
		if n := countEvents(eventsOf(t, s, "lobby", late.AWNID), world.AgentJoined); n != 3 {
			t.Fatalf("a new member sees %d agent.joined, want all 3 (public events of any age)", n)
		}
		if _, err := s.SubmitAction(ctx, "lobby", a.AWNID, "wave", nil); err != nil {
			t.Fatal(err)
		}
		if n := countEvents(eventsOf(t, s, "lobby", late.AWNID), world.ActionSubmitted); n != 1 {
			t.Fatalf("a new member sees %d action.submitted after its join, want 1", n)
		}

		// The public feed: public events only, no membership needed, and
		// its cursor moves past what it may not see.
		feed, err := s.PublicEvents(ctx, "lobby", "", 2)
		if err != nil || len(feed.Events) != 2 {
			t.Fatalf("public feed: %+v, %v", feed, err)
		}
		var all []world.Event
		for cursor := ""; ; {
			p, err := s.PublicEvents(ctx, "lobby", cursor, 2)
			if err != nil {
				t.Fatal(err)
			}
			all = append(all, p.Events...)
			if len(p.Events) == 0 && p.Cursor == cursor {
				break
			}
			cursor = p.Cursor
		}
		for _, e := range all {
			if e.Visibility != world.Public {
				t.Fatalf("the public feed shows a %s event", e.Visibility)
			}
		}
		if n := countEvents(all, world.AgentJoined); n != 3 {
			t.Fatalf("the public feed shows %d agent.joined, want 3", n)
		}
		_, err = s.PublicEvents(ctx, "nowhere", "", 0)
		wantKind(t, err, apierror.NotFound)
	})
}
