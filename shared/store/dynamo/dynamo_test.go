package dynamo_test

import (
	"os"
	"testing"

	"github.com/a2awire/a2awire/shared/store/dynamo/dynamolocal"
)

// local is the DynamoDB Local server shared by this package's tests
// (conformance_test.go included); each test gets its own table.
var local *dynamolocal.Server

func TestMain(m *testing.M) {
	os.Exit(dynamolocal.Main(m, func(s *dynamolocal.Server) { local = s }))
}
