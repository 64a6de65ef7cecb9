package dynamo

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"os"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	awshttp "github.com/aws/aws-sdk-go-v2/aws/transport/http"
	"github.com/aws/aws-sdk-go-v2/credentials"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"

	"github.com/a2awire/a2awire/shared/store/schema"
)

// LocalClient returns a client for a DynamoDB-compatible endpoint such as
// DynamoDB Local (the harness's -dynamodb-endpoint). It uses dummy
// credentials (access key LocalKey()) and region us-east-1 and reads no AWS
// environment or shared config, so a developer's AWS_PROFILE cannot send
// local traffic to a real account or break the run. optFns are applied last
// (e.g. a capacity meter).
//
// Its HTTP client keeps up to 64 idle connections to the endpoint (the
// SDK's default is 10), more than a Store's requests in flight
// (WithMaxInFlight), so a burst does not open and close a connection per
// request.
func LocalClient(endpoint string, optFns ...func(*dynamodb.Options)) *dynamodb.Client {
	return dynamodb.New(dynamodb.Options{
		Region:       "us-east-1",
		BaseEndpoint: aws.String(endpoint),
		Credentials:  credentials.NewStaticCredentialsProvider(LocalKey(), "local", ""),
		HTTPClient: awshttp.NewBuildableClient().WithTransportOptions(func(t *http.Transport) {
			t.MaxIdleConns, t.MaxIdleConnsPerHost = 64, 64
		}),
	}, optFns...)
}

// LocalKeyEnv sets the access key LocalClient signs with. DynamoDB Local
// started without -sharedDb keeps one database per access key, so test
// binaries that share one server (see dynamolocal) each set their own and
// never see each other's tables; a process they start inherits it.
const LocalKeyEnv = "A2AWIRE_DYNAMODB_LOCAL_KEY"

// LocalKey is $A2AWIRE_DYNAMODB_LOCAL_KEY, or "local".
func LocalKey() string {
	if k := os.Getenv(LocalKeyEnv); k != "" {
		return k
	}
	return "local"
}

// tableWait bounds how long CreateTable and DeleteTable wait for the table
// to settle: seconds on DynamoDB Local, up to a few minutes on AWS.
const tableWait = 5 * time.Minute

// CreateTable creates table from schema.Default() — keys, GSIs, on-demand
// billing, a NEW_AND_OLD_IMAGES stream — waits until it and its indexes are
// ACTIVE, and enables TTL on the schema's TTL attribute. An existing table is
// fine: it is waited for and its TTL is enabled if it was not, so the
// harness can call this on every start.
func CreateTable(ctx context.Context, client *dynamodb.Client, table string) error {
	def := schema.Default()
	attrs := map[string]schema.Attr{}
	keyAttrs := func(pk, sk schema.Attr) []types.KeySchemaElement {
		attrs[pk.Name], attrs[sk.Name] = pk, sk
		return []types.KeySchemaElement{
			{AttributeName: aws.String(pk.Name), KeyType: types.KeyTypeHash},
			{AttributeName: aws.String(sk.Name), KeyType: types.KeyTypeRange},
		}
	}
	in := &dynamodb.CreateTableInput{
		TableName:   aws.String(table),
		KeySchema:   keyAttrs(def.PartitionKey, def.SortKey),
		BillingMode: types.BillingModePayPerRequest,
		StreamSpecification: &types.StreamSpecification{
			StreamEnabled:  aws.Bool(true),
			StreamViewType: types.StreamViewType(def.StreamView),
		},
	}
	for _, ix := range def.Indexes {
		in.GlobalSecondaryIndexes = append(in.GlobalSecondaryIndexes, types.GlobalSecondaryIndex{
			IndexName:  aws.String(ix.Name),
			KeySchema:  keyAttrs(ix.PartitionKey, ix.SortKey),
			Projection: &types.Projection{ProjectionType: types.ProjectionTypeAll},
		})
	}
	for _, a := range attrs {
		in.AttributeDefinitions = append(in.AttributeDefinitions, types.AttributeDefinition{
			AttributeName: aws.String(a.Name), AttributeType: types.ScalarAttributeType(a.Type),
		})
	}

	_, err := client.CreateTable(ctx, in)
	var inUse *types.ResourceInUseException
	if err != nil && !errors.As(err, &inUse) {
		return fmt.Errorf("dynamo: create table %s: %w", table, err)
	}
	if err := waitActive(ctx, client, table); err != nil {
		return fmt.Errorf("dynamo: create table %s: %w", table, err)
	}
	if err := enableTTL(ctx, client, table, def.TTLAttribute); err != nil {
		return fmt.Errorf("dynamo: create table %s: %w", table, err)
	}
	return nil
}

// waitActive polls DescribeTable until the table and every GSI are ACTIVE.
// It polls fast at first (DynamoDB Local is ready at once) and backs off to
// 2 s (AWS takes seconds), where the SDK's waiter starts at 20 s.
func waitActive(ctx context.Context, client *dynamodb.Client, table string) error {
	ctx, cancel := context.WithTimeout(ctx, tableWait)
	defer cancel()
	for delay := 20 * time.Millisecond; ; delay = min(2*delay, 2*time.Second) {
		out, err := client.DescribeTable(ctx, &dynamodb.DescribeTableInput{TableName: aws.String(table)})
		var missing *types.ResourceNotFoundException
		if err != nil && !errors.As(err, &missing) {
			return fmt.Errorf("wait for ACTIVE: %w", err)
		}
		if err == nil && active(out.Table) {
			return nil
		}
		if err := sleep(ctx, delay); err != nil {
			return fmt.Errorf("wait for ACTIVE: %w", err)
		}
	}
}

func active(t *types.TableDescription) bool {
	if t == nil || t.TableStatus != types.TableStatusActive {
		return false
	}
	for _, ix := range t.GlobalSecondaryIndexes {
		if ix.IndexStatus != types.IndexStatusActive {
			return false
		}
	}
	return true
}

// enableTTL turns TTL on unless it already is (UpdateTimeToLive fails when
// asked to enable an enabled TTL).
func enableTTL(ctx context.Context, client *dynamodb.Client, table, attr string) error {
	out, err := client.DescribeTimeToLive(ctx, &dynamodb.DescribeTimeToLiveInput{TableName: aws.String(table)})
	if err != nil {
		return fmt.Errorf("describe TTL: %w", err)
	}
	if d := out.TimeToLiveDescription; d != nil && aws.ToString(d.AttributeName) == attr &&
		(d.TimeToLiveStatus == types.TimeToLiveStatusEnabled || d.TimeToLiveStatus == types.TimeToLiveStatusEnabling) {
		return nil
	}
	_, err = client.UpdateTimeToLive(ctx, &dynamodb.UpdateTimeToLiveInput{
		TableName: aws.String(table),
		TimeToLiveSpecification: &types.TimeToLiveSpecification{
			AttributeName: aws.String(attr),
			Enabled:       aws.Bool(true),
		},
	})
	if err != nil {
		return fmt.Errorf("enable TTL on %s: %w", attr, err)
	}
	return nil
}

// DeleteTable deletes table and waits until it is gone (so a CreateTable
// right after, as in the harness's -reset, does not hit the old one). A
// missing table is fine.
func DeleteTable(ctx context.Context, client *dynamodb.Client, table string) error {
	_, err := client.DeleteTable(ctx, &dynamodb.DeleteTableInput{TableName: aws.String(table)})
	var missing *types.ResourceNotFoundException
	if errors.As(err, &missing) {
		return nil
	}
	if err != nil {
		return fmt.Errorf("dynamo: delete table %s: %w", table, err)
	}
	ctx, cancel := context.WithTimeout(ctx, tableWait)
	defer cancel()
	for delay := 20 * time.Millisecond; ; delay = min(2*delay, 2*time.Second) {
		_, err := client.DescribeTable(ctx, &dynamodb.DescribeTableInput{TableName: aws.String(table)})
		if errors.As(err, &missing) {
			return nil
		}
		if err != nil {
			return fmt.Errorf("dynamo: delete table %s: wait: %w", table, err)
		}
		if err := sleep(ctx, delay); err != nil {
			return fmt.Errorf("dynamo: delete table %s: wait: %w", table, err)
		}
	}
}
