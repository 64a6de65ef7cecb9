// Package worldtest holds what the world's tests and the harness's soak
// share: the events a member may see, read straight from the table, to hold
// what a cursor reader saw against.
package worldtest

import (
	"context"
	"slices"
	"testing"

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
