package registry_test

import (
	"context"
	"crypto/ed25519"
	"fmt"
	"strings"
	"sync"
	"testing"

	"github.com/a2awire/a2awire/shared/apierror"
	"github.com/a2awire/a2awire/shared/registry"
	"github.com/a2awire/a2awire/shared/store"
	"github.com/a2awire/a2awire/shared/store/memory"
)

// TestReservedPrefixNeedsNetworkKey is the repro of "any key can register
// a2awire-anything": a name under the network's prefix, or one reading
// like it, is 403 name_reserved for every key but the SharedKey.
func TestReservedPrefixNeedsNetworkKey(t *testing.T) {
	ctx := context.Background()
	network := key(90)
	r := registry.New(memory.New(), registry.SharedKey(network))
	for _, name := range []string{"a2awire-anything", "a2awire-c1ean", "a2avvire-clean"} {
		_, _, err := r.Register(ctx, agent(name, 1, "x"))
		wantKind(t, err, apierror.Forbidden, "name_reserved")
	}
	own := agent("a2awire-clean", 0, "x")
	own.PublicKey = network
	if _, created, err := r.Register(ctx, own); err != nil || !created {
		t.Fatalf("the network key registering a2awire-clean: %v", err)
	}
	// Without a SharedKey, no key may take the prefix.
	bare := registry.New(memory.New())
	_, _, err := bare.Register(ctx, own)
	wantKind(t, err, apierror.Forbidden, "name_reserved")
	// A name that only contains the prefix later is not reserved.
	if _, _, err := r.Register(ctx, agent("my-a2awire-x", 2, "x")); err != nil {
		t.Fatalf("my-a2awire-x: %v", err)
	}
}

// TestConfusableNameRefused: a name whose skeleton another key holds is
// 409 name_confusable, on every engine; its own holder may update it, and
// the network key may hold several names that read alike.
func TestConfusableNameRefused(t *testing.T) {
	everyEngine(t, func(t *testing.T, st store.Store) {
		ctx := context.Background()
		network := key(90)
		r := registry.New(st, registry.SharedKey(network))
		if _, _, err := r.Register(ctx, agent("mail-bot", 1, "x")); err != nil {
			t.Fatal(err)
		}
		for i, name := range []string{"rnail-bot", "mai1-bot", "rnai1-bot"} {
			_, _, err := r.Register(ctx, agent(name, 2+i, "x"))
			e := wantKind(t, err, apierror.Conflict, "name_confusable")
			if !strings.Contains(e.Message, `"mail-bot"`) {
				t.Errorf("%s: message %q does not name the held name", name, e.Message)
			}
			if _, err := r.Get(ctx, name); apierror.KindOf(err) != apierror.NotFound {
				t.Errorf("%s was written: %v", name, err)
			}
		}
		// The holder updates its own name.
		upd := agent("mail-bot", 1, "y")
		if _, created, err := r.Register(ctx, upd); err != nil || created {
			t.Fatalf("owner update: created %v, %v", created, err)
		}
		// The network key may register names reading alike.
		for _, name := range []string{"a2awire-clean", "a2awire-c1ean"} {
			a := agent(name, 0, "x")
			a.PublicKey = network
			if _, _, err := r.Register(ctx, a); err != nil {
				t.Fatalf("network key, %s: %v", name, err)
			}
		}
	})
}

// TestConfusableRace: keys racing for names that read alike ("wide",
// "vvide", "vvlde"…, all of skeleton "vvide") — one wins, each other gets
// name_confusable or name_taken, and only the winner's name exists: the
// rule holds in the write, not in a read before it.
func TestConfusableRace(t *testing.T) {
	everyEngine(t, func(t *testing.T, st store.Store) {
		ctx := context.Background()
		r := registry.New(st)
		names := []string{"wide-agent", "vvide-agent"}
		const n = 12
		var wg sync.WaitGroup
		errs := make([]error, n)
		for i := range n {
			wg.Add(1)
			go func() {
				defer wg.Done()
				_, _, errs[i] = r.Register(ctx, agent(names[i%2], 200+i, "x"))
			}()
		}
		wg.Wait()
		winners := 0
		for i, err := range errs {
			if err == nil {
				winners++
				continue
			}
			e := apierror.From(err)
			if e.Kind != apierror.Conflict || (e.RegistryCode() != "name_confusable" && e.RegistryCode() != "name_taken") {
				t.Errorf("racer %d: %v", i, err)
			}
		}
		if winners != 1 {
			t.Fatalf("%d winners, want 1", winners)
		}
		found := 0
		for _, name := range names {
			if _, err := r.Get(ctx, name); err == nil {
				found++
			}
		}
		if found != 1 {
			t.Errorf("%d of the names exist, want 1", found)
		}
	})
}

// TestUpdateFillsSkeleton: a name registered before skeletons were kept
// (its items written without one) gets its skeleton at its owner's next
// update, after which a confusable name is refused.
func TestUpdateFillsSkeleton(t *testing.T) {
	ctx := context.Background()
	st := memory.New()
	acts := registry.SeedActions(agent("old-agent", 1, "x"), t0)
	if _, err := st.Write(ctx, acts[:len(acts)-1]...); err != nil { // all but the skeleton
		t.Fatal(err)
	}
	r := registry.New(st)
	if _, _, err := r.Register(ctx, agent("o1d-agent", 2, "x")); err != nil {
		t.Fatalf("before the owner's update: %v", err)
	}
	_, _, err := r.Register(ctx, agent("old-agent", 1, "y"))
	wantKind(t, err, apierror.Conflict, "name_confusable") // o1d-agent took the skeleton first
	st2 := memory.New()
	if _, err := st2.Write(ctx, acts[:len(acts)-1]...); err != nil {
		t.Fatal(err)
	}
	r2 := registry.New(st2)
	if _, _, err := r2.Register(ctx, agent("old-agent", 1, "y")); err != nil {
		t.Fatalf("owner update: %v", err)
	}
	_, _, err = r2.Register(ctx, agent("o1d-agent", 2, "x"))
	wantKind(t, err, apierror.Conflict, "name_confusable")
}

// TestTextThatDeceivesRefused is the repro of NUL, U+202E and U+200B in a
// description and U+202E in an endpoint being accepted, and of a
// small-order key registering.
func TestTextThatDeceivesRefused(t *testing.T) {
	ctx := context.Background()
	r := registry.New(memory.New())
	for _, c := range []struct {
		name   string
		change func(a *registry.Agent)
		word   string
	}{
		{"NUL in description", func(a *registry.Agent) { a.Description = "a\x00b" }, "U+0000"},
		{"RLO in description", func(a *registry.Agent) { a.Description = "harmless \u202eexe.gpj" }, "U+202E"},
		{"ZWSP in description", func(a *registry.Agent) { a.Description = "clean\u200bagent" }, "U+200B"},
		{"newline in description", func(a *registry.Agent) { a.Description = "two\nlines" }, "U+000A"},
		{"RLO in endpoint", func(a *registry.Agent) { a.Endpoint = "https://example.com/\u202e" }, "U+202E"},
		{"small-order key", func(a *registry.Agent) { a.PublicKey = ed25519.PublicKey(append([]byte{1}, make([]byte, 31)...)) }, "public key"},
	} {
		a := agent("valid-agent", 1, "x")
		c.change(&a)
		_, _, err := r.Register(ctx, a)
		if e := apierror.From(err); err == nil || e.Kind != apierror.Invalid || !strings.Contains(e.Message, c.word) {
			t.Errorf("%s: %v, want Invalid naming %s", c.name, err, c.word)
		}
	}
	ok := agent("valid-agent", 1, "x")
	ok.Description = fmt.Sprintf("Ünïcödé, emoji %s and a tab-free line.", "👩\u200d💻")
	if _, _, err := r.Register(ctx, ok); err != nil {
		t.Fatalf("plain Unicode description: %v", err)
	}
}
