package main

import (
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/a2awire/a2awire/shared/conform"
)

// fixtureRuns are the single-endpoint commands a provider author runs:
// each fixture passes on its own with a task, a good and a bad input.
func fixtureRuns(base string) map[string][]string {
	ep := func(name string) string { return conform.FixtureEndpoint(base, name) }
	return map[string][]string{
		conform.Punctual: {"conform", ep(conform.Punctual), "--task", "latency-benchmark",
			"--input", `{"delay_ms":1,"payload_bytes":8}`, "--bad-input", `{"delay_ms":-1}`, "--agent", conform.Punctual},
		conform.Clean: {"conform", ep(conform.Clean), "--task", "word-count",
			"--input", `{"text":"hello world"}`, "--bad-input", `{"text":5}`, "--agent", conform.Clean},
		conform.Messy: {"conform", ep(conform.Messy), "--task", "messy-echo",
			"--input", `{"x":1}`, "--bad-input", `{"simulate":"invalid_input"}`, "--agent", conform.Messy},
		conform.Translator: {"conform", ep(conform.Translator), "--task", "translation",
			"--input", `{"text":"hello","target_lang":"es"}`, "--bad-input", `{"text":"hello","target_lang":"xx"}`, "--agent", conform.Translator},
		conform.Ledger: {"conform", ep(conform.Ledger), "--task", "record-entry", "--stateful",
			"--input", `{"account":"cli-test","amount_cents":250}`, "--bad-input", `{"account":"a","amount_cents":0}`, "--agent", conform.Ledger},
	}
}

// verdictLine matches a verdict line: status, item name, detail.
func verdictLine() *regexp.Regexp { return regexp.MustCompile(`^(PASS|FAIL|SKIP)  (\S+) +(.*)$`) }

// verdicts parses the verdict lines of human output by item name.
func verdicts(t *testing.T, stdout string) map[string]string {
	t.Helper()
	out := map[string]string{}
	line := verdictLine()
	for _, l := range strings.Split(stdout, "\n") {
		if m := line.FindStringSubmatch(l); m != nil {
			out[m[2]] = m[1]
		}
	}
	return out
}

// TestConformEachFixture: `awn conform <endpoint> --task … --bad-input …`
// passes every fixture on its own, one line per item and a summary.
func TestConformEachFixture(t *testing.T) {
	t.Parallel()
	base := gateway(t)
	for name, args := range fixtureRuns(base) {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			r := awn(t, nil, args...)
			if r.code != 0 {
				t.Fatalf("%v", r)
			}
			stateful := slices.Contains(args, "--stateful")
			names := conform.Names(stateful)
			line := verdictLine()
			lines := strings.Split(strings.TrimSuffix(r.stdout, "\n"), "\n")
			if len(lines) != len(names)+1 {
				t.Fatalf("%d lines, want %d verdicts and a summary:\n%s", len(lines), len(names), r.stdout)
			}
			for i, n := range names {
				m := line.FindStringSubmatch(lines[i])
				if m == nil || m[1] != "PASS" || m[2] != n {
					t.Errorf("line %d %q, want PASS %s", i+1, lines[i], n)
				}
			}
			want := strconv.Itoa(len(names)) + " passed, 0 failed, 0 skipped"
			if lines[len(names)] != want {
				t.Errorf("summary %q, want %q", lines[len(names)], want)
			}
			if !strings.Contains(r.stderr, "conform: checking "+args[1]) {
				t.Errorf("no progress on stderr: %s", r.stderr)
			}
		})
	}
}

// report is the exact single-endpoint JSON shape of awn conform --json.
type report struct {
	Endpoint string          `json:"endpoint"`
	Checks   []conform.Check `json:"checks"`
	Passed   int             `json:"passed"`
	Failed   int             `json:"failed"`
}

// checkShape asserts a report document has exactly report's keys.
func checkShape(t *testing.T, raw json.RawMessage) report {
	t.Helper()
	var top map[string]json.RawMessage
	if err := json.Unmarshal(raw, &top); err != nil {
		t.Fatal(err)
	}
	if got := keys(top); !slices.Equal(got, []string{"checks", "endpoint", "failed", "passed"}) {
		t.Errorf("report keys %v", got)
	}
	var checks []map[string]json.RawMessage
	if err := json.Unmarshal(top["checks"], &checks); err != nil {
		t.Fatal(err)
	}
	for _, c := range checks {
		if got := keys(c); !slices.Equal(got, []string{"detail", "name", "status"}) {
			t.Errorf("check keys %v", got)
		}
	}
	var rep report
	if err := json.Unmarshal(raw, &rep); err != nil {
		t.Fatal(err)
	}
	return rep
}

// TestConformJSON: with --json, before or after the arguments, stdout is
// exactly one report document and the verdicts go to stderr as progress.
func TestConformJSON(t *testing.T) {
	t.Parallel()
	base := gateway(t)
	ep := punctualURL(base)
	for _, args := range [][]string{
		{"--json", "conform", ep, "--task", "ping"},
		{"conform", ep, "--task", "ping", "--json"},
	} {
		r := awn(t, nil, args...)
		if r.code != 0 {
			t.Fatalf("%v", r)
		}
		var raw json.RawMessage
		decodeStrict(t, r.stdout, &raw)
		rep := checkShape(t, raw)
		names := conform.Names(false)
		if rep.Endpoint != ep || rep.Passed != len(names)-1 || rep.Failed != 0 || len(rep.Checks) != len(names) {
			t.Errorf("%v: report %+v", args, rep)
		}
		for i, c := range rep.Checks {
			want := conform.Pass
			if c.Name == conform.BadInput400 {
				want = conform.Skip
			}
			if c.Name != names[i] || c.Status != want {
				t.Errorf("check %d %+v, want %s %s", i, c, names[i], want)
			}
		}
		if !strings.Contains(r.stderr, "conform: skip bad-input-400") {
			t.Errorf("stderr lacks progress: %s", r.stderr)
		}
	}
}

// TestConformBrokenProvider: a provider that hides an error inside a 200
// fails the run with exit 1, naming the items in text and in JSON.
func TestConformBrokenProvider(t *testing.T) {
	t.Parallel()
	base := gateway(t)
	// Forward to the real punctual fixture, but answer its refusals of bad
	// values with a 200 wrapping the error.
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		req, _ := http.NewRequestWithContext(r.Context(), r.Method, punctualURL(base), r.Body)
		req.Header = r.Header.Clone()
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			http.Error(w, err.Error(), http.StatusBadGateway)
			return
		}
		defer resp.Body.Close()
		body, _ := io.ReadAll(resp.Body)
		status := resp.StatusCode
		if status == http.StatusBadRequest && strings.Contains(string(body), "invalid_input") {
			body = []byte(`{"output":` + string(body) + `,"metadata":{"agent":"a2awire-punctual","capability":"latency-benchmark","duration_ms":0}}`)
			status = http.StatusOK
		}
		for k, v := range resp.Header {
			w.Header()[k] = v
		}
		w.Header().Del("Content-Length")
		w.WriteHeader(status)
		_, _ = w.Write(body)
	}))
	t.Cleanup(srv.Close)
	args := []string{"conform", srv.URL, "--task", "latency-benchmark", "--bad-input", `{"delay_ms":-1}`}

	r := awn(t, nil, args...)
	if r.code != 1 {
		t.Fatalf("want exit 1: %v", r)
	}
	v := verdicts(t, r.stdout)
	var failed []string
	for n, s := range v {
		if s == "FAIL" {
			failed = append(failed, n)
		}
	}
	slices.Sort(failed)
	if want := []string{conform.BadInput400, conform.NoErrorIn200}; !slices.Equal(failed, want) {
		t.Fatalf("failed %v, want %v:\n%s", failed, want, r.stdout)
	}
	if !strings.Contains(r.stdout, "9 passed, 2 failed, 0 skipped") {
		t.Errorf("summary missing:\n%s", r.stdout)
	}

	r = awn(t, nil, append(args, "--json")...)
	if r.code != 1 {
		t.Fatalf("want exit 1: %v", r)
	}
	var raw json.RawMessage
	decodeStrict(t, r.stdout, &raw)
	if rep := checkShape(t, raw); rep.Failed != 2 || rep.Passed != 9 {
		t.Errorf("report %+v", rep)
	}
}

// TestConformFixtures: `awn conform --fixtures` passes all five fixtures at
// AWN_URL or --url, grouped per fixture, and --json gives one document
// holding a report per fixture.
func TestConformFixtures(t *testing.T) {
	t.Parallel()
	base := gateway(t)
	agents := []string{conform.Punctual, conform.Clean, conform.Messy, conform.Translator, conform.Ledger}

	r := awn(t, map[string]string{"AWN_URL": base}, "conform", "--fixtures")
	if r.code != 0 {
		t.Fatalf("%v", r)
	}
	for _, a := range agents {
		if !strings.Contains(r.stdout, "== "+a+" (task ") {
			t.Errorf("no group for %s:\n%s", a, r.stdout)
		}
	}
	if strings.Contains(r.stdout, "FAIL") || strings.Contains(r.stdout, "SKIP") {
		t.Errorf("not all items passed:\n%s", r.stdout)
	}
	total := 4*len(conform.Names(false)) + len(conform.Names(true))
	if want := "5 fixtures: " + strconv.Itoa(total) + " passed, 0 failed, 0 skipped\n"; !strings.HasSuffix(r.stdout, want) {
		t.Errorf("stdout does not end with %q:\n%s", want, r.stdout)
	}

	// --url wins over AWN_URL, and --json may come first.
	r = awn(t, map[string]string{"AWN_URL": "http://127.0.0.1:1"}, "--json", "conform", "--fixtures", "--url", base)
	if r.code != 0 {
		t.Fatalf("%v", r)
	}
	var doc map[string]json.RawMessage
	decodeStrict(t, r.stdout, &doc)
	if got := keys(doc); !slices.Equal(got, []string{"endpoints", "failed", "passed"}) {
		t.Fatalf("document keys %v", got)
	}
	var eps []json.RawMessage
	if err := json.Unmarshal(doc["endpoints"], &eps); err != nil || len(eps) != len(agents) {
		t.Fatalf("endpoints: %v, %d", err, len(eps))
	}
	for i, raw := range eps {
		rep := checkShape(t, raw)
		if rep.Endpoint != conform.FixtureEndpoint(base, agents[i]) || rep.Failed != 0 || rep.Passed != len(rep.Checks) {
			t.Errorf("report %d: %+v", i, rep)
		}
	}
	if string(doc["passed"]) != strconv.Itoa(total) || string(doc["failed"]) != "0" {
		t.Errorf("totals passed %s failed %s", doc["passed"], doc["failed"])
	}
}

// TestConformFixturesUnreachable: nothing listening is one clear error on
// stderr with exit 1 — not a FAIL line per item — for --fixtures and for one
// endpoint, in text and --json mode.
func TestConformFixturesUnreachable(t *testing.T) {
	t.Parallel()
	srv := httptest.NewServer(http.NotFoundHandler())
	srv.Close()
	for _, args := range [][]string{
		{"conform", "--fixtures"},
		{"--json", "conform", "--fixtures"},
		{"conform", srv.URL + "/agents/x/invoke", "--task", "ping"},
	} {
		r := awn(t, map[string]string{"AWN_URL": srv.URL}, args...)
		if r.code != 1 || r.stdout != "" || strings.Contains(r.stderr, "FAIL") ||
			!strings.Contains(r.stderr, "awn: cannot reach "+srv.URL) || !strings.Contains(r.stderr, "connection refused") ||
			!strings.Contains(r.stderr, "is the server running?") || strings.Count(r.stderr, "\n") != 2 {
			t.Errorf("%q: want exit 1, empty stdout and one two-line error; got %v", args, r)
		}
	}
}

// TestConformNotes: a provider that answers a non-POST with 405 and Allow:
// POST but FastAPI's own body passes with exit 0; a NOTE line follows the
// item's PASS line, the summary counts the note, and the JSON document keeps
// its fields with the note inside the item's detail.
func TestConformNotes(t *testing.T) {
	t.Parallel()
	base := gateway(t)
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Method != http.MethodPost {
			w.Header().Set("Allow", "POST")
			w.Header().Set("Content-Type", "application/json")
			w.WriteHeader(http.StatusMethodNotAllowed)
			_, _ = io.WriteString(w, `{"detail":"Method Not Allowed"}`)
			return
		}
		req, _ := http.NewRequestWithContext(r.Context(), r.Method, punctualURL(base), r.Body)
		req.Header = r.Header.Clone()
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			http.Error(w, err.Error(), http.StatusBadGateway)
			return
		}
		defer resp.Body.Close()
		for k, v := range resp.Header {
			w.Header()[k] = v
		}
		w.WriteHeader(resp.StatusCode)
		_, _ = io.Copy(w, resp.Body)
	}))
	t.Cleanup(srv.Close)
	args := []string{"conform", srv.URL, "--task", "ping"}

	r := awn(t, nil, args...)
	if r.code != 0 {
		t.Fatalf("want exit 0: %v", r)
	}
	lines := strings.Split(r.stdout, "\n")
	i := slices.IndexFunc(lines, func(l string) bool { return strings.HasPrefix(l, "PASS  "+conform.NonPost405+" ") })
	if i < 0 || i+1 >= len(lines) || !strings.HasPrefix(lines[i+1], "NOTE  "+conform.NonPost405+" ") ||
		!strings.Contains(lines[i+1], `{"detail":"Method Not Allowed"}`) {
		t.Fatalf("no NOTE line after the non-post-405 verdict:\n%s", r.stdout)
	}
	if n := strings.Count(r.stdout, "\nNOTE  "); n != 1 {
		t.Errorf("%d NOTE lines, want 1:\n%s", n, r.stdout)
	}
	names := conform.Names(false)
	if want := strconv.Itoa(len(names)-1) + " passed, 0 failed, 1 skipped, 1 note\n"; !strings.HasSuffix(r.stdout, want) {
		t.Errorf("stdout does not end with %q:\n%s", want, r.stdout)
	}

	r = awn(t, nil, append(args, "--json")...)
	if r.code != 0 {
		t.Fatalf("want exit 0: %v", r)
	}
	var raw json.RawMessage
	decodeStrict(t, r.stdout, &raw)
	rep := checkShape(t, raw)
	for _, c := range rep.Checks {
		if c.Name == conform.NonPost405 && (c.Status != conform.Pass || !strings.Contains(c.Detail, `; note: 405 {"detail":"Method Not Allowed"}`)) {
			t.Errorf("JSON check %+v", c)
		}
	}
}
