package main

import (
	"encoding/json"
	"fmt"
	"io"
	"strings"
	"text/tabwriter"
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

// WriteTable renders the report as one aligned table, then how each row
// was measured, keyed by row id (rows measured alike share one line), since
// the methods are too long for a column.
func WriteTable(w io.Writer, r Report) error {
	fmt.Fprintf(w, "a2awire benchmarks — %s (%s, took %s)\n\n", r.Machine, r.Started, r.Elapsed)
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "#\tMEASURE\tRESULT\tTARGET\tSTATUS")
	for _, row := range r.Rows {
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\n", row.ID, row.Name, oneLine(row.Result), oneLine(row.Target), row.Status)
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	fmt.Fprintln(w, "\nhow each row was measured:")
	for _, m := range methods(r.Rows) {
		if _, err := fmt.Fprintf(w, "  %s: %s\n", m.ids, m.text); err != nil {
			return err
		}
	}
	return nil
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
