package dynamo_test

import (
	"context"
	"testing"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"

	"github.com/a2awire/a2awire/shared/store/dynamo"
	"github.com/a2awire/a2awire/shared/store/schema"
)

// TestCreateTable checks the created table against schema.Default() and
// that CreateTable and DeleteTable are idempotent, as the harness's start-up
// and -reset rely on.
func TestCreateTable(t *testing.T) {
	ctx := context.Background()
	client := local.Client()
	const table = "create-table-test"
	for range 2 {
		if err := dynamo.CreateTable(ctx, client, table); err != nil {
			t.Fatal(err)
		}
	}
	out, err := client.DescribeTable(ctx, &dynamodb.DescribeTableInput{TableName: aws.String(table)})
	if err != nil {
		t.Fatal(err)
	}
	def, td := schema.Default(), out.Table
	if td.TableStatus != types.TableStatusActive {
		t.Errorf("status %s", td.TableStatus)
	}
	if len(td.KeySchema) != 2 || aws.ToString(td.KeySchema[0].AttributeName) != def.PartitionKey.Name ||
		aws.ToString(td.KeySchema[1].AttributeName) != def.SortKey.Name {
		t.Errorf("key schema %+v", td.KeySchema)
	}
	if len(td.GlobalSecondaryIndexes) != len(def.Indexes) || aws.ToString(td.GlobalSecondaryIndexes[0].IndexName) != def.Indexes[0].Name {
		t.Errorf("indexes %+v", td.GlobalSecondaryIndexes)
	}
	if td.BillingModeSummary == nil || td.BillingModeSummary.BillingMode != types.BillingModePayPerRequest {
		t.Errorf("billing %+v", td.BillingModeSummary)
	}
	if td.StreamSpecification == nil || !aws.ToBool(td.StreamSpecification.StreamEnabled) ||
		string(td.StreamSpecification.StreamViewType) != def.StreamView || td.LatestStreamArn == nil {
		t.Errorf("stream %+v", td.StreamSpecification)
	}
	ttl, err := client.DescribeTimeToLive(ctx, &dynamodb.DescribeTimeToLiveInput{TableName: aws.String(table)})
	if err != nil {
		t.Fatal(err)
	}
	if d := ttl.TimeToLiveDescription; d == nil || aws.ToString(d.AttributeName) != def.TTLAttribute || d.TimeToLiveStatus != types.TimeToLiveStatusEnabled {
		t.Errorf("TTL %+v", ttl.TimeToLiveDescription)
	}
	for range 2 {
		if err := dynamo.DeleteTable(ctx, client, table); err != nil {
			t.Fatal(err)
		}
	}
	if err := dynamo.CreateTable(ctx, client, table); err != nil {
		t.Fatalf("create after delete: %v", err)
	}
	if err := dynamo.DeleteTable(ctx, client, table); err != nil {
		t.Fatal(err)
	}
}
