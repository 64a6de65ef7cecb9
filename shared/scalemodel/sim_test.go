package scalemodel_test

import (
	"context"
	"crypto/ed25519"
	"encoding/json"
	"fmt"
	"io"
	"math"
	"net/http"
	"net/http/httptest"
	"os"
	"slices"
	"sort"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/aws/aws-lambda-go/events"

	"github.com/a2awire/a2awire/local/harness"
	"github.com/a2awire/a2awire/shared/auth"
	"github.com/a2awire/a2awire/shared/egress"
	"github.com/a2awire/a2awire/shared/logging"
	"github.com/a2awire/a2awire/shared/queue"
	"github.com/a2awire/a2awire/shared/routes"
	"github.com/a2awire/a2awire/shared/scalemodel"
	"github.com/a2awire/a2awire/shared/store"
	"github.com/a2awire/a2awire/shared/store/dynamo"
	"github.com/a2awire/a2awire/shared/store/dynamo/dynamolocal"
	"github.com/a2awire/a2awire/shared/webhook"
	"github.com/a2awire/a2awire/shared/world"
)

var local *dynamolocal.Server

func TestMain(m *testing.M) {
	os.Exit(dynamolocal.Main(m, func(s *dynamolocal.Server) { local = s }))
}

// meter counts the write units each successful Write spends per partition
// key, as DynamoDB on-demand bills items under 1 KB: a lone write is 1 unit,
// each action of a transaction (ConditionCheck included) 2. An action on an
// item in gsi1 (which projects every attribute) also writes the index: 1
// unit on its gsi1 partition when the item stays at its index key, 1 to
// delete the old entry and 1 to put the new one when the index key moves
// (an entry appearing or going is 1). The old item is read before the
// write for that, so the meter is for sequential use. Keys are named with
// names (concrete → pattern, e.g. "sim" → "<world>"); each pattern's
// concrete keys are counted too (keys), to show how a pattern spreads.
type meter struct {
	store.Store
	names []string // old, new pairs for strings.NewReplacer
	mu    sync.Mutex
	units map[string]float64
	keys  map[string]map[string]float64 // pattern → concrete key → units
}

// add counts u units on the concrete key k.
func (m *meter) add(r *strings.Replacer, k string, u float64) {
	p := r.Replace(k)
	m.units[p] += u
	if m.keys[p] == nil {
		m.keys[p] = map[string]float64{}
	}
	m.keys[p][k] += u
}

// indexKey is an item's gsi1 key ("" pk when it is not in the index).
type indexKey struct{ pk, sk string }

func (m *meter) Write(ctx context.Context, actions ...store.Action) ([]store.Item, error) {
	type move struct{ from, to indexKey }
	var moves []move
	for _, a := range actions {
		if a.Kind == store.CheckAction {
			continue
		}
		old, err := m.Store.Get(ctx, a.Key)
		if err != nil {
			old = store.Item{}
		}
		from := indexKey{old.Str(store.AttrGSI1PK), old.Str(store.AttrGSI1SK)}
		var to indexKey
		switch a.Kind {
		case store.PutAction:
			to = indexKey{a.Item.Str(store.AttrGSI1PK), a.Item.Str(store.AttrGSI1SK)}
		case store.UpdateAction:
			to = from
			if pk := a.Set.Str(store.AttrGSI1PK); pk != "" {
				to.pk = pk
			}
			if sk := a.Set.Str(store.AttrGSI1SK); sk != "" {
				to.sk = sk
			}
			if slices.Contains(a.Remove, store.AttrGSI1PK) || slices.Contains(a.Remove, store.AttrGSI1SK) {
				to = indexKey{}
			}
		}
		moves = append(moves, move{from, to})
	}
	res, err := m.Store.Write(ctx, actions...)
	if err != nil {
		return res, err
	}
	per := 1.0
	if len(actions) > 1 {
		per = 2
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	r := strings.NewReplacer(m.names...)
	for _, a := range actions {
		m.add(r, a.Key.PK, per)
	}
	for _, mv := range moves {
		switch {
		case mv.from.pk != "" && mv.from == mv.to:
			m.add(r, "gsi1:"+mv.to.pk, 1)
		default:
			if mv.from.pk != "" {
				m.add(r, "gsi1:"+mv.from.pk, 1)
			}
			if mv.to.pk != "" {
				m.add(r, "gsi1:"+mv.to.pk, 1)
			}
		}
	}
	return res, nil
}

// name adds a key name (concrete → pattern) while the meter counts.
func (m *meter) name(concrete, pattern string) {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.names = append([]string{concrete, pattern}, m.names...)
}

// take returns the units counted since the last take, per pattern and
// per concrete key of each pattern, and resets them.
func (m *meter) take() (map[string]float64, map[string]map[string]float64) {
	m.mu.Lock()
	defer m.mu.Unlock()
	u, k := m.units, m.keys
	m.units, m.keys = map[string]float64{}, map[string]map[string]float64{}
	return u, k
}

func privateKey(n int) ed25519.PrivateKey {
	seed := make([]byte, ed25519.SeedSize)
	copy(seed, fmt.Sprintf("scalemodel-key-%d", n))
	return ed25519.NewKeyFromSeed(seed)
}

func key(n int) ed25519.PublicKey { return privateKey(n).Public().(ed25519.PublicKey) }

// network serves the network's functions from the local harness over m
// (the API Gateway and Lambda path, each request's guard included: its
// nonce, rate-limit count and checks ride in the write's transaction) and
// returns its URL.
func network(t *testing.T, m *meter) string {
	t.Helper()
	h, err := harness.New(harness.Options{Log: logging.Discard(), Store: m, Feed: quiet{}})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = h.Close() })
	srv := httptest.NewServer(h)
	t.Cleanup(srv.Close)
	return srv.URL
}

// quiet is a change feed with no records: the simulations through the
// harness count the requests' own writes, and the stream's functions
// (the deleter; the dispatcher, which only reads for a world without
// webhooks) have nothing to do there. FanOut measures the dispatcher.
type quiet struct{}

func (quiet) Read(ctx context.Context, _ string, _ int) ([]events.DynamoDBEventRecord, error) {
	<-ctx.Done()
	return nil, ctx.Err()
}

func (quiet) Commit(context.Context, string, string) error { return nil }

// signedPost sends body to url signed by key n and returns the answer.
func signedPost(t *testing.T, url string, n int, body string) (int, []byte) {
	t.Helper()
	return signed(t, "POST", url, n, body)
}

// signedGet GETs url signed by key n and returns the answer.
func signedGet(t *testing.T, url string, n int) (int, []byte) {
	t.Helper()
	return signed(t, "GET", url, n, "")
}

// signed sends a request signed by key n and returns the answer.
func signed(t *testing.T, method, url string, n int, body string) (int, []byte) {
	t.Helper()
	signer, err := auth.NewSigner(privateKey(n))
	if err != nil {
		t.Fatal(err)
	}
	c := &http.Client{Transport: &auth.Transport{Signer: signer}}
	req, err := http.NewRequestWithContext(t.Context(), method, url, strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	if body != "" {
		req.Header.Set("Content-Type", "application/json")
	}
	resp, err := c.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	return resp.StatusCode, b
}

// post sends body to url signed by key n, and fails the test unless it
// answers 2xx.
func post(t *testing.T, url string, n int, body string) {
	t.Helper()
	if st, b := signedPost(t, url, n, body); st/100 != 2 {
		t.Fatalf("POST %s: %d %s", url, st, b)
	}
}

// postID posts an action, or a message, as post does and returns its
// actionId, or messageId, answered 202.
func postID(t *testing.T, url string, n int, body string) string {
	t.Helper()
	st, b := signedPost(t, url, n, body)
	var out struct {
		Data struct {
			ActionID  string `json:"actionId"`
			MessageID string `json:"messageId"`
		} `json:"data"`
	}
	if st != http.StatusAccepted || json.Unmarshal(b, &out) != nil || out.Data.ActionID+out.Data.MessageID == "" {
		t.Fatalf("POST %s: %d %s; want 202 and the queued write's id", url, st, b)
	}
	return out.Data.ActionID + out.Data.MessageID
}

// batchingHarness serves the network's functions over m with in-process
// queues, so a test hands the queued writes to world-commit itself.
func batchingHarness(t *testing.T, m *meter) (*harness.Harness, queue.Queue, string) {
	t.Helper()
	queues := harness.NewQueues(nil)
	h, err := harness.New(harness.Options{Log: logging.Discard(), Store: m, Feed: quiet{}, Queues: queues})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = h.Close() })
	srv := httptest.NewServer(h)
	t.Cleanup(srv.Close)
	return h, queues[routes.ActionQueue], srv.URL
}

// commitQueued receives the want messages waiting on q and hands them to
// world-commit in one invocation, as Lambda's event source mapping does
// with a batch it gathered, then deletes them (every one must commit).
func commitQueued(t *testing.T, h *harness.Harness, q queue.Queue, want int) {
	t.Helper()
	ctx := t.Context()
	var got []queue.Received
	for len(got) < want {
		msgs, err := q.Receive(ctx, queue.MaxBatch, time.Second)
		if err != nil || len(msgs) == 0 {
			t.Fatalf("received %d of %d queued actions: %v", len(got), want, err)
		}
		got = append(got, msgs...)
	}
	ev := events.SQSEvent{}
	for _, r := range got {
		ev.Records = append(ev.Records, events.SQSMessage{MessageId: r.ID, ReceiptHandle: r.Receipt, Body: r.Body,
			Attributes: map[string]string{"ApproximateReceiveCount": "1"}})
	}
	payload, err := json.Marshal(ev)
	if err != nil {
		t.Fatal(err)
	}
	out, err := h.Entry("world-commit").Invoke(ctx, payload)
	if err != nil {
		t.Fatal(err)
	}
	var resp events.SQSEventResponse
	if err := json.Unmarshal(out, &resp); err != nil || len(resp.BatchItemFailures) > 0 {
		t.Fatalf("world-commit answered %s (%v): every action should commit", out, err)
	}
	for _, r := range got {
		if err := q.Delete(ctx, r.Receipt); err != nil {
			t.Fatal(err)
		}
	}
}

// actions posts ops actions to world sim through url, from members keys
// 1…members in turn (each well under its rate limit).
func actions(t *testing.T, url string, members, ops int) {
	t.Helper()
	for i := range ops {
		post(t, url+"/v0/worlds/sim/actions", 1+i%members, fmt.Sprintf(`{"action":"move","params":{"n":%d}}`, i))
	}
}

// TestSimulationMatchesModel runs each workload of the model at a
// scaled-down count, one operation after another, through the domain
// code on DynamoDB Local, counts the write units per partition key, and
// checks the model: each key the model names gets its units per operation
// (within 5 %: a commit that found the head ahead writes again, a real
// cost), a key the model spreads over partitions is spread over as many
// as the simulation has (its shards, or one a webhook) with none taking
// more than 1.25 times an even share, and no key the model leaves out
// gets more than a tenth of the hottest key's units. The counts are logged next to the model's for
// docs/scale.md. Rates are not simulated: units per operation times the
// rate is the load, and that product is the model's arithmetic.
func TestSimulationMatchesModel(t *testing.T) {
	const n = 50
	// Joined an hour before the events' clock, so the world's event head
	// never runs ahead of an event's id: a commit writes once.
	before := func() time.Time { return time.Now().Add(-time.Hour) }
	bob := auth.AWNID(key(2))
	// The sharded world's events: shard 0 is the world's events partition,
	// the others have a suffix; all 16 are one pattern.
	var shardNames []string
	for i := scalemodel.EventShards - 1; i >= 1; i-- { // #s15 before #s1
		shardNames = append(shardNames, world.EventShardPK("sim", i), "EVENTS#<world>#s<n>")
	}
	shardNames = append(shardNames, world.EventShardPK("sim", 0), "EVENTS#<world>#s<n>")
	// agents names the awnIds of keys from..to-1 as, so that their
	// partitions are one pattern (AWN#<awnId>, AWN#<from>).
	agents := func(from, to int, as string) []string {
		var out []string
		for i := from; i < to; i++ {
			out = append(out, auth.AWNID(key(i)), as)
		}
		return out
	}
	sims := []struct {
		w   scalemodel.Workload
		run func(t *testing.T, m *meter) int // sets up, m.take()s, runs; returns operations
		// names are this simulation's own key names, before the shared ones.
		names []string
		// hashed are keys spread by a hash of a random id (an event's),
		// not of a name the simulation chose: their even share is a
		// binomial's mean, and the hottest is held to 5 standard
		// deviations above it.
		hashed map[string]bool
		// actors is, for a key spread over the agents acting (their own
		// partitions), how many the simulation has: fewer than its
		// operations.
		actors map[string]float64
	}{
		{scalemodel.WorldEvents(), func(t *testing.T, m *meter) int {
			const members = 25 // 2 actions each
			s := world.New(m, world.WithClock(before))
			create(t, s, "sim")
			for i := range members {
				join(t, s, "sim", key(1+i))
			}
			url := network(t, m)
			actions(t, url, members, members) // each key's first request on the instance
			m.take()
			actions(t, url, members, n)
			return n
		}, agents(1, 26, "<awnId>"), nil, map[string]float64{"AWN#<awnId>": 25, "RATE#<world>#<awnId>": 25}},
		{scalemodel.ShardedWorldEvents(), func(t *testing.T, m *meter) int {
			// 240 events over 16 shards: 15 a shard on average, so none
			// is left empty by chance (p ≈ 3e-6) and the spread shows.
			const events = 240
			const members = 30 // 8 actions each
			s := world.New(m, world.WithClock(before))
			spec := world.Manifest{ID: "sim", Description: "a simulated world", EventShards: scalemodel.EventShards,
				Actions: []world.ActionSpec{{Name: "move", Description: "moves"}}}
			if _, _, err := s.PutWorld(t.Context(), spec, key(0)); err != nil {
				t.Fatal(err)
			}
			for i := range members {
				join(t, s, "sim", key(1+i))
			}
			url := network(t, m)
			// Each key's first request on the instance; the instance
			// learns the shards from the head on the first.
			actions(t, url, members, members)
			m.take()
			actions(t, url, members, events)
			return events
		}, append(shardNames, agents(1, 31, "<awnId>")...), map[string]bool{"EVENTS#<world>#s<n>": true}, map[string]float64{"AWN#<awnId>": 30, "RATE#<world>#<awnId>": 30}},
		{scalemodel.BatchedWorldEvents(), func(t *testing.T, m *meter) int {
			// 99 members, 3 rounds of one action each, every round one
			// batch of the committer (99 distinct members: 3 full
			// transactions), so 297 events over 16 shards.
			const members, rounds = 99, 3
			s := world.New(m, world.WithClock(before))
			spec := world.Manifest{ID: "sim", Description: "a simulated world", EventShards: scalemodel.EventShards, BatchActions: true,
				Actions: []world.ActionSpec{{Name: "move", Description: "moves"}}}
			if _, _, err := s.PutWorld(t.Context(), spec, key(0)); err != nil {
				t.Fatal(err)
			}
			for i := range members {
				join(t, s, "sim", key(1+i))
			}
			h, q, url := batchingHarness(t, m)
			round := func(i int) {
				t.Helper()
				for j := range members {
					id := postID(t, url+"/v0/worlds/sim/actions", 1+j, fmt.Sprintf(`{"action":"move","params":{"n":%d}}`, i*members+j))
					m.name(world.ActionMarkerKey("sim", id).PK, "ACTIONDONE#<world>#<actionId>")
				}
				commitQueued(t, h, q, members)
			}
			round(-1) // each key's first request on the instance
			m.take()
			for i := range rounds {
				round(i)
			}
			return members * rounds
		}, append(shardNames, agents(1, 100, "<awnId>")...), map[string]bool{"EVENTS#<world>#s<n>": true}, map[string]float64{"AWN#<awnId>": 99, "RATE#<world>#<awnId>": 99}},
		{scalemodel.InboxMessages(), func(t *testing.T, m *meter) int {
			// Many senders to one recipient (bob, key 2): 25 senders, 2
			// messages each.
			const senders = 25
			s := world.New(m, world.WithClock(before))
			create(t, s, "sim")
			join(t, s, "sim", key(2))
			for i := range senders {
				join(t, s, "sim", key(10+i))
			}
			url := network(t, m)
			for i := range senders { // each key's first request on the instance
				post(t, url+"/v0/worlds/sim/messages", 10+i, fmt.Sprintf(`{"to":%q,"content":{"n":-1}}`, bob))
			}
			m.take()
			for i := range n {
				post(t, url+"/v0/worlds/sim/messages", 10+i%senders, fmt.Sprintf(`{"to":%q,"content":{"n":%d}}`, bob, i))
			}
			return n
		}, agents(10, 35, "<from>"), nil, map[string]float64{"AWN#<from>": 25, "RATE#<world>#<from>": 25}},
		{scalemodel.BatchedInboxMessages(), func(t *testing.T, m *meter) int {
			// 96 senders to one recipient (bob, key 2), 2 rounds of one
			// message each, every round one batch of the committer (96
			// distinct senders: 4 full transactions) and then one
			// consuming read of bob's (its deletes, one transaction), so
			// 192 messages over the recipient's 8 shards of each
			// partition.
			const senders, rounds = 96, 2
			s := world.New(m, world.WithClock(before))
			spec := world.Manifest{ID: "sim", Description: "a simulated world", EventShards: scalemodel.InboxShards, BatchMessages: true}
			if _, _, err := s.PutWorld(t.Context(), spec, key(0)); err != nil {
				t.Fatal(err)
			}
			join(t, s, "sim", key(2))
			for i := range senders {
				join(t, s, "sim", key(10+i))
			}
			h, q, url := batchingHarness(t, m)
			round := func(r int) {
				t.Helper()
				for j := range senders {
					id := postID(t, url+"/v0/worlds/sim/messages", 10+j, fmt.Sprintf(`{"to":%q,"content":{"n":%d}}`, bob, r*senders+j))
					m.name(world.ActionMarkerKey("sim", id).PK, "ACTIONDONE#<world>#<messageId>")
				}
				commitQueued(t, h, q, senders)
				st, b := signedGet(t, url+"/v0/worlds/sim/messages?limit=100", 2)
				var read struct {
					Data struct {
						Count int `json:"count"`
					} `json:"data"`
				}
				if st != http.StatusOK || json.Unmarshal(b, &read) != nil || read.Data.Count != senders {
					t.Fatalf("bob's read: %d %s; want the %d messages of the round", st, b, senders)
				}
			}
			round(-1) // each key's first request on the instance
			m.take()
			for r := range rounds {
				round(r)
			}
			return senders * rounds
		}, append(recipientShards(bob), agents(10, 106, "<from>")...),
			map[string]bool{"INBOX#<world>#<to>#s<n>": true, "EVENTS#<world>#<to>#s<n>": true},
			map[string]float64{"AWN#<from>": 96, "RATE#<world>#<from>": 96}},
		{scalemodel.FanOut(), func(t *testing.T, m *meter) int {
			ctx := t.Context()
			var got sync.WaitGroup
			got.Add(n)
			srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				w.WriteHeader(http.StatusNoContent)
				got.Done()
			}))
			defer srv.Close()
			d, err := webhook.NewDispatcher(webhook.Config{Store: m, Client: egress.NewClient(egress.Options{AllowLoopback: true, AllowHTTP: true})})
			if err != nil {
				t.Fatal(err)
			}
			got.Add(n) // the warm-up event's deliveries
			for i := range n {
				id := fmt.Sprintf("aw:r%03d", i)
				if _, err := m.Write(ctx, world.BareMembership("sim", id)...); err != nil {
					t.Fatal(err)
				}
				if _, err := d.Store().Set(ctx, "sim", id, fmt.Sprintf("%s/r/%d", srv.URL, i)); err != nil {
					t.Fatal(err)
				}
			}
			ids := world.NewIDs()
			log := world.NewLog(m, ids, nil)
			var evs []world.Event
			for range 2 {
				ev, err := ids.NewEvent("sim", world.PresenceChanged, world.Public, "", map[string]any{"sim": true}, time.Now())
				if err != nil {
					t.Fatal(err)
				}
				if ev, err = log.Commit(ctx, ev); err != nil {
					t.Fatal(err)
				}
				evs = append(evs, ev)
			}
			// A warm-up event: each webhook's first answer is written on
			// its webhook item too (it changes whether it answered); the
			// model is the steady state after it.
			if err := d.Dispatch(ctx, evs[0]); err != nil {
				t.Fatal(err)
			}
			m.take()
			if err := d.Dispatch(ctx, evs[1]); err != nil {
				t.Fatal(err)
			}
			got.Wait()
			return n // deliveries
		}, nil, nil, nil},
		{scalemodel.RegistryJoins(), func(t *testing.T, m *meter) int {
			const worlds = n // one join each, hashed over the listing's shards
			s := world.New(m)
			for w := range worlds {
				if _, _, err := s.PutWorld(t.Context(), world.Manifest{ID: fmt.Sprintf("reg%d", w), Description: "a simulated world"}, key(0)); err != nil {
					t.Fatal(err)
				}
			}
			m.take()
			for i := range n {
				join(t, s, fmt.Sprintf("reg%d", i%worlds), key(10+i))
			}
			return n
		}, nil, nil, nil},
	}
	for _, sim := range sims {
		t.Run(sim.w.Name, func(t *testing.T) {
			// Each simulation has its own table, meter and harness: they
			// run side by side, each waiting on DynamoDB Local's answers.
			t.Parallel()
			client, table := dynamolocal.NewTable(t, local)
			names := append(slices.Clone(sim.names), "sim", "<world>", bob, "<to>")
			for i := range n {
				names = append(names, fmt.Sprintf("aw:r%03d", i), "<awnId>")
			}
			for i := range scalemodel.ListingShards {
				names = append(names, fmt.Sprintf("#*#%d", i), "#*#<n>")
			}
			m := &meter{Store: dynamo.New(client, table), names: names, units: map[string]float64{}, keys: map[string]map[string]float64{}}
			ops := float64(sim.run(t, m))
			got, keys := m.take()
			hottest := 0.0
			for k, want := range sim.w.Units {
				per := got[k] / ops
				t.Logf("%-26s simulated %6.0f units / %3.0f ops = %.2f per op; model %.2f", k, got[k], ops, per, want)
				if math.Abs(per-want) > 0.05*want {
					t.Errorf("%s: %.2f units per operation, the model says %.2f", k, per, want)
				}
				if spread := sim.w.Spread[k]; spread > 1 {
					// Spread over as many partitions as the simulation
					// has (its shards, or its webhooks), evenly.
					parts, top := 0.0, 0.0
					for _, u := range keys[k] {
						parts++
						top = max(top, u)
					}
					t.Logf("%-26s spread over %.0f partitions, the hottest %.0f units (%.0f%%); model: over %.0f", k, parts, top, 100*top/got[k], spread)
					even := got[k] / parts
					bound := 1.25 * even
					if sim.hashed[k] {
						// ops operations, each on one of parts at random:
						// the binomial's standard deviation, in units.
						sd := math.Sqrt(ops*(1/parts)*(1-1/parts)) * want
						bound = max(bound, even+5*sd)
					}
					want := min(spread, ops)
					if a := sim.actors[k]; a > 0 {
						want = min(spread, a)
					}
					if parts != want || top > bound {
						t.Errorf("%s: %.0f partitions, the hottest with %.0f of %.0f units; want %.0f, none over %.0f (an even share %.1f)", k, parts, top, got[k], want, bound, even)
					}
				}
				hottest = max(hottest, got[k])
			}
			var others []string
			for k := range got {
				if _, ok := sim.w.Units[k]; !ok {
					others = append(others, k)
				}
			}
			sort.Strings(others)
			left := 0.0
			for _, k := range others {
				left += got[k]
				// The registry's joins write their own world's and agent's
				// partitions too: those spread over 100,000 worlds and their
				// agents, so only gsi1 keys are held to the model there.
				if sim.w.Name == scalemodel.RegistryJoins().Name && !strings.HasPrefix(k, "gsi1:") {
					continue
				}
				if got[k] > hottest/100 && len(others) <= 20 {
					t.Logf("%-26s simulated %6.0f units (left out of the model)", k, got[k])
				}
				if got[k] > hottest/10 {
					t.Errorf("%s: %.0f units, more than a tenth of the model's hottest key (%.0f), and the model leaves it out", k, got[k], hottest)
				}
			}
			t.Logf("%d other keys, %.0f units in all", len(others), left)
			for _, l := range sim.w.Loads() {
				t.Logf("at %.0f/s: %-26s %8.1f units/s a partition, %.3g× a partition's %d", sim.w.Rate, l.Key, l.Units, l.Over, scalemodel.PartitionWriteUnits)
			}
		})
	}
}

// recipientShards names the shards of to's inbox and private events in
// world sim (of InboxShards), the suffixed ones before shard 0, which is
// a prefix of each.
func recipientShards(to string) []string {
	var out []string
	for i := scalemodel.InboxShards - 1; i >= 0; i-- {
		out = append(out, world.ShardPK(world.InboxPK("sim", to), i), "INBOX#<world>#<to>#s<n>",
			world.ShardPK(world.PrivateEventsPK("sim", to), i), "EVENTS#<world>#<to>#s<n>")
	}
	return out
}

func create(t *testing.T, s *world.Service, id string) {
	t.Helper()
	m := world.Manifest{ID: id, Description: "a simulated world", Actions: []world.ActionSpec{{Name: "move", Description: "moves"}}}
	if _, _, err := s.PutWorld(t.Context(), m, key(0)); err != nil {
		t.Fatal(err)
	}
}

func join(t *testing.T, s *world.Service, id string, keys ...ed25519.PublicKey) {
	t.Helper()
	for _, k := range keys {
		if _, _, err := s.Join(t.Context(), id, k, nil); err != nil {
			t.Fatalf("join %s: %v", id, err)
		}
	}
}
