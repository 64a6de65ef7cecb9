package escrow_test

import (
	"context"
	"net/http"
	"slices"
	"sync"
	"testing"

	"github.com/a2awire/a2awire/shared/escrow"
	"github.com/a2awire/a2awire/shared/protocol"
	"github.com/a2awire/a2awire/shared/store"
)

// movingProviders is provider "p" registered at the endpoint its item in
// the store names, which a test moves; it gives the condition that the
// item still names an endpoint (escrow.ProviderChecks).
type movingProviders struct{ st store.Store }

var movingKey = store.Key{PK: "PROVIDER#p", SK: "P"}

func (m movingProviders) Provider(ctx context.Context, name string) (escrow.Provider, error) {
	it, err := m.st.Get(ctx, movingKey)
	if err != nil {
		return escrow.Provider{}, err
	}
	return escrow.Provider{Endpoint: it.Str("endpoint"), Account: provider, Capabilities: []string{"work"}}, nil
}

func (movingProviders) Unchanged(name, endpoint string) store.Action {
	return store.Check(movingKey, store.Eq("endpoint", store.S(endpoint)))
}

// endpoints records where each invocation went.
type endpoints struct {
	invoker
	mu  sync.Mutex
	got []string
}

func (e *endpoints) Invoke(ctx context.Context, endpoint string, req protocol.Request, taskID string) (int, http.Header, []byte, error) {
	e.mu.Lock()
	e.got = append(e.got, endpoint)
	e.mu.Unlock()
	return e.invoker.Invoke(ctx, endpoint, req, taskID)
}

// TestVerifyInvokesTheEndpointKept: a verify invokes the endpoint its
// escrow kept at creation without reading the provider; when the provider
// moved since, the write's condition finds it, and the verify reads the
// provider and invokes its new endpoint (the same task id) before it
// delivers — never an outcome of an endpoint the registry no longer names.
func TestVerifyInvokesTheEndpointKept(t *testing.T) {
	everyEngine(t, func(t *testing.T, st store.Store) {
		ctx := context.Background()
		buyer := awn(10)
		put := func(ep string) {
			if _, err := st.Write(ctx, store.Put(movingKey, store.Item{"type": store.S("test"), "endpoint": store.S(ep)})); err != nil {
				t.Fatal(err)
			}
		}
		put("http://old.invalid/invoke")
		inv := &endpoints{}
		s, err := escrow.New(escrow.Options{Store: st, Providers: movingProviders{st}, Invoker: inv, Operator: operator, Now: newClock().Now})
		if err != nil {
			t.Fatal(err)
		}
		if err := s.Ledger().Grant(ctx, buyer, 10, "test"); err != nil {
			t.Fatal(err)
		}
		hire := func() escrow.Escrow {
			e := must(s.Create(ctx, escrow.CreateInput{Buyer: buyer, Provider: "p", Capability: "work", Amount: 1}))
			return must(s.Fund(ctx, e.ID, buyer))
		}

		e := hire()
		if got := must(s.Verify(ctx, e.ID, buyer)); got.State != escrow.Delivered {
			t.Fatalf("verify: %s", got.State)
		}
		if want := []string{"http://old.invalid/invoke"}; !slices.Equal(inv.got, want) {
			t.Fatalf("invoked %v, want %v", inv.got, want)
		}

		e = hire()
		put("http://new.invalid/invoke")
		inv.got = nil
		if got := must(s.Verify(ctx, e.ID, buyer)); got.State != escrow.Delivered {
			t.Fatalf("verify after the move: %s", got.State)
		}
		if want := []string{"http://old.invalid/invoke", "http://new.invalid/invoke"}; !slices.Equal(inv.got, want) {
			t.Fatalf("after the move invoked %v, want %v", inv.got, want)
		}
		if n := inv.calls[e.ID]; n != 2 {
			t.Fatalf("the moved verify invoked %d times with its task id, want 2", n)
		}
	})
}
