package dynamo_test

import (
	"testing"

	"github.com/a2awire/a2awire/shared/store"
	"github.com/a2awire/a2awire/shared/store/dynamo"
	"github.com/a2awire/a2awire/shared/store/dynamo/dynamolocal"
	"github.com/a2awire/a2awire/shared/store/dynamo/dynamostream"
	"github.com/a2awire/a2awire/shared/store/storetest"
)

// The runners open engines directly rather than through storetest/stores,
// so that this package's tests do not link (or wait for) the other engines.

// TestConformance runs the engine suite on DynamoDB Local, the ground truth
// the embedded engines are held to.
func TestConformance(t *testing.T) {
	t.Logf("DynamoDB Local at %s", local.Endpoint())
	storetest.Run(t, func(t *testing.T) store.Store {
		client, table := dynamolocal.NewTable(t, local)
		return dynamo.New(client, table)
	})
}

// TestFeedConformance runs the change-feed suite on DynamoDB Local's real
// stream (dynamodbstreams).
func TestFeedConformance(t *testing.T) {
	storetest.RunFeed(t, func(t *testing.T) (store.Store, store.Feed) {
		client, table := dynamolocal.NewTable(t, local)
		feed, err := dynamostream.NewFeed(t.Context(), dynamostream.LocalClient(local.Endpoint()), client, table)
		if err != nil {
			t.Fatal(err)
		}
		return dynamo.New(client, table), feed
	})
}
