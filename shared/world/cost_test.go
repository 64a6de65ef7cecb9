package world_test

import (
	"context"
	"encoding/json"
	"fmt"
	"maps"
	"testing"
	"time"

	"github.com/a2awire/a2awire/shared/apierror"
	"github.com/a2awire/a2awire/shared/auth"
	"github.com/a2awire/a2awire/shared/registry"
	"github.com/a2awire/a2awire/shared/store"
	"github.com/a2awire/a2awire/shared/store/dynamo"
	"github.com/a2awire/a2awire/shared/store/dynamo/capacity"
	"github.com/a2awire/a2awire/shared/store/dynamo/dynamolocal"
	"github.com/a2awire/a2awire/shared/store/memory"
	"github.com/a2awire/a2awire/shared/store/storetest"
	"github.com/a2awire/a2awire/shared/world"
)

// costStep is one operation and what it may cost: DynamoDB calls by API
// name, and item-API calls {gets, queries, writes} on any engine.
type costStep struct {
	name  string
	run   func(ctx context.Context, s *world.Service, st store.Store) error
	calls map[string]int
	items [3]int64
}

func wantErr(kind apierror.Kind, err error) error {
	if apierror.KindOf(err) != kind {
		return fmt.Errorf("got %v, want %v", err, kind)
	}
	return nil
}

// costSteps run in order on one fresh table; docs/storage.md's cost table
// lists the same figures.
func costSteps() []costStep {
	a, b := auth.AWNID(key(1)), auth.AWNID(key(2))
	return []costStep{
		{"put world (create)", func(ctx context.Context, s *world.Service, _ store.Store) error {
			_, _, err := s.PutWorld(ctx, manifest("cost", "move"), key(0))
			return err
		}, map[string]int{"GetItem": 1, "TransactWriteItems": 1}, [3]int64{1, 0, 1}}, // the manifest, its listing items and the owner's index item
		{"put world (owner update)", func(ctx context.Context, s *world.Service, _ store.Store) error {
			_, _, err := s.PutWorld(ctx, manifest("cost", "move", "say"), key(0))
			return err
		}, map[string]int{"GetItem": 1, "TransactWriteItems": 1}, [3]int64{1, 0, 1}},
		{"put world (another key)", func(ctx context.Context, s *world.Service, _ store.Store) error {
			_, _, err := s.PutWorld(ctx, manifest("cost"), key(9))
			return wantErr(apierror.Forbidden, err)
		}, map[string]int{"GetItem": 1}, [3]int64{1, 0, 0}},
		{"get world", func(ctx context.Context, s *world.Service, _ store.Store) error {
			_, err := s.GetWorld(ctx, "cost")
			return err
		}, map[string]int{"GetItem": 1}, [3]int64{1, 0, 0}},
		{"join (new, registered key)", func(ctx context.Context, s *world.Service, _ store.Store) error {
			m, created, err := s.Join(ctx, "cost", key(1), json.RawMessage(`{"x":1}`))
			if err == nil && (!created || m.SubjectID != "cost-agent") {
				return fmt.Errorf("join: %+v created %v", m, created)
			}
			return err
		}, map[string]int{"GetItem": 3, "Query": 1, "TransactWriteItems": 1}, [3]int64{3, 1, 1}}, // member, key item, manifest, inbox; then one transaction
		{"join (new, unregistered key)", func(ctx context.Context, s *world.Service, _ store.Store) error {
			_, _, err := s.Join(ctx, "cost", key(2), nil)
			return err
		}, map[string]int{"GetItem": 3, "Query": 1, "TransactWriteItems": 1}, [3]int64{3, 1, 1}},
		{"join (already a member)", func(ctx context.Context, s *world.Service, _ store.Store) error {
			_, created, err := s.Join(ctx, "cost", key(1), nil)
			if err == nil && created {
				return fmt.Errorf("rejoin created")
			}
			return err
		}, map[string]int{"GetItem": 3, "Query": 1}, [3]int64{3, 1, 0}}, // read side by side before it is known
		{"join (unknown world)", func(ctx context.Context, s *world.Service, _ store.Store) error {
			_, _, err := s.Join(ctx, "nowhere", key(3), nil)
			return wantErr(apierror.NotFound, err)
		}, map[string]int{"GetItem": 3, "Query": 1}, [3]int64{3, 1, 0}},
		{"agents list", func(ctx context.Context, s *world.Service, _ store.Store) error {
			ms, err := s.Members(ctx, "cost")
			if err == nil && len(ms) != 2 {
				return fmt.Errorf("%d members", len(ms))
			}
			return err
		}, map[string]int{"Query": 1}, [3]int64{0, 1, 0}},
		{"member", func(ctx context.Context, s *world.Service, _ store.Store) error {
			_, err := s.Member(ctx, "cost", a)
			return err
		}, map[string]int{"GetItem": 1}, [3]int64{1, 0, 0}},
		{"member key (auth of member routes)", func(ctx context.Context, s *world.Service, _ store.Store) error {
			_, _, err := s.MemberKey(ctx, "cost", auth.KeyID(key(1)))
			return err
		}, map[string]int{"GetItem": 2}, [3]int64{2, 0, 0}},
		{"submit action", func(ctx context.Context, s *world.Service, _ store.Store) error {
			_, err := s.SubmitAction(ctx, "cost", a, "move", json.RawMessage(`{"to":"b2"}`))
			return err
		}, map[string]int{"GetItem": 1, "TransactWriteItems": 1}, [3]int64{1, 0, 1}},
		{"append event", func(ctx context.Context, s *world.Service, _ store.Store) error {
			return s.Append(ctx, world.Event{Type: world.MessageReceived, World: "cost", Data: json.RawMessage(`{}`), Visibility: world.Private, Recipient: a})
		}, map[string]int{"TransactWriteItems": 1}, [3]int64{0, 0, 1}},
		{"events", func(ctx context.Context, s *world.Service, _ store.Store) error {
			evs, err := s.Events(ctx, "cost", a, "", 0)
			if err == nil && len(evs) != 4 { // 2 joins, 1 action, 1 message
				return fmt.Errorf("%d events", len(evs))
			}
			return err
		}, map[string]int{"GetItem": 2, "Query": 2}, [3]int64{2, 2, 0}}, // the member (its join bounds agents events), the head
		{"events (a cursor from the future)", func(ctx context.Context, s *world.Service, _ store.Store) error {
			_, err := s.Events(ctx, "cost", a, world.CursorFloor(time.Now().Add(time.Hour)), 0)
			return wantErr(apierror.Invalid, err)
		}, map[string]int{}, [3]int64{0, 0, 0}},
		{"events long poll (events waiting)", func(ctx context.Context, s *world.Service, _ store.Store) error {
			_, err := s.WaitEvents(ctx, "cost", a, "", 0, 10*time.Second)
			return err
			// a's first poll: the member and its webhook, read beside
			// the head, show it not online, so the commit of
			// presence.changed (online) records the poll, with no steady
			// update tried first.
		}, map[string]int{"TransactWriteItems": 1, "GetItem": 3, "Query": 2}, [3]int64{3, 2, 1}},
		{"events poll at the head, wait 0 (mark + the head and the member read)", func(ctx context.Context, s *world.Service, st store.Store) error {
			if err := world.New(st, world.WithIDs(testIDs)).MarkPolled(ctx, "cost", b); err != nil { // st: not counted; b online
				return err
			}
			head, err := st.Get(ctx, world.EventHeadKey("cost"))
			if err != nil {
				return err
			}
			evs, err := s.WaitEvents(ctx, "cost", b, head.Str("last"), 0, 0)
			if err == nil && len(evs) != 0 {
				return fmt.Errorf("%d events past the head", len(evs))
			}
			return err
		}, map[string]int{"UpdateItem": 1, "GetItem": 3}, [3]int64{3, 0, 1}},
		{"mark polled", func(ctx context.Context, s *world.Service, _ store.Store) error {
			return s.MarkPolled(ctx, "cost", a)
		}, map[string]int{"UpdateItem": 1}, [3]int64{0, 0, 1}},
		{"reachable (ping)", func(ctx context.Context, s *world.Service, _ store.Store) error {
			ok, err := s.Reachable(ctx, "cost", a)
			if err == nil && !ok {
				return fmt.Errorf("not reachable")
			}
			return err
		}, map[string]int{"GetItem": 1}, [3]int64{1, 0, 0}},
		{"leave (3 inbox messages)", func(ctx context.Context, s *world.Service, st store.Store) error {
			var puts []store.Action
			for i := range 3 {
				puts = append(puts, store.Put(store.Key{PK: world.InboxPK("cost", b), SK: fmt.Sprintf("MSG#%d", i)}, store.Item{world.AttrType: store.S("message")}))
			}
			if _, err := st.Write(ctx, puts...); err != nil {
				return err
			}
			return s.Leave(ctx, "cost", b)
		}, map[string]int{"GetItem": 2, "TransactWriteItems": 1, "Query": 1}, [3]int64{2, 1, 1}}, // member, manifest, inbox; one transaction deletes the messages too
		{"leave (empty inbox)", func(ctx context.Context, s *world.Service, _ store.Store) error {
			return s.Leave(ctx, "cost", a)
		}, map[string]int{"GetItem": 2, "TransactWriteItems": 1, "Query": 1}, [3]int64{2, 1, 1}},
		{"leave (not a member)", func(ctx context.Context, s *world.Service, _ store.Store) error {
			return wantErr(apierror.NotJoined, s.Leave(ctx, "cost", a))
		}, map[string]int{"GetItem": 2, "Query": 1}, [3]int64{2, 1, 0}},
	}
}

// setUpCost registers key 1 as cost-agent and returns a service that looks
// subjects up in that registry.
func setUpCost(t *testing.T, st store.Store) *world.Service {
	t.Helper()
	reg := registry.New(st)
	if _, _, err := reg.Register(context.Background(), registry.Agent{Name: "cost-agent", Endpoint: "https://cost.example/invoke",
		Capabilities: []string{"chat"}, PublicKey: key(1)}); err != nil {
		t.Fatal(err)
	}
	return world.New(st, world.WithSubjects(reg), world.WithIDs(testIDs))
}

// TestCost pins the DynamoDB calls of every world operation on DynamoDB
// Local (measured by the capacity meter), and the item-API calls on the
// memory engine, so a regression that adds a call fails here.
func TestCost(t *testing.T) {
	t.Run("dynamo", func(t *testing.T) {
		m := capacity.New()
		client, table := dynamolocal.NewTable(t, local, m.Option())
		s := setUpCost(t, dynamo.New(client, table))
		// The steps' own writes go through an unmetered client.
		raw := dynamo.New(local.Client(), table)
		m.Take()
		ctx := context.Background()
		for _, c := range costSteps() {
			start := time.Now()
			if err := c.run(ctx, s, raw); err != nil {
				t.Fatalf("%s: %v", c.name, err)
			}
			took := time.Since(start)
			got := m.Take()
			t.Logf("%-40s %v %v", c.name, took.Round(time.Millisecond), got.Calls())
			if !maps.Equal(got.Calls(), c.calls) {
				t.Errorf("%s: DynamoDB calls %v, want %v", c.name, got.Calls(), c.calls)
			}
		}
	})
	t.Run("memory", func(t *testing.T) {
		st := memory.New()
		t.Cleanup(func() { _ = st.Close() })
		counted := &storetest.Counting{Store: st}
		s := setUpCost(t, counted)
		counted.Take()
		ctx := context.Background()
		for _, c := range costSteps() {
			if err := c.run(ctx, s, st); err != nil { // the step's own writes bypass the counter
				t.Fatalf("%s: %v", c.name, err)
			}
			if got := counted.Take(); got != c.items {
				t.Errorf("%s: item-API calls {gets, queries, writes} = %v, want %v", c.name, got, c.items)
			}
		}
	})
}

// TestLongPollCost: a long poll that waits reads its member beside the
// first check and makes 1 UpdateItem, then one check per PollInterval,
// each 1 GetItem of the head while it has not moved (no Query): a 1 s wait
// on the wait clock is 5 checks.
func TestLongPollCost(t *testing.T) {
	m := capacity.New()
	client, table := dynamolocal.NewTable(t, local, m.Option())
	st := dynamo.New(client, table)
	wc := newWaitClock()
	s := world.New(st, world.WithIDs(testIDs), world.WithWaitClock(wc))
	if _, _, err := s.PutWorld(context.Background(), manifest("lobby"), key(0)); err != nil {
		t.Fatal(err)
	}
	a := join(t, s, "lobby", 1)
	if err := s.MarkPolled(context.Background(), "lobby", a.AWNID); err != nil { // online: its next polls change nothing
		t.Fatal(err)
	}
	evs, err := s.Events(context.Background(), "lobby", a.AWNID, "", 0)
	if err != nil {
		t.Fatal(err)
	}
	m.Take()
	const wait = time.Second
	done := make(chan error, 1)
	go func() {
		got, err := s.WaitEvents(context.Background(), "lobby", a.AWNID, evs[len(evs)-1].ID, 0, wait)
		if err == nil && len(got) != 0 {
			err = fmt.Errorf("%d events", len(got))
		}
		done <- err
	}()
	start := wc.Now()
	if err := wc.runUntil(t, done); err != nil {
		t.Fatal(err)
	}
	calls := m.Take().Calls()
	t.Logf("waited %v on the wait clock: %v", wc.Now().Sub(start), calls)
	// The first check reads the member and its webhook beside the head
	// (markPolledRead); the four after it read the head alone.
	if want := map[string]int{"UpdateItem": 1, "GetItem": 7}; !maps.Equal(calls, want) {
		t.Fatalf("a %v long poll made %v; want %v", wait, calls, want)
	}
}
