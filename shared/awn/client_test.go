package awn_test

import (
	"context"
	"crypto/ed25519"
	"crypto/rand"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/a2awire/a2awire/shared/awn"
	"github.com/a2awire/a2awire/shared/sse"
	"github.com/a2awire/a2awire/shared/webhook/signature"
)

// waits records the client's waits instead of taking them.
type waits struct {
	mu sync.Mutex
	d  []time.Duration
}

func (w *waits) sleep(ctx context.Context, d time.Duration) error {
	w.mu.Lock()
	w.d = append(w.d, d)
	w.mu.Unlock()
	return ctx.Err()
}

func (w *waits) all() []time.Duration {
	w.mu.Lock()
	defer w.mu.Unlock()
	return slices.Clone(w.d)
}

func worldOK(w http.ResponseWriter, status int, data any) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	_ = json.NewEncoder(w).Encode(map[string]any{"ok": true, "data": data})
}

func worldErr(w http.ResponseWriter, status int, code, msg string) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	_ = json.NewEncoder(w).Encode(map[string]any{"ok": false, "error": map[string]string{"code": code, "message": msg}})
}

func newClient(t *testing.T, url string, opts ...awn.Option) *awn.Client {
	t.Helper()
	id, err := awn.NewIdentity()
	if err != nil {
		t.Fatal(err)
	}
	c, err := awn.New(url, append([]awn.Option{awn.WithIdentity(id)}, opts...)...)
	if err != nil {
		t.Fatal(err)
	}
	return c
}

// TestReadsRetried: a GET answered 429 (Retry-After: 3) then 503 (none)
// then 200 succeeds, having waited 3 s as asked and then the backoff
// doubled from 1 s, 2 s.
func TestReadsRetried(t *testing.T) {
	t.Parallel()
	var n int
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		n++
		switch n {
		case 1:
			w.Header().Set("Retry-After", "3")
			worldErr(w, 429, "RATE_LIMITED", "slow down")
		case 2:
			w.WriteHeader(503)
		default:
			worldOK(w, 200, map[string]any{"worldId": "arena", "name": "Arena"})
		}
	}))
	defer srv.Close()
	var wt waits
	c := newClient(t, srv.URL, awn.WithSleep(wt.sleep))
	m, err := c.World(context.Background(), "arena")
	if err != nil || m.Name != "Arena" || n != 3 {
		t.Fatalf("World: %+v, %v after %d requests", m, err, n)
	}
	if got := wt.all(); !slices.Equal(got, []time.Duration{3 * time.Second, 2 * time.Second}) {
		t.Errorf("waits %v, want [3s 2s]", got)
	}
}

// TestRetriesBounded: a read that stays busy is tried 1 + WithRetries
// times and returns the last refusal.
func TestRetriesBounded(t *testing.T) {
	t.Parallel()
	var n int
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		n++
		worldErr(w, 503, "UNAVAILABLE", "busy")
	}))
	defer srv.Close()
	var wt waits
	c := newClient(t, srv.URL, awn.WithSleep(wt.sleep), awn.WithRetries(2))
	_, err := c.World(context.Background(), "arena")
	var e *awn.Error
	if !errors.As(err, &e) || e.Status != 503 || e.Code != "UNAVAILABLE" || n != 3 {
		t.Errorf("err %v after %d requests, want the 503 after 3", err, n)
	}
}

// TestWritesNotRetried: a send answered 429 is sent once; the error
// carries the code, the message and the Retry-After.
func TestWritesNotRetried(t *testing.T) {
	t.Parallel()
	var n int
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		n++
		if r.Header.Get("Signature") == "" || r.Header.Get("Signature-Input") == "" {
			t.Errorf("unsigned %s %s", r.Method, r.URL.Path)
		}
		w.Header().Set("Retry-After", "7")
		worldErr(w, 429, "RATE_LIMITED", "slow down")
	}))
	defer srv.Close()
	var wt waits
	c := newClient(t, srv.URL, awn.WithSleep(wt.sleep))
	_, err := c.SendText(context.Background(), "arena", "aw:sha256:"+strings.Repeat("a", 64), "hi")
	var e *awn.Error
	if !errors.As(err, &e) || n != 1 || len(wt.all()) != 0 {
		t.Fatalf("err %v after %d requests and waits %v", err, n, wt.all())
	}
	if e.Status != 429 || e.Code != "RATE_LIMITED" || e.Message != "slow down" || e.RetryAfter != 7*time.Second ||
		e.Method != "POST" || e.Path != "/v0/worlds/arena/messages" || !e.Temporary() || !awn.IsCode(err, "rate_limited") {
		t.Errorf("error %+v", e)
	}
}

// TestErrorShapes: the registry's envelope, an answer that is no envelope
// at all, and a 2xx answer that is not the world envelope.
func TestErrorShapes(t *testing.T) {
	t.Parallel()
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		switch r.URL.Path {
		case "/api/v1/agents/taken":
			w.WriteHeader(409)
			_, _ = io.WriteString(w, `{"error":"name_taken","message":"another key holds it"}`)
		case "/api/v1/agents/proxy":
			w.WriteHeader(502)
			_, _ = io.WriteString(w, "<html>bad gateway</html>")
		default:
			_, _ = io.WriteString(w, `{"name":"no envelope"}`)
		}
	}))
	defer srv.Close()
	c, err := awn.New(srv.URL, awn.WithRetries(0))
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	_, err = c.Agent(ctx, "taken")
	var e *awn.Error
	if !errors.As(err, &e) || e.Code != "name_taken" || e.Surface != awn.RegistrySurface || e.Error() != "name_taken: another key holds it" {
		t.Errorf("registry refusal: %v", err)
	}
	_, err = c.Agent(ctx, "proxy")
	if !errors.As(err, &e) || e.Code != "" || e.Message != "502 Bad Gateway: <html>bad gateway</html>" {
		t.Errorf("no envelope: %v", err)
	}
	_, err = c.World(ctx, "bare")
	var s *awn.ShapeError
	if !errors.As(err, &s) || !s.NoEnvelope || !strings.Contains(err.Error(), "not the world envelope") {
		t.Errorf("2xx without the envelope: %v", err)
	}
	if _, err := c.Join(ctx, "arena", nil); !errors.Is(err, awn.ErrNoIdentity) {
		t.Errorf("join without an identity: %v", err)
	}
	if _, err := awn.New("ftp://example.com"); err == nil {
		t.Error("an ftp URL was taken")
	}
}

func event(id, typ string) map[string]any {
	return map[string]any{"eventId": id, "type": typ, "worldId": "arena", "data": map[string]any{}, "visibility": "public", "createdAt": "2026-12-04T12:00:00Z"}
}

func ids(t *testing.T, seq func(func(awn.Event, error) bool), n int) []string {
	t.Helper()
	var out []string
	for e, err := range seq {
		if err != nil {
			t.Fatalf("after %v: %v", out, err)
		}
		if out = append(out, e.EventID); len(out) == n {
			break
		}
	}
	return out
}

// TestEventsStreamResume: a stream that ends is reopened after the last
// event (Last-Event-ID), and an event the server sends again is not
// yielded twice.
func TestEventsStreamResume(t *testing.T) {
	t.Parallel()
	var mu sync.Mutex
	var lastIDs []string
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path != "/v0/worlds/arena/events/stream" {
			http.NotFound(w, r)
			return
		}
		mu.Lock()
		lastIDs = append(lastIDs, r.Header.Get("Last-Event-ID"))
		n := len(lastIDs)
		mu.Unlock()
		w.Header().Set("Content-Type", sse.ContentType)
		send := func(id string) {
			b, _ := json.Marshal(event(id, "action.submitted"))
			fmt.Fprintf(w, "id: %s\nevent: action.submitted\ndata: %s\n\n", id, b)
		}
		switch n {
		case 1:
			send("01A")
			send("01B")
			// and a cut mid-event: its id line is read, its data is not
			_, _ = io.WriteString(w, "id: 01C\nevent: action.submitted\ndata: {\"eventId\"")
		default:
			send("01B") // again: must not be yielded twice
			send("01C")
			send("01D")
		}
	}))
	defer srv.Close()
	var wt waits
	var notices []awn.Wait
	c := newClient(t, srv.URL, awn.WithSleep(wt.sleep))
	got := ids(t, c.Events(context.Background(), "arena", awn.FollowOptions{OnWait: func(w awn.Wait) { notices = append(notices, w) }}), 4)
	if !slices.Equal(got, []string{"01A", "01B", "01C", "01D"}) {
		t.Errorf("events %v", got)
	}
	mu.Lock()
	defer mu.Unlock()
	if !slices.Equal(lastIDs[:2], []string{"", "01B"}) {
		t.Errorf("Last-Event-ID %q, want none then 01B", lastIDs)
	}
	if len(notices) != 1 || notices[0].Reason != awn.WaitStreamBroken {
		t.Errorf("notices %+v, want one broken stream", notices)
	}
}

// TestEventsFallBackToPolling: with no stream served, Events long-polls
// from the cursor (wait=20), takes the server's cursor past invisible
// events, and waits out a 429 as asked.
func TestEventsFallBackToPolling(t *testing.T) {
	t.Parallel()
	var mu sync.Mutex
	var afters []string
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path != "/v0/worlds/arena/events" {
			http.NotFound(w, r)
			return
		}
		q := r.URL.Query()
		if q.Get("wait") != "20" {
			t.Errorf("poll without wait=20: %v", q)
		}
		mu.Lock()
		afters = append(afters, q.Get("after"))
		n := len(afters)
		mu.Unlock()
		switch n {
		case 1:
			worldOK(w, 200, map[string]any{"events": []any{event("01A", "agent.joined")}})
		case 2:
			w.Header().Set("Retry-After", "5")
			worldErr(w, 429, "RATE_LIMITED", "slow down")
		case 3:
			worldOK(w, 200, map[string]any{"events": []any{}, "cursor": "01M"})
		default:
			worldOK(w, 200, map[string]any{"events": []any{event("01A", "agent.joined"), event("01N", "agent.left")}})
		}
	}))
	defer srv.Close()
	var wt waits
	var reasons []awn.WaitReason
	c := newClient(t, srv.URL, awn.WithSleep(wt.sleep))
	got := ids(t, c.Events(context.Background(), "arena", awn.FollowOptions{OnWait: func(w awn.Wait) { reasons = append(reasons, w.Reason) }}), 2)
	if !slices.Equal(got, []string{"01A", "01N"}) {
		t.Errorf("events %v", got)
	}
	mu.Lock()
	defer mu.Unlock()
	if !slices.Equal(afters, []string{"", "01A", "01A", "01M"}) {
		t.Errorf("cursors %v", afters)
	}
	if !slices.Equal(reasons, []awn.WaitReason{awn.WaitFallback, awn.WaitRetry}) || !slices.Equal(wt.all(), []time.Duration{5 * time.Second}) {
		t.Errorf("notices %v, waits %v", reasons, wt.all())
	}
}

// TestEventsRefusalEnds: a refusal other than busy ends the sequence with
// the error; a cancelled context ends it without one.
func TestEventsRefusalEnds(t *testing.T) {
	t.Parallel()
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		worldErr(w, 403, "NOT_JOINED", "you are not a member of this world")
	}))
	defer srv.Close()
	c := newClient(t, srv.URL)
	var errs []error
	for _, err := range c.Events(context.Background(), "arena", awn.FollowOptions{NoStream: true}) {
		errs = append(errs, err)
	}
	if len(errs) != 1 || !awn.IsCode(errs[0], "NOT_JOINED") {
		t.Errorf("yielded %v", errs)
	}
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	for _, err := range c.Events(ctx, "arena", awn.FollowOptions{}) {
		t.Errorf("a cancelled follow yielded %v", err)
	}
}

// TestReceiverV1a: deliveries signed by the network's key pass with its
// key, fail with another; with a secret too, both must pass.
func TestReceiverV1a(t *testing.T) {
	t.Parallel()
	pub, priv, _ := ed25519.GenerateKey(rand.Reader)
	other, _, _ := ed25519.GenerateKey(rand.Reader)
	secret, _ := signature.NewSecret()
	otherSecret, _ := signature.NewSecret()
	body := []byte(`{"worldId":"arena","eventId":"01J","event":"agent.joined","payload":{},"timestamp":"2026-12-04T12:00:00Z"}`)
	for _, tc := range []struct {
		name         string
		rc           awn.Receiver
		signSecret   string
		want         int
		reasonPrefix string
	}{
		{"v1a", awn.Receiver{NetworkKeys: []ed25519.PublicKey{other, pub}}, otherSecret, 204, ""},
		{"v1a wrong key", awn.Receiver{NetworkKeys: []ed25519.PublicKey{other}}, otherSecret, 401, "v1a: "},
		{"v1 and v1a", awn.Receiver{Secret: secret, NetworkKeys: []ed25519.PublicKey{pub}}, secret, 204, ""},
		{"v1 wrong secret", awn.Receiver{Secret: secret, NetworkKeys: []ed25519.PublicKey{pub}}, otherSecret, 401, "v1: "},
		{"nothing to verify with", awn.Receiver{}, secret, 401, "the receiver has no secret"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			h, err := signature.Headers("01J", time.Now(), body, tc.signSecret, priv)
			if err != nil {
				t.Fatal(err)
			}
			req := httptest.NewRequest(http.MethodPost, "/", strings.NewReader(string(body)))
			for k, v := range h {
				req.Header[k] = v
			}
			rec := httptest.NewRecorder()
			tc.rc.ServeHTTP(rec, req)
			if rec.Code != tc.want || !strings.HasPrefix(rec.Body.String(), tc.reasonPrefix) {
				t.Errorf("answered %d %q", rec.Code, rec.Body.String())
			}
		})
	}
}

// TestIdentityFiles: a key file that is not a PEM key is an error naming
// it; a profile name is checked.
func TestIdentityFiles(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	if _, err := awn.LoadIdentity(dir); !errors.Is(err, awn.ErrNoIdentityFile) {
		t.Errorf("empty dir: %v", err)
	}
	if err := os.WriteFile(filepath.Join(dir, awn.KeyFile), []byte("not a key"), 0o600); err != nil {
		t.Fatal(err)
	}
	if _, err := awn.LoadIdentity(dir); err == nil || !strings.Contains(err.Error(), "not a PEM") {
		t.Errorf("garbage key: %v", err)
	}
	var ue *awn.UsageError
	if _, err := awn.ProfileDir(dir, "../etc"); !errors.As(err, &ue) {
		t.Errorf("profile ../etc: %v", err)
	}
	id, err := awn.CreateIdentity(dir, true)
	if err != nil {
		t.Fatal(err)
	}
	if fi, err := os.Stat(id.File); err != nil || fi.Mode().Perm() != 0o600 {
		t.Errorf("key file %v %v", fi, err)
	}
}

// TestIdempotentWritesRetried: a join (which the network answers with the
// same membership however often it is asked) is retried after a 503, each
// attempt signed afresh; an action is not.
func TestIdempotentWritesRetried(t *testing.T) {
	t.Parallel()
	var mu sync.Mutex
	seen := map[string]int{}
	sigs := map[string]bool{}
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		seen[r.URL.Path]++
		n := seen[r.URL.Path]
		sigs[r.Header.Get("Signature")] = true
		mu.Unlock()
		if n == 1 {
			worldErr(w, 503, "UNAVAILABLE", "busy")
			return
		}
		worldOK(w, 200, map[string]any{"awnId": "aw:sha256:" + strings.Repeat("a", 64), "slot": 1, "joinedAt": "2026-12-04T12:00:00Z", "players": nil})
	}))
	defer srv.Close()
	var wt waits
	c := newClient(t, srv.URL, awn.WithSleep(wt.sleep))
	ctx := context.Background()
	if m, err := c.Join(ctx, "arena", nil); err != nil || m.Slot != 1 {
		t.Errorf("join: %+v %v", m, err)
	}
	if _, _, err := c.Act(ctx, "arena", "move", nil); !awn.IsCode(err, "UNAVAILABLE") {
		t.Errorf("act: %v", err)
	}
	mu.Lock()
	defer mu.Unlock()
	if seen["/v0/worlds/arena/join"] != 2 || seen["/v0/worlds/arena/actions"] != 1 || len(sigs) != 3 {
		t.Errorf("requests %v, %d distinct signatures", seen, len(sigs))
	}
}
