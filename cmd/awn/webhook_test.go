package main

import (
	"bytes"
	"context"
	"crypto/ed25519"
	"crypto/rand"
	"encoding/json"
	"fmt"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/a2awire/a2awire/shared/auth"
	"github.com/a2awire/a2awire/shared/webhook/delivery"
	"github.com/a2awire/a2awire/shared/webhook/signature"
)

// keyDirectory serves pub as the network's webhook key directory, at the
// path awn webhook serve fetches by default.
func keyDirectory(t *testing.T, pub ed25519.PublicKey) string {
	t.Helper()
	mux := http.NewServeMux()
	mux.HandleFunc("GET "+networkKeyPath, func(w http.ResponseWriter, _ *http.Request) {
		w.Header().Set("Content-Type", auth.DirectoryMediaType)
		_ = json.NewEncoder(w).Encode(auth.NewDirectory(pub))
	})
	srv := httptest.NewServer(mux)
	t.Cleanup(srv.Close)
	return srv.URL
}

func newKey(t *testing.T) (ed25519.PublicKey, ed25519.PrivateKey) {
	t.Helper()
	pub, priv, err := ed25519.GenerateKey(rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	return pub, priv
}

func newSecret(t *testing.T) string {
	t.Helper()
	s, err := signature.NewSecret()
	if err != nil {
		t.Fatal(err)
	}
	return s
}

// listening waits for the receiver's "listening on http://ADDR," line and
// returns its URL.
func (rn *running) listening(t *testing.T) string {
	t.Helper()
	deadline := time.Now().Add(20 * time.Second)
	for time.Now().Before(deadline) {
		s := rn.stderr.String()
		if _, rest, ok := strings.Cut(s, "listening on "); ok {
			if u, _, ok := strings.Cut(rest, ","); ok {
				return u
			}
		}
		select {
		case code := <-rn.done:
			rn.done <- code
			t.Fatalf("webhook serve ended with %d:\n%s", code, s)
		case <-time.After(10 * time.Millisecond):
		}
	}
	t.Fatalf("webhook serve did not say where it listens:\n%s", rn.stderr.String())
	return ""
}

func testDelivery(id string) delivery.Delivery {
	return delivery.Delivery{WorldID: "lobby", EventID: id, Type: "message.received",
		Payload: json.RawMessage(`{"from":"aw:sha256:ab","preview":"hi"}`), Timestamp: time.Date(2026, 12, 1, 20, 0, 0, 0, time.UTC)}
}

// TestWebhookServe: the receiver prints a delivery signed with its secret
// and the network key and answers 204; it answers 401 and says why on
// stderr for a wrong secret, a missing or foreign v1a signature and a
// tampered body; it exits 0 on Ctrl-C.
func TestWebhookServe(t *testing.T) {
	t.Parallel()
	netPub, netKey := newKey(t)
	_, otherKey := newKey(t)
	secret := newSecret(t)
	env := withHome(t, keyDirectory(t, netPub))
	rn := start(t, env, "webhook", "serve", "--addr", "127.0.0.1:0", "--secret", secret)
	u := rn.listening(t)
	if !strings.Contains(rn.stderr.String(), "checking v1 with the secret and v1a with the network key") {
		t.Errorf("startup line: %s", rn.stderr.String())
	}
	ctx := context.Background()
	client := &http.Client{}

	res := delivery.Deliver(ctx, client, u, testDelivery("01GOOD"), secret, netKey)
	if res.Status != http.StatusNoContent || res.Action != nil {
		t.Errorf("a good delivery: %+v", res)
	}
	for _, c := range []struct {
		id, secret string
		key        ed25519.PrivateKey
		why        string
	}{
		{"01WRONGSECRET", newSecret(t), netKey, "v1: "},
		{"01NOV1A", secret, nil, "v1a: "},
		{"01FOREIGN", secret, otherKey, "v1a: "},
	} {
		res := delivery.Deliver(ctx, client, u, testDelivery(c.id), c.secret, c.key)
		if res.Status != http.StatusUnauthorized {
			t.Errorf("%s: %+v, want 401", c.id, res)
		}
		if want := "refused delivery " + c.id + ": " + c.why; !strings.Contains(rn.stderr.String(), want) {
			t.Errorf("%s: stderr lacks %q:\n%s", c.id, want, rn.stderr.String())
		}
	}
	// A body changed after signing.
	body, err := delivery.BuildBody(testDelivery("01TAMPERED"))
	if err != nil {
		t.Fatal(err)
	}
	h, err := signature.Headers("01TAMPERED", time.Now(), body, secret, netKey)
	if err != nil {
		t.Fatal(err)
	}
	post := func(body []byte, h http.Header) int {
		req, _ := http.NewRequest(http.MethodPost, u, bytes.NewReader(body))
		for k, v := range h {
			req.Header[k] = v
		}
		resp, err := client.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		_ = resp.Body.Close()
		return resp.StatusCode
	}
	if code := post(bytes.Replace(body, []byte(`"hi"`), []byte(`"ho"`), 1), h); code != http.StatusUnauthorized {
		t.Errorf("tampered body: %d", code)
	}
	// Signed, but not a delivery.
	junk := []byte(`[1,2]`)
	if h, err = signature.Headers("01JUNK", time.Now(), junk, secret, netKey); err != nil {
		t.Fatal(err)
	}
	if code := post(junk, h); code != http.StatusBadRequest {
		t.Errorf("signed junk: %d", code)
	}
	resp, err := client.Get(u)
	if err != nil {
		t.Fatal(err)
	}
	_ = resp.Body.Close()
	if resp.StatusCode != http.StatusMethodNotAllowed {
		t.Errorf("GET: %d", resp.StatusCode)
	}

	rn.cancel()
	if code := rn.wait(t); code != 0 {
		t.Errorf("exit %d after Ctrl-C; stderr:\n%s", code, rn.stderr.String())
	}
	out := rn.stdout.String()
	if out != "2026-12-01T20:00:00Z  lobby  01GOOD  message.received  {\"from\":\"aw:sha256:ab\",\"preview\":\"hi\"}\n" {
		t.Errorf("stdout, want the one verified delivery:\n%s", out)
	}
	if strings.Contains(rn.stderr.String(), "error") {
		t.Errorf("stderr:\n%s", rn.stderr.String())
	}
}

// TestWebhookServeAction: with --action the receiver answers verified
// deliveries with {"action","params"}, which delivery reads as the action
// to forward; without --secret it checks v1a alone; --json prints each
// delivery as one JSON line.
func TestWebhookServeAction(t *testing.T) {
	t.Parallel()
	netPub, netKey := newKey(t)
	env := withHome(t, "http://127.0.0.1:1")
	rn := start(t, env, "--json", "webhook", "serve", "--addr", "127.0.0.1:0", "--network-key-url", keyDirectory(t, netPub)+networkKeyPath,
		"--action", "move", "--params", `{"to":"e4"}`)
	u := rn.listening(t)
	res := delivery.Deliver(context.Background(), &http.Client{}, u, testDelivery("01ACT"), newSecret(t), netKey)
	if res.Status != http.StatusOK || res.Action == nil || res.Action.Action != "move" || string(res.Action.Params) != `{"to":"e4"}` {
		t.Errorf("delivery with --action: %+v", res)
	}
	res = delivery.Deliver(context.Background(), &http.Client{}, u, testDelivery("01UNSIGNED"), newSecret(t), nil)
	if res.Status != http.StatusUnauthorized {
		t.Errorf("delivery without v1a: %+v", res)
	}
	rn.cancel()
	if code := rn.wait(t); code != 0 {
		t.Errorf("exit %d", code)
	}
	var got delivery.Body
	decodeStrict(t, rn.stdout.String(), &got)
	if got.EventID != "01ACT" || got.WorldID != "lobby" || got.Event != "message.received" {
		t.Errorf("--json line: %s", rn.stdout.String())
	}
}

// TestWebhookServeKeys: without a secret the network key is required; with
// one, an unreachable default key directory leaves v1 checks only; a
// taken address is reported.
func TestWebhookServeKeys(t *testing.T) {
	t.Parallel()
	r := awn(t, withHome(t, "http://127.0.0.1:1"), "webhook", "serve", "--addr", "127.0.0.1:0")
	if r.code != 1 || !strings.Contains(r.stderr, "awn: the network's signing key: ") {
		t.Errorf("no secret, no key: %v", r)
	}
	secret := newSecret(t)
	rn := start(t, withHome(t, "http://127.0.0.1:1"), "webhook", "serve", "--addr", "127.0.0.1:0", "--secret", secret)
	u := rn.listening(t)
	if s := rn.stderr.String(); !strings.Contains(s, "v1a signatures are not checked") || !strings.Contains(s, "checking v1 with the secret (Ctrl-C") {
		t.Errorf("stderr:\n%s", s)
	}
	if res := delivery.Deliver(context.Background(), &http.Client{}, u, testDelivery("01V1"), secret, nil); res.Status != http.StatusNoContent {
		t.Errorf("v1-only delivery: %+v", res)
	}
	rn.cancel()
	rn.wait(t)

	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	r = awn(t, withHome(t, "http://127.0.0.1:1"), "webhook", "serve", "--addr", ln.Addr().String(), "--secret", secret)
	if r.code != 1 || !strings.Contains(r.stderr, "listen on "+ln.Addr().String()) {
		t.Errorf("address in use: %v", r)
	}
}

// TestWebhookServeConcurrent: deliveries arriving at once are each verified
// and printed as one whole line (run under -race).
func TestWebhookServeConcurrent(t *testing.T) {
	t.Parallel()
	netPub, netKey := newKey(t)
	secret := newSecret(t)
	rn := start(t, withHome(t, keyDirectory(t, netPub)), "webhook", "serve", "--addr", "127.0.0.1:0", "--secret", secret)
	u := rn.listening(t)
	const n = 32
	var wg sync.WaitGroup
	statuses := make(chan int, n)
	for i := range n {
		wg.Add(1)
		go func() {
			defer wg.Done()
			statuses <- delivery.Deliver(context.Background(), &http.Client{}, u, testDelivery(fmt.Sprintf("01C%03d", i)), secret, netKey).Status
		}()
	}
	wg.Wait()
	close(statuses)
	for s := range statuses {
		if s != http.StatusNoContent {
			t.Errorf("a concurrent delivery got %d", s)
		}
	}
	rn.cancel()
	rn.wait(t)
	lines := strings.Split(strings.TrimSuffix(rn.stdout.String(), "\n"), "\n")
	seen := map[string]bool{}
	for _, l := range lines {
		f := strings.Fields(l)
		if len(f) != 5 || f[1] != "lobby" || f[3] != "message.received" {
			t.Errorf("torn or wrong line %q", l)
			continue
		}
		seen[f[2]] = true
	}
	if len(seen) != n {
		t.Errorf("%d distinct deliveries printed, want %d:\n%s", len(seen), n, rn.stdout.String())
	}
}
