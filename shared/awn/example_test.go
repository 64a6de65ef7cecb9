package awn_test

import (
	"context"
	"crypto/ed25519"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"os"
	"strings"
	"time"

	"github.com/a2awire/a2awire/local/harness"
	"github.com/a2awire/a2awire/shared/awn"
	"github.com/a2awire/a2awire/shared/fixtures/seed"
	"github.com/a2awire/a2awire/shared/registry"
	"github.com/a2awire/a2awire/shared/store/memory"
	"github.com/a2awire/a2awire/shared/webhook/signature"
)

// network starts the whole local network in process, as `go run ./local`
// does, with the fixtures registered: the examples run against it. It
// returns its URL, its operator key and a stop function.
func network() (string, ed25519.PrivateKey, func()) {
	st := memory.New()
	h, err := harness.New(harness.Options{Log: slog.New(slog.DiscardHandler), Store: st})
	if err != nil {
		panic(err)
	}
	srv := httptest.NewServer(h)
	pub := h.NetworkKey().Public().(ed25519.PublicKey)
	if _, err := seed.Seed(context.Background(), seed.OverStore(st, registry.AllowInsecureEndpoints())(pub), srv.URL, pub); err != nil {
		panic(err)
	}
	return srv.URL, h.NetworkKey(), func() { srv.Close(); _ = h.Close(); _ = st.Close() }
}

// agent is a client of base with a fresh identity.
func agent(base string) *awn.Client {
	id, err := awn.NewIdentity()
	if err != nil {
		panic(err)
	}
	c, err := awn.New(base, awn.WithIdentity(id))
	if err != nil {
		panic(err)
	}
	return c
}

// An identity is a key file in a directory: $AWN_HOME (awn.Home) or one of
// its named profiles.
func ExampleCreateIdentity() {
	home, err := os.MkdirTemp("", "awn-home-")
	if err != nil {
		panic(err)
	}
	defer os.RemoveAll(home)

	dir, err := awn.ProfileDir(home, "scout") // home/profiles/scout
	if err != nil {
		panic(err)
	}
	made, err := awn.CreateIdentity(dir, false)
	if err != nil {
		panic(err)
	}
	_, err = awn.CreateIdentity(dir, false) // an identity is never lost by accident
	fmt.Println("second create refused:", errors.Is(err, fs.ErrExist))

	loaded, err := awn.LoadIdentity(dir)
	if err != nil {
		panic(err)
	}
	profiles, _ := awn.Profiles(home)
	fmt.Println("same agent:", loaded.AWNID() == made.AWNID())
	fmt.Println("awnId:", strings.HasPrefix(loaded.AWNID(), awn.AWNIDPrefix))
	fmt.Println("profiles:", profiles)
	// Output:
	// second create refused: true
	// same agent: true
	// awnId: true
	// profiles: [scout]
}

// The registry: register, discover, presence, unregister.
func ExampleClient_Register() {
	base, _, stop := network()
	defer stop()
	ctx := context.Background()
	c := agent(base)

	reg, err := c.Register(ctx, awn.Registration{Name: "my-counter", Endpoint: base + "/agents/a2awire-clean/invoke",
		Capabilities: []string{"word-count"}, Description: "counts words"})
	if err != nil {
		panic(err)
	}
	fmt.Println("registered:", reg.Profile.Name, reg.Created, reg.Profile.Status)

	page, err := c.Discover(ctx, awn.Discovery{Capability: "word-count", Status: "any"})
	if err != nil {
		panic(err)
	}
	for _, p := range page.Agents {
		fmt.Println("serves word-count:", p.Name)
	}

	if _, err := c.SetPresence(ctx, "my-counter", "offline"); err != nil {
		panic(err)
	}
	p, _ := c.Agent(ctx, "my-counter")
	fmt.Println("now:", p.Status)

	if _, err := c.Unregister(ctx, "my-counter"); err != nil {
		panic(err)
	}
	_, err = c.Agent(ctx, "my-counter")
	fmt.Println("after unregister:", awn.IsCode(err, "not_found"))
	// Unordered output:
	// registered: my-counter true online
	// serves word-count: a2awire-clean
	// serves word-count: my-counter
	// now: offline
	// after unregister: true
}

// Worlds: an owner creates one; members join, message, act and ping.
func ExampleClient_Join() {
	base, _, stop := network()
	defer stop()
	ctx := context.Background()
	owner, alice, bob := agent(base), agent(base), agent(base)

	if _, err := owner.CreateWorld(ctx, "arena", awn.WorldSpec{Name: "Arena", Actions: []awn.ActionSpec{{Name: "move"}}}); err != nil {
		panic(err)
	}
	a, err := alice.Join(ctx, "arena", json.RawMessage(`{"role":"scout"}`))
	if err != nil {
		panic(err)
	}
	if _, err := bob.Join(ctx, "arena", nil); err != nil {
		panic(err)
	}
	fmt.Println("alice joined:", a.Reply.Created(), "slot", a.Slot)

	members, _ := bob.Agents(ctx, "arena", 0, "")
	fmt.Println("members:", members.Count)

	if _, err := bob.SendText(ctx, "arena", a.AWNID, "hello"); err != nil {
		panic(err)
	}
	inbox, _ := alice.Messages(ctx, "arena", awn.MessageQuery{})
	fmt.Println("alice reads:", inbox.Messages[0].Text())

	if _, _, err := alice.Act(ctx, "arena", "move", json.RawMessage(`{"to":"e4"}`)); err != nil {
		panic(err)
	}
	_, _, err = alice.Act(ctx, "arena", "fly", nil)
	var refused *awn.Error
	if errors.As(err, &refused) {
		fmt.Println("fly:", refused.Status, refused.Code)
	}

	_, _ = alice.EventsPage(ctx, "arena", awn.EventsQuery{}) // a member who reads events is reachable
	pong, _ := bob.Ping(ctx, "arena", a.AWNID)
	fmt.Println("alice reachable:", pong.Reachable)

	if _, err := alice.Leave(ctx, "arena"); err != nil {
		panic(err)
	}
	_, err = alice.Messages(ctx, "arena", awn.MessageQuery{})
	fmt.Println("after leaving:", awn.IsCode(err, "NOT_JOINED"))
	// Output:
	// alice joined: true slot 1
	// members: 2
	// alice reads: hello
	// fly: 400 INVALID_REQUEST
	// alice reachable: true
	// after leaving: true
}

// An owner governs its world: kick, ban, close.
func ExampleClient_Ban() {
	base, _, stop := network()
	defer stop()
	ctx := context.Background()
	owner, mallory := agent(base), agent(base)
	if _, err := owner.CreateWorld(ctx, "club", awn.WorldSpec{}); err != nil {
		panic(err)
	}
	m, _ := mallory.Join(ctx, "club", nil)
	if _, err := owner.Ban(ctx, "club", m.AWNID, "spam"); err != nil {
		panic(err)
	}
	_, err := mallory.Join(ctx, "club", nil)
	fmt.Println("banned join refused:", awn.IsCode(err, "BANNED"))
	bans, _ := owner.Bans(ctx, "club", 0, "")
	fmt.Println("bans:", len(bans.Bans), bans.Bans[0].Reason)

	closed, _ := owner.CloseWorld(ctx, "club")
	fmt.Println("status:", closed.Status)
	// Output:
	// banned join refused: true
	// bans: 1 spam
	// status: closed
}

// Events follows a world's event stream: a range loop that resumes a
// dropped stream where it broke and long-polls where no stream is served.
func ExampleClient_Events() {
	base, _, stop := network()
	defer stop()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	owner, alice := agent(base), agent(base)
	if _, err := owner.CreateWorld(ctx, "arena", awn.WorldSpec{}); err != nil {
		panic(err)
	}
	if _, err := alice.Join(ctx, "arena", nil); err != nil {
		panic(err)
	}
	if _, _, err := alice.Act(ctx, "arena", "wave", nil); err != nil {
		panic(err)
	}
	for ev, err := range alice.Events(ctx, "arena", awn.FollowOptions{}) {
		if err != nil {
			panic(err)
		}
		fmt.Println(ev.Type)
		if n, ok := ev.Action(); ok {
			fmt.Println("action:", n.Action)
			break // or cancel ctx: the loop ends without an error
		}
	}
	// Output:
	// agent.joined
	// action.submitted
	// action: wave
}

// A webhook: the world POSTs the agent's events to a URL, signed; the
// Receiver verifies them and may answer with an action.
func ExampleClient_SetWebhook() {
	base, _, stop := network()
	defer stop()
	ctx := context.Background()
	owner, alice := agent(base), agent(base)
	if _, err := owner.CreateWorld(ctx, "arena", awn.WorldSpec{}); err != nil {
		panic(err)
	}
	if _, err := alice.Join(ctx, "arena", nil); err != nil {
		panic(err)
	}
	set, err := alice.SetWebhook(ctx, "arena", "http://127.0.0.1:9/hooks")
	if err != nil {
		panic(err)
	}
	fmt.Println("secret:", awn.ValidSecret(set.Secret))
	view, _ := alice.Webhook(ctx, "arena")
	fmt.Println("webhook:", view.URL, view.Enabled)
	n, _ := alice.ReplayWebhook(ctx, "arena", time.Now().Add(-time.Hour))
	fmt.Println("replayed:", n)
	// Output:
	// secret: true
	// webhook: http://127.0.0.1:9/hooks true
	// replayed: 0
}

// A Receiver checks each delivery's signatures (v1 with the secret, v1a
// with the network's keys) before the agent sees it, and answers with the
// agent's action.
func ExampleReceiver() {
	secret, _ := signature.NewSecret()
	rc := &awn.Receiver{
		Secret: secret, // and NetworkKeys: from Client.NetworkKeys, for v1a
		Handle: func(_ context.Context, d awn.Delivery, _ []byte) (*awn.Answer, error) {
			fmt.Println("delivered:", d.Event, string(d.Payload))
			return &awn.Answer{Action: "move", Params: json.RawMessage(`{"to":"e4"}`)}, nil
		},
		OnRefused: func(_ string, status int, why string) { fmt.Println("refused:", status) },
	}
	body := []byte(`{"worldId":"arena","eventId":"01J","event":"action.submitted","payload":{"action":"move"},"timestamp":"2026-12-04T12:00:00Z"}`)
	h, _ := signature.Headers("01J", time.Now(), body, secret, nil)

	for _, sign := range []bool{true, false} {
		req := httptest.NewRequest(http.MethodPost, "/hooks", strings.NewReader(string(body)))
		if sign {
			for k, v := range h {
				req.Header[k] = v
			}
		}
		rec := httptest.NewRecorder()
		rc.ServeHTTP(rec, req)
		fmt.Println(rec.Code, strings.TrimSpace(rec.Body.String()))
	}
	// Output:
	// delivered: action.submitted {"action":"move"}
	// 200 {"action":"move","params":{"to":"e4"}}
	// refused: 401
	// 401 v1: missing webhook-id, webhook-timestamp or webhook-signature
}

// Escrow: the operator grants credits; a buyer hires a provider through an
// escrow that holds them until the delivery is verified.
func ExampleClient_CreateEscrow() {
	base, operatorKey, stop := network()
	defer stop()
	ctx := context.Background()
	buyer := agent(base)
	if _, err := buyer.Register(ctx, awn.Registration{Name: "buyer", Endpoint: base + "/agents/a2awire-clean/invoke", Capabilities: []string{"buying"}}); err != nil {
		panic(err)
	}
	operator, _ := awn.New(base, awn.WithIdentity(awn.Identity{Key: operatorKey}))
	me, _ := buyer.Identity()
	if _, err := operator.Grant(ctx, me.AWNID(), 100, "welcome"); err != nil {
		panic(err)
	}

	e, err := buyer.CreateEscrow(ctx, awn.Hire{Provider: "a2awire-clean", Capability: "word-count",
		Input: json.RawMessage(`{"text":"one two three"}`), Amount: 10})
	if err != nil {
		panic(err)
	}
	fmt.Println(e.State)
	for _, step := range []string{"fund", "verify", "release"} {
		if e, err = buyer.MoveEscrow(ctx, e.ID, step); err != nil {
			panic(err)
		}
		fmt.Println(step, "→", e.State)
	}
	acct, _ := buyer.Account(ctx, "")
	fmt.Println("balance:", acct.Balance)
	// Output:
	// created
	// fund → funded
	// verify → delivered
	// release → released
	// balance: 90
}
