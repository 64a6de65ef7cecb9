package conform_test

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"maps"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/a2awire/a2awire/shared/conform"
	"github.com/a2awire/a2awire/shared/protocol"
)

// quiet keeps the kit's logs of deliberate 500s out of the test output.
func quiet() protocol.Option { return protocol.WithLogger(slog.New(slog.DiscardHandler)) }

// run checks t and returns the verdicts by name, failing the test when the
// runner breaks its own contract (order, count, progress callbacks).
func run(t *testing.T, target conform.Target) map[string]conform.Check {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	var mu sync.Mutex
	var progress []string
	r := conform.Runner{
		HTTP: &http.Client{Timeout: 5 * time.Second},
		OnCheck: func(c conform.Check) {
			mu.Lock()
			defer mu.Unlock()
			progress = append(progress, c.Name)
		},
	}
	checks, err := r.Run(ctx, target)
	if err != nil {
		t.Fatalf("Run: %v", err)
	}
	var names []string
	byName := map[string]conform.Check{}
	for _, c := range checks {
		names = append(names, c.Name)
		byName[c.Name] = c
		if c.Status != conform.Pass && c.Detail == "" {
			t.Errorf("%s is %s without a detail", c.Name, c.Status)
		}
	}
	if want := conform.Names(target.Stateful); !slices.Equal(names, want) {
		t.Fatalf("items %v, want %v", names, want)
	}
	if !slices.Equal(progress, names) {
		t.Errorf("OnCheck saw %v, want %v", progress, names)
	}
	return byName
}

// having returns the names of the items with status.
func having(checks map[string]conform.Check, status conform.Status) []string {
	var out []string
	for _, n := range slices.Sorted(maps.Keys(checks)) {
		if checks[n].Status == status {
			out = append(out, n)
		}
	}
	return out
}

func report(checks map[string]conform.Check) string {
	var b strings.Builder
	for _, n := range slices.Sorted(maps.Keys(checks)) {
		fmt.Fprintf(&b, "\n  %s %s: %s", checks[n].Status, n, checks[n].Detail)
		for _, note := range checks[n].Notes {
			fmt.Fprintf(&b, "\n    note: %s", note)
		}
	}
	return b.String()
}

// noted returns the names of the items with notes.
func noted(checks map[string]conform.Check) []string {
	var out []string
	for _, n := range slices.Sorted(maps.Keys(checks)) {
		if len(checks[n].Notes) > 0 {
			out = append(out, n)
		}
	}
	return out
}

// counterInput is the test providers' input: add amount to account.
type counterInput struct {
	Account string `json:"account"`
	Amount  int    `json:"amount_cents"`
}

// book is the test providers' state: entries per account, so that a
// provider acting twice shows.
type book struct {
	mu      sync.Mutex
	entries map[string]int
}

func (b *book) add(_ context.Context, in counterInput) (map[string]any, error) {
	if in.Account == "" || in.Amount == 0 {
		return nil, protocol.Errorf(protocol.InvalidInput, "input.account is required and input.amount_cents must not be 0")
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	b.entries[in.Account]++
	return map[string]any{"account": in.Account, "sequence": b.entries[in.Account]}, nil
}

func (b *book) balance(_ context.Context, in counterInput) (map[string]any, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return map[string]any{"account": in.Account, "entries": b.entries[in.Account]}, nil
}

// newProvider is a conformant provider built with the kit: capability
// "record-entry" appends to the book, "balance" reads it. With idem it is
// stateful.
func newProvider(idem protocol.Idempotency) *protocol.Provider {
	b := &book{entries: map[string]int{}}
	opts := []protocol.Option{quiet()}
	if idem != nil {
		opts = append(opts, protocol.WithIdempotency(idem))
	}
	p := protocol.NewProvider("test-provider", opts...)
	protocol.Handle(p, "record-entry", b.add)
	protocol.Handle(p, "balance", b.balance)
	return p
}

// memIdem is a minimal idempotency store for stateful test providers.
// ignoreHash makes it replay even for a different body, a deliberate bug.
type memIdem struct {
	mu         sync.Mutex
	recs       map[string]*record
	ignoreHash bool
}

type record struct {
	hash string
	done bool
	rec  protocol.Recorded
}

func newIdem() *memIdem { return &memIdem{recs: map[string]*record{}} }

func (m *memIdem) Begin(_ context.Context, key protocol.TaskKey) (protocol.Claim, *protocol.Recorded, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	r, ok := m.recs[key.TaskID]
	if !ok {
		m.recs[key.TaskID] = &record{hash: key.RequestHash}
		return protocol.Claim{TaskKey: key}, nil, nil
	}
	if !m.ignoreHash && r.hash != key.RequestHash {
		return protocol.Claim{}, nil, protocol.Errorf(protocol.IdempotencyKeyReused, "task id reused with another request")
	}
	if !r.done {
		return protocol.Claim{}, nil, protocol.Errorf(protocol.RequestInProgress, "task id still in progress")
	}
	rec := r.rec
	return protocol.Claim{}, &rec, nil
}

func (m *memIdem) Commit(_ context.Context, key protocol.Claim, rec protocol.Recorded) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.recs[key.TaskID].done, m.recs[key.TaskID].rec = true, rec
	return nil
}

func (m *memIdem) Abort(_ context.Context, key protocol.Claim) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	delete(m.recs, key.TaskID)
	return nil
}

// serve starts h on loopback for the test's lifetime.
func serve(t *testing.T, h http.Handler) string {
	t.Helper()
	srv := httptest.NewServer(h)
	t.Cleanup(srv.Close)
	return srv.URL + "/invoke"
}

func target(endpoint string, stateful bool) conform.Target {
	t := conform.Target{
		Endpoint: endpoint,
		Agent:    "test-provider",
		Task:     "record-entry",
		Input:    json.RawMessage(`{"account":"acct-1","amount_cents":100}`),
		BadInput: json.RawMessage(`{"account":"acct-1","amount_cents":0}`),
		Stateful: stateful,
	}
	if stateful {
		t.Effects = func(ctx context.Context, hc *http.Client) (int64, error) {
			return conform.LedgerEntries(ctx, hc, endpoint, "acct-1")
		}
	}
	return t
}

// isBad reports whether a request carries the test target's bad input.
func isBad(body []byte) bool { return strings.Contains(string(body), `"amount_cents":0`) }

// rewrite wraps the conformant provider, answering requests that match
// with respond instead.
func rewrite(p http.Handler, match func(*http.Request, []byte) bool, respond func(w http.ResponseWriter, r *http.Request)) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		r.Body = io.NopCloser(strings.NewReader(string(body)))
		if match(r, body) {
			respond(w, r)
			return
		}
		p.ServeHTTP(w, r)
	})
}

func writeJSON(w http.ResponseWriter, status int, body string) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	_, _ = io.WriteString(w, body)
}

// TestConformantProvidersPass: the kit's providers pass every item, the
// stateful one with its effect count.
func TestConformantProvidersPass(t *testing.T) {
	t.Parallel()
	for _, stateful := range []bool{false, true} {
		t.Run(fmt.Sprintf("stateful=%v", stateful), func(t *testing.T) {
			t.Parallel()
			var idem protocol.Idempotency
			if stateful {
				idem = newIdem()
			}
			checks := run(t, target(serve(t, newProvider(idem)), stateful))
			if bad := having(checks, conform.Fail); len(bad) > 0 || len(having(checks, conform.Skip)) > 0 {
				t.Fatalf("want every item to pass:%s", report(checks))
			}
			// The kit does all the network asks, so nothing is noted.
			if n := noted(checks); len(n) > 0 {
				t.Fatalf("notes on %v:%s", n, report(checks))
			}
			if stateful {
				if d := checks[conform.ReplayIdentical].Detail; !strings.Contains(d, protocol.ReplayedHeader+": true") {
					t.Errorf("replay detail %q does not report the Replayed header", d)
				}
				if d := checks[conform.ActsOnce].Detail; !strings.Contains(d, "effect count") {
					t.Errorf("acts-once detail %q does not report the effect count", d)
				}
			}
		})
	}
}

// TestBrokenProvidersFailTheRightItems: each deliberately broken provider
// fails exactly the items its bug breaks, and every detail says what was
// seen. A provider that only falls short of what the network's providers do
// beyond the published checklist fails nothing: the item carries a note.
func TestBrokenProvidersFailTheRightItems(t *testing.T) {
	t.Parallel()
	post := func(r *http.Request, _ []byte) bool { return r.Method == http.MethodPost }
	tests := []struct {
		name     string
		handler  func() http.Handler
		stateful bool
		want     []string
		// detail, when set, must appear in the first wanted item's detail.
		detail string
		// noteOn, when set, is the one item with notes, and note must
		// appear in one of them.
		noteOn, note string
	}{
		{
			name: "200 with an error inside output",
			handler: func() http.Handler {
				return rewrite(newProvider(nil), func(_ *http.Request, b []byte) bool { return isBad(b) }, func(w http.ResponseWriter, _ *http.Request) {
					writeJSON(w, 200, `{"output":{"error":"invalid_input","message":"amount_cents must not be 0"},`+
						`"metadata":{"agent":"test-provider","capability":"record-entry","duration_ms":0}}`)
				})
			},
			want:   []string{conform.BadInput400, conform.NoErrorIn200},
			detail: "got 200",
		},
		{
			name: "500 on bad input",
			handler: func() http.Handler {
				return rewrite(newProvider(nil), func(_ *http.Request, b []byte) bool { return isBad(b) }, func(w http.ResponseWriter, _ *http.Request) {
					writeJSON(w, 500, `{"error":"internal_error","message":"the provider failed"}`)
				})
			},
			want:   []string{conform.BadInput400},
			detail: "500 internal_error",
		},
		{
			name: "bad input refused with the wrong code",
			handler: func() http.Handler {
				return rewrite(newProvider(nil), func(_ *http.Request, b []byte) bool { return isBad(b) }, func(w http.ResponseWriter, _ *http.Request) {
					writeJSON(w, 400, `{"error":"unsupported_capability","message":"no"}`)
				})
			},
			want:   []string{conform.BadInput400},
			detail: "want error invalid_input",
		},
		{
			name: "ignores Content-Type",
			handler: func() http.Handler {
				p := newProvider(nil)
				return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
					r.Header.Set("Content-Type", "application/json")
					p.ServeHTTP(w, r)
				})
			},
			want:   []string{conform.NonJSON415},
			detail: "got 200",
		},
		{
			name: "405 without Allow",
			handler: func() http.Handler {
				return rewrite(newProvider(nil), func(r *http.Request, _ []byte) bool { return r.Method != http.MethodPost }, func(w http.ResponseWriter, _ *http.Request) {
					writeJSON(w, 405, `{"error":"method_not_allowed","message":"use POST"}`)
				})
			},
			want:   []string{conform.NonPost405},
			detail: "405 without Allow: POST",
		},
		{
			name: "input required",
			handler: func() http.Handler {
				return rewrite(newProvider(nil), func(_ *http.Request, b []byte) bool {
					var m map[string]json.RawMessage
					_ = json.Unmarshal(b, &m)
					in, ok := m["input"]
					return m != nil && m["task"] != nil && (!ok || string(in) == "null")
				}, func(w http.ResponseWriter, _ *http.Request) {
					writeJSON(w, 422, `{"error":"invalid_request","message":"input: field required"}`)
				})
			},
			want:   []string{conform.InputDefaults},
			detail: "input must default to {}",
		},
		{
			name: "malformed JSON is a 400",
			handler: func() http.Handler {
				return rewrite(newProvider(nil), func(_ *http.Request, b []byte) bool { return !json.Valid(b) && len(b) > 0 }, func(w http.ResponseWriter, _ *http.Request) {
					writeJSON(w, 400, `{"error":"bad_json","message":"cannot parse"}`)
				})
			},
			want:   []string{conform.MalformedBody422},
			detail: "want 422",
		},
		{
			name: "unknown capability answered 200",
			handler: func() http.Handler {
				return rewrite(newProvider(nil), func(_ *http.Request, b []byte) bool { return strings.Contains(string(b), "conform-unknown-") }, func(w http.ResponseWriter, _ *http.Request) {
					writeJSON(w, 200, `{"output":{},"metadata":{"agent":"test-provider","capability":"record-entry","duration_ms":0}}`)
				})
			},
			// The 200 names the wrong capability, so it is also not a well-formed success.
			want:   []string{conform.UnknownCapability, conform.NoErrorIn200},
			detail: "got 200",
		},
		{
			name: "wrong agent name and fractional duration",
			handler: func() http.Handler {
				return rewrite(newProvider(nil), post, func(w http.ResponseWriter, r *http.Request) {
					rec := httptest.NewRecorder()
					newProvider(nil).ServeHTTP(rec, r)
					if rec.Code != 200 {
						writeJSON(w, rec.Code, rec.Body.String())
						return
					}
					body := strings.Replace(rec.Body.String(), `"agent":"test-provider"`, `"agent":"someone-else"`, 1)
					body = strings.Replace(body, `"duration_ms":0`, `"duration_ms":0.5`, 1)
					writeJSON(w, 200, body)
				})
			},
			want:   []string{conform.SuccessShape, conform.NoErrorIn200},
			detail: `want the registered name "test-provider"`,
		},
		{
			name: "refuses application/json; charset=utf-8",
			handler: func() http.Handler {
				return rewrite(newProvider(nil), func(r *http.Request, _ []byte) bool {
					return r.Method == http.MethodPost && r.Header.Get("Content-Type") != "application/json"
				}, func(w http.ResponseWriter, _ *http.Request) {
					writeJSON(w, 415, `{"error":"unsupported_media_type","message":"Content-Type must be exactly application/json"}`)
				})
			},
			want:   []string{conform.AcceptsPostJSON},
			detail: "application/json; charset=utf-8",
		},
		{
			name: "bytes after the JSON of every 200",
			handler: func() http.Handler {
				return rewrite(newProvider(nil), post, func(w http.ResponseWriter, r *http.Request) {
					rec := httptest.NewRecorder()
					newProvider(nil).ServeHTTP(rec, r)
					body := rec.Body.String()
					if rec.Code == 200 {
						body += "\n<!-- served by a proxy -->"
					}
					writeJSON(w, rec.Code, body)
				})
			},
			want:   []string{conform.SuccessShape, conform.NoErrorIn200},
			detail: "data after the JSON value",
		},
		{
			name: "message null",
			handler: func() http.Handler {
				return rewrite(newProvider(nil), func(r *http.Request, _ []byte) bool { return r.Method != http.MethodPost }, func(w http.ResponseWriter, _ *http.Request) {
					w.Header().Set("Allow", "POST")
					writeJSON(w, 405, `{"error":"method_not_allowed","message":null}`)
				})
			},
			noteOn: conform.NonPost405,
			note:   "message is missing or not a string (got null)",
		},
		{
			name: "absent input answered otherwise than {}",
			handler: func() http.Handler {
				return rewrite(newProvider(nil), func(_ *http.Request, b []byte) bool {
					var m map[string]json.RawMessage
					_ = json.Unmarshal(b, &m)
					in, ok := m["input"]
					return m != nil && m["task"] != nil && (!ok || string(in) == "null")
				}, func(w http.ResponseWriter, _ *http.Request) {
					writeJSON(w, 400, `{"error":"invalid_input","message":"input is required"}`)
				})
			},
			want:   []string{conform.InputDefaults},
			detail: "input absent must be answered like input {}",
		},
		{
			name: "replay without X-A2AWire-Replayed",
			handler: func() http.Handler {
				p := newProvider(newIdem())
				return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
					p.ServeHTTP(dropHeader{w, protocol.ReplayedHeader}, r)
				})
			},
			stateful: true,
			noteOn:   conform.ReplayIdentical,
			note:     "without " + protocol.ReplayedHeader + ": true (absent)",
		},
		{
			name: "task ids split on commas",
			handler: func() http.Handler {
				p := newProvider(newIdem())
				return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
					// What httpadapter does, read as Header.Get reads it.
					if id := r.Header.Get(protocol.TaskIDHeader); id != "" {
						r.Header.Set(protocol.TaskIDHeader, strings.TrimSpace(strings.Split(id, ",")[0]))
					}
					p.ServeHTTP(w, r)
				})
			},
			stateful: true,
			want:     []string{conform.ReplayIdentical},
			detail:   "task ids must be taken exactly as sent",
		},
		{
			name: "task ids split on commas, replays unmarked",
			handler: func() http.Handler {
				p := newProvider(newIdem())
				return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
					if id := r.Header.Get(protocol.TaskIDHeader); id != "" {
						r.Header.Set(protocol.TaskIDHeader, strings.TrimSpace(strings.Split(id, ",")[0]))
					}
					p.ServeHTTP(dropHeader{w, protocol.ReplayedHeader}, r)
				})
			},
			stateful: true,
			// Without the header, the ledger's effect count shows the
			// second id was not run.
			want:   []string{conform.ReplayIdentical},
			detail: "was answered as a replay",
		},
		{
			name:     "stateful provider that acts twice",
			handler:  func() http.Handler { return newProvider(nil) },
			stateful: true,
			want:     []string{conform.ReplayIdentical, conform.ReusedKey409, conform.ActsOnce},
			detail:   "answered differently",
		},
		{
			name:     "stateful provider that replays a reused key",
			handler:  func() http.Handler { i := newIdem(); i.ignoreHash = true; return newProvider(i) },
			stateful: true,
			noteOn:   conform.ReusedKey409,
			note:     "409 idempotency_key_reused",
		},
		{
			name: "stateful provider that acts on a reused key",
			handler: func() http.Handler {
				p := newProvider(newIdem())
				fresh := newProvider(nil)
				// A reused id with another input runs again, unguarded.
				return rewrite(p, func(r *http.Request, b []byte) bool {
					return r.Header.Get(protocol.TaskIDHeader) != "" && strings.Contains(string(b), "conform_nonce")
				}, fresh.ServeHTTP)
			},
			stateful: true,
			want:     []string{conform.ReusedKey409},
			detail:   "want 409 idempotency_key_reused, got 200",
		},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			checks := run(t, target(serve(t, tc.handler()), tc.stateful))
			got := having(checks, conform.Fail)
			want := slices.Sorted(slices.Values(tc.want))
			if !slices.Equal(got, want) {
				t.Fatalf("failed items %v, want %v:%s", got, want, report(checks))
			}
			if len(tc.want) > 0 {
				if d := checks[tc.want[0]].Detail; !strings.Contains(d, tc.detail) {
					t.Errorf("%s detail %q does not contain %q", tc.want[0], d, tc.detail)
				}
			}
			if tc.noteOn != "" {
				if got := noted(checks); !slices.Equal(got, []string{tc.noteOn}) {
					t.Fatalf("notes on %v, want on %s:%s", got, tc.noteOn, report(checks))
				}
				if ns := strings.Join(checks[tc.noteOn].Notes, "\n"); !strings.Contains(ns, tc.note) {
					t.Errorf("%s notes %q do not contain %q", tc.noteOn, ns, tc.note)
				}
			}
		})
	}
}

// TestFrameworkBodiesAreNotes: a provider whose 405, 415 and 422 carry a
// framework's own body (FastAPI's {"detail": …}) and that refuses an
// explicit input null with 422 passes every item; each of those items
// carries a note naming what the network's providers answer instead, and
// the JSON of a check keeps its three fields with the notes in detail.
func TestFrameworkBodiesAreNotes(t *testing.T) {
	t.Parallel()
	p := newProvider(nil)
	h := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		r.Body = io.NopCloser(strings.NewReader(string(body)))
		if strings.Contains(string(body), `"input":null`) {
			writeJSON(w, 422, `{"detail":[{"loc":["body","input"],"msg":"none is not an allowed value","type":"type_error.none.not_allowed"}]}`)
			return
		}
		rec := httptest.NewRecorder()
		p.ServeHTTP(rec, r)
		switch rec.Code {
		case 405, 415, 422:
			w.Header().Set("Allow", rec.Header().Get("Allow"))
			writeJSON(w, rec.Code, `{"detail":[{"loc":["body"],"msg":"field required","type":"value_error.missing"}]}`)
		default:
			maps.Copy(w.Header(), rec.Header())
			w.WriteHeader(rec.Code)
			_, _ = w.Write(rec.Body.Bytes())
		}
	})
	checks := run(t, target(serve(t, h), false))
	if bad := having(checks, conform.Fail); len(bad) > 0 {
		t.Fatalf("failed %v:%s", bad, report(checks))
	}
	want := []string{conform.InputDefaults, conform.InvalidRequest422, conform.MalformedBody422, conform.NonJSON415, conform.NonPost405}
	if got := noted(checks); !slices.Equal(got, want) {
		t.Fatalf("notes on %v, want on %v:%s", got, want, report(checks))
	}
	for _, n := range want[1:] {
		if ns := strings.Join(checks[n].Notes, "\n"); !strings.Contains(ns, "the network's providers answer {error, message}") ||
			!strings.Contains(ns, `{"detail":`) {
			t.Errorf("%s notes %q do not show the body and what the network answers", n, ns)
		}
	}
	if ns := strings.Join(checks[conform.InputDefaults].Notes, "\n"); !strings.Contains(ns, "input null was refused") {
		t.Errorf("input-defaults notes %q", ns)
	}
	c := checks[conform.NonPost405]
	b, err := json.Marshal(c)
	if err != nil {
		t.Fatal(err)
	}
	var doc map[string]string
	if err := json.Unmarshal(b, &doc); err != nil || len(doc) != 3 || doc["name"] != c.Name || doc["status"] != "pass" ||
		doc["detail"] != c.Detail+"; note: "+c.Notes[0] {
		t.Errorf("JSON of a noted check %s: %v", b, err)
	}
}

// TestActsTwiceCountsEffects: the effect count names how often the provider
// acted, even if its answers were identical.
func TestActsTwiceCountsEffects(t *testing.T) {
	t.Parallel()
	// A provider that stores and replays answers but still acts on every
	// request: its answers agree, only the effect count shows the bug.
	b := &book{entries: map[string]int{}}
	idem := newIdem()
	p := protocol.NewProvider("test-provider", quiet(), protocol.WithIdempotency(idem))
	protocol.Handle(p, "record-entry", b.add)
	protocol.Handle(p, "balance", b.balance)
	h := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		r.Body = io.NopCloser(strings.NewReader(string(body)))
		var req protocol.Request
		if json.Unmarshal(body, &req) == nil && req.Task == "record-entry" && r.Header.Get(protocol.TaskIDHeader) != "" {
			var in counterInput
			if json.Unmarshal(req.Input, &in) == nil && in.Amount != 0 {
				_, _ = b.add(r.Context(), in) // the bug: a side effect outside the kit's guard
			}
		}
		p.ServeHTTP(w, r)
	})
	checks := run(t, target(serve(t, h), true))
	if got := having(checks, conform.Fail); !slices.Equal(got, []string{conform.ActsOnce}) {
		t.Fatalf("failed items %v, want [acts-once]:%s", got, report(checks))
	}
	if d := checks[conform.ActsOnce].Detail; !strings.Contains(d, "acted 7 times") {
		t.Errorf("acts-once detail %q does not count the effects", d)
	}
}

// TestUnreachableFailsEverythingFast: a closed port fails every item at
// once instead of timing out probe after probe.
func TestUnreachableFailsEverythingFast(t *testing.T) {
	t.Parallel()
	srv := httptest.NewServer(http.NotFoundHandler())
	endpoint := srv.URL + "/invoke"
	srv.Close()
	start := time.Now()
	checks := run(t, target(endpoint, true))
	if got := having(checks, conform.Fail); len(got) != len(conform.Names(true)) {
		t.Fatalf("failed %v, want every item:%s", got, report(checks))
	}
	if d := checks[conform.NoErrorIn200].Detail; !strings.Contains(d, "could not be reached") {
		t.Errorf("detail %q does not say the endpoint was unreachable", d)
	}
	if took := time.Since(start); took > 5*time.Second {
		t.Errorf("took %s", took)
	}
}

// TestSkipWithoutBadInput: no bad input, no judgement on bad values.
func TestSkipWithoutBadInput(t *testing.T) {
	t.Parallel()
	tg := target(serve(t, newProvider(nil)), false)
	tg.BadInput = nil
	checks := run(t, tg)
	if got := having(checks, conform.Skip); !slices.Equal(got, []string{conform.BadInput400}) {
		t.Fatalf("skipped %v, want [bad-input-400]:%s", got, report(checks))
	}
	if got := having(checks, conform.Fail); len(got) > 0 {
		t.Fatalf("failed %v:%s", got, report(checks))
	}
}

// TestEmptyGoodInputMustSucceedWithoutInput: when {} is the good input, an
// absent or null input must succeed too, not merely avoid a 422.
func TestEmptyGoodInputMustSucceedWithoutInput(t *testing.T) {
	t.Parallel()
	p := protocol.NewProvider("test-provider", quiet())
	p.HandleFunc("ping", func(_ context.Context, in json.RawMessage) (any, error) {
		if string(in) != "{}" {
			return nil, protocol.Errorf(protocol.InvalidInput, "saw %s", in)
		}
		return map[string]bool{"pong": true}, nil
	})
	h := rewrite(p, func(_ *http.Request, b []byte) bool {
		return !strings.Contains(string(b), `"input"`) && strings.Contains(string(b), `"ping"`)
	},
		func(w http.ResponseWriter, _ *http.Request) {
			writeJSON(w, 400, `{"error":"invalid_input","message":"input is required"}`)
		})
	checks := run(t, conform.Target{Endpoint: serve(t, h), Agent: "test-provider", Task: "ping"})
	if got := having(checks, conform.Fail); !slices.Equal(got, []string{conform.InputDefaults}) {
		t.Fatalf("failed %v, want [input-defaults]:%s", got, report(checks))
	}
	if d := checks[conform.InputDefaults].Detail; !strings.Contains(d, "input absent must be answered like input {}") {
		t.Errorf("detail %q", d)
	}
}

func TestValidate(t *testing.T) {
	t.Parallel()
	for _, tc := range []conform.Target{
		{Task: "x"},
		{Endpoint: "http://127.0.0.1:1/x"},
		{Endpoint: "http://127.0.0.1:1/x", Task: "x", Input: json.RawMessage(`[1]`)},
		{Endpoint: "http://127.0.0.1:1/x", Task: "x", BadInput: json.RawMessage(`null`)},
	} {
		var r conform.Runner
		if _, err := r.Run(context.Background(), tc); err == nil {
			t.Errorf("Run(%+v) = nil error", tc)
		}
	}
}

// TestCancelledRunSendsNothing: once the caller gives up, the remaining
// items fail as not run instead of probing.
func TestCancelledRunSendsNothing(t *testing.T) {
	t.Parallel()
	var hits atomic.Int32
	h := http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		hits.Add(1)
		w.WriteHeader(http.StatusTeapot)
	})
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	var r conform.Runner
	checks, err := r.Run(ctx, target(serve(t, h), true))
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range checks {
		if c.Status != conform.Fail || !strings.Contains(c.Detail, "not run: context canceled") {
			t.Errorf("%+v", c)
		}
	}
	if n := hits.Load(); n != 0 {
		t.Errorf("%d probes reached the provider", n)
	}
}

// dropHeader hides one response header, as a proxy that strips unknown
// headers would.
type dropHeader struct {
	http.ResponseWriter
	name string
}

func (d dropHeader) WriteHeader(code int) {
	d.Header().Del(d.name)
	d.ResponseWriter.WriteHeader(code)
}
