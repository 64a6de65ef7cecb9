package world_test

import (
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"strings"
	"sync"
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

// guard keeps a broken poll from hanging a test; nothing is timed by it.
const guard = 20 * time.Second

// waitClock is a long poll's fake wait clock: After records a wake-up and
// reports it on armed; the test moves the clock to it with fire.
type waitClock struct {
	mu    sync.Mutex
	now   time.Time
	wakes []wake
	armed chan struct{}
	// seen counts wake-ups whose armed signal waiting took, not fired yet.
	seen int
}

type wake struct {
	at time.Time
	ch chan time.Time
}

func newWaitClock() *waitClock { return &waitClock{now: t0, armed: make(chan struct{}, 64)} }

func (c *waitClock) Now() time.Time { c.mu.Lock(); defer c.mu.Unlock(); return c.now }

func (c *waitClock) After(d time.Duration) <-chan time.Time {
	ch := make(chan time.Time, 1)
	c.mu.Lock()
	c.wakes = append(c.wakes, wake{c.now.Add(d), ch})
	c.mu.Unlock()
	c.armed <- struct{}{}
	return ch
}

// fire moves the clock to the earliest wake-up and wakes its poll.
func (c *waitClock) fire() {
	c.mu.Lock()
	w := c.wakes[0]
	c.wakes = c.wakes[1:]
	if w.at.After(c.now) {
		c.now = w.at
	}
	c.mu.Unlock()
	w.ch <- w.at
}

// waiting blocks until the poll waits on the clock; a poll that returns
// instead fails the test.
func (c *waitClock) waiting(t *testing.T, done <-chan error) {
	t.Helper()
	select {
	case <-c.armed:
		c.mu.Lock()
		c.seen++
		c.mu.Unlock()
	case err := <-done:
		t.Fatalf("the poll returned (%v) where it should wait", err)
	case <-time.After(guard):
		t.Fatal("the poll neither waits nor returns")
	}
}

// runUntil wakes the poll each time it waits until it returns, and
// returns its error.
func (c *waitClock) runUntil(t *testing.T, done <-chan error) error {
	t.Helper()
	c.mu.Lock()
	seen := c.seen > 0
	c.seen = 0
	c.mu.Unlock()
	if seen {
		c.fire()
	}
	for {
		select {
		case err := <-done:
			return err
		case <-c.armed:
			c.fire()
		case <-time.After(guard):
			t.Fatal("the poll neither waits nor returns")
		}
	}
}

// waitingService is service with the wait clock wc.
func waitingService(t *testing.T, st store.Store, wc *waitClock) (*world.Service, world.Member, world.Member) {
	t.Helper()
	s := world.New(st, world.WithIDs(testIDs), world.WithWaitClock(wc))
	if _, _, err := s.PutWorld(context.Background(), manifest("lobby"), key(0)); err != nil {
		t.Fatal(err)
	}
	a, b := join(t, s, "lobby", 1), join(t, s, "lobby", 2)
	// Both online before the test's polls, so that no poll announces a
	// change of presence.
	for _, m := range []world.Member{a, b} {
		if err := s.MarkPolled(context.Background(), "lobby", m.AWNID); err != nil {
			t.Fatal(err)
		}
	}
	return s, a, b
}

// TestLongPollWakes: a long poll returns at once when events are waiting;
// otherwise it checks once per PollInterval of the wait clock, is not woken
// by another member's private event, and returns at the first check after
// an event for it commits (at most PollInterval after it).
func TestLongPollWakes(t *testing.T) {
	everyEngine(t, func(t *testing.T, st store.Store) {
		ctx := context.Background()
		wc := newWaitClock()
		s, a, b := waitingService(t, st, wc)
		seen, err := s.Events(ctx, "lobby", a.AWNID, "", 0)
		if err != nil {
			t.Fatal(err)
		}
		cursor := seen[len(seen)-1].ID
		if evs, err := s.WaitEvents(ctx, "lobby", a.AWNID, "", 0, 10*time.Second); err != nil || len(evs) != 4 { // 2 joins, 2 presence.changed
			t.Fatalf("waiting events: %v, %v", evs, err)
		}
		if len(wc.armed) != 0 {
			t.Fatal("a poll with events waiting waited")
		}
		for _, c := range []struct {
			name      string
			vis       world.Visibility
			recipient string
		}{{"public", world.Public, ""}, {"private", world.Private, a.AWNID}} {
			var evs []world.Event
			done := make(chan error, 1)
			go func() {
				var err error
				evs, err = s.WaitEvents(ctx, "lobby", a.AWNID, cursor, 0, 10*time.Second)
				done <- err
			}()
			wc.waiting(t, done)
			// Noise for someone else must not wake a.
			noise := world.Event{Type: world.MessageReceived, World: "lobby", Data: json.RawMessage(`{}`), Visibility: world.Private, Recipient: b.AWNID}
			if err := s.Append(ctx, noise); err != nil {
				t.Fatal(err)
			}
			wc.fire()
			wc.waiting(t, done)
			e := world.Event{Type: world.PresenceChanged, World: "lobby", Data: json.RawMessage(`{}`), Visibility: c.vis, Recipient: c.recipient}
			if err := s.Append(ctx, e); err != nil {
				t.Fatal(err)
			}
			appended := wc.Now()
			if err := wc.runUntil(t, done); err != nil || len(evs) != 1 || evs[0].Visibility != c.vis {
				t.Fatalf("%s: long poll returned %v, %v", c.name, evs, err)
			}
			if d := wc.Now().Sub(appended); d > world.PollInterval {
				t.Fatalf("%s: long poll returned %v after the event, want ≤ %v", c.name, d, world.PollInterval)
			}
			cursor = evs[0].ID
		}
	})
}

// TestLongPollDeadline: a long poll returns a second before its context's
// deadline, with no events and no error; otherwise when its own wait runs
// out (to the wait clock's tick); and a cancelled poll stops with
// Unavailable.
func TestLongPollDeadline(t *testing.T) {
	everyEngine(t, func(t *testing.T, st store.Store) {
		wc := newWaitClock()
		s, a, _ := waitingService(t, st, wc)
		seen, err := s.Events(context.Background(), "lobby", a.AWNID, "", 0)
		if err != nil {
			t.Fatal(err)
		}
		cursor := seen[len(seen)-1].ID
		poll := func(ctx context.Context, wait time.Duration) (time.Duration, error) {
			done := make(chan error, 1)
			go func() {
				evs, err := s.WaitEvents(ctx, "lobby", a.AWNID, cursor, 0, wait)
				if err == nil && len(evs) != 0 {
					err = fmt.Errorf("%d events", len(evs))
				}
				done <- err
			}()
			start := wc.Now()
			err := wc.runUntil(t, done)
			return wc.Now().Sub(start), err
		}
		// The real deadline is converted to the wait clock once: 10 s
		// away, the poll ends about 9 s later on the wait clock, before
		// its 20 s wait.
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		took, err := poll(ctx, 20*time.Second)
		cancel()
		if err != nil {
			t.Fatal(err)
		}
		if took > 9*time.Second || took < 8*time.Second {
			t.Fatalf("a poll with a deadline 10 s away waited %v on the wait clock, want about 9 s", took)
		}
		if took, err := poll(context.Background(), 600*time.Millisecond); err != nil || took != 600*time.Millisecond {
			t.Fatalf("a 600 ms wait: %v, %v", took, err)
		}
		ctx, cancel = context.WithCancel(context.Background())
		done := make(chan error, 1)
		go func() {
			_, err := s.WaitEvents(ctx, "lobby", a.AWNID, cursor, 0, 10*time.Second)
			done <- err
		}()
		wc.waiting(t, done)
		cancel()
		wantKind(t, <-done, apierror.Unavailable)
	})
}
