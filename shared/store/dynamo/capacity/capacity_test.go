package capacity_test

import (
	"context"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"

	"github.com/a2awire/a2awire/shared/store/dynamo"
	"github.com/a2awire/a2awire/shared/store/dynamo/capacity"
)

// fakeDynamo answers DynamoDB's JSON protocol with canned bodies keyed by
// operation (the X-Amz-Target header), so the middleware is tested without
// a server. A body starting with "500" makes the first try of that
// operation fail with a retryable error.
func fakeDynamo(t *testing.T, bodies map[string]string) (*httptest.Server, *atomic.Int64) {
	t.Helper()
	var hits atomic.Int64
	var mu sync.Mutex
	failed := map[string]bool{}
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		hits.Add(1)
		_, _ = io.Copy(io.Discard, r.Body)
		op := strings.TrimPrefix(r.Header.Get("X-Amz-Target"), "DynamoDB_20120810.")
		body, ok := bodies[op]
		if !ok {
			t.Errorf("unexpected operation %q", op)
			w.WriteHeader(http.StatusBadRequest)
			return
		}
		w.Header().Set("Content-Type", "application/x-amz-json-1.0")
		if rest, ok := strings.CutPrefix(body, "500"); ok {
			mu.Lock()
			first := !failed[op]
			failed[op] = true
			mu.Unlock()
			if first {
				w.WriteHeader(http.StatusInternalServerError)
				_, _ = io.WriteString(w, `{"__type":"com.amazonaws.dynamodb.v20120810#InternalServerError","message":"try again"}`)
				return
			}
			body = rest
		}
		if strings.Contains(body, "__type") {
			w.WriteHeader(http.StatusBadRequest)
		}
		_, _ = io.WriteString(w, body)
	}))
	t.Cleanup(srv.Close)
	return srv, &hits
}

func TestMeter(t *testing.T) {
	srv, hits := fakeDynamo(t, map[string]string{
		"GetItem":            `{"Item":{"pk":{"S":"a"}},"ConsumedCapacity":{"TableName":"t","CapacityUnits":1}}`,
		"PutItem":            `{"__type":"com.amazonaws.dynamodb.v20120810#ConditionalCheckFailedException","message":"The conditional request failed"}`,
		"TransactWriteItems": `500{"ConsumedCapacity":[{"TableName":"t","CapacityUnits":6,"WriteCapacityUnits":6}]}`,
		"Query":              `{"Items":[],"Count":0,"ScannedCount":0,"ConsumedCapacity":{"TableName":"t","CapacityUnits":0.5}}`,
	})
	m := capacity.New()
	client := dynamo.LocalClient(srv.URL, m.Option())
	ctx := context.Background()
	table := aws.String("t")
	key := map[string]types.AttributeValue{"pk": &types.AttributeValueMemberS{Value: "a"}}

	for range 2 {
		if _, err := client.GetItem(ctx, &dynamodb.GetItemInput{TableName: table, Key: key}); err != nil {
			t.Fatal(err)
		}
	}
	_, err := client.PutItem(ctx, &dynamodb.PutItemInput{TableName: table, Item: key})
	var ccf *types.ConditionalCheckFailedException
	if !errors.As(err, &ccf) {
		t.Fatalf("PutItem: %v", err)
	}
	if _, err := client.TransactWriteItems(ctx, &dynamodb.TransactWriteItemsInput{
		TransactItems: []types.TransactWriteItem{{Put: &types.Put{TableName: table, Item: key}}},
	}); err != nil {
		t.Fatal(err)
	}
	if _, err := client.Query(ctx, &dynamodb.QueryInput{TableName: table}); err != nil {
		t.Fatal(err)
	}

	r := m.Take()
	want := capacity.Report{
		"GetItem":            {Calls: 2, Units: 2, ReadUnits: 2},
		"PutItem":            {Calls: 1, Errors: 1},
		"TransactWriteItems": {Calls: 1, Units: 6, WriteUnits: 6}, // retried once, counted once
		"Query":              {Calls: 1, Units: 0.5, ReadUnits: 0.5},
	}
	if len(r) != len(want) {
		t.Fatalf("report:\n%s", r)
	}
	for op, u := range want {
		if r[op] != u {
			t.Errorf("%s: %+v, want %+v", op, r[op], u)
		}
	}
	if got := hits.Load(); got != 6 {
		t.Errorf("server saw %d requests, want 6 (5 calls + 1 retry)", got)
	}
	if tot := r.Total(); tot.Calls != 5 || tot.Units != 8.5 || tot.ReadUnits != 2.5 || tot.WriteUnits != 6 {
		t.Errorf("total %+v", tot)
	}
	if !strings.Contains(r.String(), "GetItem: calls=2 errors=0 units=2 read=2 write=0\n") {
		t.Errorf("String():\n%s", r)
	}
	if len(m.Snapshot()) != 0 {
		t.Errorf("Take did not reset: %v", m.Snapshot())
	}
}

func TestMeterConcurrentAndReset(t *testing.T) {
	srv, _ := fakeDynamo(t, map[string]string{
		"GetItem": `{"ConsumedCapacity":{"TableName":"t","CapacityUnits":0.5}}`,
	})
	m := capacity.New()
	// Two clients sharing one meter, as a benchmark might.
	clients := []*dynamodb.Client{dynamo.LocalClient(srv.URL, m.Option()), dynamo.LocalClient(srv.URL, m.Option())}
	var wg sync.WaitGroup
	for i := range 40 {
		wg.Go(func() {
			_, err := clients[i%2].GetItem(context.Background(), &dynamodb.GetItemInput{
				TableName: aws.String("t"),
				Key:       map[string]types.AttributeValue{"pk": &types.AttributeValueMemberS{Value: "a"}},
			})
			if err != nil {
				t.Error(err)
			}
		})
	}
	wg.Wait()
	if got := m.Snapshot().Calls(); got["GetItem"] != 40 {
		t.Fatalf("calls %v, want 40 GetItem", got)
	}
	if u := m.Snapshot()["GetItem"]; u.Units != 20 {
		t.Fatalf("units %g, want 20", u.Units)
	}
	m.Reset()
	if len(m.Snapshot()) != 0 {
		t.Fatal("Reset left usage")
	}
}
