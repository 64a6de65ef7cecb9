package world_test

import (
	"context"
	"crypto/ed25519"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/a2awire/a2awire/shared/apierror"
	"github.com/a2awire/a2awire/shared/auth"
	"github.com/a2awire/a2awire/shared/registry"
	"github.com/a2awire/a2awire/shared/store"
	"github.com/a2awire/a2awire/shared/store/dynamo/dynamolocal"
	"github.com/a2awire/a2awire/shared/store/memory"
	"github.com/a2awire/a2awire/shared/store/storetest/stores"
	"github.com/a2awire/a2awire/shared/world"
)

// local is the DynamoDB Local server of this package's tests.
var local *dynamolocal.Server

func TestMain(m *testing.M) {
	os.Exit(dynamolocal.Main(m, func(s *dynamolocal.Server) { local = s }))
}

// The registry is the production Subjects.
var _ world.Subjects = (*registry.Registry)(nil)

// key returns a deterministic Ed25519 public key numbered n.
func key(n int) ed25519.PublicKey {
	seed := make([]byte, ed25519.SeedSize)
	copy(seed, fmt.Sprintf("world-test-key-%d", n))
	return ed25519.NewKeyFromSeed(seed).Public().(ed25519.PublicKey)
}

// testIDs is the one id source of the services and events of these tests,
// so ids made by a test and by a service are ordered as one process's are.
var testIDs = world.NewIDs()

var t0 = time.Date(2026, 12, 1, 7, 0, 0, 0, time.UTC)

// clock is a settable clock.
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

func wantKind(t *testing.T, err error, kind apierror.Kind, words ...string) {
	t.Helper()
	if err == nil {
		t.Fatalf("no error, want %v", kind)
	}
	var e *apierror.Error
	if !errors.As(err, &e) {
		t.Fatalf("error %v is %T, not an *apierror.Error", err, err)
	}
	if e.Kind != kind {
		t.Fatalf("error %v has kind %v, want %v", err, e.Kind, kind)
	}
	for _, w := range words {
		if !strings.Contains(e.Message, w) {
			t.Fatalf("message %q does not name %q", e.Message, w)
		}
	}
}

// everyEngine runs f on memory, bolt and DynamoDB Local.
func everyEngine(t *testing.T, f func(t *testing.T, st store.Store)) {
	for _, e := range stores.All(local) {
		t.Run(e.Name, func(t *testing.T) { f(t, e.Open(t)) })
	}
}

func manifest(id string, actions ...string) world.Manifest {
	m := world.Manifest{ID: id, Description: "a test world", Category: "test"}
	for _, a := range actions {
		m.Actions = append(m.Actions, world.ActionSpec{Name: a, Description: "does " + a})
	}
	return m
}

// newWorld returns a service on st at clock c with world id created by key 0.
func newWorld(t *testing.T, st store.Store, c *clock, id string, actions ...string) *world.Service {
	t.Helper()
	s := world.New(st, world.WithClock(c.Now), world.WithIDs(testIDs))
	if _, created, err := s.PutWorld(context.Background(), manifest(id, actions...), key(0)); err != nil || !created {
		t.Fatalf("PutWorld %s: created %v, %v", id, created, err)
	}
	return s
}

func join(t *testing.T, s *world.Service, id string, n int) world.Member {
	t.Helper()
	m, _, err := s.Join(context.Background(), id, key(n), nil)
	if err != nil {
		t.Fatalf("join %d: %v", n, err)
	}
	return m
}

func TestManifestValidation(t *testing.T) {
	ctx := context.Background()
	s := world.New(memory.New())
	many := make([]world.ActionSpec, 65)
	for i := range many {
		many[i] = world.ActionSpec{Name: fmt.Sprintf("a%d", i)}
	}
	cases := []struct {
		name   string
		change func(m *world.Manifest)
		word   string
	}{
		{"empty id", func(m *world.Manifest) { m.ID = "" }, "world id"},
		{"upper-case id", func(m *world.Manifest) { m.ID = "Lobby" }, "world id"},
		{"id starting with -", func(m *world.Manifest) { m.ID = "-lobby" }, "world id"},
		{"64-char id", func(m *world.Manifest) { m.ID = strings.Repeat("a", 64) }, "world id"},
		{"id with #", func(m *world.Manifest) { m.ID = "a#b" }, "world id"},
		{"101-char name", func(m *world.Manifest) { m.Name = strings.Repeat("é", 101) }, "name"},
		{"invalid UTF-8 name", func(m *world.Manifest) { m.Name = "\xff" }, "name"},
		{"1025-char description", func(m *world.Manifest) { m.Description = strings.Repeat("d", 1025) }, "description"},
		{"65-char category", func(m *world.Manifest) { m.Category = strings.Repeat("c", 65) }, "category"},
		{"65 actions", func(m *world.Manifest) { m.Actions = many }, "actions"},
		{"bad action name", func(m *world.Manifest) { m.Actions = []world.ActionSpec{{Name: "Move"}} }, "action name"},
		{"empty action name", func(m *world.Manifest) { m.Actions = []world.ActionSpec{{Name: ""}} }, "action name"},
		{"65-char action name", func(m *world.Manifest) { m.Actions = []world.ActionSpec{{Name: strings.Repeat("m", 65)}} }, "action name"},
		{"duplicate action", func(m *world.Manifest) {
			m.Actions = []world.ActionSpec{{Name: "move"}, {Name: "say"}, {Name: "move"}}
		}, "distinct"},
		{"513-char action description", func(m *world.Manifest) {
			m.Actions = []world.ActionSpec{{Name: "move", Description: strings.Repeat("x", 513)}}
		}, "description of action"},
	}
	for _, c := range cases {
		m := manifest("valid", "move")
		c.change(&m)
		_, _, err := s.PutWorld(ctx, m, key(0))
		wantKind(t, err, apierror.Invalid, c.word)
		if _, err := s.GetWorld(ctx, "valid"); apierror.KindOf(err) != apierror.NotFound {
			t.Fatalf("%s: a refused manifest was stored (%v)", c.name, err)
		}
	}
	_, _, err := s.PutWorld(ctx, manifest("valid"), key(0)[:31])
	wantKind(t, err, apierror.Invalid, "publicKey")
	// The limits themselves are accepted.
	m := world.Manifest{ID: strings.Repeat("a", 63), Name: strings.Repeat("é", 100), Description: strings.Repeat("d", 1024),
		Category: strings.Repeat("c", 64), Actions: many[:64]}
	m.Actions[0] = world.ActionSpec{Name: "a.b_c-" + strings.Repeat("x", 58), Description: strings.Repeat("x", 512)}
	if _, created, err := s.PutWorld(ctx, m, key(0)); err != nil || !created {
		t.Fatalf("manifest at the limits: created %v, %v", created, err)
	}
}

func TestPutWorld(t *testing.T) {
	everyEngine(t, func(t *testing.T, st store.Store) {
		ctx := context.Background()
		c := &clock{now: t0}
		s := world.New(st, world.WithClock(c.Now))
		if _, err := s.GetWorld(ctx, "lobby"); apierror.KindOf(err) != apierror.NotFound {
			t.Fatalf("GetWorld before creation: %v, want NotFound", err)
		}
		got, created, err := s.PutWorld(ctx, world.Manifest{ID: "lobby", Actions: []world.ActionSpec{{Name: "move"}}}, key(0))
		if err != nil || !created {
			t.Fatalf("create: created %v, %v", created, err)
		}
		if got.Name != "lobby" || got.OwnerKeyID != auth.KeyID(key(0)) || !got.CreatedAt.Equal(t0) || got.Members != 0 {
			t.Fatalf("created manifest %+v", got)
		}
		join(t, s, "lobby", 1)
		c.Advance(time.Minute)
		got, created, err = s.PutWorld(ctx, world.Manifest{ID: "lobby", Name: "The Lobby", Description: "where agents meet", Category: "social"}, key(0))
		if err != nil || created {
			t.Fatalf("update: created %v, %v", created, err)
		}
		if got.Name != "The Lobby" || got.Description != "where agents meet" || got.Category != "social" || len(got.Actions) != 0 ||
			got.Members != 1 || !got.CreatedAt.Equal(t0) || !got.UpdatedAt.Equal(t0.Add(time.Minute)) {
			t.Fatalf("updated manifest %+v", got)
		}
		read, err := s.GetWorld(ctx, "lobby")
		if err != nil || read.Name != "The Lobby" || read.Members != 1 || !read.OwnerKey.Equal(key(0)) {
			t.Fatalf("GetWorld after update: %+v, %v", read, err)
		}
		// Clearing optional fields removes them.
		got, _, err = s.PutWorld(ctx, world.Manifest{ID: "lobby"}, key(0))
		if err != nil || got.Description != "" || got.Category != "" || got.Name != "lobby" {
			t.Fatalf("clearing update: %+v, %v", got, err)
		}
		_, _, err = s.PutWorld(ctx, world.Manifest{ID: "lobby", Name: "mine now"}, key(9))
		wantKind(t, err, apierror.Forbidden)
		if read, _ := s.GetWorld(ctx, "lobby"); read.Name != "lobby" {
			t.Fatalf("a forbidden update changed the name to %q", read.Name)
		}
	})
}

// TestPutWorldRace: of concurrent creations by two keys, one creates, the
// same key's others update, the other key is refused.
func TestPutWorldRace(t *testing.T) {
	s := world.New(memory.New())
	var wg sync.WaitGroup
	var mu sync.Mutex
	created, forbidden, updated := 0, 0, 0
	for i := range 10 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			_, c, err := s.PutWorld(context.Background(), manifest("race"), key(i%2))
			mu.Lock()
			defer mu.Unlock()
			switch {
			case err == nil && c:
				created++
			case err == nil:
				updated++
			case apierror.KindOf(err) == apierror.Forbidden:
				forbidden++
			default:
				t.Error(err)
			}
		}()
	}
	wg.Wait()
	if created != 1 || updated != 4 || forbidden != 5 {
		t.Fatalf("created %d updated %d forbidden %d, want 1, 4, 5", created, updated, forbidden)
	}
}

// fakeSubjects names key 1 "alice" and fails for key 66.
type fakeSubjects struct{}

func (fakeSubjects) NameForKey(_ context.Context, k ed25519.PublicKey) (string, error) {
	switch {
	case k.Equal(key(1)):
		return "alice", nil
	case k.Equal(key(66)):
		return "", errors.New("registry down")
	}
	return "", apierror.New(apierror.NotFound, "no agent")
}

// eventsOf returns every event of world visible to awnID.
func eventsOf(t *testing.T, s *world.Service, id, awnID string) []world.Event {
	t.Helper()
	evs, err := s.Events(context.Background(), id, awnID, "", world.MaxEventLimit)
	if err != nil {
		t.Fatal(err)
	}
	return evs
}

func TestJoin(t *testing.T) {
	everyEngine(t, func(t *testing.T, st store.Store) {
		ctx := context.Background()
		c := &clock{now: t0}
		s := world.New(st, world.WithClock(c.Now), world.WithSubjects(fakeSubjects{}))
		_, _, err := s.Join(ctx, "nowhere", key(1), nil)
		wantKind(t, err, apierror.NotFound, "nowhere")
		if _, _, err := s.PutWorld(ctx, manifest("lobby"), key(0)); err != nil {
			t.Fatal(err)
		}
		m, created, err := s.Join(ctx, "lobby", key(1), json.RawMessage(`{"role": "scout"}`))
		if err != nil || !created {
			t.Fatalf("join: created %v, %v", created, err)
		}
		if m.AWNID != auth.AWNID(key(1)) || m.KeyID != auth.KeyID(key(1)) || m.Slot != 1 || m.SubjectID != "alice" ||
			string(m.Metadata) != `{"role":"scout"}` || !m.JoinedAt.Equal(t0) || !m.PublicKey.Equal(key(1)) {
			t.Fatalf("member %+v", m)
		}
		c.Advance(time.Second)
		again, created, err := s.Join(ctx, "lobby", key(1), json.RawMessage(`{"role": "other"}`))
		if err != nil || created {
			t.Fatalf("rejoin: created %v, %v", created, err)
		}
		if again.Slot != 1 || !again.JoinedAt.Equal(t0) || string(again.Metadata) != `{"role":"scout"}` {
			t.Fatalf("rejoin changed the membership: %+v", again)
		}
		m2, created, err := s.Join(ctx, "lobby", key(2), json.RawMessage(`null`))
		if err != nil || !created || m2.Slot != 2 || m2.SubjectID != "" || m2.Metadata != nil {
			t.Fatalf("second join: %+v created %v, %v", m2, created, err)
		}
		_, _, err = s.Join(ctx, "lobby", key(66), nil)
		wantKind(t, err, apierror.Internal)
		if w, _ := s.GetWorld(ctx, "lobby"); w.Members != 2 {
			t.Fatalf("members = %d, want 2", w.Members)
		}
		evs := eventsOf(t, s, "lobby", m.AWNID)
		if len(evs) != 2 {
			t.Fatalf("events %v, want two agent.joined", evs)
		}
		for i, want := range []string{
			fmt.Sprintf(`{"awnId":%q,"slot":1,"subjectId":"alice"}`, m.AWNID),
			fmt.Sprintf(`{"awnId":%q,"slot":2,"subjectId":null}`, m2.AWNID),
		} {
			if e := evs[i]; e.Type != world.AgentJoined || e.Visibility != world.Public || string(e.Data) != want || e.World != "lobby" {
				t.Fatalf("event %d = %+v data %s, want agent.joined %s", i, e, e.Data, want)
			}
		}
	})
}

func TestJoinValidation(t *testing.T) {
	ctx := context.Background()
	s := newWorld(t, memory.New(), &clock{now: t0}, "lobby")
	for name, md := range map[string]string{
		"array":       `[1]`,
		"string":      `"x"`,
		"number":      `1`,
		"not JSON":    `{`,
		"over 4 KiB":  `{"x":"` + strings.Repeat("a", 4096) + `"}`,
		"trailing ws": `{} x`,
	} {
		_, _, err := s.Join(ctx, "lobby", key(1), json.RawMessage(md))
		if apierror.KindOf(err) != apierror.Invalid || !strings.Contains(err.Error(), "metadata") {
			t.Errorf("%s: %v, want Invalid naming metadata", name, err)
		}
	}
	_, _, err := s.Join(ctx, "lobby", key(1)[:16], nil)
	wantKind(t, err, apierror.Invalid, "publicKey")
	if ms, _ := s.Members(ctx, "lobby"); len(ms) != 0 {
		t.Fatalf("refused joins left members %v", ms)
	}
	// Exactly 4 KiB is accepted.
	md := `{"x":"` + strings.Repeat("a", 4096-8) + `"}`
	if _, _, err := s.Join(ctx, "lobby", key(1), json.RawMessage(md)); err != nil {
		t.Fatalf("4096-byte metadata: %v", err)
	}
}

// TestJoinWithRegistry joins with the registry as Subjects: a registered
// key's member carries its name, an unregistered one none.
func TestJoinWithRegistry(t *testing.T) {
	ctx := context.Background()
	st := memory.New()
	reg := registry.New(st)
	if _, _, err := reg.Register(ctx, registry.Agent{Name: "alice", Endpoint: "https://alice.example/invoke",
		Capabilities: []string{"chat"}, PublicKey: key(1)}); err != nil {
		t.Fatal(err)
	}
	s := world.New(st, world.WithSubjects(reg))
	if _, _, err := s.PutWorld(ctx, manifest("lobby"), key(0)); err != nil {
		t.Fatal(err)
	}
	if m := join(t, s, "lobby", 1); m.SubjectID != "alice" {
		t.Fatalf("registered key joined with subject %q", m.SubjectID)
	}
	if m := join(t, s, "lobby", 2); m.SubjectID != "" {
		t.Fatalf("unregistered key joined with subject %q", m.SubjectID)
	}
}

// TestConcurrentJoinsDistinctKeys: joins of distinct keys released at
// once each get a distinct slot, the count and the events match. 10 joins
// race for the count and the slots as 20 did (every one of them is in
// flight at once); the extra 10 only added conflicting rounds.
func TestConcurrentJoinsDistinctKeys(t *testing.T) {
	everyEngine(t, func(t *testing.T, st store.Store) {
		ctx := context.Background()
		s := newWorld(t, st, &clock{now: t0}, "lobby")
		const n = 10
		slots := make([]int64, n)
		var wg sync.WaitGroup
		gate := make(chan struct{})
		for i := range n {
			wg.Add(1)
			go func() {
				defer wg.Done()
				<-gate
				m, created, err := s.Join(ctx, "lobby", key(100+i), nil)
				if err != nil || !created {
					t.Errorf("join %d: created %v, %v", i, created, err)
				}
				slots[i] = m.Slot
			}()
		}
		close(gate)
		wg.Wait()
		sorted := slices.Sorted(slices.Values(slots))
		if len(slices.Compact(slices.Clone(sorted))) != n || sorted[0] < 1 {
			t.Fatalf("slots %v are not %d distinct positive slots", slots, n)
		}
		w, err := s.GetWorld(ctx, "lobby")
		if err != nil || w.Members != n {
			t.Fatalf("members = %d (%v), want %d", w.Members, err, n)
		}
		ms, err := s.Members(ctx, "lobby")
		if err != nil || len(ms) != n {
			t.Fatalf("Members: %d, %v", len(ms), err)
		}
		if evs := eventsOf(t, s, "lobby", ms[0].AWNID); len(evs) != n {
			t.Fatalf("%d agent.joined events, want %d", len(evs), n)
		}
	})
}

func TestConcurrentJoinsOneKey(t *testing.T) {
	everyEngine(t, func(t *testing.T, st store.Store) {
		ctx := context.Background()
		s := newWorld(t, st, &clock{now: t0}, "lobby")
		const n = 10
		got := make([]world.Member, n)
		var wg sync.WaitGroup
		var mu sync.Mutex
		created := 0
		gate := make(chan struct{})
		for i := range n {
			wg.Add(1)
			go func() {
				defer wg.Done()
				<-gate
				m, c, err := s.Join(ctx, "lobby", key(7), nil)
				if err != nil {
					t.Errorf("join %d: %v", i, err)
				}
				got[i] = m
				if c {
					mu.Lock()
					created++
					mu.Unlock()
				}
			}()
		}
		close(gate)
		wg.Wait()
		if created != 1 {
			t.Fatalf("%d joins reported creating the membership, want 1", created)
		}
		for i, m := range got {
			if m.Slot != got[0].Slot || m.AWNID != auth.AWNID(key(7)) {
				t.Fatalf("join %d returned %+v, join 0 %+v", i, m, got[0])
			}
		}
		w, err := s.GetWorld(ctx, "lobby")
		if err != nil || w.Members != 1 {
			t.Fatalf("members = %d (%v), want 1", w.Members, err)
		}
		if ms, err := s.Members(ctx, "lobby"); err != nil || len(ms) != 1 {
			t.Fatalf("Members = %v, %v", ms, err)
		}
		if evs := eventsOf(t, s, "lobby", got[0].AWNID); len(evs) != 1 {
			t.Fatalf("%d agent.joined events, want 1", len(evs))
		}
	})
}

func TestLeave(t *testing.T) {
	everyEngine(t, func(t *testing.T, st store.Store) {
		ctx := context.Background()
		s := newWorld(t, st, &clock{now: t0}, "lobby")
		a, b := join(t, s, "lobby", 1), join(t, s, "lobby", 2)
		// A webhook and 150 inbox messages (two pages of deletes), as
		// packages webhook and inbox store them; b's inbox is kept.
		acts := []store.Action{store.Put(world.WebhookKey("lobby", a.AWNID), store.Item{world.AttrType: store.S("webhook")})}
		if _, err := st.Write(ctx, acts...); err != nil {
			t.Fatal(err)
		}
		inbox := func(who string, n int) {
			var batch []store.Action
			for i := range n {
				batch = append(batch, store.Put(store.Key{PK: world.InboxPK("lobby", who), SK: fmt.Sprintf("MSG#%04d", i)},
					store.Item{world.AttrType: store.S("message")}))
				if len(batch) == store.MaxActions || i == n-1 {
					if _, err := st.Write(ctx, batch...); err != nil {
						t.Fatal(err)
					}
					batch = nil
				}
			}
		}
		inbox(a.AWNID, 150)
		inbox(b.AWNID, 3)
		if err := s.Leave(ctx, "lobby", a.AWNID); err != nil {
			t.Fatal(err)
		}
		if _, err := s.Member(ctx, "lobby", a.AWNID); apierror.KindOf(err) != apierror.NotFound {
			t.Fatalf("Member after leave: %v, want NotFound", err)
		}
		_, _, err := s.MemberKey(ctx, "lobby", a.KeyID)
		wantKind(t, err, apierror.NotJoined)
		if _, err := st.Get(ctx, world.WebhookKey("lobby", a.AWNID)); !errors.Is(err, store.ErrNotFound) {
			t.Fatalf("webhook item after leave: %v", err)
		}
		for who, want := range map[string]int{a.AWNID: 0, b.AWNID: 3} {
			p, err := st.Query(ctx, store.Query{PK: world.InboxPK("lobby", who)})
			if err != nil || len(p.Items) != want {
				t.Fatalf("inbox of %s: %d items (%v), want %d", who, len(p.Items), err, want)
			}
		}
		if w, _ := s.GetWorld(ctx, "lobby"); w.Members != 1 {
			t.Fatalf("members = %d, want 1", w.Members)
		}
		evs := eventsOf(t, s, "lobby", b.AWNID)
		last := evs[len(evs)-1]
		if last.Type != world.AgentLeft || last.Visibility != world.Public || string(last.Data) != fmt.Sprintf(`{"awnId":%q}`, a.AWNID) {
			t.Fatalf("last event %+v %s, want agent.left", last, last.Data)
		}
		wantKind(t, s.Leave(ctx, "lobby", a.AWNID), apierror.NotJoined)
		wantKind(t, s.Leave(ctx, "nowhere", a.AWNID), apierror.NotJoined)
		// Joining again is a new membership with a new slot.
		again, created, err := s.Join(ctx, "lobby", key(1), nil)
		if err != nil || !created || again.Slot != 3 {
			t.Fatalf("join after leave: %+v created %v, %v", again, created, err)
		}
		if w, _ := s.GetWorld(ctx, "lobby"); w.Members != 2 {
			t.Fatalf("members = %d, want 2", w.Members)
		}
	})
}

// TestConcurrentLeaves: of racing leaves of one member one succeeds and the
// count drops by one.
func TestConcurrentLeaves(t *testing.T) {
	everyEngine(t, func(t *testing.T, st store.Store) {
		ctx := context.Background()
		s := newWorld(t, st, &clock{now: t0}, "lobby")
		a := join(t, s, "lobby", 1)
		join(t, s, "lobby", 2)
		var wg sync.WaitGroup
		var mu sync.Mutex
		ok := 0
		for range 5 {
			wg.Add(1)
			go func() {
				defer wg.Done()
				err := s.Leave(ctx, "lobby", a.AWNID)
				if err != nil && apierror.KindOf(err) != apierror.NotJoined {
					t.Error(err)
				}
				if err == nil {
					mu.Lock()
					ok++
					mu.Unlock()
				}
			}()
		}
		wg.Wait()
		if w, _ := s.GetWorld(ctx, "lobby"); ok != 1 || w.Members != 1 {
			t.Fatalf("%d leaves succeeded, members = %d; want 1 and 1", ok, w.Members)
		}
	})
}

func awnIDs(ms []world.Member) []string {
	out := make([]string, len(ms))
	for i, m := range ms {
		out[i] = m.AWNID
	}
	return out
}

// TestAgentsListJoined is US-001's: three joined agents are listed, by slot.
func TestAgentsListJoined(t *testing.T) {
	everyEngine(t, func(t *testing.T, st store.Store) {
		ctx := context.Background()
		s := newWorld(t, st, &clock{now: t0}, "lobby")
		var want []string
		for _, n := range []int{3, 1, 2} {
			want = append(want, join(t, s, "lobby", n).AWNID)
		}
		ms, err := s.Members(ctx, "lobby")
		if err != nil {
			t.Fatal(err)
		}
		if !slices.Equal(awnIDs(ms), want) {
			t.Fatalf("members %v, want %v (by slot)", awnIDs(ms), want)
		}
		for i, m := range ms {
			if m.Slot != int64(i+1) {
				t.Fatalf("member %d has slot %d", i, m.Slot)
			}
		}
		_, err = s.Members(ctx, "nowhere")
		wantKind(t, err, apierror.NotFound)
		// An empty world lists no one, and is not NotFound.
		newWorld(t, st, &clock{now: t0}, "empty")
		if ms, err := s.Members(ctx, "empty"); err != nil || len(ms) != 0 {
			t.Fatalf("empty world: %v, %v", ms, err)
		}
	})
}

// TestAgentsListAfterLeave is US-001's: a member that left is not listed.
func TestAgentsListAfterLeave(t *testing.T) {
	everyEngine(t, func(t *testing.T, st store.Store) {
		ctx := context.Background()
		s := newWorld(t, st, &clock{now: t0}, "lobby")
		a, b, c := join(t, s, "lobby", 1), join(t, s, "lobby", 2), join(t, s, "lobby", 3)
		if err := s.Leave(ctx, "lobby", b.AWNID); err != nil {
			t.Fatal(err)
		}
		ms, err := s.Members(ctx, "lobby")
		if err != nil || !slices.Equal(awnIDs(ms), []string{a.AWNID, c.AWNID}) {
			t.Fatalf("members %v (%v), want %v", awnIDs(ms), err, []string{a.AWNID, c.AWNID})
		}
	})
}

// TestMemberKeyNotJoined: the lookup of member routes finds members only;
// anyone else is NotJoined (401 NOT_JOINED on the HTTP surface).
func TestMemberKeyNotJoined(t *testing.T) {
	everyEngine(t, func(t *testing.T, st store.Store) {
		ctx := context.Background()
		s := newWorld(t, st, &clock{now: t0}, "lobby")
		newWorld(t, st, &clock{now: t0}, "other")
		m := join(t, s, "lobby", 1)
		pub, awnID, err := s.MemberKey(ctx, "lobby", m.KeyID)
		if err != nil || !pub.Equal(key(1)) || awnID != m.AWNID {
			t.Fatalf("MemberKey = %x %q %v", pub, awnID, err)
		}
		for _, c := range []struct{ world, keyID string }{
			{"lobby", auth.KeyID(key(2))}, {"other", m.KeyID}, {"nowhere", m.KeyID}, {"lobby", ""}, {"NOT A WORLD", m.KeyID}, {"lobby", strings.Repeat("k", 2000)},
		} {
			_, _, err := s.MemberKey(ctx, c.world, c.keyID)
			wantKind(t, err, apierror.NotJoined)
		}
	})
}

// TestPingReachable is US-006's: a member that polled events within 30 s is
// reachable.
func TestPingReachable(t *testing.T) {
	everyEngine(t, func(t *testing.T, st store.Store) {
		ctx := context.Background()
		c := &clock{now: t0}
		s := newWorld(t, st, c, "lobby")
		target := join(t, s, "lobby", 2)
		if _, err := s.Events(ctx, "lobby", target.AWNID, "", 0); err != nil {
			t.Fatal(err)
		}
		if ok, err := s.Reachable(ctx, "lobby", target.AWNID); err != nil || ok {
			t.Fatalf("Events alone must not mark a poll: reachable %v, %v", ok, err)
		}
		if _, err := s.WaitEvents(ctx, "lobby", target.AWNID, "", 0, 0); err != nil {
			t.Fatal(err)
		}
		c.Advance(world.ReachableWithin)
		if ok, err := s.Reachable(ctx, "lobby", target.AWNID); err != nil || !ok {
			t.Fatalf("reachable %v, %v; want true 30 s after a poll", ok, err)
		}
		m, err := s.Member(ctx, "lobby", target.AWNID)
		if err != nil || !m.LastPollAt.Equal(t0) || world.Presence(m, c.Now()) != world.PresenceOnline {
			t.Fatalf("member %+v, %v", m, err)
		}
	})
}

// TestPingUnreachable is US-006's: a member that never polled, or last
// polled more than 30 s ago, is not reachable.
func TestPingUnreachable(t *testing.T) {
	everyEngine(t, func(t *testing.T, st store.Store) {
		ctx := context.Background()
		c := &clock{now: t0}
		s := newWorld(t, st, c, "lobby")
		target := join(t, s, "lobby", 2)
		if ok, err := s.Reachable(ctx, "lobby", target.AWNID); err != nil || ok {
			t.Fatalf("never polled: reachable %v, %v", ok, err)
		}
		if err := s.MarkPolled(ctx, "lobby", target.AWNID); err != nil {
			t.Fatal(err)
		}
		c.Advance(world.ReachableWithin + time.Millisecond)
		if ok, err := s.Reachable(ctx, "lobby", target.AWNID); err != nil || ok {
			t.Fatalf("polled 30.001 s ago: reachable %v, %v", ok, err)
		}
		m, _ := s.Member(ctx, "lobby", target.AWNID)
		if world.Presence(m, c.Now()) != world.PresenceOffline {
			t.Fatalf("presence %q, want offline", world.Presence(m, c.Now()))
		}
	})
}

// TestPingNonJoined is US-006's: pinging a key that is not a member is
// NotFound, and a non-member cannot mark a poll.
func TestPingNonJoined(t *testing.T) {
	everyEngine(t, func(t *testing.T, st store.Store) {
		ctx := context.Background()
		s := newWorld(t, st, &clock{now: t0}, "lobby")
		left := join(t, s, "lobby", 3)
		if err := s.Leave(ctx, "lobby", left.AWNID); err != nil {
			t.Fatal(err)
		}
		for _, target := range []string{auth.AWNID(key(9)), left.AWNID, "", "aw:sha256:" + strings.Repeat("0", 2000)} {
			_, err := s.Reachable(ctx, "lobby", target)
			wantKind(t, err, apierror.NotFound)
		}
		wantKind(t, s.MarkPolled(ctx, "lobby", auth.AWNID(key(9))), apierror.NotJoined)
		wantKind(t, s.MarkPolled(ctx, "lobby", strings.Repeat("a", 2000)), apierror.NotJoined)
		wantKind(t, s.Leave(ctx, "lobby", strings.Repeat("a", 2000)), apierror.NotJoined)
		_, err := s.Events(ctx, "lobby", strings.Repeat("a", 2000), "", 0)
		wantKind(t, err, apierror.NotJoined)
		_, err = s.SubmitAction(ctx, "lobby", "x", "move", nil)
		wantKind(t, err, apierror.NotJoined)
		if _, err := st.Get(ctx, world.MemberKey("lobby", auth.AWNID(key(9)))); !errors.Is(err, store.ErrNotFound) {
			t.Fatalf("MarkPolled of a non-member created an item: %v", err)
		}
	})
}

func TestPresence(t *testing.T) {
	m := world.Member{}
	if world.Presence(m, t0) != world.PresenceOffline {
		t.Fatal("a member that never polled is online")
	}
	m.LastPollAt = t0
	for d, want := range map[time.Duration]string{0: "online", 30 * time.Second: "online", 30*time.Second + 1: "offline", time.Hour: "offline"} {
		if got := world.Presence(m, t0.Add(d)); got != want {
			t.Errorf("presence %v after a poll = %q, want %q", d, got, want)
		}
	}
}
