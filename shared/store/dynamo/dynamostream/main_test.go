package dynamostream_test

import (
	"os"
	"testing"

	"github.com/aws/aws-sdk-go-v2/service/dynamodb"

	"github.com/a2awire/a2awire/shared/store/dynamo"
	"github.com/a2awire/a2awire/shared/store/dynamo/dynamolocal"
)

// local is the DynamoDB Local server shared by this package's tests; each
// test gets its own table.
var local *dynamolocal.Server

func TestMain(m *testing.M) {
	os.Exit(dynamolocal.Main(m, func(s *dynamolocal.Server) { local = s }))
}

// newStore returns an engine on a fresh DynamoDB Local table, its client
// and the table name (the feed reads that table's stream).
func newStore(t *testing.T) (*dynamo.Store, *dynamodb.Client, string) {
	t.Helper()
	client, table := dynamolocal.NewTable(t, local)
	return dynamo.New(client, table), client, table
}
