package main

import (
	"context"
	"encoding/json"
	"io"
	"log"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"net/http/httputil"
	"net/url"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/a2awire/a2awire/local/harness"
	"github.com/a2awire/a2awire/shared/awn"
	"github.com/a2awire/a2awire/shared/store/memory"
)

// network serves the whole local system in process, as `go run ./local`
// does, over a fresh memory store, and returns its URL.
func network(t *testing.T) string {
	t.Helper()
	st := memory.New()
	t.Cleanup(func() { _ = st.Close() })
	h, err := harness.New(harness.Options{Log: slog.New(slog.DiscardHandler), Store: st})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = h.Close() })
	srv := httptest.NewServer(h)
	t.Cleanup(srv.Close)
	return srv.URL
}

// cutter is a proxy on 127.0.0.1 in front of the network that breaks the
// first event stream through it in the middle of its cutAt-th event: the
// client has read the events before it whole, and half of that one.
type cutter struct {
	proxy *httputil.ReverseProxy
	cutAt int
	// streams counts the event streams opened through the proxy; cuts
	// the ones it broke.
	streams, cuts atomic.Int32
}

func newCutter(t *testing.T, target string, cutAt int) (*cutter, string) {
	t.Helper()
	u, err := url.Parse(target)
	if err != nil {
		t.Fatal(err)
	}
	c := &cutter{cutAt: cutAt}
	c.proxy = httputil.NewSingleHostReverseProxy(u)
	// Events are passed on as they come; the Host header is kept, so
	// the signatures (which cover the authority) still verify.
	c.proxy.FlushInterval = -1
	c.proxy.ErrorLog = log.New(io.Discard, "", 0) // a client going away is not news
	srv := httptest.NewServer(c)
	t.Cleanup(srv.Close)
	return c, srv.URL
}

func (c *cutter) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if strings.HasSuffix(r.URL.Path, "/events/stream") && c.streams.Add(1) == 1 {
		w = &cutWriter{ResponseWriter: w, c: c}
	}
	c.proxy.ServeHTTP(w, r)
}

// cutWriter passes the stream on until the cutAt-th event's data line,
// sends half of that line, and then drops the connection.
type cutWriter struct {
	http.ResponseWriter
	c    *cutter
	seen int
}

func (w *cutWriter) Write(p []byte) (int, error) {
	for i := 0; i+5 <= len(p); i++ {
		if string(p[i:i+5]) != "data:" {
			continue
		}
		if w.seen++; w.seen == w.c.cutAt {
			_, _ = w.ResponseWriter.Write(p[:i+8])
			w.Flush()
			w.c.cuts.Add(1)
			panic(http.ErrAbortHandler) // the server closes the connection
		}
	}
	return w.ResponseWriter.Write(p)
}

func (w *cutWriter) Flush() {
	if f, ok := w.ResponseWriter.(http.Flusher); ok {
		f.Flush()
	}
}

// client is a client of base with a fresh identity, whose waits are not
// taken (recorded, returning at once) so that the test does not sleep.
func client(t *testing.T, base string) *awn.Client {
	t.Helper()
	id, err := awn.NewIdentity()
	if err != nil {
		t.Fatal(err)
	}
	c, err := awn.New(base, awn.WithIdentity(id), awn.WithSleep(func(ctx context.Context, _ time.Duration) error { return ctx.Err() }))
	if err != nil {
		t.Fatal(err)
	}
	return c
}

// TestAgentEndToEnd runs the example agent against the whole local network
// through a proxy that breaks its first event stream mid-event. A second
// member messages it and gets the echo, acts and gets its "ack"; then,
// after more actions, every event the agent may see has reached it exactly
// once and in order — the stream resumed after the drop without loss or
// repeat.
func TestAgentEndToEnd(t *testing.T) {
	t.Parallel()
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	base := network(t)
	cut, proxied := newCutter(t, base, 3)

	owner := client(t, base)
	if _, err := owner.CreateWorld(ctx, "arena", awn.WorldSpec{Name: "Arena",
		Actions: []awn.ActionSpec{{Name: "move"}, {Name: "ack"}, {Name: "done"}}}); err != nil {
		t.Fatal(err)
	}

	// The agent, through the proxy.
	var (
		mu     sync.Mutex
		seen   []awn.Event
		broken []awn.Wait
	)
	joined := make(chan awn.Membership, 1)
	doneSeen := make(chan string, 1)
	agentClient := client(t, proxied)
	agent := &Agent{Client: agentClient, World: "arena",
		OnJoined: func(m awn.Membership) { joined <- m },
		OnEvent: func(e awn.Event) {
			mu.Lock()
			seen = append(seen, e)
			mu.Unlock()
			if n, ok := e.Action(); ok && n.Action == "done" {
				doneSeen <- e.EventID
			}
		},
		OnWait: func(w awn.Wait) {
			mu.Lock()
			broken = append(broken, w)
			mu.Unlock()
		}}
	agentCtx, stopAgent := context.WithCancel(ctx)
	ran := make(chan error, 1)
	go func() { ran <- agent.Run(agentCtx) }()
	var me awn.Membership
	select {
	case me = <-joined:
	case err := <-ran:
		t.Fatalf("the agent stopped: %v", err)
	case <-ctx.Done():
		t.Fatal("the agent never joined")
	}

	// A second member, following its own events to see the answers.
	peer := client(t, base)
	if _, err := peer.Join(ctx, "arena", nil); err != nil {
		t.Fatal(err)
	}
	peerEvents := make(chan awn.Event, 100)
	go func() {
		for e, err := range peer.Events(ctx, "arena", awn.FollowOptions{}) {
			if err != nil {
				return
			}
			peerEvents <- e
		}
	}()
	await := func(what string, match func(awn.Event) bool) awn.Event {
		t.Helper()
		for {
			select {
			case e := <-peerEvents:
				if match(e) {
					return e
				}
			case <-ctx.Done():
				t.Fatalf("the peer never saw %s", what)
			}
		}
	}

	// A direct message is answered with its echo.
	if _, err := peer.SendText(ctx, "arena", me.AWNID, "hello"); err != nil {
		t.Fatal(err)
	}
	await("the echo", func(e awn.Event) bool { n, ok := e.Message(); return ok && n.From == me.AWNID })
	inbox, err := peer.Messages(ctx, "arena", awn.MessageQuery{})
	if err != nil {
		t.Fatal(err)
	}
	if len(inbox.Messages) != 1 || inbox.Messages[0].Text() != "echo: hello" || inbox.Messages[0].From != me.AWNID {
		t.Errorf("the peer's inbox: %+v", inbox.Messages)
	}

	// An action is acknowledged with one naming it.
	moveID, _, err := peer.Act(ctx, "arena", "move", json.RawMessage(`{"to":"e4"}`))
	if err != nil {
		t.Fatal(err)
	}
	ack := await("the ack", func(e awn.Event) bool { n, ok := e.Action(); return ok && n.Action == "ack" && n.AWNID == me.AWNID })
	if n, _ := ack.Action(); !strings.Contains(string(n.Params), moveID) {
		t.Errorf("the ack names %s, want the move %s", n.Params, moveID)
	}

	// More events, then a last one: the agent must see all, once, in order.
	for range 4 {
		if _, _, err := peer.Act(ctx, "arena", "move", nil); err != nil {
			t.Fatal(err)
		}
	}
	if _, _, err := peer.Act(ctx, "arena", "done", nil); err != nil {
		t.Fatal(err)
	}
	var last string
	select {
	case last = <-doneSeen:
	case err := <-ran:
		t.Fatalf("the agent stopped: %v", err)
	case <-ctx.Done():
		t.Fatal("the agent never saw the last action")
	}
	stopAgent()
	if err := <-ran; err != nil {
		t.Errorf("the agent ended with %v", err)
	}

	if cut.cuts.Load() != 1 || cut.streams.Load() < 2 {
		t.Fatalf("the proxy cut %d streams of %d opened; the test needs one cut and a reopened stream", cut.cuts.Load(), cut.streams.Load())
	}
	mu.Lock()
	defer mu.Unlock()
	if !slices.ContainsFunc(broken, func(w awn.Wait) bool { return w.Reason == awn.WaitStreamBroken }) {
		t.Errorf("no broken stream was reported: %+v", broken)
	}
	// What the agent may see, read afresh page by page, up to the last action.
	var want []string
	for after := ""; ; {
		p, err := agentClient.EventsPage(ctx, "arena", awn.EventsQuery{After: after, Limit: awn.MaxPage})
		if err != nil {
			t.Fatal(err)
		}
		for _, e := range p.Events {
			if e.EventID <= last {
				want = append(want, e.EventID)
			}
		}
		if len(p.Events) == 0 || p.Cursor > last {
			break
		}
		after = p.Cursor
	}
	var got []string
	for _, e := range seen {
		if e.EventID <= last {
			got = append(got, e.EventID)
		}
	}
	if len(want) < 8 || !slices.Equal(got, want) {
		t.Errorf("the agent saw %d events up to the last action:\n%v\nthe log holds %d:\n%v", len(got), got, len(want), want)
	}
}
