package phrasebook_test

import (
	"strings"
	"testing"

	"github.com/a2awire/a2awire/functions/fixture-translator/phrasebook"
)

func TestTranslate(t *testing.T) {
	b := phrasebook.Default()
	tests := []struct {
		from, to, in, want string
		unknown            int
	}{
		{"en", "es", "Hello, world!", "Hola, mundo!", 0},
		{"en", "es", "hello", "hola", 0},
		{"en", "es", "HELLO", "HOLA", 0},
		{"en", "fr", "Hello, my friend.", "Bonjour, mon ami.", 0},
		{"en", "de", "Good morning, my friend!", "Guten Morgen, mein Freund!", 0},
		{"en", "es", "Thank you very much.", "Muchas gracias.", 0},
		{"en", "es", "thank   you", "gracias", 0},
		{"en", "es", "Thank you. Thank you", "Gracias. Gracias", 0},
		{"en", "fr", "please", "s'il vous plaît", 0},
		{"fr", "en", "S'il vous plaît, merci.", "Please, thanks.", 0},
		{"en", "es", "The quick fox", "El quick fox", 2},
		{"en", "de", "the house is big", "der Haus ist groß", 0},
		{"de", "en", "Das Haus ist groß.", "The house is big.", 0},
		{"de", "en", "Haus", "House", 0},
		{"en", "de", "I love you", "Ich liebe dich", 0},
		{"en", "es", "Today I am happy", "Hoy yo soy feliz", 0},
		{"es", "en", "Hoy yo soy feliz", "Today I am happy", 0},
		{"es", "en", "¿Cómo estás?", "¿How are you?", 0},
		{"fr", "en", "aujourd'hui", "today", 0},
		{"fr", "en", "Peut-être demain", "Maybe tomorrow", 0},
		{"es", "fr", "Buenos días, amigo.", "Bonjour, ami.", 0},
		{"de", "es", "Danke!", "Gracias!", 0},
		{"en", "es", "On Monday at 9:30, 1 cat.", "Sobre lunes en 9:30, 1 gato.", 0},
		{"en", "es", "3 cats", "3 cats", 1},
		{"en", "es", "water\n\twine", "agua\n\tvino", 0},
		{"en", "es", "", "", 0},
		{"en", "es", "  ", "  ", 0},
		{"en", "es", "Xylophone", "Xylophone", 1},
		{"en", "es", "dog-friendly", "dog-friendly", 1},
		{"en", "es", "good night’s", "bueno night’s", 1},
		{"en", "es", "Don’t", "Don’t", 1},
		{"en", "es", "“Hello”", "“Hola”", 0},
	}
	for _, tt := range tests {
		t.Run(tt.from+"→"+tt.to+" "+tt.in, func(t *testing.T) {
			got, st := b.Translate(tt.in, tt.from, tt.to)
			if got != tt.want {
				t.Errorf("Translate(%q) = %q, want %q", tt.in, got, tt.want)
			}
			if st.Unknown != tt.unknown {
				t.Errorf("unknown words %d, want %d", st.Unknown, tt.unknown)
			}
		})
	}
}

func TestSupports(t *testing.T) {
	b := phrasebook.Default()
	for _, l := range []string{"es", "fr", "de"} {
		if !b.Supports("en", l) || !b.Supports(l, "en") {
			t.Errorf("en↔%s not supported", l)
		}
	}
	for _, pair := range [][2]string{{"en", "en"}, {"en", "ja"}, {"ja", "en"}, {"", "es"}, {"EN", "es"}} {
		if b.Supports(pair[0], pair[1]) {
			t.Errorf("%s→%s supported", pair[0], pair[1])
		}
	}
	if got, _ := b.Translate("hello", "en", "ja"); got != "hello" {
		t.Errorf("unsupported pair changed the text: %q", got)
	}
}

// TestCoverage keeps the dictionary at "a few hundred common words" per
// language and checks every entry translates back to itself through English.
func TestCoverage(t *testing.T) {
	b := phrasebook.Default()
	if n := b.Entries(); n < 300 {
		t.Errorf("%d entries, want at least 300", n)
	}
	for _, l := range []string{"es", "fr", "de"} {
		for _, w := range []string{"hello", "water", "house", "see you later", "friday"} {
			there, st := b.Translate(w, "en", l)
			if st.Unknown != 0 || there == w {
				t.Errorf("en→%s %q = %q (unknown %d)", l, w, there, st.Unknown)
			}
			back, _ := b.Translate(there, l, "en")
			if !strings.EqualFold(back, w) {
				t.Errorf("%q → %s %q → en %q", w, l, there, back)
			}
		}
	}
}

func TestParseErrors(t *testing.T) {
	for _, tsv := range []string{
		"",
		"en\tes\n",
		"en\tes\nhello\n",
		"en\tes\nhello\t|hola\n",
	} {
		if _, err := phrasebook.Parse(tsv); err == nil {
			t.Errorf("Parse(%q) succeeded", tsv)
		}
	}
}
