package delivery_test

import (
	"context"
	"crypto/ed25519"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	standardwebhooks "github.com/standard-webhooks/standard-webhooks/libraries/go"

	"github.com/a2awire/a2awire/shared/egress"
	"github.com/a2awire/a2awire/shared/webhook/delivery"
	"github.com/a2awire/a2awire/shared/webhook/signature"
)

func harnessClient() *http.Client {
	return egress.NewClient(egress.Options{AllowLoopback: true, AllowHTTP: true})
}

func sample() delivery.Delivery {
	return delivery.Delivery{
		WorldID:   "lobby",
		EventID:   "01JZ0000000000000000000042",
		Type:      "message.received",
		Payload:   json.RawMessage(`{"messageId":"m1","from":"aw:sha256:ab"}`),
		Timestamp: time.Date(2026, 12, 1, 12, 0, 0, 5, time.UTC),
	}
}

// receiver answers with status, headers and body; it records the last
// request.
type receiver struct {
	srv    *httptest.Server
	hits   atomic.Int32
	header atomic.Pointer[http.Header]
	body   atomic.Pointer[[]byte]
}

func newReceiver(t *testing.T, h func(w http.ResponseWriter)) *receiver {
	t.Helper()
	rc := &receiver{}
	rc.srv = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		rc.hits.Add(1)
		b, _ := io.ReadAll(r.Body)
		hd := r.Header.Clone()
		rc.header.Store(&hd)
		rc.body.Store(&b)
		h(w)
	}))
	t.Cleanup(rc.srv.Close)
	return rc
}

func TestDeliverSignedBody(t *testing.T) {
	rc := newReceiver(t, func(w http.ResponseWriter) { w.WriteHeader(204) })
	secret, _ := signature.NewSecret()
	_, key, _ := ed25519.GenerateKey(nil)
	r := delivery.Deliver(context.Background(), harnessClient(), rc.srv.URL+"/hook", sample(), secret, key)
	if !r.OK() || r.Status != 204 || r.Action != nil || r.Gone || r.Latency <= 0 {
		t.Fatalf("result %+v", r)
	}
	h, body := *rc.header.Load(), *rc.body.Load()
	if h.Get("X-AWN-World-Id") != "lobby" || h.Get("X-AWN-Event-Id") != sample().EventID ||
		h.Get("webhook-id") != sample().EventID || h.Get("Content-Type") != "application/json" {
		t.Errorf("headers %v", h)
	}
	var got map[string]any
	if err := json.Unmarshal(body, &got); err != nil {
		t.Fatal(err)
	}
	want := `{"worldId":"lobby","eventId":"01JZ0000000000000000000042","event":"message.received","payload":{"messageId":"m1","from":"aw:sha256:ab"},"timestamp":"2026-12-01T12:00:00.000000005Z"}`
	if string(body) != want {
		t.Errorf("body\n %s\nwant\n %s", body, want)
	}
	wh, _ := standardwebhooks.NewWebhook(secret)
	if err := wh.Verify(body, h); err != nil {
		t.Errorf("official library: %v", err)
	}
	if err := signature.VerifyV1a(h, body, key.Public().(ed25519.PublicKey), 0); err != nil {
		t.Errorf("v1a: %v", err)
	}
}

func TestDeliverEmptyPayloadIsObject(t *testing.T) {
	d := sample()
	d.Payload = nil
	b, err := delivery.BuildBody(d)
	if err != nil || !strings.Contains(string(b), `"payload":{}`) {
		t.Fatalf("%s %v", b, err)
	}
}

func TestDeliverAction(t *testing.T) {
	secret, _ := signature.NewSecret()
	cases := []struct {
		body   string
		action string
		params string
	}{
		{`{"action":"move","params":{"x":1}}`, "move", `{"x":1}`},
		{` {"action":"wave"} `, "wave", ``},
		{`{"params":{"x":1},"action":"game.move_2"}`, "game.move_2", `{"x":1}`},
		// Issue 27.8: a name worlds accept is an action here too.
		{`{"action":"2x"}`, "2x", ``},
		{`ok`, "", ""},
		{``, "", ""},
		{`{}`, "", ""},
		{`{"action":"move","params":[1]}`, "", ""},
		{`{"action":"move","params":"x"}`, "", ""},
		{`{"action":"move","params":null}`, "", ""},
		{`{"action":"move","extra":1}`, "", ""},
		{`{"Action":"move"}`, "", ""},
		{`{"action":"move","action":"jump"}`, "", ""},
		{`{"action":"Move!"}`, "", ""},
		{`{"action":1}`, "", ""},
		{`{"action":"move"} {"action":"jump"}`, "", ""},
		{`[{"action":"move"}]`, "", ""},
		{"{\"action\":\"move\",\"params\":{\"s\":\"\xff\"}}", "", ""},
		{`{"action":"move","params":{"pad":"` + strings.Repeat("x", delivery.MaxResponseBytes) + `"}}`, "", ""},
	}
	for _, c := range cases {
		rc := newReceiver(t, func(w http.ResponseWriter) { _, _ = io.WriteString(w, c.body) })
		r := delivery.Deliver(context.Background(), harnessClient(), rc.srv.URL, sample(), secret, nil)
		if !r.OK() {
			t.Errorf("%.40q: %v", c.body, r.Err)
			continue
		}
		switch {
		case c.action == "" && r.Action != nil:
			t.Errorf("%.40q: want no action, got %q", c.body, r.Action.Action)
		case c.action != "" && (r.Action == nil || r.Action.Action != c.action || string(r.Action.Params) != c.params):
			t.Errorf("%.40q: want %s %s, got %+v", c.body, c.action, c.params, r.Action)
		case c.action == "" && (r.Ignored == "") != (strings.TrimSpace(c.body) == ""):
			t.Errorf("%.40q: Ignored %q: a body that is not an action must say why, an empty one must not", c.body, r.Ignored)
		case c.action != "" && r.Ignored != "":
			t.Errorf("%.40q: an action taken, yet Ignored %q", c.body, r.Ignored)
		}
	}
}

func TestDeliverFailures(t *testing.T) {
	secret, _ := signature.NewSecret()
	c := harnessClient()
	status := func(code int, hdr ...string) *receiver {
		return newReceiver(t, func(w http.ResponseWriter) {
			for i := 0; i+1 < len(hdr); i += 2 {
				w.Header().Set(hdr[i], hdr[i+1])
			}
			w.WriteHeader(code)
		})
	}
	r := delivery.Deliver(context.Background(), c, status(410).srv.URL, sample(), secret, nil)
	var se *delivery.StatusError
	if r.OK() || !r.Gone || r.Status != 410 || !errors.As(r.Err, &se) || se.Status != 410 {
		t.Errorf("410: %+v", r)
	}
	r = delivery.Deliver(context.Background(), c, status(429, "Retry-After", "120").srv.URL, sample(), secret, nil)
	if r.OK() || r.Gone || r.RetryAfter != 120*time.Second {
		t.Errorf("429: %+v", r)
	}
	date := time.Now().Add(90 * time.Second).UTC().Format(http.TimeFormat)
	r = delivery.Deliver(context.Background(), c, status(503, "Retry-After", date).srv.URL, sample(), secret, nil)
	if r.OK() || r.RetryAfter < 80*time.Second || r.RetryAfter > 91*time.Second {
		t.Errorf("503 with a date: %+v", r)
	}
	r = delivery.Deliver(context.Background(), c, status(500, "Retry-After", "120").srv.URL, sample(), secret, nil)
	if r.OK() || r.RetryAfter != 0 || r.Status != 500 {
		t.Errorf("500 ignores Retry-After: %+v", r)
	}
	target := status(200)
	r = delivery.Deliver(context.Background(), c, status(307, "Location", target.srv.URL).srv.URL, sample(), secret, nil)
	if r.OK() || r.Status != 307 || target.hits.Load() != 0 {
		t.Errorf("307 is a failure and not followed: %+v, target hit %d", r, target.hits.Load())
	}
	// Nothing listens there any more.
	gone := status(200)
	gone.srv.Close()
	r = delivery.Deliver(context.Background(), c, gone.srv.URL, sample(), secret, nil)
	if r.OK() || r.Status != 0 || r.Err == nil {
		t.Errorf("closed port: %+v", r)
	}
	// A refused address is reported as such.
	cloud := egress.NewClient(egress.Options{AllowHTTP: true})
	ok := status(200)
	r = delivery.Deliver(context.Background(), cloud, ok.srv.URL, sample(), secret, nil)
	if !errors.Is(r.Err, egress.ErrBlocked) || ok.hits.Load() != 0 {
		t.Errorf("cloud client to loopback: %+v", r)
	}
	// A bad secret never reaches the network.
	r = delivery.Deliver(context.Background(), c, ok.srv.URL, sample(), "nope", nil)
	if r.Err == nil || ok.hits.Load() != 0 {
		t.Errorf("bad secret: %+v", r)
	}
}

// TestDeliverTimeout: a receiver slower than the caller's deadline (a ping
// probe's 2 s, here 200 ms) is a failure at that deadline; AttemptTimeout
// caps every attempt at 5 s.
func TestDeliverTimeout(t *testing.T) {
	release := make(chan struct{})
	rc := newReceiver(t, func(w http.ResponseWriter) { <-release })
	defer close(release)
	secret, _ := signature.NewSecret()
	ctx, cancel := context.WithTimeout(context.Background(), 200*time.Millisecond)
	defer cancel()
	start := time.Now()
	r := delivery.Deliver(ctx, harnessClient(), rc.srv.URL, sample(), secret, nil)
	if r.OK() || !errors.Is(r.Err, context.DeadlineExceeded) {
		t.Errorf("want a deadline error, got %+v", r)
	}
	if el := time.Since(start); el > 3*time.Second {
		t.Errorf("took %v", el)
	}
	if delivery.AttemptTimeout != 5*time.Second {
		t.Errorf("AttemptTimeout %v", delivery.AttemptTimeout)
	}
}

func TestParseRetryAfter(t *testing.T) {
	now := time.Date(2026, 12, 1, 12, 0, 0, 0, time.UTC)
	cases := map[string]time.Duration{
		"":                              0,
		"0":                             0,
		"-5":                            0,
		"30":                            30 * time.Second,
		" 7 ":                           7 * time.Second,
		"999999999999":                  delivery.MaxRetryAfter,
		"soon":                          0,
		"Tue, 01 Dec 2026 12:02:00 GMT": 2 * time.Minute,
		"Tue, 01 Dec 2026 11:00:00 GMT": 0,
		"Tue, 01 Dec 2027 12:00:00 GMT": delivery.MaxRetryAfter,
	}
	for v, want := range cases {
		if got := delivery.ParseRetryAfter(v, now); got != want {
			t.Errorf("%q: %v, want %v", v, got, want)
		}
	}
}
