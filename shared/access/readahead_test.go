package access_test

import (
	"context"
	"crypto/ed25519"
	"net/http"
	"net/http/httptest"
	"sync/atomic"
	"testing"

	"github.com/a2awire/a2awire/shared/access"
	"github.com/a2awire/a2awire/shared/auth"
	"github.com/a2awire/a2awire/shared/routes"
	"github.com/a2awire/a2awire/shared/store"
	"github.com/a2awire/a2awire/shared/store/guard"
	"github.com/a2awire/a2awire/shared/store/memory"
)

// calls counts the Gets that reach a store.
type calls struct {
	store.Store
	n atomic.Int32
}

func (c *calls) Get(ctx context.Context, k store.Key) (store.Item, error) {
	c.n.Add(1)
	return c.Store.Get(ctx, k)
}

// TestReadAhead: a route's reads ahead are issued beside its key lookup's
// read and answer the handler's same read with no call of its own; a
// lookup that reads nothing (a key known already) issues none of them.
func TestReadAhead(t *testing.T) {
	mem := memory.New()
	t.Cleanup(func() { _ = mem.Close() })
	keyItem := store.Key{PK: "KEY", SK: auth.KeyID(pub(known))}
	data := store.Key{PK: "DATA", SK: "x"}
	for _, k := range []store.Key{keyItem, data} {
		if _, err := mem.Write(context.Background(), store.Put(k, store.Item{"type": store.S("x")})); err != nil {
			t.Fatal(err)
		}
	}
	c := &calls{Store: mem}
	g := guard.Wrap(c)
	var cached atomic.Bool
	lookup := func(ctx context.Context, id string) (ed25519.PublicKey, error) {
		if !cached.Load() {
			if _, err := g.Get(ctx, store.Key{PK: "KEY", SK: id}); err != nil {
				return nil, auth.ErrUnknownKey
			}
		}
		return pub(known), nil
	}
	table := []routes.Route{{Method: "POST", Path: "/t/items", Function: "t", Auth: routes.Signed}}
	var got, ahead atomic.Bool
	handler := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_, kept := guard.Kept(r.Context(), data)
		ahead.Store(kept)
		_, err := g.Get(r.Context(), data)
		got.Store(err == nil)
		w.WriteHeader(http.StatusNoContent)
	})
	d, err := access.New(access.Config{Function: "t", Table: table, Verifier: verifier(t, nil), Keys: lookup,
		Routes: map[string]access.Route{"POST /t/items": {Handler: handler,
			ReadAhead: func(*http.Request) []guard.Read { return []guard.Read{guard.GetRead(data)} }}}})
	if err != nil {
		t.Fatal(err)
	}
	s := signer(t, known)
	for _, tc := range []struct {
		name   string
		cached bool
		want   int32
	}{
		{"the lookup reads", false, 2}, // the key item and the data beside it; the handler's read is kept
		{"the key known", true, 1},     // the handler's read alone: nothing read ahead
	} {
		cached.Store(tc.cached)
		c.n.Store(0)
		got.Store(false)
		w := httptest.NewRecorder()
		d.ServeHTTP(w, request(t, s, "POST", "/t/items", ""))
		if w.Code != http.StatusNoContent || !got.Load() {
			t.Fatalf("%s: status %d, handler read %v", tc.name, w.Code, got.Load())
		}
		if ahead.Load() == tc.cached {
			t.Errorf("%s: the data read ahead: %v, want %v", tc.name, ahead.Load(), !tc.cached)
		}
		if n := c.n.Load(); n != tc.want {
			t.Errorf("%s: %d Gets reached the store, want %d", tc.name, n, tc.want)
		}
	}
}

// busyWrites is a store whose writes fail as an overloaded DynamoDB's do.
type busyWrites struct{ store.Store }

func (busyWrites) Write(context.Context, ...store.Action) ([]store.Item, error) {
	return nil, store.ErrUnavailable
}

// TestGuardStoreBusy: when the store is too busy to take the request's
// guard (here its nonce claim), the client is answered 503 with
// Retry-After, as for any busy write, not 500: nothing about the request
// was wrong, and a retry may succeed.
func TestGuardStoreBusy(t *testing.T) {
	mem := memory.New()
	t.Cleanup(func() { _ = mem.Close() })
	v := auth.NewVerifier(auth.NewNonces(busyWrites{mem}), nil)
	lookup := func(context.Context, string) (ed25519.PublicKey, error) { return pub(known), nil }
	table := []routes.Route{{Method: "POST", Path: "/t/items", Function: "t", Auth: routes.Signed}}
	handler := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.WriteHeader(http.StatusNoContent) // no store call: the guard is written when the handler ends
	})
	d, err := access.New(access.Config{Function: "t", Table: table, Verifier: v, Keys: lookup,
		Routes: map[string]access.Route{"POST /t/items": {Handler: handler}}})
	if err != nil {
		t.Fatal(err)
	}
	w := httptest.NewRecorder()
	d.ServeHTTP(w, request(t, signer(t, known), "POST", "/t/items", ""))
	if w.Code != http.StatusServiceUnavailable || w.Header().Get("Retry-After") == "" {
		t.Fatalf("status %d, Retry-After %q, body %s; want 503 with Retry-After", w.Code, w.Header().Get("Retry-After"), w.Body)
	}
}
