package apierror_test

import (
	"errors"
	"strings"
	"testing"

	"github.com/a2awire/a2awire/shared/apierror"
)

func TestWrappedErrorKeepsKind(t *testing.T) {
	err := errors.Join(errors.New("context"), apierror.New(apierror.Forbidden, "not yours"))
	if apierror.KindOf(err) != apierror.Forbidden {
		t.Fatalf("kind %v", apierror.KindOf(err))
	}
}

func TestQuoteIsShort(t *testing.T) {
	q := apierror.Quote(strings.Repeat("é", 1<<20))
	if len(q) > 120 || !strings.Contains(q, "bytes") {
		t.Fatalf("quote %q", q)
	}
	if apierror.Quote("a\x1b") != `"a\x1b"` {
		t.Fatalf("not escaped: %s", apierror.Quote("a\x1b"))
	}
}
