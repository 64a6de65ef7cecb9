package world_test

import (
	"context"
	"encoding/json"
	"errors"
	"testing"

	"github.com/a2awire/a2awire/shared/apierror"
	"github.com/a2awire/a2awire/shared/inbox"
	"github.com/a2awire/a2awire/shared/store"
	"github.com/a2awire/a2awire/shared/store/storetest"
	"github.com/a2awire/a2awire/shared/webhook"
	"github.com/a2awire/a2awire/shared/world"
)

// indexEntry is the key of awnID's entry for w in the agent's index of
// worlds, the item MemberCheck checks.
func indexEntry(w, awnID string) store.Key {
	return store.Key{PK: world.AgentPK(awnID), SK: "JOINED#" + w}
}

func hasEntry(t *testing.T, st store.Store, w, awnID string) bool {
	t.Helper()
	_, err := st.Get(context.Background(), indexEntry(w, awnID))
	if err != nil && !errors.Is(err, store.ErrNotFound) {
		t.Fatal(err)
	}
	return err == nil
}

// TestMembershipOlderThanItsIndexEntry: the member-only writes check the
// membership's entry in the agent's index of worlds, which memberships
// from before that index lack. Such a member's action, message (as sender
// and as recipient, both entries missing at once) and webhook still
// succeed: the write fails its check, the entry is restored from the
// member item, and the write goes again. A non-member, or a member who
// left, gets no entry, and a leave that lands between the restore's read
// and its write leaves none behind.
func TestMembershipOlderThanItsIndexEntry(t *testing.T) {
	everyEngine(t, func(t *testing.T, st store.Store) {
		ctx := context.Background()
		c := &clock{now: t0}
		s := newWorld(t, st, c, "arena", "move")
		a, b := join(t, s, "arena", 1), join(t, s, "arena", 2)
		forget := func(ids ...string) {
			t.Helper()
			for _, id := range ids {
				if _, err := st.Write(ctx, store.Delete(indexEntry("arena", id))); err != nil {
					t.Fatal(err)
				}
			}
		}

		forget(a.AWNID)
		if _, err := s.SubmitAction(ctx, "arena", a.AWNID, "move", nil); err != nil {
			t.Fatalf("action of a membership without its entry: %v", err)
		}
		if !hasEntry(t, st, "arena", a.AWNID) {
			t.Fatal("the action did not restore the entry")
		}

		forget(a.AWNID, b.AWNID)
		box := inbox.New(st, inbox.WithClock(c.Now))
		if _, err := box.Send(ctx, "arena", a.AWNID, b.AWNID, json.RawMessage(`"hi"`), ""); err != nil {
			t.Fatalf("message between memberships without their entries: %v", err)
		}
		if !hasEntry(t, st, "arena", a.AWNID) || !hasEntry(t, st, "arena", b.AWNID) {
			t.Fatal("the send did not restore both entries")
		}

		forget(b.AWNID)
		if _, err := webhook.NewStore(st).Set(ctx, "arena", b.AWNID, "https://example.com/hook"); err != nil {
			t.Fatalf("webhook of a membership without its entry: %v", err)
		}
		if !hasEntry(t, st, "arena", b.AWNID) {
			t.Fatal("the webhook's Set did not restore the entry")
		}
		// The restored entry is the one a join writes: the agent's view
		// finds the key through it.
		if _, err := s.AgentKey(ctx, b.AWNID, b.KeyID); err != nil {
			t.Fatalf("AgentKey through the restored entry: %v", err)
		}

		stranger := join(t, s, "arena", 3)
		if err := s.Leave(ctx, "arena", stranger.AWNID); err != nil {
			t.Fatal(err)
		}
		if world.RestoreIndexEntry(ctx, st, "arena", stranger.AWNID) || hasEntry(t, st, "arena", stranger.AWNID) {
			t.Fatal("an entry was restored for an agent that left")
		}
		_, err := s.SubmitAction(ctx, "arena", stranger.AWNID, "move", nil)
		wantKind(t, err, apierror.NotJoined)

		// A leave between the restore's read of the member item and its
		// write: the write's check of that member item fails.
		forget(a.AWNID)
		racing := &storetest.BeforeWrite{Store: st, Hook: func() {
			if err := s.Leave(ctx, "arena", a.AWNID); err != nil {
				t.Errorf("leave: %v", err)
			}
		}}
		if world.RestoreIndexEntry(ctx, racing, "arena", a.AWNID) {
			t.Fatal("restored an entry for a membership a racing leave ended")
		}
		if hasEntry(t, st, "arena", a.AWNID) {
			t.Fatal("a racing leave left the restored entry behind")
		}
	})
}
