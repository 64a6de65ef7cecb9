package protocol_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"
	"unicode/utf8"

	"github.com/a2awire/a2awire/shared/logging"
	"github.com/a2awire/a2awire/shared/protocol"
)

// TestCheckJSON: strict JSON refuses what encoding/json lets through —
// duplicated keys at any depth (compared after unescaping), invalid UTF-8,
// lone surrogate escapes, trailing data — and accepts every valid text.
func TestCheckJSON(t *testing.T) {
	t.Parallel()
	for _, ok := range []string{
		`{}`, ` {"a":1,"A":2} `, `[1,2,{"a":[]}]`, `"\ud83d\ude00"`, `-0.5e+10`, `null`, `true`,
		`{"a":{"x":1},"b":{"x":1}}`, "\"h\u00e9llo\"", `{"":1}`, `"\u00e9\/\b\f\n\r\t\\\""`,
	} {
		if err := protocol.CheckJSON([]byte(ok)); err != nil {
			t.Errorf("CheckJSON(%s) = %v, want nil", ok, err)
		}
		if !json.Valid([]byte(ok)) {
			t.Errorf("test case %s is not JSON", ok)
		}
	}
	for _, tc := range []struct {
		in, msg string
		loc     []string
	}{
		{`{"task":"nope","task":"ping"}`, `duplicate key "task"`, []string{"task"}},
		{`{"input":{"a":1,"b":[{"x":1,"x":2}]}}`, `duplicate key "x"`, []string{"input", "b", "0", "x"}},
		{`{"a":1,"\u0061":2}`, `duplicate key "a"`, []string{"a"}},
		{"{\"t\":\"\xff\"}", "not valid UTF-8", []string{"t"}},
		{"\"\xed\xa0\x80\"", "not valid UTF-8", nil}, // an encoded surrogate
		{`"\ud800"`, "high surrogate", nil},
		{`"\udc00x"`, "lone low surrogate", nil},
		{`{"a":1} x`, "data after the JSON value", nil},
		{`{"a":1}{}`, "data after the JSON value", nil},
		{`{]`, "expected a quoted key", nil},
		{`{"a" 1}`, "expected ':'", nil},
		{`[1,]`, "expected a value", []string{"1"}},
		{`01`, "data after", nil},
		{`1.`, "digit after the decimal point", nil},
		{`"a` + "\n" + `"`, "control character", nil},
		{`"\x"`, `invalid escape \x`, nil},
		{``, "ends early", nil},
		{`nul`, "expected null", nil},
		{strings.Repeat("[", 2000), "nested more than", nil},
	} {
		err := protocol.CheckJSON([]byte(tc.in))
		je, ok := err.(*protocol.JSONError)
		if !ok {
			t.Errorf("CheckJSON(%q) = %v, want a *JSONError", clipped(tc.in), err)
			continue
		}
		if !strings.Contains(je.Msg, tc.msg) || (tc.loc != nil && fmt.Sprint(je.Loc) != fmt.Sprint(tc.loc)) {
			t.Errorf("CheckJSON(%q) = %q at %v, want %q at %v", clipped(tc.in), je.Msg, je.Loc, tc.msg, tc.loc)
		}
	}
}

func clipped(s string) string {
	if len(s) > 40 {
		return s[:40] + "…"
	}
	return s
}

// TestStrictBodies: the kit answers 422 invalid_request to the bodies that
// let two readers disagree, and matches keys case-sensitively, so a second
// spelling of a key cannot decide an amount (issue 9).
func TestStrictBodies(t *testing.T) {
	t.Parallel()
	type bookIn struct {
		Amount int64 `json:"amount_cents"`
		Nested struct {
			Memo string `json:"memo"`
		} `json:"nested"`
		Lines []struct {
			N int `json:"n"`
		} `json:"lines"`
	}
	p := protocol.NewProvider("strict", protocol.WithLogger(logging.Discard()))
	protocol.Handle(p, "book", func(_ context.Context, in bookIn) (bookIn, error) { return in, nil })

	for _, body := range []string{
		`{"task":"nope","task":"book"}`,
		`{"task":"book","input":{"amount_cents":1,"amount_cents":2}}`,
		"{\"task\":\"book\",\"input\":{\"m\":\"\xff\"}}",
		`{"task":"book","input":{"m":"\udead"}}`,
	} {
		w := do(t, p, call{body: body})
		if e := mustErrorBody(t, w); w.Code != 422 || e.Error != protocol.InvalidRequest || len(e.Details) == 0 {
			t.Errorf("%q: %d %+v, want 422 invalid_request with details", body, w.Code, e)
		}
		if !utf8.Valid(w.Body.Bytes()) {
			t.Errorf("%q: the error body is not UTF-8", body)
		}
	}

	w := do(t, p, call{body: `{"task":"book","input":{"amount_cents":100,"AMOUNT_CENTS":999999,` +
		`"nested":{"MEMO":"x","memo":"ok"},"NESTED":{"memo":"no"},"lines":[{"N":7,"n":1}]}}`})
	var r struct {
		Output bookIn `json:"output"`
	}
	if err := json.Unmarshal(w.Body.Bytes(), &r); err != nil || w.Code != 200 {
		t.Fatalf("%d %s", w.Code, w.Body)
	}
	if r.Output.Amount != 100 || r.Output.Nested.Memo != "ok" || len(r.Output.Lines) != 1 || r.Output.Lines[0].N != 1 {
		t.Errorf("keys matched case-insensitively: %+v", r.Output)
	}
	if w := do(t, p, call{body: `{"Task":"book"}`}); w.Code != 422 {
		t.Errorf("Task (capitalised) read as task: %d %s", w.Code, w.Body)
	}
	if w := do(t, p, call{body: `{"task":"book","input":{"AMOUNT_CENTS":"x"}}`}); w.Code != 200 {
		t.Errorf("an unknown key in another case was decoded: %d %s", w.Code, w.Body)
	}
}

// TestOutputIsUTF8: a capability whose output holds invalid UTF-8 (an
// echoed raw message) gets a 500, not a body that is not JSON text.
func TestOutputIsUTF8(t *testing.T) {
	t.Parallel()
	p := protocol.NewProvider("echo", protocol.WithLogger(logging.Discard()))
	p.HandleFunc("raw", func(context.Context, json.RawMessage) (any, error) {
		return map[string]any{"echo": json.RawMessage("\"\xff\"")}, nil
	})
	w := do(t, p, call{body: `{"task":"raw"}`})
	if w.Code != 500 || !utf8.Valid(w.Body.Bytes()) {
		t.Errorf("%d %q", w.Code, w.Body)
	}
}

// TestContentEncodingAndMethod: a body in any coding but identity is 415
// (never decoded as if plain), and methods are case-sensitive.
func TestContentEncodingAndMethod(t *testing.T) {
	t.Parallel()
	p := newTestProvider()
	for _, ce := range []string{"gzip", "br", "identity, gzip", "x-custom"} {
		w := do(t, p, call{body: `{"task":"echo"}`, header: map[string]string{"Content-Encoding": ce}})
		if e := mustErrorBody(t, w); w.Code != 415 || e.Error != protocol.UnsupportedMediaType {
			t.Errorf("Content-Encoding %s: %d %+v", ce, w.Code, e)
		}
	}
	for _, ce := range []string{"identity", "IDENTITY", ""} {
		if w := do(t, p, call{body: `{"task":"echo"}`, header: map[string]string{"Content-Encoding": ce}}); w.Code != 200 {
			t.Errorf("Content-Encoding %q: %d %s", ce, w.Code, w.Body)
		}
	}
	for _, m := range []string{"post", "Post", "GET"} {
		w := do(t, p, call{method: m, body: `{"task":"echo"}`})
		if w.Code != 405 || w.Header().Get("Allow") != "POST" {
			t.Errorf("method %s: %d Allow %q", m, w.Code, w.Header().Get("Allow"))
		}
	}
}

// TestClientValuesQuotedShort: an error message quotes a client-supplied
// value as a short escaped prefix, not whole.
func TestClientValuesQuotedShort(t *testing.T) {
	t.Parallel()
	p := newTestProvider()
	task := strings.Repeat("x", 1<<20-100) + "\x1b[31m"
	body, _ := json.Marshal(map[string]string{"task": task})
	w := do(t, p, call{body: string(body)})
	e := mustErrorBody(t, w)
	if w.Code != 400 || len(e.Message) > 300 || !strings.Contains(e.Message, fmt.Sprintf("(%d bytes)", len(task))) {
		t.Errorf("%d, message of %d bytes: %.300s", w.Code, len(e.Message), e.Message)
	}
	if got := protocol.Quote("a\x1b[0m\u00e9"); got != `"a\x1b[0m\u00e9"` {
		t.Errorf("Quote = %s", got)
	}
}

// TestTaskIDTakenExactly: a stateful provider takes the task id exactly as
// sent — commas and inner spaces included, repeated lines joined with ","
// as API Gateway does — and refuses ids that are empty, too long or not
// printable ASCII with 400 invalid_input.
func TestTaskIDTakenExactly(t *testing.T) {
	t.Parallel()
	idem := newFakeIdem()
	var seen []string
	p := protocol.NewProvider("ids", protocol.WithLogger(logging.Discard()), protocol.WithIdempotency(idem))
	p.HandleFunc("id", func(ctx context.Context, _ json.RawMessage) (any, error) {
		seen = append(seen, protocol.TaskID(ctx))
		return map[string]string{"id": protocol.TaskID(ctx)}, nil
	})
	send := func(ids ...string) *http.Response {
		r := newRequest(`{"task":"id"}`)
		for _, id := range ids {
			r.Header.Add(protocol.TaskIDHeader, id)
		}
		w := recorder()
		p.ServeHTTP(w, r)
		return w.Result()
	}
	for _, id := range []string{"x,a", "x,b", "x, b"} {
		if res := send(id); res.StatusCode != 200 || res.Header.Get(protocol.ReplayedHeader) != "" {
			t.Fatalf("%q: %d replayed=%q", id, res.StatusCode, res.Header.Get(protocol.ReplayedHeader))
		}
	}
	if res := send("x,a"); res.StatusCode != 200 || res.Header.Get(protocol.ReplayedHeader) != "true" {
		t.Errorf("repeat of x,a: %d replayed=%q", res.StatusCode, res.Header.Get(protocol.ReplayedHeader))
	}
	if res := send("x", "a"); res.Header.Get(protocol.ReplayedHeader) != "true" {
		t.Errorf("two lines x and a are not the id x,a")
	}
	if fmt.Sprint(seen) != "[x,a x,b x, b]" {
		t.Errorf("capability saw ids %q", seen)
	}
	for _, bad := range []string{"", strings.Repeat("t,a", 100), "caf\u00e9", "tab\there", "del\x7f"} {
		res := send(bad)
		var e protocol.ErrorBody
		_ = json.NewDecoder(res.Body).Decode(&e)
		if res.StatusCode != 400 || e.Error != protocol.InvalidInput || len(e.Message) > 300 {
			t.Errorf("id %q: %d %+v", clipped(bad), res.StatusCode, e)
		}
	}
	if !protocol.ValidTaskID(strings.Repeat("~", 255)) || protocol.ValidTaskID(strings.Repeat("~", 256)) {
		t.Error("ValidTaskID length bounds")
	}
}

// TestUnavailableIs503: an *Error with code unavailable, however wrapped,
// and from the idempotency store as from a capability, is a 503 with
// Retry-After — never a 500; a 429 or 503 without RetryAfter gets 1 s.
func TestUnavailableIs503(t *testing.T) {
	t.Parallel()
	overload := &protocol.Error{Code: protocol.Unavailable, Message: "the store is busy; retry", RetryAfter: 3 * time.Second}
	p := protocol.NewProvider("busy", protocol.WithLogger(logging.Discard()), protocol.WithIdempotency(busyIdem{overload}))
	p.HandleFunc("wrapped", func(context.Context, json.RawMessage) (any, error) {
		return nil, fmt.Errorf("append entry: %w", overload)
	})
	p.HandleFunc("bare", func(context.Context, json.RawMessage) (any, error) {
		return nil, &protocol.Error{Code: protocol.Unavailable, Message: "busy"}
	})
	p.HandleFunc("rate", func(context.Context, json.RawMessage) (any, error) {
		return nil, protocol.Errorf(protocol.RateLimited, "slow down")
	})
	for _, tc := range []struct {
		task, taskID, retry string
		status              int
	}{
		{"wrapped", "", "3", 503}, {"bare", "", "1", 503}, {"rate", "", "1", 429}, {"bare", "t-1", "3", 503},
	} {
		r := newRequest(`{"task":"` + tc.task + `"}`)
		if tc.taskID != "" {
			r.Header.Set(protocol.TaskIDHeader, tc.taskID)
		}
		w := recorder()
		p.ServeHTTP(w, r)
		if w.Code != tc.status || w.Header().Get("Retry-After") != tc.retry {
			t.Errorf("%s (task id %q): %d Retry-After %q, want %d %s", tc.task, tc.taskID, w.Code, w.Header().Get("Retry-After"), tc.status, tc.retry)
		}
		if err := protocol.Verify(w.Code, w.Header(), w.Body.Bytes(), protocol.Expect{}); err != nil {
			t.Errorf("%s: %v", tc.task, err)
		}
	}
}

// busyIdem is an idempotency store that is overloaded.
type busyIdem struct{ err error }

func (b busyIdem) Begin(context.Context, protocol.TaskKey) (protocol.Claim, *protocol.Recorded, error) {
	return protocol.Claim{}, nil, fmt.Errorf("claim: %w", b.err)
}
func (busyIdem) Commit(context.Context, protocol.Claim, protocol.Recorded) error { return nil }
func (busyIdem) Abort(context.Context, protocol.Claim) error                     { return nil }

// TestDecodeInput: the exported decoder matches keys exactly through
// pointers, maps and embedded structs, and names a field of the wrong type.
func TestDecodeInput(t *testing.T) {
	t.Parallel()
	type Base struct {
		ID string `json:"id"`
	}
	type in struct {
		Base
		P *struct {
			V int `json:"v"`
		} `json:"p"`
		M map[string]struct {
			V int `json:"v"`
		} `json:"m"`
		Plain string
	}
	var v in
	err := protocol.DecodeInput(json.RawMessage(`{"ID":"no","id":"yes","p":{"V":9,"v":1},"m":{"k":{"V":9,"v":2}},"plain":"no","Plain":"ok"}`), &v)
	if err != nil || v.ID != "yes" || v.P == nil || v.P.V != 1 || v.M["k"].V != 2 || v.Plain != "ok" {
		t.Errorf("%v %+v", err, v)
	}
	err = protocol.DecodeInput(json.RawMessage(`{"p":{"v":"x"}}`), &v)
	var perr *protocol.Error
	if !errAs(err, &perr) || perr.Code != protocol.InvalidInput || !strings.Contains(perr.Message, "input.p.v must be a JSON integer") {
		t.Errorf("%v", err)
	}
	if err := protocol.DecodeInput(json.RawMessage(`{}`), v); err == nil {
		t.Error("a non-pointer was accepted")
	}
}

func newRequest(body string) *http.Request {
	r := httptest.NewRequest(http.MethodPost, "/invoke", strings.NewReader(body))
	r.Header.Set("Content-Type", "application/json")
	return r
}

func recorder() *httptest.ResponseRecorder { return httptest.NewRecorder() }

func errAs(err error, target any) bool { return errors.As(err, target) }
