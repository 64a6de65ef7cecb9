package clean

import (
	"context"
	"errors"
	"strings"
	"testing"

	"github.com/a2awire/a2awire/shared/protocol"
)

// TestTextLimit reaches the text limit directly: over HTTP the body limit
// (also 1 MiB, envelope included) refuses such a text first.
func TestTextLimit(t *testing.T) {
	at := strings.Repeat("a", MaxTextBytes)
	if _, err := wordCount(context.Background(), Input{Text: &at}); err != nil {
		t.Errorf("text of exactly %d bytes: %v", MaxTextBytes, err)
	}
	over := at + "é"
	_, err := wordCount(context.Background(), Input{Text: &over})
	var perr *protocol.Error
	if !errors.As(err, &perr) || perr.Code != protocol.InvalidInput {
		t.Errorf("text over the limit: got %v, want invalid_input", err)
	}
}
