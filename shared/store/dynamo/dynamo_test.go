package dynamo_test

import (
	"os"
	"testing"

	"github.com/a2awire/a2awire/shared/store/dynamo"
	"github.com/a2awire/a2awire/shared/store/dynamo/dynamolocal"
	"github.com/a2awire/a2awire/shared/store/storetest"
)

// local is the DynamoDB Local server shared by this package's tests; each
// test gets its own table.
var local *dynamolocal.Server

func TestMain(m *testing.M) {
	os.Exit(dynamolocal.Main(m, func(s *dynamolocal.Server) { local = s }))
}

func TestConformance(t *testing.T) {
	t.Logf("DynamoDB Local at %s", local.Endpoint())
	storetest.Run(t, func(t *testing.T) storetest.Store {
		client, table := dynamolocal.NewTable(t, local)
		return dynamo.New(client, table)
	})
}
