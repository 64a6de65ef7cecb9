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
// straight from st (the shared partition and awnID's private one, every
// page), sorted; awnID "" reads the shared partition only.
func VisibleIDs(t testing.TB, st store.Store, w, awnID string) []string {
	t.Helper()
	pks := []string{world.SharedEventsPK(w)}
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
	q := store.Query{PK: world.SharedEventsPK(w)}
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
			return n
		}
		q.Cursor = page.Cursor
	}
}
