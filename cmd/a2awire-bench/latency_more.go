package main

import (
	"context"
	"crypto/ed25519"
	"encoding/base64"
	"encoding/json"
	"fmt"

	"github.com/a2awire/a2awire/local/harness"
	"github.com/a2awire/a2awire/shared/store"
)

// signedRoutes are rows 7w–7zm: the signed routes outside the world's
// membership routes — a member's webhook, the registry's writes, the
// accounts and the escrows — each with the state its request needs set
// up before it (not counted), as latencyRows measures the others.
// operator is the network key (it grants credits).
type signedRoutes struct {
	base     func() string
	operator ed25519.PrivateKey
	buyer    worldMember // registered as bench-buyer, granted credits
	hooked   worldMember // a lobby member whose webhook the rows set
}

// setUp registers the buyer, grants it credits and seeds the fixtures
// (the escrows' providers) at the served harness.
func (sr *signedRoutes) setUp(ctx context.Context, st store.Store, join func(context.Context, worldMember, string) error) error {
	if _, err := harness.SeedFixtures(ctx, st, sr.base(), sr.operator); err != nil {
		return err
	}
	for _, m := range []worldMember{sr.hooked, sr.buyer} { // the buyer's presence is carried to the lobby
		if err := join(ctx, m, "lobby"); err != nil {
			return err
		}
	}
	if err := sr.expect(ctx, sr.buyer.key, "POST", "/api/v1/agents", registration("bench-buyer", sr.buyer), 201, nil); err != nil {
		return err
	}
	return sr.expect(ctx, sr.operator, "POST", "/api/v1/accounts/"+sr.buyer.id+"/grant", `{"amount":1000000,"memo":"make bench"}`, 200, nil)
}

// registration is the body registering m under name.
func registration(name string, m worldMember) string {
	b, _ := json.Marshal(map[string]any{"name": name, "description": "make bench", "endpoint": "https://example.com/" + name,
		"capabilities": []string{"bench"}, "public_key": base64.StdEncoding.EncodeToString(m.key.Public().(ed25519.PublicKey))})
	return string(b)
}

// expect sends a signed request and fails unless it answers want; into,
// when set, receives the JSON answer.
func (sr *signedRoutes) expect(ctx context.Context, k ed25519.PrivateKey, method, path, body string, want int, into any) error {
	st, out, err := httpSigned(ctx, sr.base(), k, method, path, body)
	if err == nil && st != want {
		err = fmt.Errorf("%s %s: %d %s, want %d", method, path, st, out, want)
	}
	if err == nil && into != nil {
		err = json.Unmarshal([]byte(out), into)
	}
	return err
}

// escrowAt creates an escrow of the buyer's and takes it to state
// ("created", "funded" or "delivered"), returning its id.
func (sr *signedRoutes) escrowAt(ctx context.Context, state string) (string, error) {
	var e struct{ ID, State string }
	if err := sr.expect(ctx, sr.buyer.key, "POST", "/api/v1/escrows", `{"provider":"a2awire-punctual","capability":"ping","input":{},"amount":1}`, 201, &e); err != nil {
		return "", err
	}
	for _, step := range []struct{ path, state string }{{"fund", "funded"}, {"verify", "delivered"}} {
		if e.State == state {
			break
		}
		if err := sr.expect(ctx, sr.buyer.key, "POST", "/api/v1/escrows/"+e.ID+"/"+step.path, "", 200, &e); err != nil {
			return "", err
		}
	}
	if e.State != state {
		return "", fmt.Errorf("escrow %s is %s, want %s", e.ID, e.State, state)
	}
	return e.ID, nil
}

func (sr *signedRoutes) routes(fresh func(base, i int) worldMember) []latencyRoute {
	b, h := sr.buyer, sr.hooked
	hook := "/v0/worlds/lobby/webhook"
	setHook := `{"url":"https://example.com/bench-hook"}`
	escrowStep := func(from, step string) func(context.Context, int) (latencyRequest, error) {
		return func(ctx context.Context, _ int) (latencyRequest, error) {
			id, err := sr.escrowAt(ctx, from)
			return latencyRequest{b.key, "POST", "/api/v1/escrows/" + id + "/" + step, "", 0}, err
		}
	}
	var shown string
	return []latencyRoute{
		{"7w", "world webhook set (a new secret each request)", "world-webhook-set", 200, fixed(h.key, "PUT", hook, setHook)},
		{"7x", "world webhook show (a member with a webhook)", "world-webhook-show", 200, fixed(h.key, "GET", hook, "")},
		{"7y", "world webhook replay (no dead letters)", "world-webhook-replay", 200, fixed(h.key, "POST", hook+"/replay", `{"since":"2026-01-01T00:00:00Z"}`)},
		{"7z", "world webhook remove (set before each request)", "world-webhook-remove", 200, func(ctx context.Context, _ int) (latencyRequest, error) {
			return latencyRequest{h.key, "DELETE", hook, "", 0}, sr.expect(ctx, h.key, "PUT", hook, setHook, 200, nil)
		}},
		{"7za", "registry register (a new agent each request)", "registry", 201, func(_ context.Context, i int) (latencyRequest, error) {
			m := fresh(0x7a00, i)
			return latencyRequest{m.key, "POST", "/api/v1/agents", registration(fmt.Sprintf("bench-new-%d", i), m), 0}, nil
		}},
		{"7zb", "registry update by its owner", "registry", 200, fixed(b.key, "POST", "/api/v1/agents", registration("bench-buyer", b))},
		{"7zc", "registry presence by its owner (offline and online, alternately; carried to the one world it joined)", "registry", 200, func(_ context.Context, i int) (latencyRequest, error) {
			status := map[bool]string{true: "offline", false: "online"}[i%2 == 0]
			return latencyRequest{b.key, "PUT", "/api/v1/agents/bench-buyer/presence", fmt.Sprintf(`{"status":%q}`, status), 0}, nil
		}},
		{"7zd", "registry delete by its owner (registered before each request)", "registry", 200, func(ctx context.Context, i int) (latencyRequest, error) {
			m, name := fresh(0x7d00, i), fmt.Sprintf("bench-gone-%d", i)
			return latencyRequest{m.key, "DELETE", "/api/v1/agents/" + name, "", 0}, sr.expect(ctx, m.key, "POST", "/api/v1/agents", registration(name, m), 201, nil)
		}},
		{"7ze", "account read by its owner", "accounts", 200, fixed(b.key, "GET", "/api/v1/accounts/"+b.id, "")},
		{"7zf", "account grant by the operator", "accounts", 200, func(context.Context, int) (latencyRequest, error) {
			// sr.operator is the harness's key, known once it runs.
			return latencyRequest{sr.operator, "POST", "/api/v1/accounts/" + b.id + "/grant", `{"amount":1,"memo":"make bench"}`, 0}, nil
		}},
		{"7zg", "escrow create", "escrows", 201, fixed(b.key, "POST", "/api/v1/escrows", `{"provider":"a2awire-punctual","capability":"ping","input":{},"amount":1}`)},
		{"7zh", "escrow fund (created before each request)", "escrows", 200, escrowStep("created", "fund")},
		{"7zi", "escrow verify (the provider invoked; funded before each request)", "escrows", 200, escrowStep("funded", "verify")},
		{"7zj", "escrow release (delivered before each request)", "escrows", 200, escrowStep("delivered", "release")},
		{"7zk", "escrow refund (created before each request)", "escrows", 200, escrowStep("created", "refund")},
		{"7zl", "escrow dispute (delivered before each request)", "escrows", 200, escrowStep("delivered", "dispute")},
		{"7zm", "escrow show", "escrows", 200, func(ctx context.Context, _ int) (latencyRequest, error) {
			var err error
			if shown == "" {
				shown, err = sr.escrowAt(ctx, "created")
			}
			return latencyRequest{b.key, "GET", "/api/v1/escrows/" + shown, "", 0}, err
		}},
		{"7zn", "escrow list (the buyer's first page)", "escrows", 200, fixed(b.key, "GET", "/api/v1/escrows?role=buyer&limit=20", "")},
	}
}
