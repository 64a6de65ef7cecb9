// Package clean is the a2awire-clean fixture: the minimal, strictly
// conformant reference provider. It counts the words, characters
// and lines of a text and adds nothing to the protocol's required metadata,
// so a buyer can test that it reads exactly what the protocol promises.
package clean

import (
	"context"
	"log/slog"
	"strings"
	"unicode/utf8"

	"github.com/a2awire/a2awire/shared/protocol"
)

// Name is the fixture's registered agent name.
const Name = "a2awire-clean"

// MaxTextBytes bounds input.text (1 MiB of UTF-8). The kit's body limit
// already keeps text below it; the check stays so that raising the body limit
// cannot silently raise the text limit.
const MaxTextBytes = 1 << 20

// New returns the fixture's HTTP handler.
func New(log *slog.Logger) *protocol.Provider {
	p := protocol.NewProvider(Name, protocol.WithLogger(log))
	protocol.Handle(p, "word-count", wordCount)
	return p
}

// Input is word-count's input. Text is a pointer so that a missing or null
// text is told apart from the empty string, which is valid.
type Input struct {
	Text *string `json:"text"`
}

// Output is word-count's output.
type Output struct {
	// Words counts runs of non-space characters (strings.Fields).
	Words int `json:"words"`
	// Characters counts Unicode code points, not bytes.
	Characters int `json:"characters"`
	// Lines is described at CountLines.
	Lines int `json:"lines"`
}

func wordCount(_ context.Context, in Input) (Output, error) {
	if in.Text == nil {
		return Output{}, protocol.Errorf(protocol.InvalidInput, "input.text is required and must be a string")
	}
	text := *in.Text
	if len(text) > MaxTextBytes {
		return Output{}, protocol.Errorf(protocol.InvalidInput, "input.text is longer than %d bytes", MaxTextBytes)
	}
	return Output{
		Words:      len(strings.Fields(text)),
		Characters: utf8.RuneCountInString(text),
		Lines:      CountLines(text),
	}, nil
}

// CountLines counts lines the way an editor shows them: 0 for the empty
// text; otherwise the number of "\n"-separated lines, where a final "\n"
// ends the last line instead of starting an empty one. So "a" and "a\n" are
// 1 line, "a\nb" and "a\nb\n" are 2, "\n" is 1 and "\n\n" is 2. A "\r\n"
// counts as one line break; a lone "\r" does not break a line.
func CountLines(text string) int {
	if text == "" {
		return 0
	}
	n := strings.Count(text, "\n")
	if !strings.HasSuffix(text, "\n") {
		n++
	}
	return n
}
