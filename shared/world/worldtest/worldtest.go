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
// have, not only those its head names, and awnID's private partition,
// every page), sorted; awnID "" reads the shared events only.
func VisibleIDs(t testing.TB, st store.Store, w, awnID string) []string {
	t.Helper()
	pks := SharedPKs(w)
	if awnID != "" {
		pks = append(pks, world.PrivateEventsPK(w, awnID))
	}
	var out []string
	for _, pk := range pks {
		q := store.Query{PK: pk}
		for {
			page, err := st.Query(context.Background(), q)
			if err != nil {
				t.Fatal(err)
			}
			for _, it := range page.Items {
				out = append(out, it.Key().SK)
			}
			if page.Cursor == "" {
				break
			}
			q.Cursor = page.Cursor
		}
	}
	slices.Sort(out)
	return out
}

// CountShared returns how many events of type typ the shared partition of
// world w holds (a test that counts the events its writes made leaves out
// those the world makes itself, such as presence.changed).
func CountShared(t testing.TB, st store.Store, w, typ string) int {
	t.Helper()
	n := 0
	for _, pk := range SharedPKs(w) {
		q := store.Query{PK: pk}
		for {
			page, err := st.Query(context.Background(), q)
			if err != nil {
				t.Fatal(err)
			}
			for _, it := range page.Items {
				e, err := world.DecodeEvent(it)
				if err != nil {
					t.Fatal(err)
				}
				if e.Type == typ {
					n++
				}
			}
			if page.Cursor == "" {
				break
			}
			q.Cursor = page.Cursor
		}
	}
	return n
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
