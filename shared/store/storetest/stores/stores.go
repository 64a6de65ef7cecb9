// Package stores opens a fresh store of every engine — memory, bolt and
// dynamo on DynamoDB Local — for the tests of domain packages (idempotency,
// ledger, …), which must behave the same on all three:
//
//	for _, e := range stores.All(local) {
//		t.Run(e.Name, func(t *testing.T) {
//			s := e.Open(t)
//			...
//		})
//	}
//
// local comes from dynamolocal.Main in the test package's TestMain.
package stores

import (
	"path/filepath"
	"testing"

	"github.com/a2awire/a2awire/shared/store"
	"github.com/a2awire/a2awire/shared/store/bolt"
	"github.com/a2awire/a2awire/shared/store/dynamo"
	"github.com/a2awire/a2awire/shared/store/dynamo/dynamolocal"
	"github.com/a2awire/a2awire/shared/store/dynamo/dynamostream"
	"github.com/a2awire/a2awire/shared/store/memory"
)

// Engine names one storage engine and opens fresh, empty stores of it; the
// test that opens one owns it and its cleanup.
type Engine struct {
	// Name is memory, bolt or dynamo.
	Name string
	// Open returns a fresh store.
	Open func(t *testing.T) store.Store
	// OpenFeed returns a fresh store and its change feed.
	OpenFeed func(t *testing.T) (store.Store, store.Feed)
}

// All returns memory, bolt (a file in t.TempDir) and dynamo (a fresh table
// on local, its feed reading the table's stream).
func All(local *dynamolocal.Server) []Engine {
	return []Engine{Memory(), Bolt(), Dynamo(local)}
}

// Memory is the in-memory engine; the store is its own feed.
func Memory() Engine {
	open := func(t *testing.T) *memory.Store {
		s := memory.New()
		t.Cleanup(func() { _ = s.Close() })
		return s
	}
	return Engine{
		Name:     "memory",
		Open:     func(t *testing.T) store.Store { return open(t) },
		OpenFeed: func(t *testing.T) (store.Store, store.Feed) { s := open(t); return s, s },
	}
}

// Bolt is the file engine, on a fresh file; the store is its own feed.
func Bolt() Engine {
	open := func(t *testing.T) *bolt.Store {
		s, err := bolt.Open(filepath.Join(t.TempDir(), bolt.DefaultFile))
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() {
			if err := s.Close(); err != nil {
				t.Error(err)
			}
		})
		return s
	}
	return Engine{
		Name:     "bolt",
		Open:     func(t *testing.T) store.Store { return open(t) },
		OpenFeed: func(t *testing.T) (store.Store, store.Feed) { s := open(t); return s, s },
	}
}

// Dynamo is the DynamoDB engine on a fresh table of local; its feed reads
// the table's stream from the moment it is opened.
func Dynamo(local *dynamolocal.Server) Engine {
	return Engine{
		Name: "dynamo",
		Open: func(t *testing.T) store.Store {
			client, table := dynamolocal.NewTable(t, local)
			return dynamo.New(client, table)
		},
		OpenFeed: func(t *testing.T) (store.Store, store.Feed) {
			client, table := dynamolocal.NewTable(t, local)
			feed, err := dynamostream.NewFeed(t.Context(), dynamostream.LocalClient(local.Endpoint()), client, table)
			if err != nil {
				t.Fatal(err)
			}
			return dynamo.New(client, table), feed
		},
	}
}
