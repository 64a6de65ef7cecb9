package worldhttp_test

import (
	"context"
	"fmt"
	"net/http/httptest"
	"sync"
	"testing"
	"time"

	"github.com/a2awire/a2awire/local/harness"
	"github.com/a2awire/a2awire/shared/logging"
	"github.com/a2awire/a2awire/shared/ratelimit"
	"github.com/a2awire/a2awire/shared/store/dynamo"
	"github.com/a2awire/a2awire/shared/store/dynamo/dynamolocal"
	"github.com/aws/aws-lambda-go/events"
)

// TestRateLimitAcrossHarnesses: two harness instances, each with its own
// DynamoDB client over one DynamoDB Local table (two Lambda instances of
// world-send, as far as the limit can tell), serve one agent alternately;
// the send limit of one minute holds across both — exactly the default 30
// of 40 sends pass, the rest are 429 RATE_LIMITED with Retry-After, and
// which instance answered makes no difference. Both instances' limiters
// read one injected clock, held inside one minute for the burst (a minute
// boundary inside it would open a fresh window) and then moved to the
// next minute, whose window is fresh on both.
func TestRateLimitAcrossHarnesses(t *testing.T) {
	c := &clock{now: time.Date(2026, 12, 1, 12, 0, 10, 0, time.UTC)}
	client, table := dynamolocal.NewTable(t, local)
	st1, st2 := dynamo.New(client, table), dynamo.New(dynamo.LocalClient(local.Endpoint()), table)
	var (
		bases []string
		first *harness.Harness
	)
	for _, st := range []*dynamo.Store{st1, st2} {
		h, err := harness.New(harness.Options{Log: logging.Discard(), Store: st, Feed: noFeed{}, Now: c.Now})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = h.Close() })
		if first == nil {
			first = h
		}
		srv := httptest.NewServer(h)
		t.Cleanup(srv.Close)
		bases = append(bases, srv.URL)
	}
	if _, _, err := harness.SeedLobby(context.Background(), st1, first.NetworkKey()); err != nil {
		t.Fatal(err)
	}
	// The same two keys talk to either instance.
	a := []*agent{newAgent(t, bases[0], 20), newAgent(t, bases[1], 20)}
	b := newAgent(t, bases[1], 21)
	a[0].call("POST", "/v0/worlds/lobby/join", fmt.Sprintf(`{"publicKey":%q}`, b64(a[0].key)), 201)
	b.call("POST", "/v0/worlds/lobby/join", fmt.Sprintf(`{"publicKey":%q}`, b64(b.key)), 201)

	limit := ratelimit.DefaultLimits()[ratelimit.Send]
	sent, limited := 0, 0
	for i := range limit + 10 {
		via := a[i%2]
		body := fmt.Sprintf(`{"to":%q,"content":{"n":%d}}`, b.awnID(), i)
		if sent < limit {
			via.call("POST", "/v0/worlds/lobby/messages", body, 201)
			sent++
			continue
		}
		e := via.call("POST", "/v0/worlds/lobby/messages", body, 429)
		if e["code"] != "RATE_LIMITED" {
			t.Fatalf("send %d through instance %d: %v, want RATE_LIMITED", i, i%2+1, e)
		}
		limited++
	}
	if sent != limit || limited != 10 {
		t.Fatalf("sent %d, limited %d; want %d and 10", sent, limited, limit)
	}
	// What passed is in the inbox, whichever instance took it.
	if got := b.call("GET", "/v0/worlds/lobby/messages?peek=true&limit=100", "", 200); got["count"] != float64(limit) {
		t.Fatalf("inbox holds %v messages, want %d", got["count"], limit)
	}
	// In the next minute a send passes again, on either instance.
	c.Advance(50 * time.Second)
	for i, via := range a {
		via.call("POST", "/v0/worlds/lobby/messages", fmt.Sprintf(`{"to":%q,"content":{"next":%d}}`, b.awnID(), i), 201)
	}
}

// clock is a settable clock for the harnesses' Now.
type clock struct {
	mu  sync.Mutex
	now time.Time
}

func (c *clock) Now() time.Time { c.mu.Lock(); defer c.mu.Unlock(); return c.now }

func (c *clock) Advance(d time.Duration) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.now = c.now.Add(d)
}

// noFeed stands in for the table's stream: these harnesses drive no
// triggers (Run is never called), so nothing reads it.
type noFeed struct{}

func (noFeed) Read(ctx context.Context, _ string, _ int) ([]events.DynamoDBEventRecord, error) {
	<-ctx.Done()
	return nil, ctx.Err()
}

func (noFeed) Commit(context.Context, string, string) error { return nil }
