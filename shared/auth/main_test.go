package auth

import (
	"os"
	"testing"

	"github.com/a2awire/a2awire/shared/store/dynamo/dynamolocal"
)

// local is DynamoDB Local, for the replay guard's tests on every engine.
var local *dynamolocal.Server

func TestMain(m *testing.M) {
	os.Exit(dynamolocal.Main(m, func(s *dynamolocal.Server) { local = s }))
}
