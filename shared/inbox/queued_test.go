package inbox_test

import (
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/a2awire/a2awire/shared/apierror"
	"github.com/a2awire/a2awire/shared/auth"
	"github.com/a2awire/a2awire/shared/inbox"
	"github.com/a2awire/a2awire/shared/store"
	"github.com/a2awire/a2awire/shared/store/memory"
	"github.com/a2awire/a2awire/shared/world"
	"github.com/a2awire/a2awire/shared/world/worldtest"
)

// batching is a world that batches its messages, its service and inbox
// over one store, and members numbered from 10.
type batching struct {
	st    *worldtest.WriteLog
	q     *worldtest.SentQueue
	world *world.Service
	box   *inbox.Inbox
}

func newBatching(t *testing.T, st store.Store, id string, batch bool, members int) (*batching, []string) {
	t.Helper()
	ctx := context.Background()
	c := &clock{now: t0}
	b := &batching{st: &worldtest.WriteLog{Store: st}, q: &worldtest.SentQueue{}}
	b.box = inbox.New(b.st, inbox.WithClock(c.Now))
	b.world = world.New(b.st, world.WithClock(c.Now), world.WithQueuedMessages(b.box.QueuedEvent))
	b.box = inbox.New(b.st, inbox.WithClock(c.Now), inbox.WithQueue(b.q, b.world))
	if _, _, err := b.world.PutWorld(ctx, world.Manifest{ID: id, Name: id, Description: "a busy inbox", BatchMessages: batch}, key(0)); err != nil {
		t.Fatal(err)
	}
	if m, err := b.world.GetWorld(ctx, id); err != nil || m.BatchMessages != batch {
		t.Fatalf("manifest batchMessages = %v, %v; want %v", m.BatchMessages, err, batch)
	}
	var ids []string
	for n := 10; n < 10+members; n++ {
		j, _, err := b.world.Join(ctx, id, key(n), nil)
		if err != nil {
			t.Fatal(err)
		}
		ids = append(ids, j.AWNID)
	}
	b.st.Take()
	return b, ids
}

// TestQueuedMessagesCommitManyToATransaction: in a world that batches its
// messages, Submit writes nothing and queues each message; CommitQueued
// then commits 48 messages of 48 senders to one recipient in 2
// transactions (the recipient's check written once per transaction, so 24
// fit one: 3 Writes if each message carried its own), each message in the
// inbox once, as it was submitted, with its message.received; the same
// messages handed out again, after the recipient consumed them, store
// nothing more (their markers).
func TestQueuedMessagesCommitManyToATransaction(t *testing.T) {
	everyEngine(t, func(t *testing.T, st store.Store) {
		ctx := context.Background()
		b, ids := newBatching(t, st, "busy", true, 49)
		to, senders := ids[0], ids[1:]
		var want []inbox.Message
		for i, from := range senders {
			sent, err := b.box.Submit(ctx, "busy", from, to, json.RawMessage(fmt.Sprintf(`{"n":%d}`, i)), "")
			if err != nil || !sent.Queued {
				t.Fatalf("Submit: %+v, %v; want queued", sent, err)
			}
			want = append(want, sent.Message)
		}
		if w := b.st.Take(); len(w) != 0 {
			t.Fatalf("queuing wrote %d times; want nothing written", len(w))
		}
		if got, err := b.box.Read(ctx, "busy", to, inbox.ReadOptions{Peek: true}); err != nil || len(got) != 0 {
			t.Fatalf("inbox before the commit: %d messages, %v", len(got), err)
		}
		qs := b.q.Take(t)
		for i, err := range b.world.CommitQueued(ctx, qs) {
			if err != nil {
				t.Fatalf("message %d: %v", i, err)
			}
		}
		if w := b.st.Take(); len(w) != 2 {
			t.Fatalf("%d Writes for 48 messages to one recipient; want 2", len(w))
		}
		got, err := b.box.Read(ctx, "busy", to, inbox.ReadOptions{Limit: inbox.MaxLimit})
		if err != nil {
			t.Fatal(err)
		}
		if len(got) != len(want) {
			t.Fatalf("read %d messages, want %d", len(got), len(want))
		}
		byID := map[string]inbox.Message{}
		for _, m := range got {
			byID[m.ID] = m
		}
		for _, w := range want {
			g, ok := byID[w.ID]
			if !ok || g.From != w.From || g.To != to || string(g.Content) != string(w.Content) || g.ContentType != inbox.DefaultContentType || !g.SentAt.Equal(w.SentAt) {
				t.Fatalf("message %s: read %+v (found %v), submitted %+v", w.ID, g, ok, w)
			}
		}
		evs, err := b.world.Events(ctx, "busy", to, "", 100)
		if err != nil {
			t.Fatal(err)
		}
		received := 0
		for _, e := range evs {
			if e.Type == world.MessageReceived {
				received++
			}
		}
		if received != len(want) {
			t.Fatalf("%d message.received events, want %d", received, len(want))
		}

		// Handed out again after the inbox was consumed: first as if the
		// queue delivered twice unnoticed (markers found in the
		// transaction), then as a redelivery (markers read first).
		for _, redelivered := range []bool{false, true} {
			again := slices.Clone(qs[:5])
			for i := range again {
				again[i].Redelivered = redelivered
			}
			for i, err := range b.world.CommitQueued(ctx, again) {
				if err != nil {
					t.Fatalf("redelivered %v, message %d: %v", redelivered, i, err)
				}
			}
			if got, err := b.box.Read(ctx, "busy", to, inbox.ReadOptions{Peek: true}); err != nil || len(got) != 0 {
				t.Fatalf("redelivered %v: %d messages stored again, %v", redelivered, len(got), err)
			}
		}
	})
}

// TestQueuedMessageOfALeaverIsDropped: a recipient who left between the
// queue and the commit drops the message (NotFound), a sender who left
// drops it too (NotJoined), both final (world.Dropped); the other messages
// of their transaction commit.
func TestQueuedMessageOfALeaverIsDropped(t *testing.T) {
	everyEngine(t, func(t *testing.T, st store.Store) {
		ctx := context.Background()
		b, ids := newBatching(t, st, "busy", true, 4)
		to, gone, sender, leaver := ids[0], ids[1], ids[2], ids[3]
		for _, p := range [][2]string{{sender, to}, {sender, gone}, {leaver, to}} {
			if _, err := b.box.Submit(ctx, "busy", p[0], p[1], json.RawMessage(`"hi"`), "text/plain"); err != nil {
				t.Fatal(err)
			}
		}
		for _, a := range []string{gone, leaver} {
			if err := b.world.Leave(ctx, "busy", a); err != nil {
				t.Fatal(err)
			}
		}
		errs := b.world.CommitQueued(ctx, b.q.Take(t))
		if errs[0] != nil {
			t.Fatalf("the message of two members: %v", errs[0])
		}
		if apierror.KindOf(errs[1]) != apierror.NotFound || !world.Dropped(errs[1]) {
			t.Fatalf("to a recipient who left: %v; want NotFound, dropped", errs[1])
		}
		if apierror.KindOf(errs[2]) != apierror.NotJoined || !world.Dropped(errs[2]) {
			t.Fatalf("from a sender who left: %v; want NotJoined, dropped", errs[2])
		}
		got, err := b.box.Read(ctx, "busy", to, inbox.ReadOptions{})
		if err != nil || len(got) != 1 || got[0].From != sender {
			t.Fatalf("recipient's inbox: %+v, %v; want the one message of %s", got, err, sender)
		}
	})
}

// TestSubmitSendsAtOnceWithoutBatching: in a world that does not batch its
// messages Submit stores the message at once, as Send does.
func TestSubmitSendsAtOnceWithoutBatching(t *testing.T) {
	everyEngine(t, func(t *testing.T, st store.Store) {
		ctx := context.Background()
		b, ids := newBatching(t, st, "quiet", false, 2)
		sent, err := b.box.Submit(ctx, "quiet", ids[1], ids[0], json.RawMessage(`"hi"`), "")
		if err != nil || sent.Queued {
			t.Fatalf("Submit: %+v, %v; want stored", sent, err)
		}
		if qs := b.q.Take(t); len(qs) != 0 {
			t.Fatalf("queued %d messages", len(qs))
		}
		got, err := b.box.Read(ctx, "quiet", ids[0], inbox.ReadOptions{})
		if err != nil || len(got) != 1 || got[0].ID != sent.ID {
			t.Fatalf("inbox: %+v, %v; want %s", got, err, sent.ID)
		}
	})
}

// TestQueuedEventRefusesWhatSubmitDoesNot: content Submit would refuse is
// Invalid at the commit, so the message is dropped, never retried.
func TestQueuedEventRefusesWhatSubmitDoesNot(t *testing.T) {
	b := inbox.New(memory.New())
	q := world.QueuedAction{Kind: world.KindMessage, World: "busy", ActionID: "01KBM0000000000000000000AA", AWNID: auth.AWNID(key(1)), To: auth.AWNID(key(2)),
		Content: json.RawMessage(`null`), ContentType: "text/plain", SentAt: t0.UnixNano()}
	if _, err := b.QueuedEvent(q, t0.Add(time.Second)); !world.Dropped(err) {
		t.Fatalf("null content: %v; want a final error", err)
	}
	q.Content, q.ContentType = json.RawMessage(`"hi"`), "not a type"
	if _, err := b.QueuedEvent(q, t0.Add(time.Second)); !world.Dropped(err) {
		t.Fatalf("a bad content type: %v; want a final error", err)
	}
	q.ContentType = "text/plain"
	ev, err := b.QueuedEvent(q, t0.Add(time.Second))
	if err != nil || ev.Type != world.MessageReceived || ev.Recipient != q.To || ev.Attach == nil {
		t.Fatalf("a good message: %+v, %v", ev, err)
	}
}

// TestQueuedMessageToANonMemberIsRefusedAtOnce: in a world that batches
// its messages, a message to an agent that is not a member is NotFound at
// the request, as an unbatched send answers it, and nothing is queued.
func TestQueuedMessageToANonMemberIsRefusedAtOnce(t *testing.T) {
	everyEngine(t, func(t *testing.T, st store.Store) {
		ctx := context.Background()
		b, ids := newBatching(t, st, "busy", true, 2)
		if err := b.world.Leave(ctx, "busy", ids[1]); err != nil {
			t.Fatal(err)
		}
		for _, to := range []string{ids[1], auth.AWNID(key(99))} {
			_, err := b.box.Submit(ctx, "busy", ids[0], to, json.RawMessage(`"hi"`), "")
			wantKind(t, err, apierror.NotFound)
		}
		if qs := b.q.Take(t); len(qs) != 0 {
			t.Fatalf("queued %d messages to non-members", len(qs))
		}
	})
}

// TestQueuedMessageOfMembershipsOlderThanTheirIndexEntries: a sender and a
// recipient whose memberships have no entry in the agents' index of worlds
// (joined before it existed): Submit finds the recipient by its member
// item and queues the message, and the commit writes both entries from
// their member items and stores the message.
func TestQueuedMessageOfMembershipsOlderThanTheirIndexEntries(t *testing.T) {
	everyEngine(t, func(t *testing.T, st store.Store) {
		ctx := context.Background()
		b, ids := newBatching(t, st, "old", true, 2)
		to, from := ids[0], ids[1]
		for _, a := range ids {
			if _, err := st.Write(ctx, store.Delete(world.MemberCheck("old", a).Key)); err != nil {
				t.Fatal(err)
			}
		}
		sent, err := b.box.Submit(ctx, "old", from, to, json.RawMessage(`"hi"`), "")
		if err != nil || !sent.Queued {
			t.Fatalf("Submit: %+v, %v; want queued", sent, err)
		}
		for i, err := range b.world.CommitQueued(ctx, b.q.Take(t)) {
			if err != nil {
				t.Fatalf("message %d: %v", i, err)
			}
		}
		got, err := b.box.Read(ctx, "old", to, inbox.ReadOptions{})
		if err != nil || len(got) != 1 || got[0].ID != sent.ID {
			t.Fatalf("inbox: %+v, %v; want %s", got, err, sent.ID)
		}
		for _, a := range ids {
			if _, err := st.Get(ctx, world.MemberCheck("old", a).Key); err != nil {
				t.Fatalf("%s's index entry after the commit: %v", a, err)
			}
		}
	})
}
