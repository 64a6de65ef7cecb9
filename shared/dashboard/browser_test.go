package dashboard_test

import (
	"bytes"
	"context"
	"crypto/ed25519"
	"crypto/rand"
	"crypto/x509"
	"encoding/base64"
	"encoding/json"
	"encoding/pem"
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
	// Visible first: a control of a view pressed right after the view's
	// own button is shown by that button's handler, which may not have
	// run yet (a hidden element is not focusable).
	return chromedp.Steps(chromedp.WaitVisible(chromedp.CSS(sel)), chromedp.Focus(chromedp.CSS(sel)), chromedp.KeyEvent(kb.Enter))
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

// cutStream sits in front of the harness and, on the lobby's event stream
// only, ends the first connection after the first write that carries an
// event (a dropped connection, seen by the page as the stream's end), then
// holds the reconnection until release is closed, noting what it resumes
// from. Every byte is the real route's.
type cutStream struct {
	mu          sync.Mutex
	opened      int
	lastSent    string // the last id: the first connection wrote
	resumedFrom string // the Last-Event-ID of the second
	resumedURL  string
	signed      bool
	reconnected chan struct{}
	release     chan struct{}
}

func (c *cutStream) wrap(api http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path != "/v0/worlds/lobby/events/stream" {
			api.ServeHTTP(w, r)
			return
		}
		c.mu.Lock()
		c.opened++
		n := c.opened
		if n == 1 {
			c.signed = strings.Contains(r.Header.Get("Signature-Input"), `tag="web-bot-auth"`) && r.Header.Get("Signature") != ""
		}
		if n == 2 {
			c.resumedFrom, c.resumedURL = r.Header.Get("Last-Event-ID"), r.URL.String()
		}
		c.mu.Unlock()
		switch n {
		case 1:
			ctx, cancel := context.WithCancel(r.Context())
			defer cancel()
			api.ServeHTTP(&cutWriter{ResponseWriter: w, c: c, cut: cancel}, r.WithContext(ctx))
		case 2:
			close(c.reconnected)
			select {
			case <-c.release:
			case <-r.Context().Done():
				return
			}
			api.ServeHTTP(w, r)
		default:
			api.ServeHTTP(w, r)
		}
	})
}

// cutWriter ends its request after the first write holding an event.
type cutWriter struct {
	http.ResponseWriter
	c   *cutStream
	cut func()
}

func (w *cutWriter) Write(p []byte) (int, error) {
	n, err := w.ResponseWriter.Write(p)
	var last string
	for _, line := range strings.Split(string(p), "\n") {
		if id, ok := strings.CutPrefix(line, "id: "); ok {
			last = id
		}
	}
	if last != "" {
		w.c.mu.Lock()
		w.c.lastSent = last
		w.c.mu.Unlock()
		w.cut()
	}
	return n, err
}

func (w *cutWriter) Flush() { http.NewResponseController(w.ResponseWriter).Flush() }

// Unwrap lets the harness lift the server's deadlines for the stream.
func (w *cutWriter) Unwrap() http.ResponseWriter { return w.ResponseWriter }

// eventIDs are the ids of the events the API's long poll lists for a.
func eventIDs(t *testing.T, a *agent, world string) []string {
	t.Helper()
	var ids []string
	after := ""
	for {
		q := "limit=100"
		if after != "" {
			q += "&after=" + after
		}
		page := a.must(t, "GET", "/v0/worlds/"+world+"/events?"+q, nil)
		evs := page["events"].([]any)
		for _, e := range evs {
			ids = append(ids, e.(map[string]any)["eventId"].(string))
		}
		if len(evs) == 0 {
			return ids
		}
		after = ids[len(ids)-1]
	}
}

// TestLiveEventsOverTheStream follows the lobby in chromium through the
// harness's real GET /v0/worlds/{world}/events/stream. The first
// connection is cut after its first event page; the page reconnects with
// Last-Event-ID set to the last id it was sent, and an action submitted
// while it was away arrives on the resumed stream. At the end the page
// lists exactly the events the API's long poll lists, in order, none
// repeated.
func TestLiveEventsOverTheStream(t *testing.T) {
	c := &cutStream{reconnected: make(chan struct{}), release: make(chan struct{})}
	s := startSiteWith(t, c.wrap)
	ctx := browser(t)
	dev := newAgent(t, s.base, s.network)
	bob := newAgent(t, s.base, nil)
	dev.must(t, "POST", "/v0/worlds/lobby/join", map[string]any{"publicKey": dev.pub})
	bob.must(t, "POST", "/v0/worlds/lobby/join", map[string]any{"publicKey": bob.pub})

	run(t, ctx, "open", chromedp.Navigate(s.base+"/#events"))
	run(t, ctx, "dev key", press("#dev-key"))
	waitFor(t, ctx, "key loaded", `document.querySelector("#key-status").textContent.startsWith("Signing as")`)
	run(t, ctx, "follow", press("#events-start"))
	select {
	case <-c.reconnected:
	case <-time.After(15 * time.Second):
		t.Fatal("the page did not reconnect after its stream was cut")
	}
	c.mu.Lock()
	lastSent, resumedFrom, resumedURL, signed := c.lastSent, c.resumedFrom, c.resumedURL, c.signed
	c.mu.Unlock()
	if !signed {
		t.Error("the stream request carried no Web Bot Auth signature")
	}
	if lastSent == "" || resumedFrom != lastSent {
		t.Errorf("the page resumed with Last-Event-ID %q (URL %s), the cut stream last sent %q", resumedFrom, resumedURL, lastSent)
	}
	waitFor(t, ctx, "reconnecting", `document.querySelector("#events-status").textContent.startsWith("Reconnecting to lobby after event `+lastSent+`")`)
	// Submitted while the page is away: only a resumption shows it.
	act := bob.must(t, "POST", "/v0/worlds/lobby/actions", map[string]any{"action": "wave", "params": map[string]any{"to": "everyone"}})
	close(c.release)
	waitFor(t, ctx, "streaming again", `document.querySelector("#events-status").textContent === "Following lobby (event stream)."`)
	waitFor(t, ctx, "action from the gap", `[...document.querySelectorAll('#events-table tr[data-type="action.submitted"]')].some(tr => tr.textContent.includes(`+js(fmt.Sprint(act["actionId"]))+`))`)
	// The page's rows are the API's events: nothing lost, nothing twice.
	// (Later presence events may still come; both sides are read until
	// they agree.)
	var want []string
	var got []string
	for deadline := time.Now().Add(10 * time.Second); ; {
		want = eventIDs(t, dev, "lobby")
		ids, err := chromedp.Run(ctx, chromedp.Evaluate[[]string](`[...document.querySelectorAll("#events-table tbody tr")].map(tr => tr.dataset.eventId)`))
		if err != nil {
			t.Fatal(err)
		}
		got = ids
		if strings.Join(got, ",") == strings.Join(want, ",") || time.Now().After(deadline) {
			break
		}
		time.Sleep(100 * time.Millisecond)
	}
	if strings.Join(got, ",") != strings.Join(want, ",") {
		t.Errorf("the page lists events\n%v\nthe API lists\n%v", got, want)
	}
	c.mu.Lock()
	opened := c.opened
	c.mu.Unlock()
	if opened != 2 {
		t.Errorf("%d stream connections, want 2", opened)
	}
	screenshot(t, ctx, "events-stream")
	run(t, ctx, "stop", press("#events-stop"))
}

// TestLiveEventsFallBackToLongPoll answers the stream's path 404 as API
// Gateway does in AWS (the stream has its own function URL there) and
// checks the page follows the lobby with the real long poll instead.
func TestLiveEventsFallBackToLongPoll(t *testing.T) {
	var polled atomic.Int32
	s := startSiteWith(t, func(api http.Handler) http.Handler {
		return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			switch r.URL.Path {
			case "/v0/worlds/lobby/events/stream":
				w.Header().Set("Content-Type", "application/json")
				w.WriteHeader(http.StatusNotFound)
				_, _ = io.WriteString(w, `{"message":"Not Found"}`)
				return
			case "/v0/worlds/lobby/events":
				if r.URL.Query().Get("wait") != "" {
					polled.Add(1)
				}
			}
			api.ServeHTTP(w, r)
		})
	})
	ctx := browser(t)
	dev := newAgent(t, s.base, s.network)
	bob := newAgent(t, s.base, nil)
	dev.must(t, "POST", "/v0/worlds/lobby/join", map[string]any{"publicKey": dev.pub})
	bob.must(t, "POST", "/v0/worlds/lobby/join", map[string]any{"publicKey": bob.pub})
	run(t, ctx, "open", chromedp.Navigate(s.base+"/#events"))
	run(t, ctx, "dev key", press("#dev-key"))
	waitFor(t, ctx, "key loaded", `document.querySelector("#key-status").textContent.startsWith("Signing as")`)
	run(t, ctx, "follow", press("#events-start"))
	waitFor(t, ctx, "long poll", `document.querySelector("#events-status").textContent.startsWith("Following lobby (long poll")`)
	act := bob.must(t, "POST", "/v0/worlds/lobby/actions", map[string]any{"action": "wave", "params": map[string]any{}})
	waitFor(t, ctx, "action by long poll", `[...document.querySelectorAll('#events-table tr[data-type="action.submitted"]')].some(tr => tr.textContent.includes(`+js(fmt.Sprint(act["actionId"]))+`))`)
	if polled.Load() == 0 {
		t.Error("the page showed the action without a long poll (wait=)")
	}
	run(t, ctx, "stop", press("#events-stop"))
	// The page's last poll runs to its end even when the page goes, as a
	// Lambda invocation does: one more event ends it now, so the server's
	// shutdown does not wait for it.
	bob.must(t, "POST", "/v0/worlds/lobby/actions", map[string]any{"action": "bye", "params": map[string]any{}})
}

// TestEscrowView grants credits with the operator's key (the network key),
// creates and funds an escrow and creates a second one from Go, then
// loads the buyer's key file in chromium: the balance, the held amount
// and each escrow with its state are the API's. With the dev key (the
// fixtures' account) the funded escrow shows under the provider role.
func TestEscrowView(t *testing.T) {
	s := startSite(t)
	ctx := browser(t)
	operator := newAgent(t, s.base, s.network)
	buyer := newAgent(t, s.base, nil)
	// Escrow routes are for registered agents.
	buyer.must(t, "POST", "/api/v1/agents", map[string]any{"name": "dashboard-buyer", "endpoint": s.base + "/nowhere", "capabilities": []string{"buying"}, "public_key": buyer.pub})
	operator.must(t, "POST", "/api/v1/accounts/"+buyer.awnID+"/grant", map[string]any{"amount": 500, "memo": "dashboard test"})
	funded := buyer.must(t, "POST", "/api/v1/escrows", map[string]any{"provider": "a2awire-punctual", "capability": "ping", "input": map[string]any{}, "amount": 40})
	fundedID := funded["id"].(string)
	if e := buyer.must(t, "POST", "/api/v1/escrows/"+fundedID+"/fund", nil); e["state"] != "funded" {
		t.Fatalf("fund: %v", e)
	}
	created := buyer.must(t, "POST", "/api/v1/escrows", map[string]any{"provider": "a2awire-clean", "capability": "word-count", "input": map[string]any{"text": "a b"}, "amount": 7})
	acct := buyer.must(t, "GET", "/api/v1/accounts/"+buyer.awnID, nil)
	if acct["balance"] != float64(460) || acct["held"] != float64(40) {
		t.Fatalf("the API's account after the grant and the funding: %v", acct)
	}
	list := buyer.must(t, "GET", "/api/v1/escrows?role=buyer&limit=100", nil)["escrows"].([]any)
	if len(list) != 2 {
		t.Fatalf("the API lists %d escrows for the buyer, want 2: %v", len(list), list)
	}

	der, err := x509.MarshalPKCS8PrivateKey(buyer.key)
	if err != nil {
		t.Fatal(err)
	}
	keyFile := filepath.Join(t.TempDir(), "key.pem")
	if err := os.WriteFile(keyFile, pem.EncodeToMemory(&pem.Block{Type: "PRIVATE KEY", Bytes: der}), 0o600); err != nil {
		t.Fatal(err)
	}
	run(t, ctx, "open", chromedp.Navigate(s.base+"/"))
	run(t, ctx, "load the buyer's key file", chromedp.SetUploadFiles(chromedp.CSS("#key-file"), []string{keyFile}))
	waitFor(t, ctx, "key loaded", `document.querySelector("#key-status").textContent.includes(`+js(buyer.awnID)+`)`)
	run(t, ctx, "escrows view", press("#nav-escrows"))
	waitFor(t, ctx, "balance", `document.querySelector("#balance-available")?.textContent === `+js(fmt.Sprint(acct["balance"])))
	if got := text(t, ctx, "#balance-held"); got != fmt.Sprint(acct["held"]) {
		t.Errorf("held shows %s, the API says %v", got, acct["held"])
	}
	waitFor(t, ctx, "escrow rows", `document.querySelectorAll("#escrows-table tbody tr[data-escrow-id]").length === 2`)
	for _, e := range list {
		e := e.(map[string]any)
		row := fmt.Sprintf(`#escrows-table tr[data-escrow-id=%q][data-role="buyer"]`, e["id"])
		for col, key := range map[int]string{3: "state", 4: "provider", 5: "capability", 6: "amount"} {
			if got := text(t, ctx, fmt.Sprintf("%s td:nth-child(%d)", row, col)); got != fmt.Sprint(e[key]) {
				t.Errorf("escrow %s: %s shows %q, the API says %v", e["id"], key, got, e[key])
			}
		}
	}
	if got := text(t, ctx, fmt.Sprintf(`#escrows-table tr[data-escrow-id=%q] td:nth-child(3)`, fundedID)); got != "funded" {
		t.Errorf("the funded escrow shows state %q", got)
	}
	if got := text(t, ctx, fmt.Sprintf(`#escrows-table tr[data-escrow-id=%q] td:nth-child(3)`, created["id"])); got != "created" {
		t.Errorf("the unfunded escrow shows state %q", got)
	}
	screenshot(t, ctx, "escrows")

	// The provider's side: the fixtures' account is the network key's.
	opAcct := operator.must(t, "GET", "/api/v1/accounts/"+operator.awnID, nil)
	run(t, ctx, "dev key", press("#dev-key"))
	waitFor(t, ctx, "dev key loaded", `document.querySelector("#key-status").textContent.includes(`+js(operator.awnID)+`)`)
	waitFor(t, ctx, "provider row", `document.querySelector('#escrows-table tr[data-escrow-id=`+js(fundedID)+`][data-role="provider"] td:nth-child(3)')?.textContent === "funded"`)
	waitFor(t, ctx, "operator balance", `document.querySelector("#balance-available")?.textContent === `+js(fmt.Sprint(opAcct["balance"])))
}
