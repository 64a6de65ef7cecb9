package deleter_test

import (
	"context"
	"crypto/ed25519"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/aws/aws-lambda-go/events"

	"github.com/a2awire/a2awire/functions/world-deleter/deleter"
	"github.com/a2awire/a2awire/local/cloud"
	"github.com/a2awire/a2awire/shared/apierror"
	"github.com/a2awire/a2awire/shared/auth"
	"github.com/a2awire/a2awire/shared/inbox"
	"github.com/a2awire/a2awire/shared/logging"
	"github.com/a2awire/a2awire/shared/ratelimit"
	"github.com/a2awire/a2awire/shared/routes"
	"github.com/a2awire/a2awire/shared/store"
	"github.com/a2awire/a2awire/shared/store/dynamo/dynamolocal"
	"github.com/a2awire/a2awire/shared/store/storetest"
	"github.com/a2awire/a2awire/shared/store/storetest/stores"
	"github.com/a2awire/a2awire/shared/webhook"
	"github.com/a2awire/a2awire/shared/world"
)

var local *dynamolocal.Server

func TestMain(m *testing.M) {
	os.Exit(dynamolocal.Main(m, func(s *dynamolocal.Server) { local = s }))
}

func key(n int) ed25519.PublicKey {
	seed := make([]byte, ed25519.SeedSize)
	copy(seed, fmt.Sprintf("deleter-test-key-%d", n))
	return ed25519.NewKeyFromSeed(seed).Public().(ed25519.PublicKey)
}

// recording remembers the key of every item written through it, by the
// world its partition key names, so a test can check each is gone.
type recording struct {
	store.Store
	mu   sync.Mutex
	keys map[store.Key]bool
}

func (r *recording) Write(ctx context.Context, acts ...store.Action) ([]store.Item, error) {
	r.mu.Lock()
	if r.keys == nil {
		r.keys = map[store.Key]bool{}
	}
	for _, a := range acts {
		if a.Kind == store.PutAction || a.Kind == store.UpdateAction {
			r.keys[a.Key] = true
		}
	}
	r.mu.Unlock()
	return r.Store.Write(ctx, acts...)
}

// of returns the recorded keys that belong to world w: those of its
// partitions (every partition of a world names it: WORLD#w, EVENTS#w…,
// INBOX#w#…, RATE#w#…) and its items in an agent's index of worlds
// (AWN#<awnId>, JOINED#w or OWNS#w).
func (r *recording) of(w string) []store.Key {
	r.mu.Lock()
	defer r.mu.Unlock()
	var out []store.Key
	for k := range r.keys {
		_, rest, ok := strings.Cut(k.PK, "#")
		// The world's partitions, and its items in other partitions
		// (an agent's index of the worlds it joined or owns).
		if ok && (rest == w || strings.HasPrefix(rest, w+"#")) || strings.HasSuffix(k.SK, "#"+w) {
			out = append(out, k)
		}
	}
	return out
}

// crashing fails every Write after the first n: a process dying midway.
type crashing struct {
	store.Store
	n atomic.Int64
}

var errCrash = errors.New("the process died")

func (c *crashing) Write(ctx context.Context, acts ...store.Action) ([]store.Item, error) {
	if c.n.Add(-1) < 0 {
		return nil, errCrash
	}
	return c.Store.Write(ctx, acts...)
}

// seed fills world w with members current members, former members that
// joined and left, messages direct messages (each also a private
// message.received), hooks webhooks with a pending retry and a dead
// letter each, and a rate window per member; the owner is key 0.
func seed(t testing.TB, st store.Store, w string, members, former, messages, hooks int) {
	t.Helper()
	ctx := context.Background()
	s := world.New(st)
	if _, _, err := s.PutWorld(ctx, world.Manifest{ID: w, Category: "doomed", EventShards: 4}, key(0)); err != nil {
		t.Fatal(err)
	}
	var ids []string
	for i := range members + former {
		m, _, err := s.Join(ctx, w, key(1+i), nil)
		if err != nil {
			t.Fatal(err)
		}
		ids = append(ids, m.AWNID)
	}
	box := inbox.New(st)
	for i := range messages {
		from, to := ids[i%len(ids)], ids[(i+1)%len(ids)]
		if _, err := box.Send(ctx, w, from, to, json.RawMessage(`{"n":1}`), ""); err != nil {
			t.Fatal(err)
		}
	}
	hooksStore := webhook.NewStore(st)
	for i := range hooks {
		if _, err := hooksStore.Set(ctx, w, ids[i], "https://hook.example/"+ids[i]); err != nil {
			t.Fatal(err)
		}
		// What the dispatcher leaves for a failing receiver.
		due := map[string]string{store.AttrGSI1PK: webhook.DuePK(i % webhook.Shards), store.AttrGSI1SK: fmt.Sprintf("%015d#%s#%s", i, w, ids[i])}
		if _, err := st.Write(ctx,
			store.Put(store.Key{PK: webhook.RetryPK(w, ids[i]), SK: "E1"}, store.Item{world.AttrType: store.S(webhook.TypeRetry),
				store.AttrGSI1PK: store.S(due[store.AttrGSI1PK]), store.AttrGSI1SK: store.S(due[store.AttrGSI1SK])}),
			store.Put(store.Key{PK: webhook.DeadLetterPK(w, ids[i]), SK: "E0"}, store.Item{world.AttrType: store.S(webhook.TypeDeadLetter)}),
		); err != nil {
			t.Fatal(err)
		}
	}
	lim := ratelimit.New(st, ratelimit.DefaultLimits())
	for _, id := range ids {
		if err := lim.Allow(ctx, w, id, ratelimit.Send); err != nil {
			t.Fatal(err)
		}
	}
	for _, id := range ids[members:] {
		if err := s.Leave(ctx, w, id); err != nil {
			t.Fatal(err)
		}
	}
}

// gone fails the test for every recorded key of w still in the table.
func gone(t testing.TB, st store.Store, rec *recording, w string) {
	t.Helper()
	left := 0
	for _, k := range rec.of(w) {
		if _, err := st.Get(context.Background(), k); err == nil {
			left++
			if left <= 5 {
				t.Errorf("item %s of %s is still there", k, w)
			}
		} else if !errors.Is(err, store.ErrNotFound) {
			t.Fatal(err)
		}
	}
	if left > 0 {
		t.Fatalf("%d items of %s are left", left, w)
	}
}

// TestPurgeLeavesNothingAndResumes: a world with members, former members,
// messages, private events, webhooks with a pending retry and a dead
// letter, and rate windows is deleted; the first round dies after 1
// Write, its members' (the name is still taken then), and later rounds of 1 Write
// each pick up from what is left, until no item the world ever wrote is
// in the table — while another world's items are all still there — and
// the name can be created again — messages and private events in every
// shard of the world's 4 included. 8 members, 2 former, 30 messages and 2
// webhooks keep it at seconds on DynamoDB Local; BenchmarkPurge is the
// same at 1,000 members, 10,000 messages and 50 webhooks.
func TestPurgeLeavesNothingAndResumes(t *testing.T) {
	for _, e := range stores.All(local) {
		t.Run(e.Name, func(t *testing.T) {
			ctx := context.Background()
			rec := &recording{Store: e.Open(t)}
			seed(t, rec, "doomed", 8, 2, 30, 2)
			seed(t, rec, "doomed-not", 2, 1, 4, 1) // a world whose name starts the same
			before := len(rec.of("doomed"))
			// Its 4 event shards spread each member's inbox and private
			// events: the deletion must empty the shards past 0 as well.
			inboxShards, privateShards := 0, 0
			for _, k := range rec.of("doomed") {
				if strings.HasPrefix(k.PK, "INBOX#doomed#") && strings.Contains(k.PK, "#s") {
					inboxShards++
				}
				if strings.HasPrefix(k.PK, "EVENTS#doomed#aw:") && strings.Contains(k.PK, "#s") {
					privateShards++
				}
			}
			if inboxShards == 0 || privateShards == 0 {
				t.Fatalf("%d messages and %d private events in shards past 0: the seed spread none", inboxShards, privateShards)
			}
			var kept []store.Key // the other world's items now
			for _, k := range rec.of("doomed-not") {
				if _, err := rec.Get(ctx, k); err == nil {
					kept = append(kept, k)
				}
			}
			s := deleter.Service(rec)
			if err := s.DeleteWorld(ctx, "doomed", auth.KeyID(key(1))); apierror.KindOf(err) != apierror.Forbidden {
				t.Fatalf("delete by a member: %v", err)
			}
			if err := s.DeleteWorld(ctx, "doomed", auth.KeyID(key(0))); err != nil {
				t.Fatal(err)
			}
			crash := &crashing{Store: rec}
			crash.n.Store(1)
			if _, err := deleter.Service(crash).Purge(ctx, "doomed", world.PurgeOptions{}); !errors.Is(err, errCrash) {
				t.Fatalf("crashing round: %v", err)
			}
			if _, _, err := s.PutWorld(ctx, world.Manifest{ID: "doomed"}, key(0)); apierror.KindOf(err) != apierror.Conflict {
				t.Fatalf("create while the deletion is under way: %v", err)
			}
			counted := &storetest.Counting{Store: rec}
			cs := deleter.Service(counted)
			rounds := 0
			for done := false; !done; rounds++ {
				if rounds > 1000 {
					t.Fatal("the deletion never ends")
				}
				var err error
				if done, err = cs.Purge(ctx, "doomed", world.PurgeOptions{MaxWrites: 1}); err != nil {
					t.Fatal(err)
				}
			}
			calls := counted.Take()
			t.Logf("%d items; after a crash at 1 write: %d rounds of 1 write, {gets, queries, writes} = %v", before, rounds, calls)
			if rounds < 2 {
				t.Fatalf("%d rounds: the budget did not cut the deletion", rounds)
			}
			gone(t, rec, rec, "doomed")
			for _, k := range kept {
				if _, err := rec.Get(ctx, k); err != nil {
					t.Fatalf("item %s of another world: %v", k, err)
				}
			}
			if _, created, err := s.PutWorld(ctx, world.Manifest{ID: "doomed"}, key(9)); err != nil || !created {
				t.Fatalf("the name after the deletion: created %v, %v", created, err)
			}
		})
	}
}

// TestDeleterStream: through the stream driver with the route table's
// trigger (its filter, batch size and failure reports), deleting a world
// starts the deleter from the marker's record and it runs until the world
// is gone: the name can be created again. The deleter's first invocation
// fails (a crash), and the stream retries it.
func TestDeleterStream(t *testing.T) {
	cfg := routes.Config(deleter.Function)
	if len(cfg.Triggers) != 1 || cfg.Triggers[0].Kind != routes.StreamTrigger || !cfg.Triggers[0].ReportBatchItemFailures {
		t.Fatalf("route table triggers of %s: %+v", deleter.Function, cfg.Triggers)
	}
	for _, e := range stores.All(local) {
		t.Run(e.Name, func(t *testing.T) {
			st, feed := e.OpenFeed(t)
			rec := &recording{Store: st}
			seed(t, rec, "brief", 3, 1, 6, 1)
			ctx, cancel := context.WithCancel(t.Context())
			defer cancel()
			crash := &crashing{Store: st}
			crash.n.Store(2)
			var calls atomic.Int64
			h := deleter.New(deleter.Service(crash), logging.Discard())
			entry := cloud.NewEntry(deleter.Function, func(ctx context.Context, ev events.DynamoDBEvent) (events.DynamoDBEventResponse, error) {
				if calls.Add(1) == 2 {
					crash.n.Store(1 << 30) // the process restarted
				}
				return h(ctx, ev)
			}, time.Duration(cfg.TimeoutSeconds)*time.Second)
			stream := &cloud.Stream{Entry: entry, Feed: feed, Trigger: cfg.Triggers[0], Log: logging.Discard(),
				Backoff: cloud.Backoff{Initial: 10 * time.Millisecond, Max: 50 * time.Millisecond}}
			var wg sync.WaitGroup
			wg.Go(func() { _ = stream.Run(ctx) })
			defer entry.Drain() // after the stream stops, before the store closes
			defer wg.Wait()
			defer cancel()
			s := world.New(st)
			if err := s.DeleteWorld(ctx, "brief", auth.KeyID(key(0))); err != nil {
				t.Fatal(err)
			}
			deadline := time.Now().Add(60 * time.Second)
			for {
				if _, err := st.Get(ctx, world.DeletionKey("brief")); errors.Is(err, store.ErrNotFound) {
					break
				}
				if time.Now().After(deadline) {
					t.Fatalf("the deletion did not finish (%d invocations)", calls.Load())
				}
				time.Sleep(20 * time.Millisecond)
			}
			gone(t, st, rec, "brief")
			if calls.Load() < 2 {
				t.Fatalf("%d invocations: the crashed one was not retried", calls.Load())
			}
		})
	}
}
