package main

import (
	"context"
	"os"
	"testing"

	"github.com/aws/aws-sdk-go-v2/service/dynamodb"

	"github.com/a2awire/a2awire/shared/store/dynamo"
	"github.com/a2awire/a2awire/shared/store/dynamo/dynamolocal"
)

// childEnv makes the test binary the command TestRun runs: it asks the
// server it was given and exits 7 when that server answered.
const childEnv = "DYNAMODB_LOCAL_TEST_CHILD"

func TestMain(m *testing.M) {
	if os.Getenv(childEnv) != "" {
		client := dynamo.LocalClient(os.Getenv(dynamolocal.EndpointEnv))
		if _, err := client.ListTables(context.Background(), &dynamodb.ListTablesInput{}); err != nil {
			os.Exit(1)
		}
		os.Exit(7)
	}
	os.Exit(m.Run())
}

// TestRun: the command runs with the endpoint of a server that answers in
// its environment, and its exit status is passed on.
func TestRun(t *testing.T) {
	t.Setenv(childEnv, "1")
	code, err := run([]string{"--", os.Args[0]})
	if err != nil || code != 7 {
		t.Fatalf("run: code %d, %v; want the command's 7", code, err)
	}
	if code, err := run(nil); code != 2 || err == nil {
		t.Fatalf("run without a command: code %d, %v; want 2 and the usage", code, err)
	}
}
