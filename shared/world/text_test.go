package world_test

import (
	"context"
	"crypto/ed25519"
	"testing"

	"github.com/a2awire/a2awire/shared/apierror"
	"github.com/a2awire/a2awire/shared/store/memory"
	"github.com/a2awire/a2awire/shared/world"
)

// TestManifestTextThatDeceivesRefused: control, format and line-separator
// characters in a world's name, description, category or an action's
// description are refused (400) and nothing is stored; the message names
// the code point, not the character.
func TestManifestTextThatDeceivesRefused(t *testing.T) {
	ctx := context.Background()
	s := world.New(memory.New())
	for _, c := range []struct {
		name   string
		change func(m *world.Manifest)
		words  []string
	}{
		{"NUL in name", func(m *world.Manifest) { m.Name = "Lob\x00by" }, []string{"name", "U+0000"}},
		{"RLO in name", func(m *world.Manifest) { m.Name = "Lobby \u202eevil" }, []string{"name", "U+202E"}},
		{"ZWSP in description", func(m *world.Manifest) { m.Description = "a\u200bb" }, []string{"description", "U+200B"}},
		{"newline in category", func(m *world.Manifest) { m.Category = "games\nadmin" }, []string{"category", "U+000A"}},
		{"LRI in action description", func(m *world.Manifest) { m.Actions[0].Description = "move \u2066left" }, []string{"action", "U+2066"}},
	} {
		m := manifest("deceive", "move")
		c.change(&m)
		_, _, err := s.PutWorld(ctx, m, key(0))
		wantKind(t, err, apierror.Invalid, c.words...)
		if _, err := s.GetWorld(ctx, "deceive"); apierror.KindOf(err) != apierror.NotFound {
			t.Fatalf("%s: a refused manifest was stored (%v)", c.name, err)
		}
	}
	m := manifest("plain", "move")
	m.Name, m.Description = "Ünïcödé Lobby 日本", "emoji 👩\u200d💻 and Persian می\u200cخواهم"
	if _, _, err := s.PutWorld(ctx, m, key(0)); err != nil {
		t.Fatalf("plain Unicode: %v", err)
	}
}

// TestSmallOrderKeyRefusedByWorld: the world service itself refuses the
// identity key (0x01 and 31 zero bytes) as an owner and as a member, 400,
// whoever calls it.
func TestSmallOrderKeyRefusedByWorld(t *testing.T) {
	ctx := context.Background()
	identity := ed25519.PublicKey(append([]byte{1}, make([]byte, 31)...))
	s := newWorld(t, memory.New(), &clock{now: t0}, "lobby")
	_, _, err := s.PutWorld(ctx, manifest("mine"), identity)
	wantKind(t, err, apierror.Invalid, "publicKey")
	_, _, err = s.Join(ctx, "lobby", identity, nil)
	wantKind(t, err, apierror.Invalid, "publicKey")
	if ms, _ := s.Members(ctx, "lobby"); len(ms) != 0 {
		t.Fatalf("the refused join left members %v", ms)
	}
}
