package dashboard_test

import (
	"bytes"
	"context"
	"crypto/ed25519"
	"crypto/rand"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/http/httptest"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/chromedp/chromedp"
	"github.com/chromedp/chromedp/kb"

	"github.com/a2awire/a2awire/local/cloud"
	"github.com/a2awire/a2awire/local/harness"
	"github.com/a2awire/a2awire/shared/auth"
	"github.com/a2awire/a2awire/shared/dashboard"
	"github.com/a2awire/a2awire/shared/store/memory"
)

// site is a harness serving the dashboard on 127.0.0.1, as `go run ./local`
// mounts it.
type site struct {
	base    string
	network ed25519.PrivateKey
	srv     *cloud.Server
}

func startSite(t *testing.T) *site { return startSiteWith(t, nil) }

// startSiteWith serves wrap(harness) behind the dashboard when wrap is set.
func startSiteWith(t *testing.T, wrap func(http.Handler) http.Handler) *site {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	base := "http://" + ln.Addr().String()
	st := memory.New(memory.WithFeedConsumers(harness.StreamConsumers(nil)...))
	t.Cleanup(func() { _ = st.Close() })
	_, key, err := ed25519.GenerateKey(rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	log := slog.New(slog.NewTextHandler(io.Discard, nil))
	h, err := harness.New(harness.Options{Log: log, Store: st, NetworkKey: key, BaseURL: base})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = h.Close() })
	ctx := context.Background()
	if _, err := harness.SeedFixtures(ctx, st, base, key); err != nil {
		t.Fatal(err)
	}
	if _, _, err := harness.SeedLobby(ctx, st, key); err != nil {
		t.Fatal(err)
	}
	var api http.Handler = h
	if wrap != nil {
		api = wrap(h)
	}
	handler, err := dashboard.Mount(api, dashboard.Options{DevKey: key})
	if err != nil {
		t.Fatal(err)
	}
	srv := cloud.NewServer(handler, log, cloud.ServerOptions{})
	runCtx, stop := context.WithCancel(ctx)
	done := make(chan struct{})
	go func() { _ = h.Run(runCtx); close(done) }()
	go func() { _ = srv.Serve(ln) }()
	t.Cleanup(func() {
		sctx, cancel := context.WithTimeout(ctx, 5*time.Second)
		defer cancel()
		_ = srv.Shutdown(sctx)
		stop()
		<-done
	})
	return &site{base: base, network: key, srv: srv}
}

// agent signs API calls from Go, as awn does.
type agent struct {
	key    ed25519.PrivateKey
	awnID  string
	pub    string
	client *http.Client
	base   string
}

func newAgent(t *testing.T, base string, key ed25519.PrivateKey) *agent {
	t.Helper()
	if key == nil {
		var err error
		if _, key, err = ed25519.GenerateKey(rand.Reader); err != nil {
			t.Fatal(err)
		}
	}
	s, err := auth.NewSigner(key)
	if err != nil {
		t.Fatal(err)
	}
	pub := key.Public().(ed25519.PublicKey)
	return &agent{key: key, awnID: auth.AWNID(pub), pub: base64.StdEncoding.EncodeToString(pub),
		client: &http.Client{Transport: &auth.Transport{Signer: s}, Timeout: 10 * time.Second}, base: base}
}

// call sends a signed request and returns the status and the answer (a
// world answer's data).
func (a *agent) call(t *testing.T, method, path string, body any) (int, map[string]any) {
	t.Helper()
	var rd io.Reader
	if body != nil {
		b, _ := json.Marshal(body)
		rd = bytes.NewReader(b)
	}
	req, err := http.NewRequest(method, a.base+path, rd)
	if err != nil {
		t.Fatal(err)
	}
	if body != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	resp, err := a.client.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var m map[string]any
	_ = json.NewDecoder(resp.Body).Decode(&m)
	if d, ok := m["data"].(map[string]any); ok && m["ok"] == true {
		m = d
	}
	return resp.StatusCode, m
}

func (a *agent) must(t *testing.T, method, path string, body any) map[string]any {
	t.Helper()
	status, m := a.call(t, method, path, body)
	if status >= 300 {
		t.Fatalf("%s %s: %d %v", method, path, status, m)
	}
	return m
}

// chromiumOnce is the one headless chromium the package's tests share, a
// tab each: a launch costs seconds on a loaded machine.
var chromiumOnce struct {
	sync.Once
	ctx  context.Context
	err  error
	stop func()
}

func TestMain(m *testing.M) {
	code := m.Run()
	if chromiumOnce.stop != nil {
		chromiumOnce.stop()
	}
	os.Exit(code)
}

// browser returns a new tab of Debian's chromium, headless. It fails the
// test, never skips it, when chromium is missing or cannot start: make test
// installs it.
func browser(t *testing.T) context.Context {
	t.Helper()
	chromiumOnce.Do(func() {
		var path string
		for _, name := range []string{"chromium", "chromium-browser", "google-chrome"} {
			if p, err := exec.LookPath(name); err == nil {
				path = p
				break
			}
		}
		if path == "" {
			chromiumOnce.err = fmt.Errorf("no chromium on PATH: the dashboard's browser tests need Debian's chromium (make browser-deps, run by make test, installs it)")
			return
		}
		opts := append(chromedp.DefaultExecAllocatorOptions[:], chromedp.ExecPath(path), chromedp.WindowSize(1280, 1000), chromedp.DisableGPU)
		if os.Geteuid() == 0 {
			// Chromium refuses to run its sandbox as root (containers, CI).
			opts = append(opts, chromedp.NoSandbox)
		}
		actx, cancelAlloc := chromedp.NewExecAllocator(context.Background(), opts...)
		ctx, cancel := chromedp.NewContext(actx)
		chromiumOnce.ctx, chromiumOnce.stop = ctx, func() { cancel(); cancelAlloc() }
		if err := chromedp.Do(ctx); err != nil {
			chromiumOnce.err = fmt.Errorf("chromium (%s) did not start: %w", path, err)
		}
	})
	if chromiumOnce.err != nil {
		t.Fatal(chromiumOnce.err)
	}
	tab, cancelTab := chromedp.NewContext(chromiumOnce.ctx)
	tab, cancelTimeout := context.WithTimeout(tab, 90*time.Second)
	t.Cleanup(func() { cancelTimeout(); cancelTab() })
	if err := chromedp.Do(tab); err != nil {
		t.Fatalf("chromium: new tab: %v", err)
	}
	return tab
}

func run(t *testing.T, ctx context.Context, what string, steps ...chromedp.Action[chromedp.Void]) {
	t.Helper()
	if err := chromedp.Do(ctx, steps...); err != nil {
		t.Fatalf("%s: %v", what, err)
	}
}

// waitFor polls a JavaScript expression until it is true (10 s at most).
func waitFor(t *testing.T, ctx context.Context, what, expr string) {
	t.Helper()
	ok, err := chromedp.Run(ctx, chromedp.Poll[bool](expr, chromedp.WithPollingTimeout(10*time.Second), chromedp.WithPollingInterval(50*time.Millisecond)))
	if err != nil || !ok {
		page, _ := chromedp.Run(ctx, chromedp.Text(chromedp.CSS("main")))
		t.Fatalf("%s: %s never held (%v); the page shows:\n%s", what, expr, err, page)
	}
}

func text(t *testing.T, ctx context.Context, sel string) string {
	t.Helper()
	s, err := chromedp.Run(ctx, chromedp.Text(chromedp.CSS(sel)))
	if err != nil {
		t.Fatalf("read %s: %v", sel, err)
	}
	return strings.TrimSpace(s)
}

// press moves the keyboard focus to sel and presses Enter: each view is
// reached and used from the keyboard.
func press(sel string) chromedp.Action[chromedp.Void] {
	return chromedp.Steps(chromedp.Focus(chromedp.CSS(sel)), chromedp.KeyEvent(kb.Enter))
}

// screenshot saves the page under screenshots/ (git-ignored).
func screenshot(t *testing.T, ctx context.Context, name string) {
	t.Helper()
	png, err := chromedp.Run(ctx, chromedp.FullScreenshot(100))
	if err != nil {
		t.Fatalf("screenshot %s: %v", name, err)
	}
	dir := "screenshots"
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, name+".png"), png, 0o644); err != nil {
		t.Fatal(err)
	}
}

func js(s string) string { b, _ := json.Marshal(s); return string(b) }

// TestDashboardViews clicks through every view in chromium against a
// running harness and checks what each shows against the API.
func TestDashboardViews(t *testing.T) {
	s := startSite(t)
	ctx := browser(t)
	dev := newAgent(t, s.base, s.network)
	bob := newAgent(t, s.base, nil)
	carol := newAgent(t, s.base, nil)

	run(t, ctx, "open the dashboard", chromedp.Navigate(s.base+"/"))

	// Registry with presence: the rows are the API's agents.
	_, reg := dev.call(t, "GET", "/api/v1/agents?status=any&limit=50", nil)
	agents := reg["agents"].([]any)
	waitFor(t, ctx, "registry rows", fmt.Sprintf(`document.querySelectorAll("#registry-table tbody tr").length === %d`, len(agents)))
	for _, a := range agents {
		a := a.(map[string]any)
		got := text(t, ctx, fmt.Sprintf(`#registry-table tr[data-name=%q] td:nth-child(2)`, a["name"]))
		if got != a["status"] {
			t.Errorf("registry: %s shows presence %q, the API says %q", a["name"], got, a["status"])
		}
	}
	screenshot(t, ctx, "registry")

	// The harness's dev key, loaded with the keyboard.
	run(t, ctx, "load the dev key", press("#dev-key"))
	waitFor(t, ctx, "key loaded", `document.querySelector("#key-status").textContent.includes(`+js(dev.awnID)+`)`)

	// Worlds, members and bans.
	carol.must(t, "POST", "/v0/worlds/lobby/join", map[string]any{"publicKey": carol.pub})
	bob.must(t, "POST", "/v0/worlds/lobby/join", map[string]any{"publicKey": bob.pub})
	run(t, ctx, "worlds view", press("#nav-worlds"))
	waitFor(t, ctx, "lobby row", `!!document.querySelector('#worlds-table tr[data-world="lobby"]')`)
	lobby := dev.must(t, "GET", "/v0/worlds/lobby", nil)
	if got := text(t, ctx, `#worlds-table tr[data-world="lobby"] td:nth-child(5)`); got != fmt.Sprint(lobby["memberCount"]) {
		t.Errorf("worlds: lobby shows %s members, the API says %v", got, lobby["memberCount"])
	}
	run(t, ctx, "open lobby", press(`#worlds-table tr[data-world="lobby"] button`))
	// Not a member yet: the API's refusal, worded for a person.
	waitFor(t, ctx, "members refused", `!document.querySelector("#members-error").hidden`)
	if got := text(t, ctx, "#members-error"); !strings.Contains(got, "401 NOT_JOINED") {
		t.Errorf("members of a world the key has not joined show %q, want the API's 401 NOT_JOINED", got)
	}
	run(t, ctx, "join lobby", press("#world-join"))
	waitFor(t, ctx, "members listed", `document.querySelectorAll("#members-table tbody tr").length === 3`)
	members := dev.must(t, "GET", "/v0/worlds/lobby/agents?limit=100", nil)["agents"].([]any)
	for _, m := range members {
		id := m.(map[string]any)["awnId"].(string)
		waitFor(t, ctx, "member row "+id, `!!document.querySelector('#members-table tr[data-awn-id=`+js(id)+`]')`)
	}
	run(t, ctx, "ban carol",
		chromedp.SendKeys(chromedp.CSS("#ban-id"), carol.awnID),
		chromedp.SendKeys(chromedp.CSS("#ban-reason"), "spam"),
		press(`#ban-form button[type="submit"]`))
	waitFor(t, ctx, "ban listed", `!!document.querySelector('#bans-table tr[data-awn-id=`+js(carol.awnID)+`]')`)
	waitFor(t, ctx, "banned member gone", `!document.querySelector('#members-table tr[data-awn-id=`+js(carol.awnID)+`]')`)
	bans := dev.must(t, "GET", "/v0/worlds/lobby/bans", nil)["bans"].([]any)
	if len(bans) != 1 || bans[0].(map[string]any)["awnId"] != carol.awnID || bans[0].(map[string]any)["reason"] != "spam" {
		t.Errorf("the API's bans after banning from the dashboard: %v", bans)
	}
	lobby = dev.must(t, "GET", "/v0/worlds/lobby", nil)
	waitFor(t, ctx, "member count after the ban", `document.querySelector('#worlds-table tr[data-world="lobby"] td:nth-child(5)')?.textContent === `+js(fmt.Sprint(lobby["memberCount"])))
	screenshot(t, ctx, "worlds")

	// Inbox depth.
	for i := range 3 {
		bob.must(t, "POST", "/v0/worlds/lobby/messages", map[string]any{"to": dev.awnID, "content": fmt.Sprintf("hello %d", i)})
	}
	peek := dev.must(t, "GET", "/v0/worlds/lobby/messages?peek=true&limit=100", nil)
	run(t, ctx, "inboxes view", press("#nav-inboxes"))
	waitFor(t, ctx, "inbox depth", `document.querySelector('#inboxes-table tr[data-world="lobby"] td:nth-child(4)')?.textContent === `+js(fmt.Sprint(peek["count"])))
	if peek["count"] != float64(3) {
		t.Errorf("API inbox count %v, want 3", peek["count"])
	}
	screenshot(t, ctx, "inboxes")

	// Webhook stats and dead letters: a receiver answering 410 disables the
	// webhook and dead-letters the delivery that got it.
	gone := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) { w.WriteHeader(http.StatusGone) }))
	defer gone.Close()
	dev.must(t, "PUT", "/v0/worlds/lobby/webhook", map[string]any{"url": gone.URL + "/hook"})
	bob.must(t, "POST", "/v0/worlds/lobby/messages", map[string]any{"to": dev.awnID, "content": "to the webhook"})
	var stats map[string]any
	for deadline := time.Now().Add(15 * time.Second); ; {
		stats = dev.must(t, "GET", "/v0/worlds/lobby/webhook", nil)["stats"].(map[string]any)
		if stats["deadLettered"].(float64) >= 1 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("no dead letter after a 410: %v", stats)
		}
		time.Sleep(50 * time.Millisecond)
	}
	run(t, ctx, "webhooks view", press("#nav-webhooks"))
	waitFor(t, ctx, "webhook row", `!!document.querySelector('#webhooks-table tr[data-world="lobby"] td:nth-child(6)')`)
	for col, key := range map[int]string{4: "delivered", 5: "failed", 6: "deadLettered"} {
		if got := text(t, ctx, fmt.Sprintf(`#webhooks-table tr[data-world="lobby"] td:nth-child(%d)`, col)); got != fmt.Sprint(stats[key]) {
			t.Errorf("webhooks: %s shows %s, the API says %v", key, got, stats[key])
		}
	}
	screenshot(t, ctx, "webhooks")
	run(t, ctx, "replay", press(`#webhooks-table tr[data-world="lobby"] button`))
	want := fmt.Sprintf("Replayed %v dead letter(s) in lobby", stats["deadLettered"])
	waitFor(t, ctx, "replay result", `document.querySelector("#replay-result").textContent.startsWith(`+js(want)+`)`)
	screenshot(t, ctx, "webhooks-replayed")

	// Live events: an action submitted after following starts shows up.
	run(t, ctx, "events view", press("#nav-events"), press("#events-start"))
	waitFor(t, ctx, "following", `document.querySelector("#events-status").textContent.startsWith("Following lobby")`)
	act := bob.must(t, "POST", "/v0/worlds/lobby/actions", map[string]any{"action": "wave", "params": map[string]any{"to": "everyone"}})
	waitFor(t, ctx, "live action event", `[...document.querySelectorAll('#events-table tr[data-type="action.submitted"]')].some(tr => tr.textContent.includes(`+js(fmt.Sprint(act["actionId"]))+`))`)
	screenshot(t, ctx, "events")
	run(t, ctx, "stop following", press("#events-stop"))

	// Escrows and balance: against the account route when this server has
	// one, else the API's 404 shown as a readable error.
	status, acct := dev.call(t, "GET", "/api/v1/accounts/"+url.PathEscape(dev.awnID), nil)
	run(t, ctx, "escrows view", press("#nav-escrows"))
	if status == http.StatusNotFound {
		waitFor(t, ctx, "escrow error", `!document.querySelector("#error").hidden`)
		if got := text(t, ctx, "#error"); !strings.Contains(got, "404") || !strings.Contains(got, "/api/v1/accounts/") {
			t.Errorf("escrows without the account route show %q", got)
		}
	} else {
		waitFor(t, ctx, "balance", `document.querySelector("#balance dd")?.textContent === `+js(fmt.Sprint(acct["balance"])))
	}
	screenshot(t, ctx, "escrows")

	// A server that went away: the error says so in words.
	run(t, ctx, "inboxes view again", press("#nav-inboxes"))
	waitFor(t, ctx, "inboxes shown", `document.querySelector('#inboxes-table tr[data-world="lobby"] td:nth-child(4)')?.textContent === "4"`)
	if err := s.srv.Close(); err != nil {
		t.Fatal(err)
	}
	run(t, ctx, "refresh", press("#inboxes-refresh"))
	waitFor(t, ctx, "unreachable error", `document.querySelector("#error").textContent.includes("is the server running?")`)
	screenshot(t, ctx, "error-unreachable")
}

// TestBrowserSignsAsTheCLI compares the headers the dashboard's sign.js
// makes in chromium with the Go signer awn uses, for the same key, clock
// and nonce.
func TestBrowserSignsAsTheCLI(t *testing.T) {
	s := startSite(t)
	ctx := browser(t)
	run(t, ctx, "open", chromedp.Navigate(s.base+"/"))
	const nonce = "fixed-nonce-for-the-test-0123456789"
	const created = 1767225600
	target := s.base + "/v0/worlds/lobby/messages?peek=true&limit=5"
	body := `{"to":"x","content":"hé"}`
	signer, err := auth.NewSigner(s.network, auth.WithClock(func() time.Time { return time.Unix(created, 0) }),
		auth.WithNonces(func() (string, error) { return nonce, nil }))
	if err != nil {
		t.Fatal(err)
	}
	u, _ := url.Parse(target)
	want, err := signer.Headers("POST", u, "", []byte(body))
	if err != nil {
		t.Fatal(err)
	}
	var pemText string
	resp, err := http.Get(s.base + dashboard.DevKeyPath)
	if err != nil {
		t.Fatal(err)
	}
	b, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	pemText = string(b)
	expr := `import("/dashboard/sign.js").then(async (m) => {
		const id = await m.loadKey(` + js(pemText) + `);
		return m.signatureHeaders(id, "POST", ` + js(target) + `, new TextEncoder().encode(` + js(body) + `), {now: ` + fmt.Sprint(created) + `, nonce: ` + js(nonce) + `});
	})`
	got, err := chromedp.Run(ctx, chromedp.Evaluate[map[string]string](expr, chromedp.EvalAwaitPromise))
	if err != nil {
		t.Fatalf("sign in the browser: %v", err)
	}
	for _, h := range []string{"Content-Digest", "Signature-Input", "Signature"} {
		if got[h] != want.Get(h) {
			t.Errorf("%s: browser %q, Go signer %q", h, got[h], want.Get(h))
		}
	}
}

// TestLiveEventsOverTheStream serves the world's event stream in the wire
// format of Server-Sent Events (id, event, data lines; comment heartbeats)
// in front of the harness, and checks the live view reads it: the events
// sent before and after the page started following, heartbeats ignored.
func TestLiveEventsOverTheStream(t *testing.T) {
	send := make(chan string, 4)
	var signed atomic.Bool
	s := startSiteWith(t, func(api http.Handler) http.Handler {
		return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			if r.URL.Path != "/v0/worlds/lobby/events/stream" {
				api.ServeHTTP(w, r)
				return
			}
			signed.Store(strings.Contains(r.Header.Get("Signature-Input"), `tag="web-bot-auth"`) && r.Header.Get("Signature") != "")
			w.Header().Set("Content-Type", "text/event-stream")
			w.WriteHeader(http.StatusOK)
			rc := http.NewResponseController(w)
			_ = rc.Flush()
			for {
				select {
				case ev := <-send:
					_, _ = io.WriteString(w, ev)
					_ = rc.Flush()
				case <-r.Context().Done():
					return
				}
			}
		})
	})
	ctx := browser(t)
	event := func(id, typ string) string {
		data := fmt.Sprintf(`{"eventId":%q,"type":%q,"worldId":"lobby","data":{"n":%q},"visibility":"public","createdAt":"2026-12-04T12:00:00Z"}`, id, typ, id)
		return "id: " + id + "\nevent: " + typ + "\ndata: " + data + "\n\n"
	}
	send <- event("01KBEFORE0000000000000000A", "agent.joined")
	run(t, ctx, "open", chromedp.Navigate(s.base+"/#events"))
	run(t, ctx, "dev key", press("#dev-key"))
	waitFor(t, ctx, "key loaded", `document.querySelector("#key-status").textContent.startsWith("Signing as")`)
	run(t, ctx, "follow", press("#events-start"))
	waitFor(t, ctx, "streaming", `document.querySelector("#events-status").textContent === "Following lobby (event stream)."`)
	waitFor(t, ctx, "first event", `!!document.querySelector('#events-table tr[data-event-id="01KBEFORE0000000000000000A"]')`)
	send <- ": heartbeat\n\n"
	send <- event("01KAFTER00000000000000000B", "action.submitted")
	waitFor(t, ctx, "live event", `document.querySelector('#events-table tr[data-event-id="01KAFTER00000000000000000B"]')?.dataset.type === "action.submitted"`)
	if n := text(t, ctx, "#events-table tbody"); strings.Contains(n, "heartbeat") {
		t.Errorf("a heartbeat comment shows as an event: %q", n)
	}
	if !signed.Load() {
		t.Error("the stream request carried no Web Bot Auth signature")
	}
	screenshot(t, ctx, "events-stream")
	run(t, ctx, "stop", press("#events-stop"))
}
