package awn_test

import (
	"encoding/json"
	"testing"

	"github.com/a2awire/a2awire/shared/awn"
)

// FuzzParseEvent: an event stream's data line, whatever a server sends,
// is an Event or an error — never a panic — and an Event keeps the bytes
// it came from and reads its notices without panicking.
func FuzzParseEvent(f *testing.F) {
	f.Add([]byte(`{"eventId":"01J","type":"message.received","worldId":"w","data":{"messageId":"m","from":"a","preview":"hi"},"visibility":"private","createdAt":"2026-12-04T12:00:00Z"}`))
	f.Add([]byte(`{"eventId":"01K","type":"action.submitted","data":{"action":"move","params":{"to":"e4"}}}`))
	f.Add([]byte(`{"type":"action.submitted","data":[]}`))
	f.Add([]byte(`null`))
	f.Fuzz(func(t *testing.T, b []byte) {
		e, err := awn.ParseEvent(b)
		if err != nil {
			return
		}
		if string(e.Raw) != string(b) || !json.Valid(b) {
			t.Fatalf("raw %q from %q", e.Raw, b)
		}
		_, _ = e.Message()
		_, _ = e.Action()
	})
}
