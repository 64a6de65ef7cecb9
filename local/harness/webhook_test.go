package harness_test

import (
	"context"
	"crypto/ed25519"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	standardwebhooks "github.com/standard-webhooks/standard-webhooks/libraries/go"

	"github.com/a2awire/a2awire/local/cloud"
	"github.com/a2awire/a2awire/local/harness"
	"github.com/a2awire/a2awire/shared/auth"
	"github.com/a2awire/a2awire/shared/logging"
	"github.com/a2awire/a2awire/shared/routes"
	"github.com/a2awire/a2awire/shared/store"
	"github.com/a2awire/a2awire/shared/store/memory"
	"github.com/a2awire/a2awire/shared/webhook"
	"github.com/a2awire/a2awire/shared/webhook/signature"
	"github.com/a2awire/a2awire/shared/world"
)

// clock is a settable clock for the harness's Now.
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

// TestWebhookThroughHarness: the harness drives webhook-dispatcher from
// the memory engine's feed, webhook-deliver from the delivery queue and
// webhook-retry from its schedule, as go run ./local does. A receiver that
// fails three attempts: the first two retries wait in the queue (5 s and
// 5 min, ± 10 %, on the harness's clock; the first is not sent before
// its wait), the third in the table's schedule (30 min), from which the
// retry function puts it back on the queue. Each delivery's v1a signature
// verifies with the key the harness serves at
// /.well-known/http-message-signatures-directory, and the stats count one
// delivery and three failures.
func TestWebhookThroughHarness(t *testing.T) {
	st := memory.New(memory.WithFeedConsumers(append(harness.StreamConsumers(nil), retryWatch)...))
	defer st.Close()
	// The schedule's ticker is unbuffered and its loop runs one invocation
	// per tick, so a tick is taken only after the previous invocation
	// ended: two ticks in a row end the first one's run.
	tick := make(chanTicker)
	c := &clock{now: time.Now().Truncate(time.Second)}
	h := mustHarness(t, harness.Options{Log: logging.Discard(), Store: st, Now: c.Now,
		NewTicker: func(d time.Duration) cloud.Ticker {
			// Other schedules (escrow-schedule's 5 minutes) get their own.
			if d != time.Minute {
				return make(chanTicker)
			}
			return tick
		}})
	deliveries := h.Queue(routes.DeliveryQueue)
	// advance moves the clock once no receive of the delivery queue is
	// held: a move while the worker still holds a message would end its
	// visibility timeout and deliver it a second time.
	advance := func(d time.Duration) {
		t.Helper()
		deadline := time.Now().Add(2 * time.Second)
		for deliveries.Held() > 0 {
			if time.Now().After(deadline) {
				t.Fatalf("the delivery queue still holds %d receives", deliveries.Held())
			}
			time.Sleep(5 * time.Millisecond)
		}
		c.Advance(d)
		deliveries.Wake()
	}
	ctx, stop := run(t, h)
	defer stop()

	w := httptest.NewRecorder()
	h.ServeHTTP(w, httptest.NewRequest("GET", "http://127.0.0.1:8080/.well-known/http-message-signatures-directory", nil))
	var dir struct {
		Keys []struct{ X string } `json:"keys"`
	}
	if err := json.Unmarshal(w.Body.Bytes(), &dir); err != nil || len(dir.Keys) != 1 {
		t.Fatalf("directory %d %s: %v", w.Code, w.Body, err)
	}
	raw, err := base64.RawURLEncoding.DecodeString(dir.Keys[0].X)
	if err != nil || len(raw) != ed25519.PublicKeySize {
		t.Fatalf("directory key %q: %v", dir.Keys[0].X, err)
	}
	pub := ed25519.PublicKey(raw)

	type hit struct {
		header http.Header
		body   []byte
	}
	hits := make(chan hit, 10)
	var n atomic.Int64
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		b, _ := io.ReadAll(r.Body)
		hits <- hit{r.Header.Clone(), b}
		if n.Add(1) <= 3 {
			w.WriteHeader(http.StatusServiceUnavailable)
			return
		}
		w.WriteHeader(http.StatusNoContent)
	}))
	defer srv.Close()
	// A webhook needs a member: the member item a join writes.
	if _, err := st.Write(ctx, world.BareMembership("lobby", "aw:a")...); err != nil {
		t.Fatal(err)
	}
	if _, err := webhook.NewStore(st).Set(ctx, "lobby", "aw:a", srv.URL); err != nil {
		t.Fatal(err)
	}
	failedAt := c.Now()
	e, _ := world.NewIDs().NewEvent("lobby", world.AgentJoined, world.Public, "", map[string]any{"awnId": "aw:b"}, time.Now())
	if _, err := st.Write(ctx, world.EventPut(e)); err != nil {
		t.Fatal(err)
	}
	// failed waits until the n-th failure is counted: its retry is set by
	// then, so the clock may move.
	failed := func(n int64) {
		t.Helper()
		deadline := time.Now().Add(2 * time.Second)
		for {
			v, err := webhook.NewStore(st).Show(ctx, "lobby", "aw:a")
			if err != nil {
				t.Fatal(err)
			}
			if v.Stats.Failed == n {
				return
			}
			if time.Now().After(deadline) {
				t.Fatalf("stats %+v, want %d failures", v.Stats, n)
			}
			time.Sleep(5 * time.Millisecond)
		}
	}
	next := func(within time.Duration) hit {
		t.Helper()
		select {
		case g := <-hits:
			if g.header.Get("webhook-id") != e.ID {
				t.Fatalf("delivered %q, want %s", g.header.Get("webhook-id"), e.ID)
			}
			// The harness's clock runs ahead of the real one the check
			// uses; past the first retry, beyond its tolerance.
			if c.Now().Sub(failedAt) < time.Minute {
				if err := signature.VerifyV1a(g.header, g.body, pub, 0); err != nil {
					t.Fatalf("v1a with the directory's key: %v", err)
				}
			}
			return g
		case <-time.After(within):
			t.Fatalf("no delivery within %v", within)
			return hit{}
		}
	}
	if g := next(time.Second); g.header.Get("webhook-timestamp") != fmt.Sprint(failedAt.Unix()) {
		t.Fatalf("first attempt signed at %s, want the harness clock's %d", g.header.Get("webhook-timestamp"), failedAt.Unix())
	}
	// The first retry waits in the queue 5 s (± 10 %) on the harness's
	// clock: not visible just before (the pollers look again within
	// cloud.QueuePoll), visible after.
	failed(1)
	advance(webhook.Waits[0] - webhook.Waits[0]/10 - time.Second)
	select {
	case g := <-hits:
		t.Fatalf("retried before its wait: %s", g.body)
	case <-time.After(cloud.QueuePoll + 200*time.Millisecond):
	}
	advance(webhook.Waits[0]/5 + time.Second)
	if g := next(2 * cloud.QueuePoll); g.header.Get("webhook-timestamp") != fmt.Sprint(c.Now().Unix()) {
		t.Fatalf("retry signed at %s, want after the wait, at %d", g.header.Get("webhook-timestamp"), c.Now().Unix())
	}
	// The second waits 5 min in the queue too.
	failed(2)
	advance(webhook.Waits[1] + webhook.Waits[1]/10)
	next(2 * cloud.QueuePoll)
	// The third failure's 30 min are the schedule's: a retry item, which
	// a tick after the wait puts back on the queue.
	failed(3)
	awaitRetryWrite(t, st)
	advance(webhook.Waits[2] + webhook.Waits[2]/10)
	// Every 1-minute schedule (webhook-retry, presence-sweep) takes this
	// ticker, and a tick goes to whichever loop is waiting: tick until
	// the retry has run.
	for i := 0; ; i++ {
		tick <- c.Now()
		select {
		case <-hits:
		case <-time.After(2 * cloud.QueuePoll):
			if i < 20 {
				continue
			}
			t.Fatal("no delivery after 20 ticks of the schedule")
		}
		break
	}
	deadline := time.Now().Add(2 * time.Second)
	for {
		v, err := webhook.NewStore(st).Show(ctx, "lobby", "aw:a")
		if err != nil {
			t.Fatal(err)
		}
		if v.Stats.Delivered == 1 && v.Stats.Failed == 3 && v.Stats.LastError == "the receiver answered 503" {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("stats %+v", v.Stats)
		}
		time.Sleep(10 * time.Millisecond)
	}
	if n.Load() != 4 {
		t.Errorf("%d attempts, want 4", n.Load())
	}
}

// retryWatch is a feed consumer of the test's own, reading the memory
// engine's change feed for the retry schedule's writes.
const retryWatch = "test-retry-watch"

// awaitRetryWrite blocks until the feed shows a retry written to the
// schedule (up to 5 s).
func awaitRetryWrite(t *testing.T, st *memory.Store) {
	t.Helper()
	ctx, cancel := context.WithTimeout(t.Context(), 5*time.Second)
	defer cancel()
	for {
		recs, err := st.Read(ctx, retryWatch, 100)
		if err != nil {
			t.Fatalf("no retry scheduled: %v", err)
		}
		for _, r := range recs {
			if err := st.Commit(ctx, retryWatch, r.Change.SequenceNumber); err != nil {
				t.Fatal(err)
			}
			if r.EventName != "REMOVE" && strings.HasPrefix(r.Change.Keys[store.AttrPK].String(), webhook.RetryPK("lobby", "")) {
				return
			}
		}
	}
}

// TestWebhookActionForwardedToWorld: through the harness, with the world
// service. B submits an action; A's receiver answers its delivery with an
// action of its own, which the world records as action.submitted from A
// (B polls it) and delivers to both; A's answer to its own action is not
// submitted again.
func TestWebhookActionForwardedToWorld(t *testing.T) {
	st := memory.New(memory.WithFeedConsumers(harness.StreamConsumers(nil)...))
	defer st.Close()
	h := mustHarness(t, harness.Options{Log: logging.Discard(), Store: st,
		NewTicker: func(time.Duration) cloud.Ticker { return make(chanTicker) }})
	ctx, stop := run(t, h)
	defer stop()
	svc := world.New(st)
	key := func(n byte) ed25519.PublicKey {
		return ed25519.NewKeyFromSeed(append(make([]byte, 31), n)).Public().(ed25519.PublicKey)
	}
	if _, _, err := svc.PutWorld(ctx, world.Manifest{ID: "arena", Actions: []world.ActionSpec{{Name: "wave", Description: "wave"}}}, key(1)); err != nil {
		t.Fatal(err)
	}
	a, _, err := svc.Join(ctx, "arena", key(2), nil)
	if err != nil {
		t.Fatal(err)
	}
	b, _, err := svc.Join(ctx, "arena", key(3), nil)
	if err != nil {
		t.Fatal(err)
	}
	// Receivers note the action.submitted events they get (the joins may
	// or may not reach them, depending on when the feed is read).
	serve := func(answer string) (*httptest.Server, chan string) {
		ch := make(chan string, 20)
		srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			var body struct {
				Event   string
				Payload struct{ AWNID string } `json:"payload"`
			}
			raw, _ := io.ReadAll(r.Body)
			_ = json.Unmarshal(raw, &body)
			if body.Event != world.ActionSubmitted {
				w.WriteHeader(http.StatusNoContent)
				return
			}
			ch <- body.Payload.AWNID
			if answer != "" {
				_, _ = io.WriteString(w, answer)
				return
			}
			w.WriteHeader(http.StatusNoContent)
		}))
		t.Cleanup(srv.Close)
		return srv, ch
	}
	srvA, gotA := serve(`{"action":"wave","params":{"to":"everyone"}}`)
	srvB, gotB := serve("")
	hooks := webhook.NewStore(st)
	if _, err := hooks.Set(ctx, "arena", a.AWNID, srvA.URL); err != nil {
		t.Fatal(err)
	}
	if _, err := hooks.Set(ctx, "arena", b.AWNID, srvB.URL); err != nil {
		t.Fatal(err)
	}
	if _, err := svc.SubmitAction(ctx, "arena", b.AWNID, "wave", nil); err != nil {
		t.Fatal(err)
	}
	next := func(ch chan string) string {
		t.Helper()
		select {
		case s := <-ch:
			return s
		case <-time.After(2 * time.Second):
			t.Fatal("no delivery within 2 s")
			return ""
		}
	}
	// A gets B's action before its own (its answer to the first made the
	// second); B gets both, in either order: deliveries are not ordered
	// (one may wait for its endpoint's slot while the next goes ahead),
	// as Standard Webhooks tells receivers.
	if by := []string{next(gotA), next(gotA)}; by[0] != b.AWNID || by[1] != a.AWNID {
		t.Fatalf("A got action.submitted by %v, want B's then A's", by)
	}
	if by := []string{next(gotB), next(gotB)}; !slices.Contains(by, b.AWNID) || !slices.Contains(by, a.AWNID) {
		t.Fatalf("B got action.submitted by %v, want B's and A's", by)
	}
	select {
	case s := <-gotB:
		t.Fatalf("B got another action.submitted by %s (forwarded twice?)", s)
	case <-time.After(500 * time.Millisecond):
	}
	evs, err := svc.Events(ctx, "arena", b.AWNID, "", 50)
	if err != nil {
		t.Fatal(err)
	}
	var by []string
	for _, e := range evs {
		if e.Type == world.ActionSubmitted {
			var d struct{ AWNID, Action string }
			_ = json.Unmarshal(e.Data, &d)
			by = append(by, d.AWNID+" "+d.Action)
		}
	}
	if len(by) != 2 || by[0] != b.AWNID+" wave" || by[1] != a.AWNID+" wave" {
		t.Fatalf("the world's action.submitted events: %v", by)
	}
}

// TestWebhookRoutesThroughHarness: the four member routes behind the
// gateway, signed as a member: PUT shows a secret once, the next event is
// delivered signed with it (the official Standard Webhooks library
// verifies it), GET shows the stats, replay answers a count, DELETE
// removes it; a non-member is refused 401 NOT_JOINED.
func TestWebhookRoutesThroughHarness(t *testing.T) {
	st := memory.New(memory.WithFeedConsumers(harness.StreamConsumers(nil)...))
	defer st.Close()
	h := mustHarness(t, harness.Options{Log: logging.Discard(), Store: st,
		NewTicker: func(time.Duration) cloud.Ticker { return make(chanTicker) }})
	ctx, stop := run(t, h)
	defer stop()
	svc := world.New(st)
	priv := func(n byte) ed25519.PrivateKey { return ed25519.NewKeyFromSeed(append(make([]byte, 31), n)) }
	if _, _, err := svc.PutWorld(ctx, world.Manifest{ID: "arena"}, priv(1).Public().(ed25519.PublicKey)); err != nil {
		t.Fatal(err)
	}
	member, _, err := svc.Join(ctx, "arena", priv(2).Public().(ed25519.PublicKey), nil)
	if err != nil {
		t.Fatal(err)
	}
	call := func(key ed25519.PrivateKey, method, path, body string) (int, map[string]any) {
		t.Helper()
		r := httptest.NewRequest(method, "http://127.0.0.1:8080"+path, strings.NewReader(body))
		if body != "" {
			r.Header.Set("Content-Type", "application/json")
		}
		s, err := auth.NewSigner(key)
		if err != nil {
			t.Fatal(err)
		}
		if err := s.Sign(r); err != nil {
			t.Fatal(err)
		}
		w := httptest.NewRecorder()
		h.ServeHTTP(w, r)
		var out map[string]any
		_ = json.Unmarshal(w.Body.Bytes(), &out)
		return w.Code, out
	}
	hits := make(chan hitT, 10)
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		b, _ := io.ReadAll(r.Body)
		hits <- hitT{r.Header.Clone(), b}
		w.WriteHeader(http.StatusNoContent)
	}))
	defer srv.Close()

	code, out := call(priv(2), "PUT", "/v0/worlds/arena/webhook", `{"url":"`+srv.URL+`/hook"}`)
	data, _ := out["data"].(map[string]any)
	secret, _ := data["secret"].(string)
	if code != 200 || !strings.HasPrefix(secret, "whsec_") || data["url"] != srv.URL+"/hook" {
		t.Fatalf("PUT: %d %v", code, out)
	}
	if code, out := call(priv(9), "PUT", "/v0/worlds/arena/webhook", `{"url":"`+srv.URL+`"}`); code != 401 || !strings.Contains(fmt.Sprint(out), "NOT_JOINED") {
		t.Fatalf("a stranger's PUT: %d %v", code, out)
	}
	if _, err := svc.SubmitAction(ctx, "arena", member.AWNID, "wave", nil); err != nil {
		t.Fatal(err)
	}
	var g hitT
	for {
		select {
		case g = <-hits:
		case <-time.After(2 * time.Second):
			t.Fatal("no delivery within 2 s")
		}
		if strings.Contains(string(g.body), `"event":"action.submitted"`) {
			break
		}
	}
	wh, err := standardwebhooks.NewWebhook(secret)
	if err != nil {
		t.Fatal(err)
	}
	if err := wh.Verify(g.body, g.header); err != nil {
		t.Fatalf("the official library refuses the delivery: %v", err)
	}
	deadline := time.Now().Add(2 * time.Second)
	for {
		code, out := call(priv(2), "GET", "/v0/worlds/arena/webhook", "")
		data, _ := out["data"].(map[string]any)
		stats, _ := data["stats"].(map[string]any)
		if code != 200 || strings.Contains(fmt.Sprint(out), "whsec_") {
			t.Fatalf("GET: %d %v", code, out)
		}
		// At least the action's delivery; the member's agent.joined may
		// count too when the dispatcher reads it after the PUT.
		if n, _ := stats["delivered"].(float64); n >= 1 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("GET stats: %v", out)
		}
		time.Sleep(20 * time.Millisecond)
	}
	if code, out := call(priv(2), "POST", "/v0/worlds/arena/webhook/replay", `{"since":"2026-01-01T00:00:00Z"}`); code != 200 || fmt.Sprint(out["data"]) != "map[replayed:0]" {
		t.Fatalf("replay: %d %v", code, out)
	}
	if code, _ := call(priv(2), "DELETE", "/v0/worlds/arena/webhook", ""); code != 200 {
		t.Fatalf("DELETE: %d", code)
	}
	if code, out := call(priv(2), "GET", "/v0/worlds/arena/webhook", ""); code != 404 {
		t.Fatalf("GET after DELETE: %d %v", code, out)
	}
}

type hitT struct {
	header http.Header
	body   []byte
}

// TestPingLiveProbe is ping's live probe through the harness: a member that
// never polled is unreachable; once its webhook on 127.0.0.1 is registered,
// ping reaches it with a signed ping event (the official Standard Webhooks
// library verifies it with the member's secret) and reports the measured
// latency; a webhook answering 500 falls back to the poll rule (never polled:
// unreachable, latencyMs null).
func TestPingLiveProbe(t *testing.T) {
	st := memory.New(memory.WithFeedConsumers(harness.StreamConsumers(nil)...))
	defer st.Close()
	h := mustHarness(t, harness.Options{Log: logging.Discard(), Store: st})
	ctx := t.Context()
	svc := world.New(st)
	priv := func(n byte) ed25519.PrivateKey { return ed25519.NewKeyFromSeed(append(make([]byte, 31), n)) }
	if _, _, err := svc.PutWorld(ctx, world.Manifest{ID: "arena"}, priv(1).Public().(ed25519.PublicKey)); err != nil {
		t.Fatal(err)
	}
	for _, n := range []byte{2, 3} {
		if _, _, err := svc.Join(ctx, "arena", priv(n).Public().(ed25519.PublicKey), nil); err != nil {
			t.Fatal(err)
		}
	}
	target := auth.AWNID(priv(3).Public().(ed25519.PublicKey))
	call := func(key ed25519.PrivateKey, method, path, body string) (int, map[string]any) {
		t.Helper()
		r := httptest.NewRequest(method, "http://127.0.0.1:8080"+path, strings.NewReader(body))
		r.Header.Set("Content-Type", "application/json")
		s, err := auth.NewSigner(key)
		if err != nil {
			t.Fatal(err)
		}
		if err := s.Sign(r); err != nil {
			t.Fatal(err)
		}
		w := httptest.NewRecorder()
		h.ServeHTTP(w, r)
		var out map[string]any
		_ = json.Unmarshal(w.Body.Bytes(), &out)
		data, _ := out["data"].(map[string]any)
		return w.Code, data
	}
	ping := func() map[string]any {
		t.Helper()
		code, data := call(priv(2), "POST", "/v0/worlds/arena/ping", `{"target":"`+target+`"}`)
		if code != 200 {
			t.Fatalf("ping: %d %v", code, data)
		}
		return data
	}
	if got := ping(); got["reachable"] != false || got["latencyMs"] != nil {
		t.Fatalf("before any webhook or poll: %v, want unreachable with latencyMs null", got)
	}

	status := make(chan int, 1)
	status <- http.StatusNoContent
	probes := make(chan hitT, 4)
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		b, _ := io.ReadAll(r.Body)
		probes <- hitT{r.Header.Clone(), b}
		code := <-status
		status <- code
		w.WriteHeader(code)
	}))
	defer srv.Close()
	code, data := call(priv(3), "PUT", "/v0/worlds/arena/webhook", `{"url":"`+srv.URL+`"}`)
	secret, _ := data["secret"].(string)
	if code != 200 || secret == "" {
		t.Fatalf("PUT webhook: %d %v", code, data)
	}
	got := ping()
	if got["reachable"] != true {
		t.Fatalf("with a live webhook: %v, want reachable", got)
	}
	if ms, ok := got["latencyMs"].(float64); !ok || ms < 0 || ms > 2000 {
		t.Fatalf("latencyMs = %v, want the probe's round trip in ms (0..2000)", got["latencyMs"])
	}
	probe := <-probes
	if !strings.Contains(string(probe.body), `"event":"ping"`) {
		t.Fatalf("the probe is not a ping event: %s", probe.body)
	}
	wh, err := standardwebhooks.NewWebhook(secret)
	if err != nil {
		t.Fatal(err)
	}
	if err := wh.Verify(probe.body, probe.header); err != nil {
		t.Fatalf("the official library refuses the probe: %v", err)
	}

	<-status
	status <- http.StatusInternalServerError
	if got := ping(); got["reachable"] != false || got["latencyMs"] != nil {
		t.Fatalf("webhook answering 500, never polled: %v, want unreachable with latencyMs null", got)
	}
}
