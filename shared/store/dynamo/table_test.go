package dynamo_test

import (
	"context"
	"strconv"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"

	"github.com/a2awire/a2awire/shared/store"
	"github.com/a2awire/a2awire/shared/store/dynamo"
	"github.com/a2awire/a2awire/shared/store/dynamo/dynamolocal"
	"github.com/a2awire/a2awire/shared/store/schema"
	"github.com/a2awire/a2awire/shared/store/storetest"
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

// TestItemShapes reads raw items to pin the key patterns and attribute
// names documented in the package comment: other tools (the stream
// dispatcher, an operator with the AWS console) read them as stored.
func TestItemShapes(t *testing.T) {
	ctx := context.Background()
	client, table := dynamolocal.NewTable(t, local)
	s := dynamo.New(client, table)
	now := time.Date(2030, 1, 1, 0, 0, 0, 0, time.UTC)
	rec := store.IdemRecord{Scope: "agent", Key: "task", RequestHash: "h",
		ExpiresAt: now.Add(24*time.Hour + 1), InProgressUntil: now.Add(time.Minute)}
	storetest.MustClaim(t, s, rec, now)
	storetest.MustComplete(t, s, "agent", "task", "h", 201, []byte("body"))
	storetest.MustAppend(t, s, store.LedgerEntry{Account: "acct", EntryID: "e1", AmountCents: 5, Memo: "m", CreatedAt: now})

	get := func(pk, sk string) map[string]types.AttributeValue {
		t.Helper()
		out, err := client.GetItem(ctx, &dynamodb.GetItemInput{TableName: &table, ConsistentRead: aws.Bool(true),
			Key: map[string]types.AttributeValue{"pk": &types.AttributeValueMemberS{Value: pk}, "sk": &types.AttributeValueMemberS{Value: sk}}})
		if err != nil || out.Item == nil {
			t.Fatalf("item %s / %s: %v (found: %t)", pk, sk, err, out != nil && out.Item != nil)
		}
		return out.Item
	}
	want := func(item map[string]types.AttributeValue, attrs map[string]string) {
		t.Helper()
		for name, v := range attrs {
			var got string
			switch a := item[name].(type) {
			case *types.AttributeValueMemberS:
				got = a.Value
			case *types.AttributeValueMemberN:
				got = a.Value
			case *types.AttributeValueMemberB:
				got = string(a.Value)
			}
			if got != v {
				t.Errorf("%s / %s: %s = %q, want %q", item["pk"], item["sk"], name, got, v)
			}
		}
	}
	ttl := now.Add(24 * time.Hour).Unix() // rounded up from +24h+1ns
	want(get("IDEM#agent", "KEY#task"), map[string]string{
		"type": "idem", "scope": "agent", "key": "task", "state": "completed", "requestHash": "h",
		"status": "201", "body": "body", "expiresAt": itoa(ttl + 1),
		"expiresAtNano": itoa(rec.ExpiresAt.UnixNano()), "inProgressUntilNano": itoa(rec.InProgressUntil.UnixNano()),
	})
	want(get("LEDGER#acct", "ACCOUNT"), map[string]string{"type": "ledger-account", "account": "acct", "entries": "1", "balanceCents": "5"})
	entry := map[string]string{"account": "acct", "entryId": "e1", "sequence": "1", "amountCents": "5", "balanceCents": "5",
		"memo": "m", "createdAtNano": itoa(now.UnixNano())}
	entry["type"] = "ledger-entry"
	want(get("LEDGER#acct", "SEQ#00000000000000000001"), entry)
	entry["type"] = "ledger-entry-id"
	want(get("LEDGER#acct", "ENTRYID#e1"), entry)
}

func itoa(n int64) string { return strconv.FormatInt(n, 10) }
