package world_test

import (
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/a2awire/a2awire/shared/apierror"
	"github.com/a2awire/a2awire/shared/auth"
	"github.com/a2awire/a2awire/shared/store"
	"github.com/a2awire/a2awire/shared/store/memory"
	"github.com/a2awire/a2awire/shared/world"
)

func appendEvent(t *testing.T, s *world.Service, id, typ string, vis world.Visibility, recipient string, n int) world.Event {
	t.Helper()
	e := world.Event{Type: typ, World: id, Data: json.RawMessage(fmt.Sprintf(`{"n":%d}`, n)), Visibility: vis, Recipient: recipient,
		CreatedAt: time.Now().UTC()}
	e.ID = testIDs.New(e.CreatedAt)
	if err := s.Append(context.Background(), e); err != nil {
		t.Fatal(err)
	}
	return e
}

func ids(evs []world.Event) []string {
	out := make([]string, len(evs))
	for i, e := range evs {
		out[i] = e.ID
	}
	return out
}

// service returns a service on st (real clock) with world id and members
// keys 1 and 2.
func service(t *testing.T, st store.Store, id string, actions ...string) (*world.Service, world.Member, world.Member) {
	t.Helper()
	s := world.New(st, world.WithIDs(testIDs))
	if _, _, err := s.PutWorld(context.Background(), manifest(id, actions...), key(0)); err != nil {
		t.Fatal(err)
	}
	return s, join(t, s, id, 1), join(t, s, id, 2)
}

func TestEventsVisibility(t *testing.T) {
	everyEngine(t, func(t *testing.T, st store.Store) {
		ctx := context.Background()
		s, a, b := service(t, st, "lobby")
		pub := appendEvent(t, s, "lobby", world.PresenceChanged, world.Public, "", 1)
		agents := appendEvent(t, s, "lobby", world.ActionSubmitted, world.Agents, "", 2)
		toA := appendEvent(t, s, "lobby", world.MessageReceived, world.Private, a.AWNID, 3)
		toB := appendEvent(t, s, "lobby", world.MessageReceived, world.Private, b.AWNID, 4)
		appendEvent(t, s, "other", world.PresenceChanged, world.Public, "", 5)
		for _, c := range []struct {
			who  string
			want []world.Event
		}{{a.AWNID, []world.Event{pub, agents, toA}}, {b.AWNID, []world.Event{pub, agents, toB}}} {
			evs, err := s.Events(ctx, "lobby", c.who, "", 0)
			if err != nil {
				t.Fatal(err)
			}
			// The two joins come first.
			if len(evs) != 5 || evs[0].Type != world.AgentJoined || evs[1].Type != world.AgentJoined {
				t.Fatalf("events of %s: %v", c.who, evs)
			}
			for i, w := range c.want {
				got := evs[2+i]
				if got.ID != w.ID || got.Type != w.Type || got.Visibility != w.Visibility || got.Recipient != w.Recipient ||
					string(got.Data) != string(w.Data) || got.World != "lobby" || !got.CreatedAt.Equal(w.CreatedAt) {
					t.Fatalf("event %d of %s = %+v, want %+v", 2+i, c.who, got, w)
				}
			}
		}
	})
}

func TestEventsAfterAndLimit(t *testing.T) {
	everyEngine(t, func(t *testing.T, st store.Store) {
		ctx := context.Background()
		s, a, b := service(t, st, "lobby")
		// Shared and private events interleaved: every page merges both
		// partitions in id order.
		var want []string
		joined, _ := s.Events(ctx, "lobby", a.AWNID, "", 0)
		want = append(want, ids(joined)...)
		for i := range 12 {
			switch i % 3 {
			case 0:
				want = append(want, appendEvent(t, s, "lobby", world.PresenceChanged, world.Public, "", i).ID)
			case 1:
				want = append(want, appendEvent(t, s, "lobby", world.MessageReceived, world.Private, a.AWNID, i).ID)
			default:
				appendEvent(t, s, "lobby", world.MessageReceived, world.Private, b.AWNID, i)
			}
		}
		all, err := s.Events(ctx, "lobby", a.AWNID, "", world.MaxEventLimit)
		if err != nil || !slices.Equal(ids(all), want) {
			t.Fatalf("all events %v (%v), want %v", ids(all), err, want)
		}
		for _, limit := range []int{1, 2, 3, 5} {
			var got []string
			after := ""
			for range 20 {
				page, err := s.Events(ctx, "lobby", a.AWNID, after, limit)
				if err != nil {
					t.Fatal(err)
				}
				if len(page) > limit {
					t.Fatalf("limit %d: page of %d", limit, len(page))
				}
				if len(page) == 0 {
					break
				}
				got = append(got, ids(page)...)
				after = page[len(page)-1].ID
			}
			if !slices.Equal(got, want) {
				t.Fatalf("limit %d: paged %v, want %v", limit, got, want)
			}
		}
		// A cursor is case-insensitive, as ULIDs are.
		page, err := s.Events(ctx, "lobby", a.AWNID, strings.ToLower(want[len(want)-2]), 0)
		if err != nil || !slices.Equal(ids(page), want[len(want)-1:]) {
			t.Fatalf("lower-case cursor: %v, %v", ids(page), err)
		}
		// The default limit is 50.
		for i := range 60 {
			appendEvent(t, s, "lobby", world.PresenceChanged, world.Public, "", i)
		}
		if page, err := s.Events(ctx, "lobby", a.AWNID, "", 0); err != nil || len(page) != world.DefaultEventLimit {
			t.Fatalf("default limit: %d events, %v", len(page), err)
		}
	})
}

func TestEventsBadArguments(t *testing.T) {
	ctx := context.Background()
	s, a, _ := service(t, memory.New(), "lobby")
	for _, after := range []string{"nope", "01ARZ3NDEKTSV4RRFFQ69G5FA", "01ARZ3NDEKTSV4RRFFQ69G5FAVV", "8ZZZZZZZZZZZZZZZZZZZZZZZZZ", "01ARZ3NDEKTSV4RRFFQ69G5FAU"} {
		_, err := s.Events(ctx, "lobby", a.AWNID, after, 0)
		wantKind(t, err, apierror.Invalid, "after")
	}
	for _, limit := range []int{-1, world.MaxEventLimit + 1} {
		_, err := s.Events(ctx, "lobby", a.AWNID, "", limit)
		wantKind(t, err, apierror.Invalid, "limit")
		_, err = s.WaitEvents(ctx, "lobby", a.AWNID, "", limit, 0)
		wantKind(t, err, apierror.Invalid, "limit")
	}
	for _, wait := range []time.Duration{-time.Second, world.MaxWait + time.Millisecond} {
		_, err := s.WaitEvents(ctx, "lobby", a.AWNID, "", 0, wait)
		wantKind(t, err, apierror.Invalid, "wait")
	}
	_, err := s.WaitEvents(ctx, "lobby", a.AWNID, "bad", 0, 0)
	wantKind(t, err, apierror.Invalid, "after")
	_, err = s.WaitEvents(ctx, "lobby", auth.AWNID(key(9)), "", 0, time.Second)
	wantKind(t, err, apierror.NotJoined)
	if m, _ := s.Member(ctx, "lobby", a.AWNID); !m.LastPollAt.IsZero() {
		t.Fatal("a refused poll marked the member as polled")
	}
}

// TestEventsExpire: events older than EventTTL are never returned, even
// before the sweeper deletes them.
func TestEventsExpire(t *testing.T) {
	everyEngine(t, func(t *testing.T, st store.Store) {
		ctx := context.Background()
		c := &clock{now: t0}
		s := newWorld(t, st, c, "lobby")
		a := join(t, s, "lobby", 1) // agent.joined at t0
		c.Advance(24 * time.Hour)
		later := world.Event{Type: world.PresenceChanged, World: "lobby", Data: json.RawMessage(`{}`), Visibility: world.Public}
		if err := s.Append(ctx, later); err != nil {
			t.Fatal(err)
		}
		if evs := eventsOf(t, s, "lobby", a.AWNID); len(evs) != 2 {
			t.Fatalf("before expiry: %d events, want 2", len(evs))
		}
		c.Advance(world.EventTTL - 24*time.Hour + time.Second)
		evs := eventsOf(t, s, "lobby", a.AWNID)
		if len(evs) != 1 || evs[0].Type != world.PresenceChanged {
			t.Fatalf("after the join expired: %v, want the later event only", evs)
		}
		// Also with a cursor from before the expiry.
		evs, err := s.Events(ctx, "lobby", a.AWNID, world.CursorFloor(t0.Add(-time.Hour)), 0)
		if err != nil || len(evs) != 1 {
			t.Fatalf("old cursor: %v, %v", evs, err)
		}
		c.Advance(24 * time.Hour)
		if evs := eventsOf(t, s, "lobby", a.AWNID); len(evs) != 0 {
			t.Fatalf("after every event expired: %v", evs)
		}
	})
}

func TestSubmitAction(t *testing.T) {
	everyEngine(t, func(t *testing.T, st store.Store) {
		ctx := context.Background()
		s, a, b := service(t, st, "arena", "move", "say")
		id, err := s.SubmitAction(ctx, "arena", a.AWNID, "move", json.RawMessage(`{"dir": "north"}`))
		if err != nil {
			t.Fatal(err)
		}
		evs := eventsOf(t, s, "arena", b.AWNID)
		last := evs[len(evs)-1]
		want := fmt.Sprintf(`{"actionId":%q,"awnId":%q,"action":"move","params":{"dir":"north"}}`, id, a.AWNID)
		if last.Type != world.ActionSubmitted || last.Visibility != world.Agents || string(last.Data) != want {
			t.Fatalf("event %+v %s, want action.submitted %s", last, last.Data, want)
		}
		if id2, err := s.SubmitAction(ctx, "arena", a.AWNID, "say", nil); err != nil || id2 <= id {
			t.Fatalf("second action: %q, %v (after %q)", id2, err, id)
		}
		if evs := eventsOf(t, s, "arena", b.AWNID); !strings.HasSuffix(string(evs[len(evs)-1].Data), `"params":{}}`) {
			t.Fatalf("nil params stored as %s, want {}", evs[len(evs)-1].Data)
		}
		_, err = s.SubmitAction(ctx, "arena", a.AWNID, "fly", nil)
		wantKind(t, err, apierror.Invalid, "fly", "move, say")
		for name, p := range map[string]string{"array": `[]`, "string": `"x"`, "broken": `{`, "over 64 KiB": `{"x":"` + strings.Repeat("a", 64<<10) + `"}`} {
			_, err := s.SubmitAction(ctx, "arena", a.AWNID, "move", json.RawMessage(p))
			if apierror.KindOf(err) != apierror.Invalid || !strings.Contains(err.Error(), "params") {
				t.Errorf("params %s: %v, want Invalid naming params", name, err)
			}
		}
		_, err = s.SubmitAction(ctx, "arena", a.AWNID, "Not An Action", nil)
		wantKind(t, err, apierror.Invalid, "action")
		_, err = s.SubmitAction(ctx, "nowhere", a.AWNID, "move", nil)
		wantKind(t, err, apierror.NotFound)
		if n := len(eventsOf(t, s, "arena", b.AWNID)); n != len(evs)+1 {
			t.Fatalf("refused actions wrote events: %d, want %d", n, len(evs)+1)
		}
		// A world without actions accepts any (from its members).
		free := newWorld(t, st, &clock{now: time.Now()}, "free")
		join(t, free, "free", 1)
		if _, err := free.SubmitAction(ctx, "free", a.AWNID, "anything.at_all", nil); err != nil {
			t.Fatalf("world without actions: %v", err)
		}
	})
}

func TestAppendValidation(t *testing.T) {
	ctx := context.Background()
	s := world.New(memory.New())
	ok := world.Event{Type: world.PresenceChanged, World: "lobby", Data: json.RawMessage(`{}`), Visibility: world.Public}
	for name, change := range map[string]func(e *world.Event){
		"bad id":               func(e *world.Event) { e.ID = "x" },
		"no world":             func(e *world.Event) { e.World = "" },
		"no type":              func(e *world.Event) { e.Type = "" },
		"array data":           func(e *world.Event) { e.Data = json.RawMessage(`[]`) },
		"no data":              func(e *world.Event) { e.Data = nil },
		"unknown visibility":   func(e *world.Event) { e.Visibility = "secret" },
		"private, no receiver": func(e *world.Event) { e.Visibility = world.Private },
	} {
		e := ok
		change(&e)
		if err := s.Append(ctx, e); apierror.KindOf(err) != apierror.Invalid {
			t.Errorf("%s: %v, want Invalid", name, err)
		}
	}
	e := ok
	e.ID = world.NewIDs().New(time.Now())
	if err := s.Append(ctx, e); err != nil {
		t.Fatal(err)
	}
	wantKind(t, s.Append(ctx, e), apierror.Conflict)
}

// TestLongPollWakes: a long poll returns within 1 s of an event arriving
// (within about one PollInterval), and at once when events are waiting.
func TestLongPollWakes(t *testing.T) {
	everyEngine(t, func(t *testing.T, st store.Store) {
		ctx := context.Background()
		s, a, b := service(t, st, "lobby")
		seen, err := s.Events(ctx, "lobby", a.AWNID, "", 0)
		if err != nil {
			t.Fatal(err)
		}
		cursor := seen[len(seen)-1].ID
		start := time.Now()
		if evs, err := s.WaitEvents(ctx, "lobby", a.AWNID, "", 0, 10*time.Second); err != nil || len(evs) != 2 {
			t.Fatalf("waiting events: %v, %v", evs, err)
		}
		if d := time.Since(start); d > time.Second {
			t.Fatalf("a poll with events waiting took %v", d)
		}
		for _, c := range []struct {
			name      string
			vis       world.Visibility
			recipient string
		}{{"public", world.Public, ""}, {"private", world.Private, a.AWNID}} {
			appended := make(chan time.Time, 1)
			go func() {
				time.Sleep(300 * time.Millisecond)
				// Noise for someone else must not wake a.
				noise := world.Event{Type: world.MessageReceived, World: "lobby", Data: json.RawMessage(`{}`), Visibility: world.Private, Recipient: b.AWNID}
				if err := s.Append(ctx, noise); err != nil {
					t.Error(err)
				}
				time.Sleep(300 * time.Millisecond)
				e := world.Event{Type: world.PresenceChanged, World: "lobby", Data: json.RawMessage(`{}`), Visibility: c.vis, Recipient: c.recipient}
				if err := s.Append(ctx, e); err != nil {
					t.Error(err)
				}
				appended <- time.Now()
			}()
			start := time.Now()
			evs, err := s.WaitEvents(ctx, "lobby", a.AWNID, cursor, 0, 10*time.Second)
			done := time.Now()
			if err != nil || len(evs) != 1 || evs[0].Visibility != c.vis {
				t.Fatalf("%s: long poll returned %v, %v", c.name, evs, err)
			}
			at := <-appended
			t.Logf("%s: returned %v after the append (%v after the start)", c.name, done.Sub(at), done.Sub(start))
			if done.Sub(at) > time.Second {
				t.Fatalf("%s: long poll returned %v after the event, want < 1 s", c.name, done.Sub(at))
			}
			if done.Sub(start) < 500*time.Millisecond {
				t.Fatalf("%s: long poll returned after %v, before the event", c.name, done.Sub(start))
			}
			cursor = evs[0].ID
		}
	})
}

// TestLongPollDeadline: a long poll returns before a context deadline
// (leaving it a second), with no events and no error, and stops when its
// own wait runs out.
func TestLongPollDeadline(t *testing.T) {
	everyEngine(t, func(t *testing.T, st store.Store) {
		s, a, _ := service(t, st, "lobby")
		seen, err := s.Events(context.Background(), "lobby", a.AWNID, "", 0)
		if err != nil {
			t.Fatal(err)
		}
		cursor := seen[len(seen)-1].ID
		ctx, cancel := context.WithTimeout(context.Background(), 1500*time.Millisecond)
		defer cancel()
		deadline, _ := ctx.Deadline()
		start := time.Now()
		evs, err := s.WaitEvents(ctx, "lobby", a.AWNID, cursor, 0, 10*time.Second)
		done := time.Now()
		if err != nil || len(evs) != 0 {
			t.Fatalf("WaitEvents = %v, %v; want no events, no error", evs, err)
		}
		t.Logf("returned after %v, %v before the deadline", done.Sub(start), deadline.Sub(done))
		if !done.Before(deadline) {
			t.Fatalf("returned %v after the deadline", done.Sub(deadline))
		}
		if done.Sub(start) < 400*time.Millisecond {
			t.Fatalf("returned after %v; it should wait until a second before the deadline", done.Sub(start))
		}
		start = time.Now()
		if evs, err := s.WaitEvents(context.Background(), "lobby", a.AWNID, cursor, 0, 600*time.Millisecond); err != nil || len(evs) != 0 {
			t.Fatalf("short wait: %v, %v", evs, err)
		}
		if d := time.Since(start); d < 550*time.Millisecond || d > 5*time.Second {
			t.Fatalf("a 600 ms wait took %v", d)
		}
		// A cancelled poll stops with Unavailable.
		ctx, cancel = context.WithCancel(context.Background())
		go func() { time.Sleep(200 * time.Millisecond); cancel() }()
		_, err = s.WaitEvents(ctx, "lobby", a.AWNID, cursor, 0, 10*time.Second)
		wantKind(t, err, apierror.Unavailable)
	})
}
