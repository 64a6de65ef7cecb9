// Package conform runs the A2AWire conformance checklist (docs/protocol.md)
// against one provider endpoint.
//
// It plays a careful buyer and a careless one: it sends the good invocation,
// the edge cases the protocol settles (absent input, malformed bodies, wrong
// methods and media types, unknown capabilities, bad values) and, for stateful
// providers, repeated task ids, then reports one named pass, fail or skip item
// per rule in a fixed order. `awn conform`, the fixture tests and CI all read
// the same verdicts, so a name here is an interface: do not rename items.
//
// A verdict judges the protocol's published checklist, what every provider
// on the network is promised to do. Where the network's own providers do
// more than that checklist asks, a provider that does only what it asks
// passes, and the difference is a note on the item (Check.Notes), never a
// failure:
//
//	item                  the published checklist      the network's providers also
//	malformed-body-422,   422 (a framework's own       answer {error, message}
//	invalid-request-422   validation error body)
//	non-json-415          415 or 422                   answer {error, message}
//	non-post-405          405 with Allow: POST         answer {error, message}
//	input-defaults        absent input reads as {}     read input null as {} too
//	replay-identical      a repeat gets the stored     mark it X-A2AWire-Replayed: true
//	                      answer
//	reused-key-409        a repeated id gets the       refuse another body with 409
//	                      stored answer                idempotency_key_reused
package conform

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"reflect"
	"strings"
	"sync"
	"time"

	"github.com/a2awire/a2awire/shared/protocol"
)

// Status is the verdict of one checklist item.
type Status string

// Verdicts.
const (
	Pass Status = "pass"
	Fail Status = "fail"
	// Skip means the item could not be judged with what the caller gave
	// (for example no bad input); it is neither a pass nor a failure.
	Skip Status = "skip"
)

// Check is one checklist item's verdict. Detail says what was seen, so that a
// failure can be acted on without rerunning by hand.
type Check struct {
	Name   string `json:"name"`
	Status Status `json:"status"`
	Detail string `json:"detail"`
	// Notes are what the provider does otherwise than the network's own
	// providers where the published checklist allows it: informational, never
	// a failure. In JSON they follow the detail, each after "; note: ", so
	// that the document keeps its three fields.
	Notes []string `json:"-"`
}

// notePrefix introduces each note inside a JSON detail.
const notePrefix = "; note: "

// MarshalJSON writes the check's three fields, the notes inside detail.
func (c Check) MarshalJSON() ([]byte, error) {
	d := c.Detail
	for _, n := range c.Notes {
		d += notePrefix + n
	}
	return json.Marshal(struct {
		Name   string `json:"name"`
		Status Status `json:"status"`
		Detail string `json:"detail"`
	}{c.Name, c.Status, d})
}

// Item names, in the order Run reports them. They are stable: scripts and
// tests match on them.
const (
	// AcceptsPostJSON: POST application/json with the good input → 200, and
	// so with Content-Type application/json; charset=utf-8.
	AcceptsPostJSON = "accepts-post-json"
	// SuccessShape: that 200 carries output and metadata with agent (= the
	// registered name when known), capability (= task) and integer duration_ms.
	SuccessShape = "success-shape"
	// InputDefaults: an invocation without input, and one with input null,
	// are read as input {}: each gets the answer an explicit input {} gets
	// (the same status and, for an error, the same code and message) — never
	// a 422.
	InputDefaults = "input-defaults"
	// BadInput400: the caller's bad input → 400 invalid_input {error, message}.
	BadInput400 = "bad-input-400"
	// MalformedBody422: a body that is not JSON → 422, with any body (the
	// published "framework validation error"; not {error, message} is a note).
	MalformedBody422 = "malformed-body-422"
	// InvalidRequest422: JSON that is not an invocation (not an object, task
	// missing or not a string, input not an object) → 422, with any body.
	InvalidRequest422 = "invalid-request-422"
	// UnknownCapability: a task the provider does not advertise → 4xx error shape.
	UnknownCapability = "unknown-capability"
	// NonPost405: GET → 405 with Allow: POST, with any body.
	NonPost405 = "non-post-405"
	// NonJSON415: Content-Type text/plain → 415 (or 422), with any body.
	NonJSON415 = "non-json-415"
	// ToleratesTaskID: the good invocation with X-A2AWire-Task-Id → 200.
	ToleratesTaskID = "tolerates-task-id"
	// ReplayIdentical (stateful): repeating a completed task id returns the
	// same status and body (without X-A2AWire-Replayed: true is a note); an
	// id that differs only after a comma ("<id>,a" then "<id>,b") is another
	// task, not a replay (task ids are taken exactly as sent).
	ReplayIdentical = "replay-identical"
	// ReusedKey409 (stateful): the same task id with a different body → 409
	// idempotency_key_reused, or the stored answer unchanged (what the
	// published protocol says of any repeated id; a note); never a new
	// execution.
	ReusedKey409 = "reused-key-409"
	// ActsOnce (stateful): a burst of concurrent and sequential repeats of one
	// task id acts once: one 200 body for all, and the target's effect count
	// (when it has one) grows by exactly one.
	ActsOnce = "acts-once"
	// NoErrorIn200: every 200 seen during the run passes the verifier, so no
	// error hides inside a success.
	NoErrorIn200 = "no-error-in-200"
)

// Names lists the items Run reports for a target, in order. The stateful
// items are only part of the checklist of stateful targets.
func Names(stateful bool) []string {
	names := []string{AcceptsPostJSON, SuccessShape, InputDefaults, BadInput400, MalformedBody422,
		InvalidRequest422, UnknownCapability, NonPost405, NonJSON415, ToleratesTaskID}
	if stateful {
		names = append(names, ReplayIdentical, ReusedKey409, ActsOnce)
	}
	return append(names, NoErrorIn200)
}

// Target is what to check and with which inputs.
type Target struct {
	// Endpoint is the provider's absolute invocation URL.
	Endpoint string
	// Agent is the provider's registered name, compared with metadata.agent;
	// empty when unknown (the field must then merely be a non-empty string).
	Agent string
	// Task is a capability the provider advertises.
	Task string
	// Input is an input object Task succeeds on; empty means {}.
	Input json.RawMessage
	// BadInput is a well-formed input object with unusable values, which must
	// get 400 invalid_input; empty skips that item.
	BadInput json.RawMessage
	// BadTask is the capability BadInput is sent to; empty means Task. It
	// exists for providers whose Task accepts any input (punctual's ping).
	BadTask string
	// Stateful adds the repeated-task-id items.
	Stateful bool
	// Effects, for stateful targets, counts how many times the provider has
	// acted on Input (for the ledger: the entries of the probe account). The
	// acts-once item reads it before and after its repeats and wants exactly
	// one more; without it, acts-once can only compare the answers.
	Effects func(ctx context.Context, hc *http.Client) (int64, error)
}

// Validate reports a target that cannot be checked at all: these are the
// caller's mistakes, not the provider's.
func (t Target) Validate() error {
	if t.Endpoint == "" {
		return errors.New("conform: no endpoint")
	}
	if t.Task == "" {
		return errors.New("conform: no task")
	}
	if len(t.Input) > 0 && !isObject(t.Input) {
		return errors.New("conform: input is not a JSON object")
	}
	if len(t.BadInput) > 0 && !isObject(t.BadInput) {
		return errors.New("conform: bad input is not a JSON object")
	}
	return nil
}

func isObject(raw json.RawMessage) bool {
	var m map[string]json.RawMessage
	return json.Unmarshal(raw, &m) == nil && m != nil
}

// Runner sends the probes.
type Runner struct {
	// HTTP sends every probe (default http.DefaultClient). Its Timeout bounds
	// each probe; the context given to Run bounds the whole run.
	HTTP *http.Client
	// OnCheck, when set, is called with each verdict as soon as it is known,
	// so a caller can show progress during a slow run.
	OnCheck func(Check)
}

// maxResponse bounds how much of each answer is read.
const maxResponse = 8 << 20

// burst is how many concurrent repeats acts-once sends before its last,
// sequential repeat.
const burst = 5

// Run checks the target and returns one Check per name of Names(t.Stateful),
// in that order. It returns an error only when the target is invalid; a
// provider that cannot be reached fails every item.
func (r *Runner) Run(ctx context.Context, t Target) ([]Check, error) {
	if err := t.Validate(); err != nil {
		return nil, err
	}
	if len(t.Input) == 0 {
		t.Input = json.RawMessage("{}")
	}
	hc := r.HTTP
	if hc == nil {
		hc = http.DefaultClient
	}
	s := &session{t: t, hc: hc}
	items := s.items()
	checks := make([]Check, 0, len(items))
	var unreachable error
	for _, it := range items {
		c := Check{Name: it.name}
		switch {
		case ctx.Err() != nil:
			c.Status, c.Detail = Fail, "not run: "+context.Cause(ctx).Error()
		case unreachable != nil:
			c.Status, c.Detail = Fail, "not run: the endpoint could not be reached: "+unreachable.Error()
		default:
			c.Status, c.Detail = it.run(ctx)
			c.Notes, s.notes = s.notes, nil
			// A first probe that never got an answer means none will: fail
			// the rest at once rather than wait out every timeout again.
			if len(checks) == 0 && s.first.err != nil {
				unreachable = s.first.err
			}
		}
		checks = append(checks, c)
		if r.OnCheck != nil {
			r.OnCheck(c)
		}
	}
	return checks, nil
}

// session is the state of one run: the target, and what the provider has
// answered so far.
type session struct {
	t  Target
	hc *http.Client

	first    exchange // the good invocation of accepts-post-json
	replayID string   // the task id replay-identical completed
	replayed exchange // its first answer
	notes    []string // the running item's notes

	mu   sync.Mutex
	oks  []exchange // every 200 seen, for no-error-in-200
	sent int
}

// note records an observation on the running item that is not a failure.
func (s *session) note(format string, args ...any) {
	s.notes = append(s.notes, fmt.Sprintf(format, args...))
}

type item struct {
	name string
	run  func(context.Context) (Status, string)
}

func (s *session) items() []item {
	all := map[string]func(context.Context) (Status, string){
		AcceptsPostJSON:   s.acceptsPostJSON,
		SuccessShape:      s.successShape,
		InputDefaults:     s.inputDefaults,
		BadInput400:       s.badInput,
		MalformedBody422:  s.malformedBody,
		InvalidRequest422: s.invalidRequest,
		UnknownCapability: s.unknownCapability,
		NonPost405:        s.nonPost,
		NonJSON415:        s.nonJSON,
		ToleratesTaskID:   s.toleratesTaskID,
		ReplayIdentical:   s.replayIdentical,
		ReusedKey409:      s.reusedKey,
		ActsOnce:          s.actsOnce,
		NoErrorIn200:      s.noErrorIn200,
	}
	var items []item
	for _, n := range Names(s.t.Stateful) {
		items = append(items, item{name: n, run: all[n]})
	}
	return items
}

// probe is one request to send.
type probe struct {
	label       string // names the probe in details
	method      string
	contentType string
	body        []byte
	taskID      string
	// expect is what a 200 to this probe must show.
	expect protocol.Expect
}

// exchange is a probe and what came back.
type exchange struct {
	probe
	status int
	header http.Header
	body   []byte
	err    error
	took   time.Duration
}

// invocation returns the good invocation's probe for input.
func (s *session) invocation(label string, input json.RawMessage) probe {
	return probe{
		label:       label,
		method:      http.MethodPost,
		contentType: "application/json",
		body:        mustJSON(map[string]any{"task": s.t.Task, "input": input}),
		expect:      protocol.Expect{Agent: s.t.Agent, Capability: s.t.Task},
	}
}

func mustJSON(v any) []byte {
	b, err := json.Marshal(v)
	if err != nil {
		panic(err) // only maps of strings and valid RawMessages reach here
	}
	return b
}

func (s *session) send(ctx context.Context, p probe) (x exchange) {
	x.probe = p
	start := time.Now()
	defer func() { x.took = time.Since(start) }()
	var body io.Reader
	if p.body != nil {
		body = bytes.NewReader(p.body)
	}
	req, err := http.NewRequestWithContext(ctx, p.method, s.t.Endpoint, body)
	if err != nil {
		x.err = err
		return x
	}
	if p.contentType != "" {
		req.Header.Set("Content-Type", p.contentType)
	}
	req.Header.Set("Accept", "application/json")
	if p.taskID != "" {
		req.Header.Set(protocol.TaskIDHeader, p.taskID)
	}
	resp, err := s.hc.Do(req)
	if err != nil {
		x.err = err
		return x
	}
	defer resp.Body.Close()
	x.status, x.header = resp.StatusCode, resp.Header
	if x.body, err = io.ReadAll(io.LimitReader(resp.Body, maxResponse)); err != nil {
		x.err = fmt.Errorf("read response: %w", err)
		return x
	}
	s.mu.Lock()
	s.sent++
	if x.status == http.StatusOK {
		s.oks = append(s.oks, x)
	}
	s.mu.Unlock()
	return x
}

// verify runs the protocol's response checks on an exchange and flattens
// their findings onto one line.
func verify(x exchange) error {
	if x.err != nil {
		return x.err
	}
	if err := protocol.Verify(x.status, x.header, x.body, x.expect); err != nil {
		return errors.New(strings.ReplaceAll(err.Error(), "\n", "; "))
	}
	return nil
}

// seen describes an answer in a few words: status, error code and message,
// or the start of the body.
func seen(x exchange) string {
	if x.err != nil {
		return "request failed: " + x.err.Error()
	}
	s := fmt.Sprintf("%d", x.status)
	var e protocol.ErrorBody
	if x.status != http.StatusOK && json.Unmarshal(x.body, &e) == nil && e.Error != "" {
		return fmt.Sprintf("%s %s: %s", s, e.Error, clip(e.Message, 100))
	}
	if len(bytes.TrimSpace(x.body)) == 0 {
		return s + " with an empty body"
	}
	return s + " " + clip(string(bytes.TrimSpace(x.body)), 100)
}

// brief describes an answer by status and error code only, for details of
// items that passed.
func brief(x exchange) string {
	if x.err != nil {
		return "request failed: " + x.err.Error()
	}
	if c := errorCode(x); c != "" && x.status != http.StatusOK {
		return fmt.Sprintf("%d %s", x.status, c)
	}
	return fmt.Sprintf("%d", x.status)
}

// ms renders a probe's round trip to the microsecond, which a provider on
// loopback needs to show more than zero.
func ms(d time.Duration) string { return d.Round(time.Microsecond).String() }

func clip(s string, n int) string {
	if r := []rune(s); len(r) > n {
		return string(r[:n]) + "…"
	}
	return s
}

func errorCode(x exchange) protocol.Code {
	var e protocol.ErrorBody
	_ = json.Unmarshal(x.body, &e)
	return e.Error
}

// wantError judges an answer that must be an error: a status that want
// accepts, in the {error, message} shape.
func wantError(x exchange, want func(int) bool, what string) (Status, string) {
	if x.err != nil {
		return Fail, seen(x)
	}
	if !want(x.status) {
		return Fail, fmt.Sprintf("want %s, got %s", what, seen(x))
	}
	if err := verify(x); err != nil {
		return Fail, fmt.Sprintf("%s: %v", seen(x), err)
	}
	return Pass, seen(x)
}

// wantCode is wantError for an exact error code, whose status the protocol
// fixes.
func wantCode(x exchange, code protocol.Code) (Status, string) {
	st, d := wantError(x, is(code.Status()), fmt.Sprintf("%d %s", code.Status(), code))
	if st == Pass && errorCode(x) != code {
		return Fail, fmt.Sprintf("want error %s, got %s", code, seen(x))
	}
	return st, d
}

// wantRefusal judges an answer the published checklist fixes by its status
// alone (405, 415, 422, where a framework answers with its own body): the
// wrong status fails; a body that is not {error, message} is noted, with
// what the verifier found, and the item passes.
func (s *session) wantRefusal(x exchange, want func(int) bool, what string) (Status, string) {
	if x.err != nil {
		return Fail, seen(x)
	}
	if !want(x.status) {
		return Fail, fmt.Sprintf("want %s, got %s", what, seen(x))
	}
	if err := verify(x); err != nil {
		s.note("%s: %s; the network's providers answer {error, message} here, the published checklist does not ask it", seen(x), err)
	}
	return Pass, seen(x)
}

func is(status int) func(int) bool { return func(s int) bool { return s == status } }

func (s *session) acceptsPostJSON(ctx context.Context) (Status, string) {
	s.first = s.send(ctx, s.invocation("good input", s.t.Input))
	if s.first.err != nil || s.first.status != http.StatusOK {
		return Fail, "want 200 for task " + s.t.Task + " with the good input, got " + seen(s.first)
	}
	// application/json with parameters is JSON.
	p := s.invocation("good input as application/json; charset=utf-8", s.t.Input)
	p.contentType = "application/json; charset=utf-8"
	x := s.send(ctx, p)
	if x.err != nil || x.status != http.StatusOK {
		return Fail, "want 200 with Content-Type " + p.contentType + " as with application/json, got " + seen(x)
	}
	return Pass, "200 in " + ms(s.first.took) + "; 200 with charset=utf-8 too"
}

func (s *session) successShape(context.Context) (Status, string) {
	if s.first.err != nil || s.first.status != http.StatusOK {
		return Fail, "no 200 to check: " + seen(s.first)
	}
	if err := verify(s.first); err != nil {
		return Fail, err.Error()
	}
	var r protocol.Response
	_ = json.Unmarshal(s.first.body, &r)
	d := fmt.Sprintf("agent %q, capability %q, duration_ms %d", r.Metadata.Agent, r.Metadata.Capability, r.Metadata.DurationMS)
	if s.t.Agent == "" {
		d += " (registered name unknown, agent not compared)"
	}
	return Pass, d
}

func (s *session) inputDefaults(ctx context.Context) (Status, string) {
	send := func(label string, body []byte) exchange {
		return s.send(ctx, probe{label: label, method: http.MethodPost, contentType: "application/json", body: body,
			expect: protocol.Expect{Agent: s.t.Agent, Capability: s.t.Task}})
	}
	// The reference: what the provider answers to an explicit input {}.
	ref := send("input {}", mustJSON(map[string]any{"task": s.t.Task, "input": map[string]any{}}))
	if ref.err != nil {
		return Fail, "input {}: " + seen(ref)
	}
	probes := []probe{
		{label: "input absent", body: mustJSON(map[string]any{"task": s.t.Task})},
		{label: "input null", body: mustJSON(map[string]any{"task": s.t.Task, "input": nil})},
	}
	var problems []string
	got := []string{"input {} → " + brief(ref)}
	for _, p := range probes {
		x := send(p.label, p.body)
		got = append(got, p.label+" → "+brief(x))
		switch {
		case x.err != nil:
			problems = append(problems, p.label+": "+seen(x))
		case x.status == http.StatusUnprocessableEntity && ref.status != http.StatusUnprocessableEntity && p.label == "input null":
			// The published protocol defaults an absent input only; an
			// explicit null is a value a framework's schema may refuse.
			s.note("input null was refused as an invalid request (%s); the network's providers read it as input {}, the published checklist defaults only an absent input", seen(x))
		case x.status == http.StatusUnprocessableEntity && ref.status != http.StatusUnprocessableEntity:
			problems = append(problems, p.label+" was refused as an invalid request ("+seen(x)+"); input must default to {}")
		case x.status != ref.status:
			problems = append(problems, fmt.Sprintf("%s must be answered like input {}: got %s, input {} got %s", p.label, seen(x), seen(ref)))
		case x.status != http.StatusOK && !sameError(x, ref):
			problems = append(problems, fmt.Sprintf("%s must be answered like input {}: got %s, input {} got %s", p.label, seen(x), seen(ref)))
		default:
			if err := verify(x); err != nil {
				problems = append(problems, p.label+": "+seen(x)+": "+err.Error())
			}
		}
	}
	if len(problems) > 0 {
		return Fail, strings.Join(problems, "; ")
	}
	return Pass, strings.Join(got, "; ")
}

// sameError reports whether two error answers carry the same code and
// message: an answer that names the missing input differs from the one an
// explicit {} gets, though both are 400 invalid_input.
func sameError(a, b exchange) bool {
	var ea, eb protocol.ErrorBody
	_ = json.Unmarshal(a.body, &ea)
	_ = json.Unmarshal(b.body, &eb)
	return ea.Error == eb.Error && ea.Message == eb.Message
}

func (s *session) badInput(ctx context.Context) (Status, string) {
	if len(s.t.BadInput) == 0 {
		return Skip, "no bad input given (--bad-input)"
	}
	p := s.invocation("bad input", s.t.BadInput)
	if s.t.BadTask != "" {
		p.body = mustJSON(map[string]any{"task": s.t.BadTask, "input": s.t.BadInput})
		p.expect.Capability = s.t.BadTask
	}
	x := s.send(ctx, p)
	return wantCode(x, protocol.InvalidInput)
}

func (s *session) malformedBody(ctx context.Context) (Status, string) {
	x := s.send(ctx, probe{label: "malformed body", method: http.MethodPost, contentType: "application/json", body: []byte(`{]`)})
	return s.wantRefusal(x, is(http.StatusUnprocessableEntity), "422 for the body {]")
}

func (s *session) invalidRequest(ctx context.Context) (Status, string) {
	probes := []probe{
		{label: "body not an object", body: []byte(`["task"]`)},
		{label: "task missing", body: []byte(`{"input":{}}`)},
		{label: "task not a string", body: []byte(`{"task":5,"input":{}}`)},
		{label: "input not an object", body: mustJSON(map[string]any{"task": s.t.Task, "input": []int{1}})},
	}
	var problems, codes, bodies []string
	for _, p := range probes {
		p.method, p.contentType = http.MethodPost, "application/json"
		x := s.send(ctx, p)
		if x.err != nil || x.status != http.StatusUnprocessableEntity {
			problems = append(problems, p.label+": want 422, got "+seen(x))
			continue
		}
		codes = append(codes, p.label+" → "+brief(x))
		if err := verify(x); err != nil {
			bodies = append(bodies, fmt.Sprintf("%s: %s: %s", p.label, seen(x), err))
		}
	}
	if len(problems) > 0 {
		return Fail, strings.Join(problems, "; ")
	}
	if len(bodies) > 0 {
		s.note("%d of %d answers are not {error, message} (%s); the network's providers answer {error, message} here, the published checklist does not ask it",
			len(bodies), len(probes), bodies[0])
	}
	return Pass, strings.Join(codes, "; ")
}

func (s *session) unknownCapability(ctx context.Context) (Status, string) {
	task := "conform-unknown-" + protocol.NewTaskID()[:8]
	p := s.invocation("unknown capability", s.t.Input)
	p.body = mustJSON(map[string]any{"task": task, "input": s.t.Input})
	p.expect.Capability = task
	x := s.send(ctx, p)
	return wantError(x, func(st int) bool { return st >= 400 && st < 500 }, "a 4xx error for task "+task)
}

func (s *session) nonPost(ctx context.Context) (Status, string) {
	x := s.send(ctx, probe{label: "GET", method: http.MethodGet})
	// HTTP itself requires Allow on a 405, so its absence fails whatever
	// the body.
	if x.err == nil && x.status == http.StatusMethodNotAllowed && !strings.Contains(x.header.Get("Allow"), http.MethodPost) {
		return Fail, seen(x) + ": 405 without Allow: POST"
	}
	st, d := s.wantRefusal(x, is(http.StatusMethodNotAllowed), "405")
	if st == Pass {
		d += "; Allow: " + x.header.Get("Allow")
	}
	return st, d
}

func (s *session) nonJSON(ctx context.Context) (Status, string) {
	p := s.invocation("text/plain body", s.t.Input)
	p.contentType = "text/plain"
	x := s.send(ctx, p)
	return s.wantRefusal(x, func(st int) bool {
		return st == http.StatusUnsupportedMediaType || st == http.StatusUnprocessableEntity
	}, "415 (or 422) for Content-Type text/plain")
}

func (s *session) toleratesTaskID(ctx context.Context) (Status, string) {
	p := s.invocation("good input with a task id", s.t.Input)
	p.taskID = protocol.NewTaskID()
	x := s.send(ctx, p)
	if x.err != nil || x.status != http.StatusOK {
		return Fail, "want 200 with " + protocol.TaskIDHeader + ", got " + seen(x)
	}
	// The answer's shape is judged by no-error-in-200, with every other 200.
	return Pass, "200 with " + protocol.TaskIDHeader + ": " + p.taskID
}

func (s *session) replayIdentical(ctx context.Context) (Status, string) {
	// Without X-A2AWire-Replayed, the effect count is what tells a replay
	// from a run: the three requests below must run twice (the first and
	// the other id), not once or three times.
	var before int64
	if s.t.Effects != nil {
		n, err := s.t.Effects(ctx, s.hc)
		if err != nil {
			return Fail, "counting effects before: " + err.Error()
		}
		before = n
	}
	base := protocol.NewTaskID()
	s.replayID = base + ",a"
	p := s.invocation("first of a repeated task id", s.t.Input)
	p.taskID = s.replayID
	a := s.send(ctx, p)
	if a.err != nil || a.status != http.StatusOK {
		return Fail, "want 200 for the first request, got " + seen(a)
	}
	s.replayed = a
	p.label = "repeat of a task id"
	b := s.send(ctx, p)
	if b.err != nil {
		return Fail, "the repeat: " + seen(b)
	}
	if b.status != a.status || !sameJSON(a.body, b.body) {
		return Fail, fmt.Sprintf("the repeat answered differently: first %s; repeat %s", seen(a), seen(b))
	}
	marked := b.header.Get(protocol.ReplayedHeader) == "true"
	if !marked {
		replayed := b.header.Get(protocol.ReplayedHeader)
		if replayed == "" {
			replayed = "absent"
		}
		s.note("the repeat came without %s: true (%s): the network's providers mark a replay so that a buyer can tell it from a new run; the published protocol defines no such header",
			protocol.ReplayedHeader, replayed)
	}
	// A gateway adapter that splits header values on commas would make
	// "<id>,a" and "<id>,b" one task.
	p.label, p.taskID = "task id differing after a comma", base+",b"
	c := s.send(ctx, p)
	if c.err != nil || c.status != http.StatusOK {
		return Fail, fmt.Sprintf("want 200 for task id %q after %q, got %s", p.taskID, s.replayID, seen(c))
	}
	if c.header.Get(protocol.ReplayedHeader) != "" {
		return Fail, fmt.Sprintf("task id %q was answered as a replay of %q: task ids must be taken exactly as sent, commas included", p.taskID, s.replayID)
	}
	d := fmt.Sprintf("repeat answered the same %d body", b.status)
	switch {
	case marked:
		d += fmt.Sprintf("; %s: true; ids ending ,a and ,b are two tasks", protocol.ReplayedHeader)
	case s.t.Effects != nil:
		after, err := s.t.Effects(ctx, s.hc)
		switch {
		case err != nil:
			return Fail, "counting effects after: " + err.Error()
		case after-before == 1:
			return Fail, fmt.Sprintf("task id %q was answered as a replay of %q (effect count %d → %d): task ids must be taken exactly as sent, commas included",
				p.taskID, s.replayID, before, after)
		case after-before != 2:
			return Fail, fmt.Sprintf("the provider acted %d times for a task id, its repeat and another id (effect count %d → %d), want twice",
				after-before, before, after)
		}
		d += fmt.Sprintf("; ids ending ,a and ,b are two tasks (effect count %d → %d)", before, after)
	case sameJSON(a.body, c.body):
		// Without the header, only a new body shows a new run; a provider
		// whose answers do not change between runs cannot be told apart.
		s.note("task id %q got the very body of %q: a replay of it, or a run that answers alike; without %s it cannot be told",
			p.taskID, s.replayID, protocol.ReplayedHeader)
	default:
		d += "; ids ending ,a and ,b are two tasks (two bodies)"
	}
	return Pass, d
}

// sameJSON reports whether two bodies hold the same JSON value, so that a
// replay re-encoded with other whitespace or key order still counts.
func sameJSON(a, b []byte) bool {
	va, ea := decodeAny(a)
	vb, eb := decodeAny(b)
	if ea != nil || eb != nil {
		return bytes.Equal(a, b)
	}
	return reflect.DeepEqual(va, vb)
}

func decodeAny(b []byte) (any, error) {
	dec := json.NewDecoder(bytes.NewReader(b))
	dec.UseNumber()
	var v any
	err := dec.Decode(&v)
	return v, err
}

func (s *session) reusedKey(ctx context.Context) (Status, string) {
	if s.replayID == "" {
		return Fail, "no completed task id to reuse"
	}
	var in map[string]json.RawMessage
	_ = json.Unmarshal(s.t.Input, &in)
	in["conform_nonce"] = json.RawMessage(mustJSON(protocol.NewTaskID()))
	p := s.invocation("reused task id, other input", mustJSON(in))
	p.taskID = s.replayID
	x := s.send(ctx, p)
	// The published protocol answers any repeated id with the stored
	// result; the network's providers refuse one whose body differs. Either
	// way the provider did not act on the other input.
	if x.err == nil && x.status == s.replayed.status && sameJSON(x.body, s.replayed.body) {
		s.note("the reused id got the stored answer of the first request: the network's providers refuse another body under a used id with 409 %s",
			protocol.IdempotencyKeyReused)
		return Pass, fmt.Sprintf("%d, the stored answer of task id %q, unchanged", x.status, s.replayID)
	}
	st, d := wantCode(x, protocol.IdempotencyKeyReused)
	if st == Fail {
		d += "; or the stored answer of the first request unchanged"
	}
	return st, d
}

func (s *session) actsOnce(ctx context.Context) (Status, string) {
	var before int64
	if s.t.Effects != nil {
		n, err := s.t.Effects(ctx, s.hc)
		if err != nil {
			return Fail, "counting effects before: " + err.Error()
		}
		before = n
	}
	p := s.invocation("repeated task id", s.t.Input)
	p.taskID = protocol.NewTaskID()
	xs := make([]exchange, burst+1)
	var wg sync.WaitGroup
	for i := range burst {
		wg.Go(func() { xs[i] = s.send(ctx, p) })
	}
	wg.Wait()
	// A last repeat after the burst has settled must find the outcome
	// recorded: a stored answer, not a request still in progress.
	xs[burst] = s.send(ctx, p)

	var (
		problems []string
		body     []byte
		oks      int
		busy     int
		differ   []string
	)
	for i, x := range xs {
		switch {
		case x.err != nil:
			problems = append(problems, fmt.Sprintf("request %d: %s", i+1, seen(x)))
		case x.status == http.StatusOK:
			oks++
			if body == nil {
				body = x.body
			} else if !sameJSON(body, x.body) {
				if len(differ) == 0 {
					differ = append(differ, fmt.Sprintf("first %s; request %d %s", clip(string(body), 100), i+1, clip(string(x.body), 100)))
				}
				differ = append(differ, fmt.Sprint(i+1))
			}
		case x.status == http.StatusConflict && errorCode(x) == protocol.RequestInProgress && i < burst:
			busy++
		default:
			problems = append(problems, fmt.Sprintf("request %d: want 200 or 409 request_in_progress, got %s", i+1, seen(x)))
		}
	}
	if len(differ) > 0 {
		problems = append(problems, fmt.Sprintf("the provider acted again: requests %s answered a different 200 body than request 1 (%s)",
			strings.Join(differ[1:], ", "), differ[0]))
	}
	if oks == 0 && len(problems) == 0 {
		problems = append(problems, "no request succeeded")
	}
	d := fmt.Sprintf("%d requests with one task id: %d × 200 (one body), %d × 409 request_in_progress", len(xs), oks, busy)
	if s.t.Effects != nil {
		after, err := s.t.Effects(ctx, s.hc)
		if err != nil {
			problems = append(problems, "counting effects after: "+err.Error())
		} else if after-before != 1 {
			problems = append(problems, fmt.Sprintf("the provider acted %d times (effect count %d → %d), want once", after-before, before, after))
		} else {
			d += fmt.Sprintf("; effect count %d → %d", before, after)
		}
	}
	if len(problems) > 0 {
		return Fail, strings.Join(problems, "; ")
	}
	return Pass, d
}

func (s *session) noErrorIn200(context.Context) (Status, string) {
	s.mu.Lock()
	oks, sent := append([]exchange(nil), s.oks...), s.sent
	s.mu.Unlock()
	if len(oks) == 0 {
		return Skip, fmt.Sprintf("none of %d answers was a 200", sent)
	}
	var problems []string
	for _, x := range oks {
		if err := verify(x); err != nil {
			problems = append(problems, x.label+": "+err.Error())
		}
	}
	if len(problems) > 0 {
		return Fail, strings.Join(problems, "; ")
	}
	return Pass, fmt.Sprintf("all %d answers with status 200 are well-formed successes", len(oks))
}
