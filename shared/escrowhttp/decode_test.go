package escrowhttp_test

import (
	"testing"

	"github.com/a2awire/a2awire/shared/apierror"
	"github.com/a2awire/a2awire/shared/escrowhttp"
)

// FuzzDecodeCreate: any body decodes or is refused as Invalid (400), never
// a panic or another kind; a decoded deadline is the one the body names.
func FuzzDecodeCreate(f *testing.F) {
	for _, s := range []string{
		`{"provider":"a2awire-clean","capability":"word-count","input":{"text":"a b"},"amount":5}`,
		`{"provider":"p","capability":"c","input":{},"amount":1,"deadline":"2026-12-05T00:00:00Z"}`,
		`{"amount":1,"amount":2}`, `{"deadline":"tomorrow"}`, `{"input":"\xff"}`, `[]`, ``, `{"amount":1e400}`,
	} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, body []byte) {
		b, deadline, err := escrowhttp.DecodeCreate(body)
		if err != nil {
			if k := apierror.KindOf(err); k != apierror.Invalid {
				t.Fatalf("%q: error kind %v: %v", body, k, err)
			}
			return
		}
		if b.Deadline == "" && !deadline.IsZero() || b.Deadline != "" && deadline.IsZero() {
			t.Fatalf("%q: deadline %q decoded as %v", body, b.Deadline, deadline)
		}
	})
}

// TestDecodeCreateRefuses: a repeated key and a deadline that is not RFC
// 3339 are Invalid.
func TestDecodeCreateRefuses(t *testing.T) {
	for _, body := range []string{`{"amount":1,"amount":2}`, `{"deadline":"tomorrow"}`, `not json`} {
		if _, _, err := escrowhttp.DecodeCreate([]byte(body)); apierror.KindOf(err) != apierror.Invalid {
			t.Errorf("%s: %v, want Invalid", body, err)
		}
	}
}
