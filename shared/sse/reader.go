package sse

import (
	"bufio"
	"io"
	"strconv"
	"strings"
	"time"
)

// Event is one dispatched event as a reader parses it.
type Event struct {
	// ID is the event's id field, "" when it had none.
	ID string
	// Type is the event field ("" when absent: "message" by the format).
	Type string
	// Data is the data lines joined with "\n".
	Data string
}

// Reader parses an event stream as the HTML standard's EventSource does
// (comments skipped, fields split at the first colon, one leading space
// dropped from the value), for the tests and the CLI.
type Reader struct {
	sc *bufio.Scanner
	// Retry is the last retry hint the stream gave (0: none).
	Retry time.Duration
	// LastID is the id of the last event that carried one, set when the
	// event is dispatched (its blank line), as EventSource's last event
	// ID string is: where to resume (Last-Event-ID). A stream cut within
	// an event leaves it at the event before, so that event is sent again.
	LastID string
	// idBuf is the standard's last event ID buffer: the id read, not yet
	// dispatched.
	idBuf string
	// Comments counts the comment lines read (heartbeats).
	Comments int
}

// NewReader reads events from r; lines may be up to max bytes (0: 1 MiB).
func NewReader(r io.Reader, max int) *Reader {
	if max <= 0 {
		max = 1 << 20
	}
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 0, 64<<10), max)
	sc.Split(scanLines)
	return &Reader{sc: sc}
}

// Next returns the next event; io.EOF when the stream ended cleanly
// between events, io.ErrUnexpectedEOF when it ended within one.
func (r *Reader) Next() (Event, error) {
	var (
		ev      Event
		data    []string
		started bool
	)
	for r.sc.Scan() {
		line := r.sc.Text()
		if line == "" {
			r.LastID = r.idBuf
			if data == nil {
				// A block without data dispatches nothing (an id alone
				// still moved LastID).
				started = false
				ev.Type = ""
				continue
			}
			ev.Data = strings.Join(data, "\n")
			return ev, nil
		}
		started = true
		if strings.HasPrefix(line, ":") {
			r.Comments++
			continue
		}
		field, value, _ := strings.Cut(line, ":")
		value = strings.TrimPrefix(value, " ")
		switch field {
		case "id":
			if !strings.ContainsRune(value, 0) {
				ev.ID = value
				r.idBuf = value
			}
		case "event":
			ev.Type = value
		case "data":
			data = append(data, value)
		case "retry":
			if ms, err := strconv.Atoi(value); err == nil && ms >= 0 {
				r.Retry = time.Duration(ms) * time.Millisecond
			}
		}
	}
	if err := r.sc.Err(); err != nil {
		return Event{}, err
	}
	if started || data != nil {
		return Event{}, io.ErrUnexpectedEOF
	}
	return Event{}, io.EOF
}

// scanLines splits at CRLF, CR or LF.
func scanLines(data []byte, atEOF bool) (int, []byte, error) {
	for i, b := range data {
		switch b {
		case '\n':
			return i + 1, data[:i], nil
		case '\r':
			if i+1 < len(data) {
				if data[i+1] == '\n' {
					return i + 2, data[:i], nil
				}
				return i + 1, data[:i], nil
			}
			if atEOF {
				return i + 1, data[:i], nil
			}
			return 0, nil, nil // a LF may follow
		}
	}
	if atEOF && len(data) > 0 {
		return len(data), data, nil
	}
	return 0, nil, nil
}
