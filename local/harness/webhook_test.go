package harness_test

import (
	"context"
	"crypto/ed25519"
	"encoding/base64"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"sync/atomic"
	"testing"
	"time"

	"github.com/a2awire/a2awire/local/cloud"
	"github.com/a2awire/a2awire/local/harness"
	"github.com/a2awire/a2awire/shared/logging"
	"github.com/a2awire/a2awire/shared/store/memory"
	"github.com/a2awire/a2awire/shared/webhook"
	"github.com/a2awire/a2awire/shared/webhook/signature"
	"github.com/a2awire/a2awire/shared/world"
)

// TestWebhookThroughHarness: the harness drives webhook-dispatcher from
// the memory engine's feed and webhook-retry from its schedule, as
// go run ./local does. A receiver that fails its first attempt gets the
// event again when the schedule ticks after the 5 s wait, and each
// delivery's v1a signature verifies with the key the harness serves at
// /.well-known/http-message-signatures-directory.
func TestWebhookThroughHarness(t *testing.T) {
	st := memory.New(memory.WithFeedConsumers(harness.StreamConsumers(nil)...))
	defer st.Close()
	tick := make(chanTicker)
	h := mustHarness(t, harness.Options{Log: logging.Discard(), Store: st,
		NewTicker: func(time.Duration) cloud.Ticker { return tick }})
	ctx, cancel := context.WithCancel(t.Context())
	done := make(chan error, 1)
	go func() { done <- h.Run(ctx) }()
	defer func() {
		cancel()
		if err := <-done; err != nil {
			t.Error(err)
		}
	}()

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
		if n.Add(1) == 1 {
			w.WriteHeader(http.StatusServiceUnavailable)
			return
		}
		w.WriteHeader(http.StatusNoContent)
	}))
	defer srv.Close()
	if _, err := webhook.NewStore(st).Set(ctx, "lobby", "aw:a", srv.URL); err != nil {
		t.Fatal(err)
	}
	e, _ := world.NewIDs().NewEvent("lobby", world.AgentJoined, world.Public, "", map[string]any{"awnId": "aw:b"}, time.Now())
	if _, err := st.Write(ctx, world.EventPut(e)); err != nil {
		t.Fatal(err)
	}
	next := func(within time.Duration) hit {
		t.Helper()
		select {
		case g := <-hits:
			if g.header.Get("webhook-id") != e.ID {
				t.Fatalf("delivered %q, want %s", g.header.Get("webhook-id"), e.ID)
			}
			if err := signature.VerifyV1a(g.header, g.body, pub, 0); err != nil {
				t.Fatalf("v1a with the directory's key: %v", err)
			}
			return g
		case <-time.After(within):
			t.Fatalf("no delivery within %v", within)
			return hit{}
		}
	}
	next(time.Second)
	// The first retry is due 5 s (± 10 %) after the failure; a tick
	// before that sends nothing, one after it sends the retry.
	tick <- time.Now()
	select {
	case g := <-hits:
		t.Fatalf("retried before its wait: %s", g.body)
	case <-time.After(500 * time.Millisecond):
	}
	time.Sleep(webhook.Waits[0] + webhook.Waits[0]/10)
	tick <- time.Now()
	next(2 * time.Second)
	deadline := time.Now().Add(2 * time.Second)
	for {
		v, err := webhook.NewStore(st).Show(ctx, "lobby", "aw:a")
		if err != nil {
			t.Fatal(err)
		}
		if v.Stats.Delivered == 1 && v.Stats.Failed == 1 && v.Stats.LastError == "the receiver answered 503" {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("stats %+v", v.Stats)
		}
		time.Sleep(20 * time.Millisecond)
	}
}
