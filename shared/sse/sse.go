// Package sse writes Server-Sent Events (the text/event-stream format of
// the HTML standard) to an http.ResponseWriter, flushing after each one so
// that a reader sees it at once: behind the local harness's flushing
// writer, under net/http, and through aws-lambda-go's lambdaurl, whose
// writer sends every Write as it is made (it has no Flush to call).
//
// Every field is written so that a reader parses back exactly what was
// given: a value carrying a line break is refused for id and event (the
// format has no way to carry one) and split into several data lines for
// data, which a reader joins with "\n" again.
package sse

import (
	"bytes"
	"errors"
	"fmt"
	"net/http"
	"strings"
	"time"
)

// ContentType is the media type of an event stream.
const ContentType = "text/event-stream"

// Writer writes one response's events. It is not safe for concurrent use.
type Writer struct {
	w   http.ResponseWriter
	rc  *http.ResponseController
	buf bytes.Buffer
}

// Start writes the stream's header (200, text/event-stream, no caching,
// no proxy buffering) and returns the writer of its events.
func Start(w http.ResponseWriter) (*Writer, error) {
	h := w.Header()
	h.Set("Content-Type", ContentType+"; charset=utf-8")
	h.Set("Cache-Control", "no-store")
	// Proxies that buffer by default (nginx) pass the stream through.
	h.Set("X-Accel-Buffering", "no")
	w.WriteHeader(http.StatusOK)
	sw := &Writer{w: w, rc: http.NewResponseController(w)}
	return sw, sw.flush()
}

// errLineBreak is a field value the format cannot carry.
var errLineBreak = errors.New("sse: a line break in an id or event name")

// Event writes one event: id (empty: none), its type (empty: "message")
// and data, then the blank line that dispatches it.
func (s *Writer) Event(id, event string, data []byte) error {
	if err := s.Add(id, event, data); err != nil {
		return err
	}
	return s.Send()
}

// Add is Event without the sending: the event waits in the writer until
// Send (or the next Event, Comment or Retry), so that a page of events is
// one Write and one flush rather than one each.
func (s *Writer) Add(id, event string, data []byte) error {
	if strings.ContainsAny(id, "\r\n\x00") || strings.ContainsAny(event, "\r\n") {
		return errLineBreak
	}
	if id != "" {
		s.buf.WriteString("id: " + id + "\n")
	}
	if event != "" {
		s.buf.WriteString("event: " + event + "\n")
	}
	for _, line := range splitLines(data) {
		s.buf.WriteString("data: ")
		s.buf.Write(line)
		s.buf.WriteByte('\n')
	}
	s.buf.WriteByte('\n')
	return nil
}

// Comment writes a comment line (": text"), which readers ignore: a
// heartbeat that keeps the connection and the intermediaries awake.
func (s *Writer) Comment(text string) error {
	for _, line := range splitLines([]byte(text)) {
		s.buf.WriteString(": ")
		s.buf.Write(line)
		s.buf.WriteByte('\n')
	}
	s.buf.WriteByte('\n')
	return s.Send()
}

// Retry tells the reader how long to wait before it reconnects.
func (s *Writer) Retry(d time.Duration) error {
	fmt.Fprintf(&s.buf, "retry: %d\n\n", d.Milliseconds())
	return s.Send()
}

// Send writes what Add left waiting, if anything, and flushes it.
func (s *Writer) Send() error {
	if s.buf.Len() == 0 {
		return nil
	}
	_, err := s.w.Write(s.buf.Bytes())
	s.buf.Reset()
	if err != nil {
		return err
	}
	return s.flush()
}

// flush pushes what was written to the client; a writer that cannot flush
// (lambdaurl's, which never buffers) is fine as it is.
func (s *Writer) flush() error {
	if err := s.rc.Flush(); err != nil && !errors.Is(err, http.ErrNotSupported) {
		return err
	}
	return nil
}

// splitLines splits data at CRLF, CR and LF, the line ends of the format;
// empty data is one empty line.
func splitLines(data []byte) [][]byte {
	var out [][]byte
	for {
		i := bytes.IndexAny(data, "\r\n")
		if i < 0 {
			return append(out, data)
		}
		out = append(out, data[:i])
		if data[i] == '\r' && i+1 < len(data) && data[i+1] == '\n' {
			i++
		}
		data = data[i+1:]
	}
}
