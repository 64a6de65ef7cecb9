// Package worldtest holds what the world's tests and the harness's soak
// share: the events a member may see, read straight from the table, to hold
// what a cursor reader saw against; and for the batched commits' tests of
// world and inbox, a store that logs its Writes and a queue that keeps what
// is sent to it.
package worldtest

import (
	"context"
	"slices"
	"sync"
	"testing"

	"github.com/a2awire/a2awire/shared/queue"
	"github.com/a2awire/a2awire/shared/store"
	"github.com/a2awire/a2awire/shared/world"
)

// VisibleIDs returns the ids of every event of w that awnID may see, read
// straight from st (every shard of the shared events that any world may
// have, not only those its head names, and as many of awnID's private
// partitions, every page), sorted; awnID "" reads the shared events only.
func VisibleIDs(t testing.TB, st store.Store, w, awnID string) []string {
	t.Helper()
	pks := SharedPKs(w)
	if awnID != "" {
		pks = append(pks, ShardPKs(world.PrivateEventsPK(w, awnID))...)
	}
	var out []string
	for _, pk := range pks {
		scan(t, st, pk, func(it store.Item) { out = append(out, it.Key().SK) })
	}
	slices.Sort(out)
	return out
}

// CountShared returns how many events of type typ the shared partitions
// of world w hold (a test that counts the events its writes made leaves
// out those the world makes itself, such as presence.changed).
func CountShared(t testing.TB, st store.Store, w, typ string) int {
	t.Helper()
	n := 0
	for _, pk := range SharedPKs(w) {
		scan(t, st, pk, func(it store.Item) {
			e, err := world.DecodeEvent(it)
			if err != nil {
				t.Fatal(err)
			}
			if e.Type == typ {
				n++
			}
		})
	}
	return n
}

// Placement returns the partition each shared event of w is in, by event
// id, read from every partition it may be in (SharedPKs).
func Placement(t testing.TB, st store.Store, w string) map[string]string {
	t.Helper()
	out := map[string]string{}
	for _, pk := range SharedPKs(w) {
		scan(t, st, pk, func(it store.Item) { out[it.Key().SK] = pk })
	}
	return out
}

// SharedPKs are the partitions the shared events of w may be in: every
// shard up to world.MaxEventShards.
func SharedPKs(w string) []string {
	pks := make([]string, world.MaxEventShards)
	for n := range pks {
		pks[n] = world.EventShardPK(w, n)
	}
	return pks
}

// ShardPKs are the partitions the items of the partition pk of a
// recipient (its private events, world.PrivateEventsPK, or its inbox,
// world.InboxPK) may be in: every shard of it up to world.MaxEventShards.
func ShardPKs(pk string) []string {
	pks := make([]string, world.MaxEventShards)
	for n := range pks {
		pks[n] = world.ShardPK(pk, n)
	}
	return pks
}

// Count returns how many items each shard of the partition pk holds
// (ShardPKs), by shard.
func Count(t testing.TB, st store.Store, pk string) []int {
	t.Helper()
	pks := ShardPKs(pk)
	out := make([]int, len(pks))
	for n, pk := range pks {
		scan(t, st, pk, func(store.Item) { out[n]++ })
	}
	return out
}

// scan calls f with every item of partition pk, every page.
func scan(t testing.TB, st store.Store, pk string, f func(store.Item)) {
	t.Helper()
	q := store.Query{PK: pk}
	for {
		page, err := st.Query(context.Background(), q)
		if err != nil {
			t.Fatal(err)
		}
		for _, it := range page.Items {
			f(it)
		}
		if page.Cursor == "" {
			return
		}
		q.Cursor = page.Cursor
	}
}

// WriteLog is a store that records the actions of every Write reaching
// it: the batched commits' tests count their transactions with it.
type WriteLog struct {
	store.Store
	mu     sync.Mutex
	writes [][]store.Action
}

// Write records acts, then writes them.
func (w *WriteLog) Write(ctx context.Context, acts ...store.Action) ([]store.Item, error) {
	w.mu.Lock()
	w.writes = append(w.writes, acts)
	w.mu.Unlock()
	return w.Store.Write(ctx, acts...)
}

// Take returns the Writes recorded since the last Take.
func (w *WriteLog) Take() [][]store.Action {
	w.mu.Lock()
	defer w.mu.Unlock()
	out := w.writes
	w.writes = nil
	return out
}

// SentQueue is an action queue (world.ActionQueue) that keeps what is sent
// to it, for a test to hand to the committer itself.
type SentQueue struct {
	mu   sync.Mutex
	msgs []queue.Message
}

// Send keeps msgs.
func (q *SentQueue) Send(_ context.Context, msgs ...queue.Message) error {
	q.mu.Lock()
	defer q.mu.Unlock()
	q.msgs = append(q.msgs, msgs...)
	return nil
}

// Take returns what was sent since the last Take, read back as the
// committer reads it (world.ParseQueuedAction): a body it cannot read
// fails the test.
func (q *SentQueue) Take(t testing.TB) []world.QueuedAction {
	t.Helper()
	q.mu.Lock()
	defer q.mu.Unlock()
	var out []world.QueuedAction
	for _, m := range q.msgs {
		a, err := world.ParseQueuedAction(m.Body)
		if err != nil {
			t.Fatalf("queued %q: %v", m.Body, err)
		}
		out = append(out, a)
	}
	q.msgs = nil
	return out
}
