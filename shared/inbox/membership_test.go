package inbox_test

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

// TestSendRacingSendersLeave (issue 26's third repro, for messages): the
// sender's leave lands after the route authenticated it as a member and
// just before Send writes. The send is refused NotJoined and the
// recipient's inbox and events stay empty, because the sender's membership
// is a condition of the message's own Write. A send to oneself (one member
// item, one check) is refused the same way once the sender has left.
func TestSendRacingSendersLeave(t *testing.T) {
	everyEngine(t, func(t *testing.T, st store.Store) {
		ctx := context.Background()
		join(t, st, lobby, alice, bob)
		racing := &storetest.BeforeWrite{Store: st, Hook: func() {
			if err := world.New(st).Leave(ctx, lobby, alice); err != nil {
				t.Errorf("leave: %v", err)
			}
		}}
		_, err := inbox.New(racing).Send(ctx, lobby, alice, bob, json.RawMessage(`"hi"`), "")
		wantKind(t, err, apierror.NotJoined)
		if n := len(partition(t, st, world.InboxPK(lobby, bob))); n != 0 {
			t.Fatalf("bob's inbox holds %d messages from a sender that had left", n)
		}
		if n := len(partition(t, st, world.PrivateEventsPK(lobby, bob))); n != 0 {
			t.Fatalf("bob's events hold %d items after the refused send", n)
		}
		_, err = inbox.New(st).Send(ctx, lobby, alice, alice, json.RawMessage(`"me"`), "")
		wantKind(t, err, apierror.NotJoined)
		if _, err := inbox.New(st).Send(ctx, lobby, bob, bob, json.RawMessage(`"me"`), ""); err != nil {
			t.Fatalf("a member's send to itself: %v", err)
		}
	})
}
