package world_test

import (
	"context"
	"encoding/json"
	"testing"

	"github.com/a2awire/a2awire/shared/apierror"
	"github.com/a2awire/a2awire/shared/inbox"
	"github.com/a2awire/a2awire/shared/store"
	"github.com/a2awire/a2awire/shared/store/storetest"
	"github.com/a2awire/a2awire/shared/world"
)

// TestNoEventCommitsToADeletedWorld: DeleteWorld marks the world's event
// head in its transaction, and every commit's update of the head is
// conditioned on that mark's absence. So a message whose write lands
// after the deletion (here with no request guard, which would check the
// manifest, and with the members not yet removed by the deleter) is
// NotFound and writes nothing — also when the deletion comes between the
// send's start and its write — and an event appended after it is
// NotFound too.
func TestNoEventCommitsToADeletedWorld(t *testing.T) {
	everyEngine(t, func(t *testing.T, st store.Store) {
		ctx := context.Background()
		c := &clock{now: t0}
		s := newWorld(t, st, c, "doomed")
		a, b := join(t, s, "doomed", 1), join(t, s, "doomed", 2)
		box := inbox.New(st, inbox.WithClock(c.Now))
		if _, err := box.Send(ctx, "doomed", a.AWNID, b.AWNID, json.RawMessage(`"before"`), ""); err != nil {
			t.Fatal(err)
		}
		head := func() string {
			t.Helper()
			h, err := world.NewLog(st, testIDs, c.Now).Head(ctx, "doomed")
			if err != nil {
				t.Fatal(err)
			}
			return h.Last
		}
		last := head()

		// The deletion lands between the send's start and its write.
		racing := &storetest.BeforeWrite{Store: st, Hook: func() {
			if err := s.DeleteWorld(ctx, "doomed", keyID(0)); err != nil {
				t.Errorf("delete: %v", err)
			}
		}}
		_, err := inbox.New(racing, inbox.WithClock(c.Now)).Send(ctx, "doomed", a.AWNID, b.AWNID, json.RawMessage(`"racing"`), "")
		wantKind(t, err, apierror.NotFound)
		_, err = box.Send(ctx, "doomed", b.AWNID, a.AWNID, json.RawMessage(`"after"`), "")
		wantKind(t, err, apierror.NotFound)
		err = s.Append(ctx, world.Event{World: "doomed", Type: "note", Visibility: world.Public, Data: json.RawMessage(`{}`)})
		wantKind(t, err, apierror.NotFound)

		for _, id := range []string{a.AWNID, b.AWNID} {
			page, err := st.Query(ctx, store.Query{PK: world.InboxPK("doomed", id)})
			if err != nil {
				t.Fatal(err)
			}
			if want := map[string]int{a.AWNID: 0, b.AWNID: 1}[id]; len(page.Items) != want {
				t.Fatalf("%d messages in an inbox of the deleted world, want %d (those sent before)", len(page.Items), want)
			}
		}
		if got := head(); got != last {
			t.Fatalf("the head moved from %s to %s after the deletion", last, got)
		}
	})
}
