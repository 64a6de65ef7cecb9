// Package stores opens a fresh store of every adapter, for the tests of
// consumers (the idempotency guard, the ledger fixture) that must behave the
// same on memory, bolt and DynamoDB Local.
package stores

import (
	"path/filepath"
	"testing"

	"github.com/a2awire/a2awire/shared/store/bolt"
	"github.com/a2awire/a2awire/shared/store/dynamo"
	"github.com/a2awire/a2awire/shared/store/dynamo/dynamolocal"
	"github.com/a2awire/a2awire/shared/store/memory"
	"github.com/a2awire/a2awire/shared/store/storetest"
)

// Adapter names one store adapter and opens a fresh, empty store of it that
// the test cleans up.
type Adapter struct {
	Name string
	Open func(t *testing.T) storetest.Store
}

// All returns memory, bolt (in t.TempDir) and dynamo (a fresh table on the
// given DynamoDB Local).
func All(local *dynamolocal.Server) []Adapter {
	return []Adapter{
		{"memory", func(t *testing.T) storetest.Store { return memory.New() }},
		{"bolt", func(t *testing.T) storetest.Store {
			s, err := bolt.Open(filepath.Join(t.TempDir(), bolt.DefaultFile))
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { _ = s.Close() })
			return s
		}},
		{"dynamo", func(t *testing.T) storetest.Store {
			client, table := dynamolocal.NewTable(t, local)
			return dynamo.New(client, table)
		}},
	}
}
