package webhook_test

import (
	"bytes"
	"context"
	"crypto/ed25519"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/a2awire/a2awire/shared/apierror"
	"github.com/a2awire/a2awire/shared/auth"
	"github.com/a2awire/a2awire/shared/ratelimit"
	"github.com/a2awire/a2awire/shared/store"
	"github.com/a2awire/a2awire/shared/store/storetest"
	"github.com/a2awire/a2awire/shared/webhook"
	"github.com/a2awire/a2awire/shared/world"
)

// agentKey is a deterministic key numbered n.
func agentKey(n int) ed25519.PublicKey {
	seed := make([]byte, ed25519.SeedSize)
	copy(seed, fmt.Sprintf("webhook-member-key-%d", n))
	return ed25519.NewKeyFromSeed(seed).Public().(ed25519.PublicKey)
}

// arena creates world "arena" (actions move and wave) over st and joins
// the agents numbered ns; it returns the service and their awnIds.
func arena(t *testing.T, st store.Store, c *clock, ns ...int) (*world.Service, []string) {
	t.Helper()
	ctx := context.Background()
	s := world.New(st, world.WithClock(c.Now))
	m := world.Manifest{ID: "arena", Actions: []world.ActionSpec{{Name: "move"}, {Name: "wave"}}}
	if _, _, err := s.PutWorld(ctx, m, agentKey(0)); err != nil {
		t.Fatal(err)
	}
	var ids []string
	for _, n := range ns {
		mb, _, err := s.Join(ctx, "arena", agentKey(n), nil)
		if err != nil {
			t.Fatal(err)
		}
		ids = append(ids, mb.AWNID)
	}
	return s, ids
}

// TestSetRacingLeave (issue 26's third repro, for webhooks): a member's
// PUT of a webhook passed the route's membership check, then its leave
// lands just before the webhook is written. Set is refused NotJoined and
// no webhook item is left behind to keep receiving events, because the
// membership is a condition of the webhook's own Write. A key that never
// joined is refused the same way.
func TestSetRacingLeave(t *testing.T) {
	everyEngine(t, func(t *testing.T, st store.Store) {
		ctx := t.Context()
		c := &clock{now: t0}
		s, ids := arena(t, st, c, 1, 2)
		racing := &storetest.BeforeWrite{Store: st, Hook: func() {
			if err := s.Leave(ctx, "arena", ids[0]); err != nil {
				t.Errorf("leave: %v", err)
			}
		}}
		_, err := webhook.NewStore(racing).Set(ctx, "arena", ids[0], "https://a.example/hook")
		wantKind(t, err, apierror.NotJoined)
		_, err = webhook.NewStore(st).Get(ctx, "arena", ids[0])
		wantKind(t, err, apierror.NotFound)
		_, err = webhook.NewStore(st).Set(ctx, "arena", auth.AWNID(agentKey(9)), "https://a.example/hook")
		wantKind(t, err, apierror.NotJoined)
		if _, err := webhook.NewStore(st).Set(ctx, "arena", ids[1], "https://b.example/hook"); err != nil {
			t.Fatalf("a member's set: %v", err)
		}
	})
}

// TestNonMemberWebhookGetsNothing: a webhook item whose agent is no longer
// a member (written before Set was conditioned, or by hand) gets no
// delivery of any event and forwards no action, while a member's webhook
// in the same world gets each.
func TestNonMemberWebhookGetsNothing(t *testing.T) {
	everyEngine(t, func(t *testing.T, st store.Store) {
		ctx := t.Context()
		c := &clock{now: t0}
		s, ids := arena(t, st, c, 1, 2)
		sub := &submitter{st: st}
		d := newDispatcher(t, st, c, sub)
		gone, member := newReceiver(t), newReceiver(t)
		gone.setAnswer(func(w http.ResponseWriter, _ *http.Request) { _, _ = io.WriteString(w, `{"action":"wave"}`) })
		for i, rc := range []*receiver{gone, member} {
			if _, err := d.Store().Set(ctx, "arena", ids[i], rc.URL); err != nil {
				t.Fatal(err)
			}
		}
		// The member item goes, the webhook item stays (what a Leave
		// racing an unconditioned Set left).
		if _, err := st.Write(ctx, store.Delete(world.MemberKey("arena", ids[0]))); err != nil {
			t.Fatal(err)
		}
		if err := d.Dispatch(ctx,
			event(t, "arena", world.PresenceChanged, world.Public, "", map[string]any{}, t0),
			event(t, "arena", world.MessageReceived, world.Private, ids[0], map[string]any{}, t0)); err != nil {
			t.Fatal(err)
		}
		member.next(t, time.Second)
		gone.none(t)
		if len(sub.got) != 0 {
			t.Fatalf("a non-member's answers were forwarded: %v", sub.got)
		}
		_ = s
	})
}

// TestRetriesDieWithTheirWebhook: a delivery that failed and waits for
// its retry never reaches the webhook that replaces its own — not after a
// DELETE and a PUT of a new URL (which would sign it with the new secret),
// not after a leave, a rejoin and a PUT of the same URL. Each retry is
// dropped when it comes due, neither sent nor dead-lettered.
func TestRetriesDieWithTheirWebhook(t *testing.T) {
	everyEngine(t, func(t *testing.T, st store.Store) {
		ctx := t.Context()
		c := &clock{now: t0}
		s, ids := arena(t, st, c, 1, 2)
		d := newDispatcher(t, st, c, nil)
		old, next := newReceiver(t), newReceiver(t)
		old.setAnswer(status(http.StatusServiceUnavailable))
		for _, id := range ids {
			if _, err := d.Store().Set(ctx, "arena", id, old.URL); err != nil {
				t.Fatal(err)
			}
		}
		if err := d.Dispatch(ctx, event(t, "arena", world.PresenceChanged, world.Public, "", map[string]any{}, t0)); err != nil {
			t.Fatal(err)
		}
		old.next(t, time.Second)
		old.next(t, time.Second)
		// Agent 1 replaces its webhook; agent 2 leaves, rejoins and sets
		// the same URL again.
		if err := d.Store().Remove(ctx, "arena", ids[0]); err != nil {
			t.Fatal(err)
		}
		if _, err := d.Store().Set(ctx, "arena", ids[0], next.URL); err != nil {
			t.Fatal(err)
		}
		if err := s.Leave(ctx, "arena", ids[1]); err != nil {
			t.Fatal(err)
		}
		if _, _, err := s.Join(ctx, "arena", agentKey(2), nil); err != nil {
			t.Fatal(err)
		}
		if _, err := d.Store().Set(ctx, "arena", ids[1], old.URL); err != nil {
			t.Fatal(err)
		}
		old.setAnswer(nil)
		c.Advance(time.Hour)
		rep, err := d.RunRetries(ctx)
		if err != nil || rep.Due != 2 || rep.Sent != 0 {
			t.Fatalf("retry run: %+v %v, want 2 due and none sent", rep, err)
		}
		next.none(t)
		old.none(t)
		if due, err := d.Store().Due(ctx, c.Now().Add(24*time.Hour), 10); err != nil || len(due) != 0 {
			t.Fatalf("retries left: %d %v", len(due), err)
		}
		for _, id := range ids {
			if dls, err := d.Store().DeadLetters(ctx, "arena", id, t0.Add(-time.Hour)); err != nil || len(dls) != 0 {
				t.Fatalf("dead letters of %s: %d %v", id, len(dls), err)
			}
		}
	})
}

// TestForwardedActionsAreActions (issue 26's fourth repro, at the
// dispatcher): a receiver that answers every delivery with an action.
// Its answer to another agent's submitted action is forwarded once, marked
// as forwarded; its answer to another agent's forwarded action is dropped
// (one hop only); and forwarded actions count against the agent's action rate
// limit (2 a minute here), the third of a minute dropped. Each drop is
// counted in the webhook's stats and logged.
func TestForwardedActionsAreActions(t *testing.T) {
	everyEngine(t, func(t *testing.T, st store.Store) {
		ctx := t.Context()
		c := &clock{now: t0}
		s, ids := arena(t, st, c, 1, 2)
		var logs bytes.Buffer
		var logMu sync.Mutex
		d, err := webhook.NewDispatcher(webhook.Config{Store: st, Client: localClient(), Actions: s, Now: c.Now, Jitter: fixedJitter,
			Limiter: ratelimit.New(st, ratelimit.Limits{ratelimit.Actions: 2}, ratelimit.WithClock(c.Now)),
			Log:     slog.New(slog.NewTextHandler(lockedWriter{&logMu, &logs}, nil))})
		if err != nil {
			t.Fatal(err)
		}
		rc := newReceiver(t)
		rc.setAnswer(func(w http.ResponseWriter, _ *http.Request) { _, _ = io.WriteString(w, `{"action":"wave"}`) })
		if _, err := d.Store().Set(ctx, "arena", ids[0], rc.URL); err != nil {
			t.Fatal(err)
		}
		actions := func() []world.Event {
			t.Helper()
			evs, err := s.Events(ctx, "arena", ids[1], "", 100)
			if err != nil {
				t.Fatal(err)
			}
			var out []world.Event
			for _, e := range evs {
				if e.Type == world.ActionSubmitted {
					out = append(out, e)
				}
			}
			return out
		}
		if _, err := s.SubmitAction(ctx, "arena", ids[1], "move", nil); err != nil {
			t.Fatal(err)
		}
		first := actions()
		if err := d.Dispatch(ctx, first...); err != nil {
			t.Fatal(err)
		}
		rc.next(t, time.Second)
		after := actions()
		if len(after) != 2 || !world.Forwarded(after[1]) || world.Forwarded(after[0]) {
			t.Fatalf("after one answer: %d actions, want the submitted one and one forwarded", len(after))
		}
		// Another agent's forwarded action (what the other receiver of a
		// pair would have answered), delivered to this one.
		byOther := event(t, "arena", world.ActionSubmitted, world.Agents, "",
			map[string]any{"actionId": "x", "awnId": ids[1], "action": "wave", "params": map[string]any{}, "via": world.ViaWebhook}, c.Now())
		if err := d.Dispatch(ctx, byOther); err != nil {
			t.Fatal(err)
		}
		rc.next(t, time.Second)
		if n := len(actions()); n != 2 {
			t.Fatalf("the answer to a forwarded action was forwarded: %d actions", n)
		}
		// Rate limit: one forwarded this minute; one more passes, the
		// next is dropped.
		for range 2 {
			if err := d.Dispatch(ctx, event(t, "arena", world.PresenceChanged, world.Public, "", map[string]any{}, c.Now())); err != nil {
				t.Fatal(err)
			}
			rc.next(t, time.Second)
		}
		if n := len(actions()); n != 3 {
			t.Fatalf("%d actions after two more answers within the minute, want 3 (limit 2 a minute)", n)
		}
		h, err := d.Store().Get(ctx, "arena", ids[0])
		if err != nil {
			t.Fatal(err)
		}
		if h.Stats.ActionsDropped != 2 || h.Stats.Delivered != 4 {
			t.Fatalf("stats %+v, want 4 delivered and 2 actions dropped", h.Stats)
		}
		logMu.Lock()
		defer logMu.Unlock()
		for _, want := range []string{"one hop only", "rate limit"} {
			if !strings.Contains(logs.String(), want) {
				t.Errorf("no drop logged with %q:\n%s", want, logs.String())
			}
		}
	})
}

// lockedWriter serializes a log handler's writes from the pool's workers.
type lockedWriter struct {
	mu *sync.Mutex
	w  io.Writer
}

func (l lockedWriter) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.w.Write(p)
}

// TestSetConcurrentWithLeave: 20 members each PUT a webhook while leaving,
// concurrently. Whatever the order, no webhook item outlives its member:
// either the set came first and the leave deleted it, or the leave came
// first and the set was refused NotJoined.
func TestSetConcurrentWithLeave(t *testing.T) {
	everyEngine(t, func(t *testing.T, st store.Store) {
		ctx := t.Context()
		c := &clock{now: t0}
		ns := make([]int, 20)
		for i := range ns {
			ns[i] = i + 1
		}
		s, ids := arena(t, st, c, ns...)
		hooks := webhook.NewStore(st)
		var wg sync.WaitGroup
		for _, id := range ids {
			wg.Go(func() {
				if _, err := hooks.Set(ctx, "arena", id, "https://a.example/hook"); err != nil && apierror.KindOf(err) != apierror.NotJoined {
					t.Errorf("set: %v", err)
				}
			})
			wg.Go(func() {
				if err := s.Leave(ctx, "arena", id); err != nil {
					t.Errorf("leave: %v", err)
				}
			})
		}
		wg.Wait()
		for _, id := range ids {
			if _, err := hooks.Get(ctx, "arena", id); apierror.KindOf(err) != apierror.NotFound {
				t.Errorf("%s left, yet its webhook remains (%v)", id, err)
			}
		}
	})
}

// TestUnparsedAnswerLogged (issue 27's eighth repro, at the dispatcher):
// an answer whose action a world would accept ("2x", starting with a
// digit) is forwarded; an answer that is not an action is dropped with a
// log line saying why, and counts as no dropped action.
func TestUnparsedAnswerLogged(t *testing.T) {
	everyEngine(t, func(t *testing.T, st store.Store) {
		ctx := t.Context()
		c := &clock{now: t0}
		s, ids := arena(t, st, c, 1)
		if _, _, err := s.PutWorld(ctx, world.Manifest{ID: "free"}, agentKey(0)); err != nil {
			t.Fatal(err)
		}
		if _, _, err := s.Join(ctx, "free", agentKey(1), nil); err != nil {
			t.Fatal(err)
		}
		var logs bytes.Buffer
		var logMu sync.Mutex
		sub := &submitter{st: st}
		d, err := webhook.NewDispatcher(webhook.Config{Store: st, Client: localClient(), Actions: sub, Now: c.Now, Jitter: fixedJitter,
			Log: slog.New(slog.NewTextHandler(lockedWriter{&logMu, &logs}, nil))})
		if err != nil {
			t.Fatal(err)
		}
		rc := newReceiver(t)
		if _, err := d.Store().Set(ctx, "free", ids[0], rc.URL); err != nil {
			t.Fatal(err)
		}
		for _, answer := range []string{`{"action":"2x"}`, `{"action":"Move!"}`} {
			rc.setAnswer(func(w http.ResponseWriter, _ *http.Request) { _, _ = io.WriteString(w, answer) })
			if err := d.Dispatch(ctx, event(t, "free", world.PresenceChanged, world.Public, "", map[string]any{}, c.Now())); err != nil {
				t.Fatal(err)
			}
			rc.next(t, time.Second)
		}
		if len(sub.got) != 1 || !strings.HasPrefix(sub.got[0], ids[0]+" 2x ") {
			t.Fatalf("forwarded %v, want the one 2x action", sub.got)
		}
		logMu.Lock()
		defer logMu.Unlock()
		if !strings.Contains(logs.String(), "not an action") || !strings.Contains(logs.String(), "Move!") {
			t.Fatalf("the ignored answer was not logged with its reason:\n%s", logs.String())
		}
	})
}

// TestDeliveryAttemptsAreLogged: each attempt writes one "webhook
// delivery" line with its world, event, status and outcome: a 2xx at
// info as delivered, a 500 at warn as failed with its retry, so a person
// watching the log sees a failed delivery and why.
func TestDeliveryAttemptsAreLogged(t *testing.T) {
	everyEngine(t, func(t *testing.T, st store.Store) {
		ctx := t.Context()
		var logs bytes.Buffer
		var logMu sync.Mutex
		d, err := webhook.NewDispatcher(webhook.Config{Store: st, Client: localClient(), NetworkKey: networkKey(), Jitter: fixedJitter,
			Log: slog.New(slog.NewTextHandler(lockedWriter{&logMu, &logs}, nil))})
		if err != nil {
			t.Fatal(err)
		}
		rc := newReceiver(t)
		if _, err := asMember(t, st, d.Store()).Set(ctx, "lobby", "aw:a", rc.URL+"/hook"); err != nil {
			t.Fatal(err)
		}
		ok := event(t, "lobby", world.AgentJoined, world.Public, "", map[string]any{}, time.Now())
		if err := d.Dispatch(ctx, ok); err != nil {
			t.Fatal(err)
		}
		rc.setAnswer(status(http.StatusInternalServerError))
		bad := event(t, "lobby", world.AgentJoined, world.Public, "", map[string]any{}, time.Now())
		if err := d.Dispatch(ctx, bad); err != nil {
			t.Fatal(err)
		}
		logMu.Lock()
		defer logMu.Unlock()
		var lines []string
		for _, l := range strings.Split(logs.String(), "\n") {
			if strings.Contains(l, `msg="webhook delivery"`) {
				lines = append(lines, l)
			}
		}
		if len(lines) != 2 {
			t.Fatalf("%d delivery lines, want 2:\n%s", len(lines), logs.String())
		}
		for _, want := range []string{"level=INFO", "world=lobby", "event=" + ok.ID, "recipient=aw:a", "status=204", "attempt=1", "outcome=delivered"} {
			if !strings.Contains(lines[0], want) {
				t.Errorf("the delivered line lacks %q: %s", want, lines[0])
			}
		}
		for _, want := range []string{"level=WARN", "event=" + bad.ID, "status=500", `outcome="failed: the receiver answered 500; retry in`} {
			if !strings.Contains(lines[1], want) {
				t.Errorf("the failed line lacks %q: %s", want, lines[1])
			}
		}
	})
}
