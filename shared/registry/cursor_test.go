package registry_test

import (
	"context"
	"crypto/hmac"
	"crypto/sha256"
	"encoding/base64"
	"fmt"
	"strconv"
	"testing"

	"github.com/a2awire/a2awire/shared/apierror"
	"github.com/a2awire/a2awire/shared/registry"
	"github.com/a2awire/a2awire/shared/store"
	"github.com/a2awire/a2awire/shared/store/memory"
)

// forgeCursor seals a discovery cursor as the registry does, under a key
// the test chooses.
func forgeCursor(key []byte, capability, status, after string) string {
	payload := fmt.Appendf(nil, `{"s":%q,"n":%q}`, status, after)
	h := hmac.New(sha256.New, key)
	for _, s := range []string{capability, status} {
		h.Write([]byte(strconv.Itoa(len(s)) + ":" + s))
	}
	h.Write(payload)
	return base64.RawURLEncoding.EncodeToString(append(payload, h.Sum(nil)[:16]...))
}

func seedAgents(t *testing.T, st store.Store, n int) {
	t.Helper()
	for i := range n {
		if _, err := st.Write(context.Background(), registry.SeedActions(agent(fmt.Sprintf("agent-%02d", i), 300+i, "all"), t0)...); err != nil {
			t.Fatal(err)
		}
	}
}

// TestCursorNotSealedWithPublicConstant is the repro: discovery cursors
// were sealed under "a2awire registry cursor v1", a key in the source. A
// cursor forged under it (or under the raw secret) is now 400, with a
// secret or without.
func TestCursorNotSealedWithPublicConstant(t *testing.T) {
	st := memory.New()
	seedAgents(t, st, 3)
	secret := []byte("deploy secret")
	for name, key := range map[string][]byte{"the old constant": []byte("a2awire registry cursor v1"), "the raw secret": secret} {
		forged := forgeCursor(key, "all", "online", "agent-00")
		for rname, r := range map[string]*registry.Registry{"no secret": registry.New(st), "a secret": registry.New(st, registry.WithCursorSecret(secret))} {
			_, err := r.Discover(context.Background(), registry.Filter{Capability: "all", Cursor: forged, Limit: 1})
			if apierror.KindOf(err) != apierror.Invalid {
				t.Errorf("cursor sealed with %s, registry with %s: %v, want Invalid (400)", name, rname, err)
			}
		}
	}
}

// TestCursorTravelsUnderOneSecret: a cursor made by one registry instance
// continues on another built with the same secret (another Lambda
// instance); an instance of another secret answers 400.
func TestCursorTravelsUnderOneSecret(t *testing.T) {
	st := memory.New()
	seedAgents(t, st, 3)
	ctx := context.Background()
	a := registry.New(st, registry.WithCursorSecret([]byte("one")))
	b := registry.New(st, registry.WithCursorSecret([]byte("one")))
	other := registry.New(st, registry.WithCursorSecret([]byte("two")))
	p, err := a.Discover(ctx, registry.Filter{Capability: "all", Limit: 1})
	if err != nil || p.Next == "" {
		t.Fatalf("first page: %+v, %v", p, err)
	}
	next, err := b.Discover(ctx, registry.Filter{Capability: "all", Limit: 1, Cursor: p.Next})
	if err != nil || len(next.Agents) != 1 || next.Agents[0].Name != "agent-01" {
		t.Fatalf("same secret: %+v, %v", next, err)
	}
	_, err = other.Discover(ctx, registry.Filter{Capability: "all", Limit: 1, Cursor: p.Next})
	if apierror.KindOf(err) != apierror.Invalid {
		t.Errorf("another secret: %v, want Invalid (400)", err)
	}
}
