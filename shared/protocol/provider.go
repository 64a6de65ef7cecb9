package protocol

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"mime"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/a2awire/a2awire/shared/httperr"
	"github.com/a2awire/a2awire/shared/strictjson"
)

// HandlerFunc runs one capability. input is always a JSON object. It returns
// the output (marshalled as JSON; it must encode as an object) or an error; an
// *Error is sent as is, any other error becomes a 500 whose text stays in the logs.
type HandlerFunc func(ctx context.Context, input json.RawMessage) (any, error)

// TaskKey identifies one execution for idempotency.
type TaskKey struct {
	Agent  string
	TaskID string
	// RequestHash is a digest of the task and input; a different hash under
	// the same task id is a reused key.
	RequestHash string
}

// Recorded is a stored response replayed for a repeated task id.
type Recorded struct {
	Status int
	Body   []byte
}

// Claim is a held task id: the key and the random claim token Begin wrote
// with it. Commit and Abort present the token, so a holder whose claim was
// taken over (its deadline passed and a retry claimed the id anew) can
// neither complete nor delete its heir's record.
type Claim struct {
	TaskKey
	Token string
}

// Idempotency makes a stateful provider act at most once per task id.
//
// The kit calls Begin before running a capability for a request that carries
// a task id. Begin returns a stored response to replay (the capability does not
// run), an *Error to refuse (409 request_in_progress, 409
// idempotency_key_reused), or (claim, nil, nil) when the caller now holds the
// claim and must run. After running, the kit calls Commit with the claim and
// the response when it is final (status below 500, except 429) and Abort
// otherwise, so that a retry runs again.
type Idempotency interface {
	Begin(ctx context.Context, key TaskKey) (Claim, *Recorded, error)
	Commit(ctx context.Context, c Claim, rec Recorded) error
	Abort(ctx context.Context, c Claim) error
}

// Provider is a conformant A2AWire endpoint: it decodes invocations, routes
// them on task to registered capabilities, times them, fills metadata, maps
// errors to statuses and, when given an Idempotency, honours task ids.
// It is an http.Handler; on Lambda serve it through lambdahttp.Entry, which
// keeps the task id as the event carried it (httpadapter alone splits it on
// commas).
type Provider struct {
	name    string
	caps    map[string]HandlerFunc
	maxBody int64
	idem    Idempotency
	log     *slog.Logger
	now     func() time.Time
}

// Option configures a Provider.
type Option func(*Provider)

// WithMaxBody sets the request body limit (default 1 MiB).
func WithMaxBody(n int64) Option { return func(p *Provider) { p.maxBody = n } }

// WithIdempotency makes the provider stateful: task ids are honoured.
func WithIdempotency(i Idempotency) Option { return func(p *Provider) { p.idem = i } }

// WithLogger sets the logger for failures (default slog.Default()).
func WithLogger(l *slog.Logger) Option { return func(p *Provider) { p.log = l } }

// WithClock replaces time.Now, for tests of timing.
func WithClock(now func() time.Time) Option { return func(p *Provider) { p.now = now } }

// NewProvider returns a provider registered under name, with no capabilities.
func NewProvider(name string, opts ...Option) *Provider {
	p := &Provider{
		name:    name,
		caps:    map[string]HandlerFunc{},
		maxBody: DefaultMaxBody,
		log:     slog.Default(),
		now:     time.Now,
	}
	for _, o := range opts {
		o(p)
	}
	return p
}

// Name is the registered agent name that metadata.agent carries.
func (p *Provider) Name() string { return p.name }

// Capabilities lists the advertised capabilities in sorted order.
func (p *Provider) Capabilities() []string {
	names := make([]string, 0, len(p.caps))
	for n := range p.caps {
		names = append(names, n)
	}
	slices.Sort(names)
	return names
}

// HandleFunc registers fn as capability. Registering a name twice panics, as
// http.ServeMux does, because it is a programming error.
func (p *Provider) HandleFunc(capability string, fn HandlerFunc) {
	if capability == "" || fn == nil {
		panic("protocol: empty capability or nil handler")
	}
	if _, dup := p.caps[capability]; dup {
		panic("protocol: capability registered twice: " + capability)
	}
	p.caps[capability] = fn
}

// Handle registers a typed capability: the input object is decoded into In
// with DecodeInput (the one strict reader: keys match field names
// case-sensitively, unknown keys are ignored, a field of the wrong type is a
// 400 invalid_input naming it)
// and the Out value is the output.
func Handle[In, Out any](p *Provider, capability string, fn func(ctx context.Context, in In) (Out, error)) {
	p.HandleFunc(capability, func(ctx context.Context, input json.RawMessage) (any, error) {
		var in In
		if err := DecodeInput(input, &in); err != nil {
			return nil, err
		}
		return fn(ctx, in)
	})
}

type (
	metaKey   struct{}
	taskIDKey struct{}
)

// TaskID returns the X-A2AWire-Task-Id of the invocation a capability is
// running for, or "" when the buyer sent none. Stateful capabilities key
// their own writes by it so that they, too, happen once per task id.
func TaskID(ctx context.Context) string {
	id, _ := ctx.Value(taskIDKey{}).(string)
	return id
}

// SetMetadata adds a metadata field to the response of the running
// capability (e.g. "engine", "tokens_used", "model"). It is a no-op outside a
// capability handler.
func SetMetadata(ctx context.Context, key string, value any) {
	if m, ok := ctx.Value(metaKey{}).(map[string]any); ok {
		m[key] = value
	}
}

// ServeHTTP answers one invocation.
func (p *Provider) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	start := p.now()
	req, perr := p.decode(w, r)
	if perr != nil {
		p.writeError(w, r, perr)
		return
	}
	fn, ok := p.caps[req.Task]
	if !ok {
		p.writeError(w, r, Errorf(UnsupportedCapability, "%s does not advertise capability %s; it offers %s",
			p.name, Quote(req.Task), strings.Join(p.Capabilities(), ", ")))
		return
	}

	taskID, sent := RawTaskID(r)
	if p.idem == nil || !sent {
		// Stateless providers ignore the task id; a capability
		// sees it only when it is a valid one.
		if !ValidTaskID(taskID) {
			taskID = ""
		}
		status, body, hdr := p.run(r.Context(), fn, req, taskID, start)
		p.write(w, status, body, hdr)
		return
	}
	if !ValidTaskID(taskID) {
		p.writeError(w, r, Errorf(InvalidInput, "%s must be 1 to %d printable ASCII characters (0x20-0x7E); got %s",
			TaskIDHeader, MaxTaskIDLength, Quote(taskID)))
		return
	}
	key := TaskKey{Agent: p.name, TaskID: taskID, RequestHash: requestHash(req)}
	claim, replay, err := p.idem.Begin(r.Context(), key)
	if err != nil {
		p.writeError(w, r, err)
		return
	}
	if replay != nil {
		w.Header().Set(ReplayedHeader, "true")
		p.write(w, replay.Status, replay.Body, nil)
		return
	}
	status, body, hdr := p.run(r.Context(), fn, req, taskID, start)
	// The outcome is recorded even if the buyer has gone away, so use a
	// context that outlives the request's cancellation.
	ctx := context.WithoutCancel(r.Context())
	if status < 500 && status != http.StatusTooManyRequests {
		if err := p.idem.Commit(ctx, claim, Recorded{Status: status, Body: body}); err != nil {
			// The work is done but unrecorded: a retry may run again, which is
			// why stateful stores also guard their own writes.
			p.log.ErrorContext(ctx, "idempotency commit failed", "agent", p.name, "task_id", taskID, "err", err)
		}
	} else if err := p.idem.Abort(ctx, claim); err != nil {
		p.log.ErrorContext(ctx, "idempotency abort failed", "agent", p.name, "task_id", taskID, "err", err)
	}
	p.write(w, status, body, hdr)
}

// requestHash digests what makes two invocations the same request: the task
// and the input's compact JSON, so insignificant whitespace does not count.
func requestHash(req Request) string {
	var in bytes.Buffer
	if err := json.Compact(&in, req.Input); err != nil {
		in.Write(req.Input)
	}
	h := sha256.New()
	h.Write([]byte(req.Task))
	h.Write([]byte{0})
	h.Write(in.Bytes())
	return hex.EncodeToString(h.Sum(nil))
}

// run executes the capability and renders the response bytes, so that the
// same bytes can be stored for replay.
func (p *Provider) run(ctx context.Context, fn HandlerFunc, req Request, taskID string, start time.Time) (int, []byte, http.Header) {
	meta := map[string]any{}
	ctx = context.WithValue(ctx, metaKey{}, meta)
	if taskID != "" {
		ctx = context.WithValue(ctx, taskIDKey{}, taskID)
	}
	out, err := p.call(ctx, fn, req.Input)
	if err == nil {
		body, merr := p.render(out, meta, req.Task, start)
		if merr == nil {
			return http.StatusOK, body, nil
		}
		err = merr
	}
	perr := p.asError(ctx, req.Task, err)
	var hdr http.Header
	if v := retryHeader(perr); v != "" {
		hdr = http.Header{"Retry-After": {v}}
	}
	body, _ := json.Marshal(perr.Body())
	return perr.Status(), body, hdr
}

// RawTaskID returns the X-A2AWire-Task-Id exactly as the buyer sent it, and
// whether it was sent at all. Repeated header lines are joined with "," as
// API Gateway joins them, so a provider behind net/http and one behind API
// Gateway read the same id; behind Lambda the value must come from
// lambdahttp.Entry, which restores the header lines the HTTP adapter splits
// on commas.
func RawTaskID(r *http.Request) (string, bool) {
	vals := r.Header.Values(TaskIDHeader)
	if len(vals) == 0 {
		return "", false
	}
	return strings.Join(vals, ","), true
}

// ValidTaskID reports whether id is a task id as the protocol defines it: 1 to
// MaxTaskIDLength characters of printable ASCII (0x20–0x7E), commas and
// inner spaces included. Two ids that differ in any byte are two tasks.
func ValidTaskID(id string) bool {
	if len(id) == 0 || len(id) > MaxTaskIDLength {
		return false
	}
	for i := range len(id) {
		if id[i] < 0x20 || id[i] > 0x7e {
			return false
		}
	}
	return true
}

// call runs fn and turns a panic into an internal error, so one bad request
// never takes the function down.
func (p *Provider) call(ctx context.Context, fn HandlerFunc, input json.RawMessage) (out any, err error) {
	defer func() {
		if v := recover(); v != nil {
			err = fmt.Errorf("panic in capability handler: %v", v)
		}
	}()
	return fn(ctx, input)
}

func (p *Provider) render(out any, meta map[string]any, task string, start time.Time) ([]byte, error) {
	output, err := json.Marshal(out)
	if err != nil {
		return nil, fmt.Errorf("encode output: %w", err)
	}
	if len(output) == 0 || output[0] != '{' {
		return nil, fmt.Errorf("output of %s is not a JSON object", task)
	}
	m := Metadata{Agent: p.name, Capability: task, Extra: meta}
	if v, ok := meta["tokens_used"]; ok {
		if n, ok := toInt64(v); ok {
			m.TokensUsed = &n
		}
	}
	if v, ok := meta["model"].(string); ok {
		m.Model = v
	}
	m.DurationMS = max(p.now().Sub(start).Milliseconds(), 0)
	body, err := json.Marshal(Response{Output: output, Metadata: m})
	if err != nil {
		return nil, err
	}
	// encoding/json copies raw messages (an echoed input, say) without
	// checking their UTF-8; JSON out must be valid UTF-8.
	if !utf8.Valid(body) {
		return nil, fmt.Errorf("output of %s is not valid UTF-8", task)
	}
	return body, nil
}

func toInt64(v any) (int64, bool) {
	switch n := v.(type) {
	case int:
		return int64(n), true
	case int64:
		return n, true
	case int32:
		return int64(n), true
	}
	return 0, false
}

// asError maps any handler error to the error sent; only *Error text reaches
// the client.
func (p *Provider) asError(ctx context.Context, task string, err error) *Error {
	var perr *Error
	if errors.As(err, &perr) {
		if perr.Status() >= 500 {
			p.log.ErrorContext(ctx, "capability failed", "agent", p.name, "capability", task, "code", perr.Code, "err", err)
		}
		return perr
	}
	p.log.ErrorContext(ctx, "capability failed", "agent", p.name, "capability", task, "err", err)
	return &Error{Code: Internal, Message: "the provider failed to process the task", Err: err}
}

// decode applies the protocol's request checks in order: method (405),
// media type and content coding (415), size (413), then shape (422).
func (p *Provider) decode(w http.ResponseWriter, r *http.Request) (Request, *Error) {
	// Methods are case-sensitive (RFC 9110): "post" is not POST.
	if r.Method != http.MethodPost {
		w.Header().Set("Allow", http.MethodPost)
		return Request{}, Errorf(MethodNotAllowed, "use POST to invoke %s", p.name)
	}
	if !IsJSON(r.Header.Get("Content-Type")) {
		return Request{}, Errorf(UnsupportedMediaType, "Content-Type must be application/json")
	}
	if ce := strings.Join(r.Header.Values("Content-Encoding"), ","); !isIdentity(ce) {
		return Request{}, Errorf(UnsupportedMediaType, "Content-Encoding %s is not supported; send the body uncompressed (identity)", Quote(ce))
	}
	if r.ContentLength > p.maxBody {
		return Request{}, p.tooLarge()
	}
	body, err := io.ReadAll(io.LimitReader(r.Body, p.maxBody+1))
	if err != nil {
		return Request{}, Errorf(InvalidRequest, "could not read the request body")
	}
	if int64(len(body)) > p.maxBody {
		return Request{}, p.tooLarge()
	}
	return DecodeRequest(body)
}

// isIdentity reports whether a Content-Encoding value leaves the body as is:
// absent, empty, or only "identity" codings.
func isIdentity(ce string) bool {
	for c := range strings.SplitSeq(ce, ",") {
		if c = strings.TrimSpace(c); c != "" && !strings.EqualFold(c, "identity") {
			return false
		}
	}
	return true
}

func (p *Provider) tooLarge() *Error {
	return Errorf(PayloadTooLarge, "request body is larger than %d bytes", p.maxBody)
}

// IsJSON reports whether a Content-Type header value is application/json,
// with or without parameters such as charset.
func IsJSON(contentType string) bool {
	mt, _, err := mime.ParseMediaType(contentType)
	return err == nil && mt == "application/json"
}

// DecodeRequest parses an invocation body with the one strict reader
// (strictjson.Decode): valid UTF-8, no duplicated keys at any depth, keys
// matched case-sensitively. Every failure is a 422 invalid_request whose
// details locate the problem; input defaults to {}.
func DecodeRequest(body []byte) (Request, *Error) {
	invalid := func(msg string, loc ...string) (Request, *Error) {
		e := Errorf(InvalidRequest, "the body is not a valid invocation: %s", msg)
		e.Details = []Detail{{Loc: append([]string{"body"}, loc...), Msg: msg}}
		return Request{}, e
	}
	var fields struct {
		Task  json.RawMessage `json:"task"`
		Input json.RawMessage `json:"input"`
	}
	if err := strictjson.Decode(body, &fields, strictjson.IgnoreUnknown); err != nil {
		var se *strictjson.Error
		switch {
		case !errors.As(err, &se):
			return invalid("is not valid JSON")
		case se.Kind == strictjson.Syntax || se.Kind == strictjson.BadUTF8:
			return invalid("is not strict JSON: "+se.Error(), se.Loc...)
		case se.Kind == strictjson.NotObject:
			return invalid("must be a JSON object")
		}
		return invalid("is not valid JSON")
	}
	var req Request
	if fields.Task == nil {
		return invalid("field required", "task")
	}
	if err := json.Unmarshal(fields.Task, &req.Task); err != nil || isNull(fields.Task) {
		return invalid("must be a string", "task")
	}
	if req.Task == "" {
		return invalid("must be a non-empty string", "task")
	}
	req.Input = json.RawMessage("{}")
	if in := fields.Input; in != nil && !isNull(in) {
		if t := bytes.TrimSpace(in); len(t) == 0 || t[0] != '{' {
			return invalid("must be a JSON object", "input")
		}
		req.Input = in
	}
	return req, nil
}

func isNull(raw json.RawMessage) bool { return string(bytes.TrimSpace(raw)) == "null" }

func (p *Provider) writeError(w http.ResponseWriter, r *http.Request, err error) {
	perr := p.asError(r.Context(), "", err)
	if v := retryHeader(perr); v != "" {
		w.Header().Set("Retry-After", v)
	}
	body, _ := json.Marshal(perr.Body())
	p.write(w, perr.Status(), body, nil)
}

func (p *Provider) write(w http.ResponseWriter, status int, body []byte, hdr http.Header) {
	for k, v := range hdr {
		w.Header()[k] = v
	}
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("Content-Length", strconv.Itoa(len(body)))
	w.WriteHeader(status)
	_, _ = w.Write(body)
}

// retryHeader is the Retry-After of an error (httperr.RetryAfter): its
// RetryAfter, or 1 s for a 429 or 503 whose author set none, because the
// protocol promises the header with both and a buyer should not have to
// guess.
func retryHeader(e *Error) string { return httperr.RetryAfter(e.Code.Kind(), e.RetryAfter) }
