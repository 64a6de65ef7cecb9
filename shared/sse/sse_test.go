package sse_test

import (
	"errors"
	"io"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/a2awire/a2awire/shared/sse"
)

// TestRoundTrip: what the Writer writes, the Reader parses back exactly —
// ids, types, data with every kind of line break (joined back with "\n"),
// empty data — skipping comments, keeping the retry hint and the last id.
func TestRoundTrip(t *testing.T) {
	rec := httptest.NewRecorder()
	w, err := sse.Start(rec)
	if err != nil {
		t.Fatal(err)
	}
	if ct := rec.Header().Get("Content-Type"); !strings.HasPrefix(ct, sse.ContentType) || !rec.Flushed {
		t.Fatalf("Start: Content-Type %q, flushed %v", ct, rec.Flushed)
	}
	want := []sse.Event{
		{ID: "01A", Type: "agent.joined", Data: `{"a":1}`},
		{ID: "01B", Type: "", Data: "one\ntwo\nthree\nfour"},
		{ID: "01C", Type: "x", Data: ""},
	}
	if err := w.Add(want[0].ID, want[0].Type, []byte(want[0].Data)); err != nil {
		t.Fatal(err)
	}
	if err := w.Comment("heartbeat"); err != nil { // sends the event Add left waiting too
		t.Fatal(err)
	}
	if err := w.Event(want[1].ID, want[1].Type, []byte("one\r\ntwo\rthree\nfour")); err != nil {
		t.Fatal(err)
	}
	if err := w.Event(want[2].ID, want[2].Type, nil); err != nil {
		t.Fatal(err)
	}
	if err := w.Retry(1500 * time.Millisecond); err != nil {
		t.Fatal(err)
	}
	if err := w.Event("bad\nid", "", nil); err == nil {
		t.Error("an id with a line break was written")
	}
	if err := w.Event("", "bad\revent", nil); err == nil {
		t.Error("an event name with a line break was written")
	}
	r := sse.NewReader(strings.NewReader(rec.Body.String()), 0)
	for i, ev := range want {
		got, err := r.Next()
		if err != nil || got != ev {
			t.Fatalf("event %d: %+v, %v; want %+v\n%s", i, got, err, ev, rec.Body.String())
		}
	}
	if _, err := r.Next(); err != io.EOF {
		t.Fatalf("after the last event: %v, want EOF", err)
	}
	if r.Retry != 1500*time.Millisecond || r.LastID != "01C" || r.Comments != 1 {
		t.Errorf("retry %v last id %q comments %d", r.Retry, r.LastID, r.Comments)
	}
}

// TestReaderCutMidEvent: a stream cut within an event is
// io.ErrUnexpectedEOF, the event is not returned, and LastID still names
// the event before it — resuming from the cut event's id would lose it.
func TestReaderCutMidEvent(t *testing.T) {
	r := sse.NewReader(strings.NewReader("id: 1\ndata: a\n\nid: 2\ndata: b"), 0)
	if ev, err := r.Next(); err != nil || ev.ID != "1" {
		t.Fatalf("%+v %v", ev, err)
	}
	if ev, err := r.Next(); !errors.Is(err, io.ErrUnexpectedEOF) {
		t.Fatalf("%+v %v, want ErrUnexpectedEOF", ev, err)
	}
	if r.LastID != "1" {
		t.Errorf("after a cut within event 2, LastID %q, want 1 (the last event dispatched)", r.LastID)
	}
}

// TestReaderIDOnlyBlockMovesLastID: a block with an id and no data
// dispatches nothing but moves the resume point, as EventSource's.
func TestReaderIDOnlyBlockMovesLastID(t *testing.T) {
	r := sse.NewReader(strings.NewReader("id: 1\ndata: a\n\nid: 7\n\n"), 0)
	if _, err := r.Next(); err != nil {
		t.Fatal(err)
	}
	if _, err := r.Next(); err != io.EOF {
		t.Fatalf("%v, want EOF", err)
	}
	if r.LastID != "7" {
		t.Errorf("LastID %q, want 7", r.LastID)
	}
}

// FuzzReader: any input parses without a panic, and every event the
// Writer writes again reads back the same (seeds in testdata/fuzz).
func FuzzReader(f *testing.F) {
	f.Add("id: 1\nevent: e\ndata: x\n\n")
	f.Add(": c\r\nretry: 10\r\ndata\r\n\r\n")
	f.Add("data: a\rdata: b\r\r")
	f.Fuzz(func(t *testing.T, in string) {
		r := sse.NewReader(strings.NewReader(in), 4096)
		for range 1000 {
			ev, err := r.Next()
			if err != nil {
				return
			}
			rec := httptest.NewRecorder()
			w, _ := sse.Start(rec)
			if err := w.Event(ev.ID, ev.Type, []byte(ev.Data)); err != nil {
				if strings.ContainsAny(ev.Type, "\r\n") || strings.ContainsAny(ev.ID, "\r\n\x00") {
					continue
				}
				t.Fatalf("rewriting %+v: %v", ev, err)
			}
			again, err := sse.NewReader(rec.Body, 0).Next()
			if err != nil || again != ev {
				t.Fatalf("%+v read back as %+v (%v)", ev, again, err)
			}
		}
	})
}
