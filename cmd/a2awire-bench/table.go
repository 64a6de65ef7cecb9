package main

import (
	"encoding/json"
	"fmt"
	"io"
	"strings"
	"unicode/utf8"
)

// Status says whether a row met its target.
type Status string

// The statuses a row can have.
const (
	// Met: the measured figure is at or within its target.
	Met Status = "ok"
	// Missed: the measured figure is outside its target.
	Missed Status = "MISSED"
	// Info: the row has no written target; the figure is reported.
	Info Status = "info"
	// NotBuilt: what the row measures does not exist yet.
	NotBuilt Status = "not built yet"
	// Failed: the measurement itself failed (the error is in Result).
	Failed Status = "FAILED"
)

// Row is one line of the table: what was measured, the figure, its target
// next to it and how it was measured, so a reader can judge the number.
type Row struct {
	ID     string             `json:"id"`
	Name   string             `json:"name"`
	Result string             `json:"result"`
	Target string             `json:"target"`
	Status Status             `json:"status"`
	Method string             `json:"method"`
	Values map[string]float64 `json:"values,omitempty"`
}

// Report is everything one `make bench` run measured, and where.
type Report struct {
	Machine string `json:"machine"`
	Started string `json:"started"`
	Elapsed string `json:"elapsed"`
	Rows    []Row  `json:"rows"`
}

// within is Met when ok holds, Missed otherwise.
func within(ok bool) Status {
	if ok {
		return Met
	}
	return Missed
}

// Width is the most columns a line of WriteTable's output takes: a
// terminal's 100, so a row never runs off the screen; the whole text of
// every cell stays in results.md and results.json.
const Width = 100

// WriteTable renders the report as one aligned table whose cells wrap
// within Width, then a summary line (how many rows met, missed or failed,
// naming those that did not), then how each row was measured, keyed by
// row id (rows measured alike share one line), since the methods are too
// long for a column.
func WriteTable(w io.Writer, r Report) error {
	fmt.Fprintf(w, "a2awire benchmarks — %s (%s, took %s)\n\n", r.Machine, r.Started, r.Elapsed)
	header := [5]string{"#", "MEASURE", "RESULT", "TARGET", "STATUS"}
	cells := make([][5]string, len(r.Rows))
	for i, row := range r.Rows {
		cells[i] = [5]string{row.ID, oneLine(row.Name), oneLine(row.Result), oneLine(row.Target), string(row.Status)}
	}
	widths := columnWidths(header, cells)
	writeRow(w, widths, header)
	for _, c := range cells {
		writeRow(w, widths, c)
	}
	fmt.Fprintln(w)
	for _, l := range wrap(Summary(r.Rows), Width) {
		fmt.Fprintln(w, l)
	}
	fmt.Fprintln(w, "\nhow each row was measured:")
	for _, m := range methods(r.Rows) {
		for i, l := range wrap(m.ids+": "+m.text, Width-4) {
			indent := "  "
			if i > 0 {
				indent = "    "
			}
			if _, err := fmt.Fprintln(w, indent+l); err != nil {
				return err
			}
		}
	}
	return nil
}

// Summary is one line saying how the rows fared: the count of each status
// and the ids of the rows that missed their target or failed.
func Summary(rows []Row) string {
	count := map[Status][]string{}
	for _, r := range rows {
		count[r.Status] = append(count[r.Status], r.ID)
	}
	parts := []string{fmt.Sprintf("%d ok", len(count[Met]))}
	for _, st := range []Status{Missed, Failed} {
		if ids := count[st]; len(ids) > 0 {
			parts = append(parts, fmt.Sprintf("%d %s (%s)", len(ids), st, strings.Join(ids, ", ")))
		} else {
			parts = append(parts, fmt.Sprintf("0 %s", strings.ToLower(string(st))))
		}
	}
	for _, st := range []Status{Info, NotBuilt} {
		if n := len(count[st]); n > 0 {
			parts = append(parts, fmt.Sprintf("%d %s", n, st))
		}
	}
	return fmt.Sprintf("summary: %d rows: %s", len(rows), strings.Join(parts, ", "))
}

// columnWidths fits the five columns in Width: the id and the status
// take what they need, the other three their natural width when all fit,
// else the measure and the target are capped and the result takes the
// rest (each at least a few columns, so a word rarely splits).
func columnWidths(header [5]string, rows [][5]string) [5]int {
	var nat [5]int
	for _, c := range append([][5]string{header}, rows...) {
		for i, s := range c {
			nat[i] = max(nat[i], utf8.RuneCountInString(s))
		}
	}
	const gap = 2
	avail := Width - nat[0] - nat[4] - 4*gap
	w := nat
	if nat[1]+nat[2]+nat[3] <= avail {
		return w
	}
	w[1] = max(min(nat[1], avail*30/100), 8)
	w[3] = max(min(nat[3], avail*28/100), 8)
	w[2] = max(avail-w[1]-w[3], 8)
	if spare := w[2] - nat[2]; spare > 0 { // the results are short: give the rest back
		w[2] = nat[2]
		w[1] = min(nat[1], w[1]+spare)
		w[3] = min(nat[3], avail-w[1]-w[2])
	}
	return w
}

// writeRow writes one row, each cell wrapped within its column, as many
// lines as its tallest cell; the last column is not padded.
func writeRow(w io.Writer, widths [5]int, cells [5]string) {
	var lines [5][]string
	height := 1
	for i, c := range cells {
		lines[i] = wrap(c, widths[i])
		height = max(height, len(lines[i]))
	}
	for l := range height {
		var b strings.Builder
		for i := range cells {
			var s string
			if l < len(lines[i]) {
				s = lines[i][l]
			}
			if i == len(cells)-1 {
				b.WriteString(s)
				break
			}
			b.WriteString(s)
			b.WriteString(strings.Repeat(" ", widths[i]-utf8.RuneCountInString(s)+2))
		}
		fmt.Fprintln(w, strings.TrimRight(b.String(), " "))
	}
}

// wrap breaks s at spaces into lines of at most width characters; a word
// longer than width is split.
func wrap(s string, width int) []string {
	var out []string
	var cur []rune
	for _, word := range strings.Fields(s) {
		rw := []rune(word)
		for len(rw) > width {
			if len(cur) > 0 {
				out, cur = append(out, string(cur)), nil
			}
			out, rw = append(out, string(rw[:width])), rw[width:]
		}
		switch {
		case len(cur) == 0:
			cur = rw
		case len(cur)+1+len(rw) <= width:
			cur = append(append(cur, ' '), rw...)
		default:
			out, cur = append(out, string(cur)), rw
		}
	}
	if len(cur) > 0 || len(out) == 0 {
		out = append(out, string(cur))
	}
	return out
}

// WriteMarkdown renders the same table and methods in Markdown, for
// docs/performance.md.
func WriteMarkdown(w io.Writer, r Report) error {
	fmt.Fprintf(w, "Measured %s on %s (took %s).\n\n", r.Started, r.Machine, r.Elapsed)
	fmt.Fprintln(w, "| # | measure | result | target | status |")
	fmt.Fprintln(w, "|---|---|---|---|---|")
	for _, row := range r.Rows {
		fmt.Fprintf(w, "| %s | %s | %s | %s | %s |\n", row.ID, cell(row.Name), cell(row.Result), cell(row.Target), row.Status)
	}
	fmt.Fprintln(w, "\nHow each row was measured:")
	fmt.Fprintln(w)
	for _, m := range methods(r.Rows) {
		if _, err := fmt.Fprintf(w, "- %s: %s\n", m.ids, m.text); err != nil {
			return err
		}
	}
	return nil
}

type method struct{ ids, text string }

// methods lists each distinct method once, with the ids of its rows, in
// the order the rows first use them.
func methods(rows []Row) []method {
	var order []string
	ids := map[string][]string{}
	for _, row := range rows {
		m := oneLine(row.Method)
		if m == "" {
			continue
		}
		if ids[m] == nil {
			order = append(order, m)
		}
		ids[m] = append(ids[m], row.ID)
	}
	out := make([]method, len(order))
	for i, m := range order {
		out[i] = method{ids: strings.Join(ids[m], ", "), text: m}
	}
	return out
}

// WriteJSON writes the report as indented JSON (bench/results.json).
func WriteJSON(w io.Writer, r Report) error {
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	return enc.Encode(r)
}

func oneLine(s string) string { return strings.Join(strings.Fields(s), " ") }

func cell(s string) string { return strings.ReplaceAll(oneLine(s), "|", `\|`) }
