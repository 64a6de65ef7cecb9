package webhook_test

import (
	"context"
	"crypto/ed25519"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"strings"
	"sync"
	"testing"
	"time"

	standardwebhooks "github.com/standard-webhooks/standard-webhooks/libraries/go"

	"github.com/a2awire/a2awire/shared/apierror"
	"github.com/a2awire/a2awire/shared/egress"
	"github.com/a2awire/a2awire/shared/store"
	"github.com/a2awire/a2awire/shared/store/dynamo/dynamolocal"
	"github.com/a2awire/a2awire/shared/store/storetest/stores"
	"github.com/a2awire/a2awire/shared/webhook"
	"github.com/a2awire/a2awire/shared/webhook/delivery"
	"github.com/a2awire/a2awire/shared/webhook/signature"
	"github.com/a2awire/a2awire/shared/world"
)

// local is the DynamoDB Local server of this package's tests.
var local *dynamolocal.Server

func TestMain(m *testing.M) {
	os.Exit(dynamolocal.Main(m, func(s *dynamolocal.Server) { local = s }))
}

var t0 = time.Date(2026, 12, 1, 12, 0, 0, 0, time.UTC)

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

func networkKey() ed25519.PrivateKey {
	return ed25519.NewKeyFromSeed([]byte("webhook-test-network-key-seed-32"))
}

// got is one request a receiver got.
type got struct {
	header http.Header
	body   []byte
	at     time.Time
}

// receiver is a webhook endpoint on 127.0.0.1 that records what it gets
// and answers with what answer says.
type receiver struct {
	*httptest.Server
	reqs chan got
	mu   sync.Mutex
	// answer writes the reply; nil is 204.
	answer func(w http.ResponseWriter, r *http.Request)
}

func newReceiver(t *testing.T) *receiver {
	t.Helper()
	rc := &receiver{reqs: make(chan got, 100)}
	rc.Server = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		b, _ := io.ReadAll(r.Body)
		rc.reqs <- got{header: r.Header.Clone(), body: b, at: time.Now()}
		rc.mu.Lock()
		a := rc.answer
		rc.mu.Unlock()
		if a == nil {
			w.WriteHeader(http.StatusNoContent)
			return
		}
		a(w, r)
	}))
	t.Cleanup(rc.Close)
	return rc
}

func (rc *receiver) setAnswer(a func(w http.ResponseWriter, r *http.Request)) {
	rc.mu.Lock()
	defer rc.mu.Unlock()
	rc.answer = a
}

func status(code int) func(http.ResponseWriter, *http.Request) {
	return func(w http.ResponseWriter, _ *http.Request) { w.WriteHeader(code) }
}

// next waits up to d for the receiver's next request.
func (rc *receiver) next(t *testing.T, d time.Duration) got {
	t.Helper()
	select {
	case g := <-rc.reqs:
		return g
	case <-time.After(d):
		t.Fatalf("receiver %s got nothing within %v", rc.URL, d)
		return got{}
	}
}

// none asserts the receiver got nothing (more).
func (rc *receiver) none(t *testing.T) {
	t.Helper()
	select {
	case g := <-rc.reqs:
		t.Fatalf("receiver %s got an unexpected request: %s", rc.URL, g.body)
	default:
	}
}

// localClient may reach receivers on this machine, as the harness's does.
func localClient() *http.Client {
	return egress.NewClient(egress.Options{AllowLoopback: true, AllowHTTP: true, Timeout: delivery.AttemptTimeout})
}

// fixedJitter lengthens every wait by the full Jitter, so due times are
// known exactly.
func fixedJitter() float64 { return 1 }

func newDispatcher(t *testing.T, st store.Store, c *clock, actions webhook.ActionSubmitter) *webhook.Dispatcher {
	t.Helper()
	cfg := webhook.Config{Store: st, Client: localClient(), NetworkKey: networkKey(), Actions: actions, Jitter: fixedJitter}
	if c != nil {
		cfg.Now = c.Now
	}
	d, err := webhook.NewDispatcher(cfg)
	if err != nil {
		t.Fatal(err)
	}
	return d
}

var ids = world.NewIDs()

func event(t *testing.T, worldID, typ string, vis world.Visibility, recipient string, data any, at time.Time) world.Event {
	t.Helper()
	e, err := ids.NewEvent(worldID, typ, vis, recipient, data, at)
	if err != nil {
		t.Fatal(err)
	}
	return e
}

func wantKind(t *testing.T, err error, kind apierror.Kind) {
	t.Helper()
	if err == nil || apierror.KindOf(err) != kind {
		t.Fatalf("error %v, want kind %v", err, kind)
	}
}

// memberSetter sets webhooks of agents it first makes members of their
// world (a member item, as a join writes it): Set requires one.
type memberSetter struct {
	t  testing.TB
	st store.Store
	s  *webhook.Store
}

func asMember(t testing.TB, st store.Store, s *webhook.Store) memberSetter {
	return memberSetter{t: t, st: st, s: s}
}

func (m memberSetter) Set(ctx context.Context, worldID, awnID, url string) (string, error) {
	m.t.Helper()
	addMember(m.t, m.st, worldID, awnID)
	return m.s.Set(ctx, worldID, awnID, url)
}

// addMember writes awnID's member item in worldID.
func addMember(t testing.TB, st store.Store, worldID, awnID string) {
	t.Helper()
	if _, err := st.Write(context.Background(), world.BareMembership(worldID, awnID)...); err != nil {
		t.Fatal(err)
	}
}

// everyEngine runs f on memory, bolt and DynamoDB Local.
func everyEngine(t *testing.T, f func(t *testing.T, st store.Store)) {
	for _, e := range stores.All(local) {
		t.Run(e.Name, func(t *testing.T) { f(t, e.Open(t)) })
	}
}

func TestSetShowRemove(t *testing.T) {
	everyEngine(t, func(t *testing.T, st store.Store) {
		c := &clock{now: t0}
		s := webhook.NewStore(st, webhook.WithClock(c.Now))
		ctx := t.Context()
		if _, err := s.Show(ctx, "w1", "aw:a"); err == nil {
			t.Fatal("show before set found a webhook")
		} else {
			wantKind(t, err, apierror.NotFound)
		}
		secret, err := asMember(t, st, s).Set(ctx, "w1", "aw:a", "https://a.example/hook")
		if err != nil {
			t.Fatal(err)
		}
		key, err := signature.ParseSecret(secret)
		if err != nil || !strings.HasPrefix(secret, "whsec_") || len(key) != 32 {
			t.Fatalf("secret %q: %d bytes, %v", secret, len(key), err)
		}
		v, err := s.Show(ctx, "w1", "aw:a")
		if err != nil {
			t.Fatal(err)
		}
		if v.URL != "https://a.example/hook" || !v.Enabled || !v.CreatedAt.Equal(t0) || v.Stats != (webhook.Stats{}) {
			t.Fatalf("view %+v", v)
		}
		if b, _ := json.Marshal(v); strings.Contains(string(b), secret) || strings.Contains(string(b), "secret") {
			t.Fatalf("the view shows the secret: %s", b)
		}
		again, err := asMember(t, st, s).Set(ctx, "w1", "aw:a", "https://b.example/hook")
		if err != nil || again == secret {
			t.Fatalf("second set: %q, %v (want a fresh secret)", again, err)
		}
		if w, _ := s.Get(ctx, "w1", "aw:a"); w.URL != "https://b.example/hook" || w.Secret != again {
			t.Fatalf("after replace: %+v", w)
		}
		// Another world's webhook of the same agent is its own.
		if _, err := s.Show(ctx, "w2", "aw:a"); apierror.KindOf(err) != apierror.NotFound {
			t.Fatalf("w2: %v", err)
		}
		if err := s.Remove(ctx, "w1", "aw:a"); err != nil {
			t.Fatal(err)
		}
		wantKind(t, s.Remove(ctx, "w1", "aw:a"), apierror.NotFound)
		_, err = s.Show(ctx, "w1", "aw:a")
		wantKind(t, err, apierror.NotFound)
		_, err = s.Replay(ctx, "w1", "aw:a", t0)
		wantKind(t, err, apierror.NotFound)
	})
}

// TestDeliverySigned: a public event reaches a receiver on 127.0.0.1 with
// the network's headers; the official Standard Webhooks library verifies
// it with the secret PUT returned, v1a verifies with the network's public
// key, and the stats count it.
func TestDeliverySigned(t *testing.T) {
	everyEngine(t, func(t *testing.T, st store.Store) {
		ctx := t.Context()
		d := newDispatcher(t, st, nil, nil)
		rc := newReceiver(t)
		secret, err := asMember(t, st, d.Store()).Set(ctx, "lobby", "aw:a", rc.URL+"/hook")
		if err != nil {
			t.Fatal(err)
		}
		e := event(t, "lobby", world.AgentJoined, world.Public, "", map[string]any{"awnId": "aw:b", "slot": 2}, time.Now())
		if err := d.Dispatch(ctx, e); err != nil {
			t.Fatal(err)
		}
		g := rc.next(t, time.Second)
		if g.header.Get("X-AWN-World-Id") != "lobby" || g.header.Get("X-AWN-Event-Id") != e.ID || g.header.Get("webhook-id") != e.ID {
			t.Fatalf("headers %v", g.header)
		}
		wh, err := standardwebhooks.NewWebhook(secret)
		if err != nil {
			t.Fatal(err)
		}
		if err := wh.Verify(g.body, g.header); err != nil {
			t.Fatalf("the official library refuses the delivery: %v", err)
		}
		if err := signature.VerifyV1a(g.header, g.body, networkKey().Public().(ed25519.PublicKey), 0); err != nil {
			t.Fatalf("v1a: %v", err)
		}
		if sigs := strings.Fields(g.header.Get("webhook-signature")); len(sigs) != 2 || !strings.HasPrefix(sigs[0], "v1,") || !strings.HasPrefix(sigs[1], "v1a,") {
			t.Fatalf("webhook-signature %q, want v1 and v1a", g.header.Get("webhook-signature"))
		}
		var body struct {
			WorldID, EventID, Event, Timestamp string
			Payload                            map[string]any
		}
		if err := json.Unmarshal(g.body, &body); err != nil || body.WorldID != "lobby" || body.EventID != e.ID || body.Event != world.AgentJoined || body.Payload["awnId"] != "aw:b" {
			t.Fatalf("body %s: %v", g.body, err)
		}
		v, err := d.Store().Show(ctx, "lobby", "aw:a")
		if err != nil || v.Stats.Delivered != 1 || v.Stats.Failed != 0 || v.Stats.LastSuccessAt == nil {
			t.Fatalf("stats %+v, %v", v.Stats, err)
		}
	})
}

// TestRecipientsByVisibility: a private event goes to its recipient's
// webhook only; public and agents events to every enabled webhook of the
// world and none of another world's.
func TestRecipientsByVisibility(t *testing.T) {
	everyEngine(t, func(t *testing.T, st store.Store) {
		ctx := t.Context()
		d := newDispatcher(t, st, nil, nil)
		rs := map[string]*receiver{}
		for _, a := range []string{"aw:a", "aw:b", "aw:c"} {
			rs[a] = newReceiver(t)
			if _, err := asMember(t, st, d.Store()).Set(ctx, "w", a, rs[a].URL); err != nil {
				t.Fatal(err)
			}
		}
		other := newReceiver(t)
		if _, err := asMember(t, st, d.Store()).Set(ctx, "w-other", "aw:a", other.URL); err != nil {
			t.Fatal(err)
		}
		priv := event(t, "w", world.MessageReceived, world.Private, "aw:b", map[string]any{"from": "aw:a"}, time.Now())
		if err := d.Dispatch(ctx, priv); err != nil {
			t.Fatal(err)
		}
		if g := rs["aw:b"].next(t, time.Second); !strings.Contains(string(g.body), priv.ID) {
			t.Fatalf("aw:b got %s", g.body)
		}
		for _, vis := range []world.Visibility{world.Public, world.Agents} {
			e := event(t, "w", world.PresenceChanged, vis, "", map[string]any{}, time.Now())
			if err := d.Dispatch(ctx, e); err != nil {
				t.Fatal(err)
			}
			for a, rc := range rs {
				if g := rc.next(t, time.Second); !strings.Contains(string(g.body), e.ID) {
					t.Fatalf("%s %s: got %s", vis, a, g.body)
				}
			}
		}
		rs["aw:a"].none(t)
		rs["aw:c"].none(t)
		other.none(t)
		// A removed webhook gets nothing more.
		if err := d.Store().Remove(ctx, "w", "aw:c"); err != nil {
			t.Fatal(err)
		}
		if err := d.Dispatch(ctx, event(t, "w", world.AgentLeft, world.Public, "", map[string]any{}, time.Now())); err != nil {
			t.Fatal(err)
		}
		rs["aw:a"].next(t, time.Second)
		rs["aw:b"].next(t, time.Second)
		rs["aw:c"].none(t)
	})
}

// TestSlowReceiverDoesNotDelayOthers: a receiver that sleeps 8 s does not
// hold up another receiver of the same event; its own attempt ends at the
// 5 s timeout and is scheduled for retry.
func TestSlowReceiverDoesNotDelayOthers(t *testing.T) {
	st := stores.Memory().Open(t)
	ctx := t.Context()
	c := &clock{now: t0}
	d := newDispatcher(t, st, c, nil)
	slow, fast := newReceiver(t), newReceiver(t)
	release := make(chan struct{})
	t.Cleanup(func() { close(release) })
	slow.setAnswer(func(w http.ResponseWriter, r *http.Request) {
		select {
		case <-time.After(8 * time.Second):
		case <-r.Context().Done():
		case <-release:
		}
		w.WriteHeader(http.StatusNoContent)
	})
	for a, rc := range map[string]*receiver{"aw:slow": slow, "aw:fast": fast} {
		if _, err := asMember(t, st, d.Store()).Set(ctx, "w", a, rc.URL); err != nil {
			t.Fatal(err)
		}
	}
	e := event(t, "w", world.PresenceChanged, world.Public, "", map[string]any{}, time.Now())
	start := time.Now()
	done := make(chan error, 1)
	go func() { done <- d.Dispatch(ctx, e) }()
	fast.next(t, time.Second)
	if el := time.Since(start); el > time.Second {
		t.Fatalf("the fast receiver waited %v", el)
	}
	slow.next(t, time.Second)
	select {
	case err := <-done:
		if err != nil {
			t.Fatal(err)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("dispatch did not end after the 5 s attempt timeout")
	}
	v, _ := d.Store().Show(ctx, "w", "aw:slow")
	if v.Stats.Failed != 1 || !strings.Contains(v.Stats.LastError, "no answer within 5s") {
		t.Fatalf("slow stats %+v", v.Stats)
	}
	due, err := d.Store().Due(ctx, t0.Add(time.Hour), 10)
	if err != nil || len(due) != 1 || due[0].Recipient != "aw:slow" || due[0].Attempts != 1 {
		t.Fatalf("due %+v, %v", due, err)
	}
}

// TestRetryScheduleDeadLetterReplay walks a failing receiver through the
// whole schedule with an injected clock: each retry comes due exactly at
// its wait (full jitter here), not a moment before, is signed afresh, and
// after the last the delivery is dead-lettered; replay sends it again.
func TestRetryScheduleDeadLetterReplay(t *testing.T) {
	everyEngine(t, func(t *testing.T, st store.Store) {
		ctx := t.Context()
		c := &clock{now: t0}
		d := newDispatcher(t, st, c, nil)
		rc := newReceiver(t)
		rc.setAnswer(status(http.StatusInternalServerError))
		if _, err := asMember(t, st, d.Store()).Set(ctx, "w", "aw:a", rc.URL); err != nil {
			t.Fatal(err)
		}
		e := event(t, "w", world.PresenceChanged, world.Public, "", map[string]any{"n": 1}, t0)
		if err := d.Dispatch(ctx, e); err != nil {
			t.Fatal(err)
		}
		stamps := map[string]bool{rc.next(t, time.Second).header.Get("webhook-timestamp"): true}
		for i, w := range webhook.Waits {
			wait := w + time.Duration(float64(w)*webhook.Jitter)
			c.Advance(wait - time.Second)
			if rep, err := d.RunRetries(ctx); err != nil || rep.Sent != 0 {
				t.Fatalf("retry %d a second early: %+v, %v", i+1, rep, err)
			}
			c.Advance(time.Second)
			rep, err := d.RunRetries(ctx)
			if err != nil || rep.Sent != 1 {
				t.Fatalf("retry %d at its due time: %+v, %v", i+1, rep, err)
			}
			g := rc.next(t, time.Second)
			if g.header.Get("webhook-id") != e.ID {
				t.Fatalf("retry %d is of %q", i+1, g.header.Get("webhook-id"))
			}
			ts := g.header.Get("webhook-timestamp")
			if ts != fmt.Sprint(c.Now().Unix()) || stamps[ts] {
				t.Fatalf("retry %d signed at %s (clock %d, earlier %v)", i+1, ts, c.Now().Unix(), stamps)
			}
			stamps[ts] = true
		}
		c.Advance(48 * time.Hour)
		if rep, err := d.RunRetries(ctx); err != nil || rep.Due != 0 {
			t.Fatalf("after the last retry: %+v, %v", rep, err)
		}
		rc.none(t)
		v, _ := d.Store().Show(ctx, "w", "aw:a")
		if v.Stats.Failed != int64(webhook.MaxAttempts) || v.Stats.DeadLettered != 1 || v.Stats.Delivered != 0 || v.Stats.LastError != "the receiver answered 500" {
			t.Fatalf("stats %+v", v.Stats)
		}
		dls, err := d.Store().DeadLetters(ctx, "w", "aw:a", t0)
		if err != nil || len(dls) != 1 || dls[0].Event.ID != e.ID || dls[0].Attempts != webhook.MaxAttempts || dls[0].LastError != "the receiver answered 500" {
			t.Fatalf("dead letters %+v, %v", dls, err)
		}
		// Replay since after the event finds nothing; since before it, the
		// dead letter is scheduled now and sent by the next run.
		if n, err := d.Store().Replay(ctx, "w", "aw:a", t0.Add(time.Minute)); err != nil || n != 0 {
			t.Fatalf("replay since later: %d, %v", n, err)
		}
		rc.setAnswer(nil)
		if n, err := d.Store().Replay(ctx, "w", "aw:a", t0.Add(-time.Minute)); err != nil || n != 1 {
			t.Fatalf("replay: %d, %v", n, err)
		}
		if rep, err := d.RunRetries(ctx); err != nil || rep.Sent != 1 {
			t.Fatalf("run after replay: %+v, %v", rep, err)
		}
		if g := rc.next(t, time.Second); g.header.Get("webhook-id") != e.ID {
			t.Fatalf("replayed %q", g.header.Get("webhook-id"))
		}
		if dls, _ := d.Store().DeadLetters(ctx, "w", "aw:a", t0.Add(-time.Hour)); len(dls) != 0 {
			t.Fatalf("dead letters after replay: %+v", dls)
		}
		if rep, _ := d.RunRetries(ctx); rep.Due != 0 {
			t.Fatalf("a delivered replay is still due: %+v", rep)
		}
		v, _ = d.Store().Show(ctx, "w", "aw:a")
		if v.Stats.Delivered != 1 {
			t.Fatalf("stats after replay %+v", v.Stats)
		}
	})
}

// TestRetryAfterHonoured: a 503 with Retry-After of an hour is not retried
// after the schedule's 5 s but after the hour.
func TestRetryAfterHonoured(t *testing.T) {
	st := stores.Memory().Open(t)
	ctx := t.Context()
	c := &clock{now: t0}
	d := newDispatcher(t, st, c, nil)
	rc := newReceiver(t)
	rc.setAnswer(func(w http.ResponseWriter, _ *http.Request) {
		w.Header().Set("Retry-After", "3600")
		w.WriteHeader(http.StatusServiceUnavailable)
	})
	if _, err := asMember(t, st, d.Store()).Set(ctx, "w", "aw:a", rc.URL); err != nil {
		t.Fatal(err)
	}
	if err := d.Dispatch(ctx, event(t, "w", world.PresenceChanged, world.Public, "", map[string]any{}, t0)); err != nil {
		t.Fatal(err)
	}
	rc.next(t, time.Second)
	c.Advance(time.Hour - time.Second)
	if rep, _ := d.RunRetries(ctx); rep.Sent != 0 {
		t.Fatalf("retried before Retry-After: %+v", rep)
	}
	c.Advance(time.Second)
	if rep, _ := d.RunRetries(ctx); rep.Sent != 1 {
		t.Fatalf("not retried at Retry-After: %+v", rep)
	}
	rc.next(t, time.Second)
}

// TestGoneDisables: a 410 disables the webhook (no retry, no later
// deliveries) and keeps the delivery as a dead letter; setting the webhook
// again enables it.
func TestGoneDisables(t *testing.T) {
	everyEngine(t, func(t *testing.T, st store.Store) {
		ctx := t.Context()
		c := &clock{now: t0}
		d := newDispatcher(t, st, c, nil)
		rc := newReceiver(t)
		rc.setAnswer(status(http.StatusGone))
		if _, err := asMember(t, st, d.Store()).Set(ctx, "w", "aw:a", rc.URL); err != nil {
			t.Fatal(err)
		}
		e := event(t, "w", world.PresenceChanged, world.Public, "", map[string]any{}, t0)
		if err := d.Dispatch(ctx, e); err != nil {
			t.Fatal(err)
		}
		rc.next(t, time.Second)
		v, _ := d.Store().Show(ctx, "w", "aw:a")
		if v.Enabled || !strings.Contains(v.DisabledReason, "410") || v.Stats.DeadLettered != 1 {
			t.Fatalf("after 410: %+v", v)
		}
		c.Advance(48 * time.Hour)
		if rep, _ := d.RunRetries(ctx); rep.Due != 0 {
			t.Fatalf("a 410 was scheduled for retry: %+v", rep)
		}
		if err := d.Dispatch(ctx, event(t, "w", world.PresenceChanged, world.Public, "", map[string]any{}, t0)); err != nil {
			t.Fatal(err)
		}
		if ok, _, err := d.Probe(ctx, "w", "aw:a"); ok || err != nil {
			t.Fatalf("probe of a disabled webhook: %v, %v", ok, err)
		}
		rc.none(t)
		if dls, _ := d.Store().DeadLetters(ctx, "w", "aw:a", t0.Add(-time.Minute)); len(dls) != 1 || dls[0].Event.ID != e.ID {
			t.Fatalf("dead letters %+v", dls)
		}
		rc.setAnswer(nil)
		if _, err := asMember(t, st, d.Store()).Set(ctx, "w", "aw:a", rc.URL); err != nil {
			t.Fatal(err)
		}
		if n, err := d.Store().Replay(ctx, "w", "aw:a", t0.Add(-time.Minute)); err != nil || n != 1 {
			t.Fatalf("replay: %d, %v", n, err)
		}
		if rep, _ := d.RunRetries(ctx); rep.Sent != 1 {
			t.Fatalf("run after replay: %+v", rep)
		}
		rc.next(t, time.Second)
	})
}

// TestRetryOfRemovedWebhookDropped: a retry whose webhook was removed is
// dropped, not sent and not dead-lettered.
func TestRetryOfRemovedWebhookDropped(t *testing.T) {
	st := stores.Memory().Open(t)
	ctx := t.Context()
	c := &clock{now: t0}
	d := newDispatcher(t, st, c, nil)
	rc := newReceiver(t)
	rc.setAnswer(status(http.StatusBadGateway))
	if _, err := asMember(t, st, d.Store()).Set(ctx, "w", "aw:a", rc.URL); err != nil {
		t.Fatal(err)
	}
	if err := d.Dispatch(ctx, event(t, "w", world.PresenceChanged, world.Public, "", map[string]any{}, t0)); err != nil {
		t.Fatal(err)
	}
	rc.next(t, time.Second)
	if err := d.Store().Remove(ctx, "w", "aw:a"); err != nil {
		t.Fatal(err)
	}
	c.Advance(time.Minute)
	if rep, err := d.RunRetries(ctx); err != nil || rep.Due != 1 || rep.Sent != 0 {
		t.Fatalf("run: %+v, %v", rep, err)
	}
	if rep, _ := d.RunRetries(ctx); rep.Due != 0 {
		t.Fatalf("the dropped retry is still due: %+v", rep)
	}
	rc.none(t)
	if dls, _ := d.Store().DeadLetters(ctx, "w", "aw:a", t0.Add(-time.Hour)); len(dls) != 0 {
		t.Fatalf("dead letters %+v", dls)
	}
}

// TestConcurrentRetryRunsSendOnce: eight workers running the schedule at
// once send a due retry exactly once (the claim is a conditional write).
func TestConcurrentRetryRunsSendOnce(t *testing.T) {
	everyEngine(t, func(t *testing.T, st store.Store) {
		ctx := t.Context()
		c := &clock{now: t0}
		d := newDispatcher(t, st, c, nil)
		rc := newReceiver(t)
		rc.setAnswer(status(http.StatusInternalServerError))
		if _, err := asMember(t, st, d.Store()).Set(ctx, "w", "aw:a", rc.URL); err != nil {
			t.Fatal(err)
		}
		for range 5 {
			if err := d.Dispatch(ctx, event(t, "w", world.PresenceChanged, world.Public, "", map[string]any{}, t0)); err != nil {
				t.Fatal(err)
			}
			rc.next(t, time.Second)
		}
		rc.setAnswer(nil)
		c.Advance(time.Minute)
		var wg sync.WaitGroup
		var mu sync.Mutex
		sent := 0
		for range 8 {
			wg.Go(func() {
				rep, err := d.RunRetries(ctx)
				if err != nil {
					t.Error(err)
				}
				mu.Lock()
				sent += rep.Sent
				mu.Unlock()
			})
		}
		wg.Wait()
		if sent != 5 {
			t.Fatalf("8 concurrent runs sent %d retries, want 5", sent)
		}
		for range 5 {
			rc.next(t, time.Second)
		}
		rc.none(t)
	})
}

// submitter stands in for the world service: it appends the action as
// the agents-visible action.submitted event it would write.
type submitter struct {
	st  store.Store
	mu  sync.Mutex
	got []string
}

func (s *submitter) ForwardAction(ctx context.Context, worldID, awnID, action string, params json.RawMessage) (string, error) {
	if action == "refused" {
		return "", apierror.New(apierror.Invalid, "action is not one of the world's actions")
	}
	s.mu.Lock()
	s.got = append(s.got, awnID+" "+action+" "+string(params))
	s.mu.Unlock()
	e, err := ids.NewEvent(worldID, world.ActionSubmitted, world.Agents, "", map[string]any{"actionId": "x", "awnId": awnID, "action": action, "params": params, "via": world.ViaWebhook}, time.Now())
	if err != nil {
		return "", err
	}
	_, err = s.st.Write(ctx, world.EventPut(e))
	return e.ID, err
}

// TestActionForwarded: a 2xx {"action","params"} answer is submitted as the
// receiver's agent's action; the world's events then hold action.submitted
// from that agent. Its answer to its own action.submitted is not
// forwarded again (no loop); a refused action costs the delivery nothing.
func TestActionForwarded(t *testing.T) {
	everyEngine(t, func(t *testing.T, st store.Store) {
		ctx := t.Context()
		sub := &submitter{st: st}
		d := newDispatcher(t, st, nil, sub)
		rc := newReceiver(t)
		rc.setAnswer(func(w http.ResponseWriter, _ *http.Request) {
			w.Header().Set("Content-Type", "application/json")
			_, _ = io.WriteString(w, `{"action":"move","params":{"to":"north"}}`)
		})
		if _, err := asMember(t, st, d.Store()).Set(ctx, "w", "aw:a", rc.URL); err != nil {
			t.Fatal(err)
		}
		if err := d.Dispatch(ctx, event(t, "w", world.AgentJoined, world.Public, "", map[string]any{"awnId": "aw:b"}, time.Now())); err != nil {
			t.Fatal(err)
		}
		rc.next(t, time.Second)
		p, err := st.Query(ctx, store.Query{PK: world.SharedEventsPK("w")})
		if err != nil || len(p.Items) != 1 {
			t.Fatalf("events %d, %v", len(p.Items), err)
		}
		ev, err := world.DecodeEvent(p.Items[0])
		if err != nil || ev.Type != world.ActionSubmitted || !strings.Contains(string(ev.Data), `"awnId":"aw:a"`) || !strings.Contains(string(ev.Data), `"north"`) {
			t.Fatalf("event %+v, %v", ev, err)
		}
		// The agent's own action.submitted reaches it; its answer is not
		// forwarded again.
		if err := d.Dispatch(ctx, ev); err != nil {
			t.Fatal(err)
		}
		rc.next(t, time.Second)
		sub.mu.Lock()
		n := len(sub.got)
		sub.mu.Unlock()
		if n != 1 {
			t.Fatalf("forwarded %d actions, want 1: %v", n, sub.got)
		}
		rc.setAnswer(func(w http.ResponseWriter, _ *http.Request) { _, _ = io.WriteString(w, `{"action":"refused"}`) })
		if err := d.Dispatch(ctx, event(t, "w", world.AgentJoined, world.Public, "", map[string]any{}, time.Now())); err != nil {
			t.Fatal(err)
		}
		rc.next(t, time.Second)
		if v, _ := d.Store().Show(ctx, "w", "aw:a"); v.Stats.Delivered != 3 || v.Stats.Failed != 0 {
			t.Fatalf("stats %+v", v.Stats)
		}
	})
}

// TestSSRFRefusedInCloudMode: with the cloud-mode client (the Lambda's),
// a webhook pointing at loopback, private, shared, link-local or metadata
// addresses is never dialled; the attempt fails with a reason the owner
// can read, and is scheduled for retry like any failure.
func TestSSRFRefusedInCloudMode(t *testing.T) {
	st := stores.Memory().Open(t)
	ctx := t.Context()
	d, err := webhook.NewDispatcher(webhook.Config{Store: st, NetworkKey: networkKey()})
	if err != nil {
		t.Fatal(err)
	}
	rc := newReceiver(t)
	port := rc.URL[strings.LastIndex(rc.URL, ":"):]
	urls := []string{
		"https://127.0.0.1" + port, "https://[::1]" + port, "https://10.0.0.1/", "https://100.64.0.1/",
		"https://169.254.169.254/latest/meta-data", "https://[fd00:ec2::254]/", "https://[::ffff:127.0.0.1]" + port,
		"https://192.168.1.1/", "https://172.16.0.1/", "https://[fd00::1]/", "https://localhost" + port,
	}
	for i, u := range urls {
		if _, err := asMember(t, st, d.Store()).Set(ctx, "w", fmt.Sprintf("aw:%02d", i), u); err != nil {
			t.Fatal(err)
		}
	}
	// And the plain http receiver itself: cloud mode sends https only.
	if _, err := asMember(t, st, d.Store()).Set(ctx, "w", "aw:http", rc.URL); err != nil {
		t.Fatal(err)
	}
	if err := d.Dispatch(ctx, event(t, "w", world.PresenceChanged, world.Public, "", map[string]any{}, time.Now())); err != nil {
		t.Fatal(err)
	}
	rc.none(t)
	for i, u := range urls {
		v, _ := d.Store().Show(ctx, "w", fmt.Sprintf("aw:%02d", i))
		if v.Stats.Delivered != 0 || v.Stats.Failed != 1 || v.Stats.LastError != "the URL resolves to an address webhooks may not reach" {
			t.Errorf("%s: stats %+v", u, v.Stats)
		}
	}
	if v, _ := d.Store().Show(ctx, "w", "aw:http"); v.Stats.Failed != 1 || v.Stats.Delivered != 0 {
		t.Errorf("http: stats %+v", v.Stats)
	}
}

// TestProbe: a ping probe is reachable when the webhook answers 2xx within
// 2 s (latency measured), not when it is slower, answers an error, or there
// is no webhook. Probes keep no stats.
func TestProbe(t *testing.T) {
	st := stores.Memory().Open(t)
	ctx := t.Context()
	d := newDispatcher(t, st, nil, nil)
	fast, slow, failing := newReceiver(t), newReceiver(t), newReceiver(t)
	slow.setAnswer(func(w http.ResponseWriter, r *http.Request) {
		select {
		case <-time.After(10 * time.Second):
		case <-r.Context().Done():
		}
	})
	failing.setAnswer(status(http.StatusInternalServerError))
	for a, rc := range map[string]*receiver{"aw:fast": fast, "aw:slow": slow, "aw:failing": failing} {
		if _, err := asMember(t, st, d.Store()).Set(ctx, "w", a, rc.URL); err != nil {
			t.Fatal(err)
		}
	}
	ok, lat, err := d.Probe(ctx, "w", "aw:fast")
	if err != nil || !ok || lat <= 0 || lat > webhook.ProbeTimeout {
		t.Fatalf("fast: %v %v %v", ok, lat, err)
	}
	g := fast.next(t, time.Second)
	var body struct{ Event, WorldID string }
	if json.Unmarshal(g.body, &body) != nil || body.Event != world.PingProbe || body.WorldID != "w" {
		t.Fatalf("probe body %s", g.body)
	}
	start := time.Now()
	if ok, _, err := d.Probe(ctx, "w", "aw:slow"); ok || err != nil {
		t.Fatalf("slow: %v %v", ok, err)
	}
	// The receiver would answer after 10 s: a probe back well before that
	// was cut at ProbeTimeout (the slack is for a loaded machine).
	if el := time.Since(start); el < webhook.ProbeTimeout || el > webhook.ProbeTimeout+4*time.Second {
		t.Fatalf("slow probe took %v, want about %v", el, webhook.ProbeTimeout)
	}
	if ok, _, err := d.Probe(ctx, "w", "aw:failing"); ok || err != nil {
		t.Fatalf("failing: %v %v", ok, err)
	}
	if ok, _, err := d.Probe(ctx, "w", "aw:none"); ok || err != nil {
		t.Fatalf("none: %v %v", ok, err)
	}
	if v, _ := d.Store().Show(ctx, "w", "aw:fast"); v.Stats.Delivered != 0 || v.Stats.Failed != 0 {
		t.Fatalf("a probe kept stats: %+v", v.Stats)
	}
}

func TestNextWait(t *testing.T) {
	for i, w := range webhook.Waits {
		lo, _ := webhook.NextWait(i+1, -1, 0)
		hi, _ := webhook.NextWait(i+1, 1, 0)
		mid, ok := webhook.NextWait(i+1, 0, 0)
		if !ok || mid != w || lo != w-w/10 || hi != w+w/10 {
			t.Errorf("wait %d: %v %v %v, want %v ±10%%", i+1, lo, mid, hi, w)
		}
	}
	if w, ok := webhook.NextWait(1, 0, time.Hour); !ok || w != time.Hour {
		t.Errorf("Retry-After: %v", w)
	}
	if _, ok := webhook.NextWait(len(webhook.Waits)+1, 0, 0); ok {
		t.Error("a wait after the last")
	}
	if got := len(webhook.Waits); got != 9 || webhook.MaxAttempts != 10 {
		t.Errorf("%d waits, %d attempts", got, webhook.MaxAttempts)
	}
}

// TestRetriesOfDisabledWebhookDeadLettered: a retry that comes due after
// its webhook was disabled by a 410 is not sent but dead-lettered (so a
// replay after re-registering finds it) and counted.
func TestRetriesOfDisabledWebhookDeadLettered(t *testing.T) {
	st := stores.Memory().Open(t)
	ctx := t.Context()
	c := &clock{now: t0}
	d := newDispatcher(t, st, c, nil)
	rc := newReceiver(t)
	rc.setAnswer(status(http.StatusInternalServerError))
	if _, err := asMember(t, st, d.Store()).Set(ctx, "w", "aw:a", rc.URL); err != nil {
		t.Fatal(err)
	}
	first := event(t, "w", world.PresenceChanged, world.Public, "", map[string]any{}, t0)
	if err := d.Dispatch(ctx, first); err != nil {
		t.Fatal(err)
	}
	rc.next(t, time.Second)
	rc.setAnswer(status(http.StatusGone))
	if err := d.Dispatch(ctx, event(t, "w", world.PresenceChanged, world.Public, "", map[string]any{}, t0)); err != nil {
		t.Fatal(err)
	}
	rc.next(t, time.Second)
	c.Advance(time.Minute)
	if rep, err := d.RunRetries(ctx); err != nil || rep.Due != 1 || rep.Sent != 0 {
		t.Fatalf("run: %+v, %v", rep, err)
	}
	rc.none(t)
	v, _ := d.Store().Show(ctx, "w", "aw:a")
	if v.Enabled || v.Stats.DeadLettered != 2 {
		t.Fatalf("view %+v", v)
	}
	dls, _ := d.Store().DeadLetters(ctx, "w", "aw:a", t0.Add(-time.Hour))
	if len(dls) != 2 || dls[0].Event.ID != first.ID || dls[0].LastError != "the webhook is disabled" {
		t.Fatalf("dead letters %+v", dls)
	}
}

func TestNewDispatcherRefusesBadConfig(t *testing.T) {
	if _, err := webhook.NewDispatcher(webhook.Config{}); err == nil {
		t.Error("a dispatcher without a store was built")
	}
	if _, err := webhook.NewDispatcher(webhook.Config{Store: stores.Memory().Open(t), NetworkKey: ed25519.PrivateKey("short")}); err == nil {
		t.Error("a dispatcher with a short key was built")
	}
}

// settler counts the presence settlements a dispatcher asks for.
type settler struct {
	mu    sync.Mutex
	calls []string
}

func (s *settler) SettlePresence(_ context.Context, worldID, awnID string) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.calls = append(s.calls, worldID+"/"+awnID)
	return nil
}

func (s *settler) count() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return len(s.calls)
}

// TestDeliveryOutcomeSettlesPresence: a delivery whose outcome differs
// from the webhook's last one (answered after failing, failing after
// answering) asks the world to settle the member's presence, and a
// delivery that answers as the last one did asks nothing. The logic reads
// the webhook's own stats only, so one engine shows it.
func TestDeliveryOutcomeSettlesPresence(t *testing.T) {
	st := stores.Memory().Open(t)
	ctx := t.Context()
	c := &clock{now: t0}
	pres := &settler{}
	d, err := webhook.NewDispatcher(webhook.Config{Store: st, Client: localClient(), NetworkKey: networkKey(),
		Jitter: fixedJitter, Now: c.Now, Presence: pres})
	if err != nil {
		t.Fatal(err)
	}
	rc := newReceiver(t)
	if _, err := asMember(t, st, d.Store()).Set(ctx, "w", "aw:a", rc.URL); err != nil {
		t.Fatal(err)
	}
	for i, step := range []struct {
		answer func(http.ResponseWriter, *http.Request)
		calls  int
	}{
		{status(http.StatusInternalServerError), 0}, // never answered before: still not answering
		{status(http.StatusInternalServerError), 0},
		{nil, 1}, // answers now
		{nil, 1},
		{status(http.StatusInternalServerError), 2}, // stopped answering
	} {
		c.Advance(time.Second)
		rc.setAnswer(step.answer)
		if err := d.Dispatch(ctx, event(t, "w", world.PresenceChanged, world.Public, "", map[string]any{"n": i}, c.Now())); err != nil {
			t.Fatal(err)
		}
		rc.next(t, time.Second)
		if got := pres.count(); got != step.calls {
			t.Fatalf("after delivery %d: %d settlements, want %d", i+1, got, step.calls)
		}
	}
	if pres.calls[0] != "w/aw:a" {
		t.Fatalf("settled %v", pres.calls)
	}
}

// TestOutcomesOnTheWebhookItemDecidePresenceAsTheLatest: the webhook item
// keeps only the outcomes that change whether the webhook answered (the
// rest go to its counters item), and the presence rule still decides as
// it would from the latest: an answer after a failed probe is written
// there (the rule said "not answered") and settles presence; a second
// answer is counted on the counters item only.
func TestOutcomesOnTheWebhookItemDecidePresenceAsTheLatest(t *testing.T) {
	st := stores.Memory().Open(t)
	ctx := t.Context()
	c := &clock{now: t0}
	pres := &settler{}
	d, err := webhook.NewDispatcher(webhook.Config{Store: st, Client: localClient(), NetworkKey: networkKey(),
		Jitter: fixedJitter, Now: c.Now, Presence: pres})
	if err != nil {
		t.Fatal(err)
	}
	rc := newReceiver(t)
	if _, err := asMember(t, st, d.Store()).Set(ctx, "w", "aw:a", rc.URL); err != nil {
		t.Fatal(err)
	}
	deliver := func(n int) {
		t.Helper()
		c.Advance(time.Second)
		if err := d.Dispatch(ctx, event(t, "w", world.PresenceChanged, world.Public, "", map[string]any{"n": n}, c.Now())); err != nil {
			t.Fatal(err)
		}
		rc.next(t, time.Second)
	}
	answered := func() (bool, time.Time) {
		t.Helper()
		h, err := st.Get(ctx, world.WebhookKey("w", "aw:a"))
		if err != nil {
			t.Fatal(err)
		}
		m, err := st.Get(ctx, world.MemberKey("w", "aw:a"))
		if err != nil {
			t.Fatal(err)
		}
		at := func(it store.Item, name string) time.Time {
			n, err := it.Int(name)
			if err != nil {
				return time.Time{}
			}
			return time.Unix(0, n).UTC()
		}
		ok := at(h, "lastSuccessAt")
		return world.Answered(world.Member{ProbeOKAt: at(m, "probeOkAt"), ProbeFailAt: at(m, "probeFailAt")},
			world.Hook{Set: true, Enabled: h.BoolAttr("enabled"), LastSuccessAt: ok, LastErrorAt: at(h, "lastErrorAt")}), ok
	}
	deliver(1)
	if ok, _ := answered(); !ok || pres.count() != 1 {
		t.Fatalf("first answer: answered %v, %d settlements, want true and 1", ok, pres.count())
	}
	// A probe that failed after it, as world.RecordProbe keeps it.
	c.Advance(time.Second)
	if _, err := st.Write(ctx, store.Update(world.MemberKey("w", "aw:a")).SetAttr("probeFailAt", store.N(c.Now().UnixNano()))); err != nil {
		t.Fatal(err)
	}
	if ok, _ := answered(); ok {
		t.Fatal("answered after a failed probe")
	}
	deliver(2)
	ok, at := answered()
	if !ok || pres.count() != 2 || !at.Equal(c.Now()) {
		t.Fatalf("answer after the failed probe: answered %v at %v, %d settlements; want true at %v and 2", ok, at, pres.count(), c.Now())
	}
	deliver(3)
	if ok, again := answered(); !ok || pres.count() != 2 || !again.Equal(at) {
		t.Fatalf("steady answer: answered %v, webhook item's outcome %v (was %v), %d settlements; want it unwritten and 2", ok, again, at, pres.count())
	}
	v, err := d.Store().Show(ctx, "w", "aw:a")
	if err != nil || v.Stats.Delivered != 3 || v.Stats.LastSuccessAt == nil || !v.Stats.LastSuccessAt.Equal(c.Now()) {
		t.Fatalf("counters %+v, %v: want 3 delivered, the last at %v", v.Stats, err, c.Now())
	}
}
