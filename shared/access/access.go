// Package access is the HTTP front of a function that serves several routes
// of the route table, where each route carries its auth. A Dispatcher takes
// the route the gateway matched and runs that route's handler behind the
// auth middleware its table entry names: public, signed, member or owner.
// The kind is read from the table, never chosen per handler, so a route
// cannot silently lose its check; a route of the table without a handler,
// or a handler without the hook its kind needs, is an error at start-up.
//
// # One match
//
// Behind lambdahttp.Entry (every Lambda and the local harness) the route
// and its path parameters are the API Gateway event's routeKey and
// pathParameters (lambdahttp.RouteOf): the gateway's match is the only
// one. Under a plain net/http server, where there is no event (tests), the
// dispatcher matches the path itself exactly as the local gateway does
// (routes.Match on the unescaped path), so both paths bind the same
// parameters.
//
// # What a handler reads
//
//   - Param(r, "world") (or Params(r)): a path parameter of the matched
//     route, unescaped;
//   - Decode(r, &in): the body, read once and bounded (413 past the
//     limit), decoded once by the one strict reader (shared/strictjson):
//     valid UTF-8, no repeated key, keys matched case-exactly, unknown keys
//     refused or ignored as Config.UnknownFields says for the surface; a
//     failure is an apierror Invalid. A route whose body carries the
//     signing key reads it in its BodyKey with DecodeKey into the same
//     type, and the handler's Decode takes that value: one decode per
//     request either way. Body(r) is the raw bytes;
//   - IdentityFrom(r.Context()): who signed (key, keyid, awnId), on signed,
//     owner and member routes;
//   - RouteOf(r): the matched row of the route table.
//
// What the values mean (required fields, ranges, formats) is checked once,
// by the domain the handler calls, which answers an *apierror.Error; the
// surface's renderer (httperr.WriteRegistry, httperr.WriteWorld) writes it.
//
// # Keys
//
// Keys are found by Config.Keys (stored keys by keyid), by
// Config.ParamKeys (keys within the resource the path names: a world's
// members, so a non-member is refused with NOT_JOINED before anything
// else), or, on signed routes, in the body (Route.BodyKey). Signed routes
// verify the body against Content-Digest. Every failure renders through the
// surface's one renderer. A route may name the reads its handler makes
// first (Route.ReadAhead): they are armed around the key lookup, so that a
// lookup that reads a stored key reads them beside it (guard.Ahead).
package access

import (
	"bytes"
	"context"
	"crypto/ed25519"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"sync"

	"github.com/a2awire/a2awire/shared/apierror"
	"github.com/a2awire/a2awire/shared/auth"
	"github.com/a2awire/a2awire/shared/httperr"
	"github.com/a2awire/a2awire/shared/lambdahttp"
	"github.com/a2awire/a2awire/shared/routes"
	"github.com/a2awire/a2awire/shared/store/guard"
	"github.com/a2awire/a2awire/shared/strictjson"
)

// DefaultMaxBody is the request body limit when Config.MaxBody is zero
// (1 MiB, as on the invocation surface).
const DefaultMaxBody = 1 << 20

// Identity is who signed an authenticated request.
type Identity struct {
	KeyID     string
	AWNID     string
	PublicKey ed25519.PublicKey
}

// MemberLookup decides membership on member routes (the worlds): after the
// signature verifies, the dispatcher asks whether id is a member of the
// resource the path names; false renders apierror.NotJoined.
type MemberLookup interface {
	IsMember(ctx context.Context, params map[string]string, id Identity) (bool, error)
}

// ParamKeyLookup is a key lookup that knows the matched route's path
// parameters: the worlds' member routes find a signing key within the world
// the path names (world.MemberKey), so a key that is no member of that world
// is refused there and then. It returns the key of keyID, an error wrapping
// auth.ErrUnknownKey when it knows none (401 unknown key), or an
// *apierror.Error, which is rendered as is (NotJoined for a non-member).
type ParamKeyLookup func(ctx context.Context, params map[string]string, keyID string) (ed25519.PublicKey, error)

// ErrNoBodyKey is what a Route.BodyKey returns when the body carries no key
// at all (an update of a world by its owner may omit publicKey): the route
// then verifies against Config.ParamKeys, else Config.Keys.
var ErrNoBodyKey = errors.New("access: the body carries no key")

// Route is what a function supplies for one route of the table.
type Route struct {
	// Handler serves the route once its auth passed.
	Handler http.Handler
	// BodyKey, on signed routes whose body carries the signing key
	// (registry POST, join, PUT /v0/worlds/{world}), returns that key; the
	// verifier then requires keyid to be its thumbprint. It reads the body
	// with DecodeKey into the route's body type, so that the handler's
	// Decode into that type takes the decoded value instead of decoding
	// the body again. An *apierror.Error it returns (e.g. Invalid for a
	// malformed body) is rendered as is. Without it the route verifies
	// against Config.Keys, the stored keys. ErrNoBodyKey falls back to the
	// stored keys (ParamKeys, else Keys).
	BodyKey func(r *http.Request) (ed25519.PublicKey, error)
	// Owns is required on owner routes: whether id owns the resource the
	// path names. False renders 403 forbidden.
	Owns func(ctx context.Context, params map[string]string, id Identity) (bool, error)
	// Anonymous, on a member route, admits a request that carries no
	// signature at all when it returns true for it (a world's public
	// feed: GET …/events?visibility=public): the handler runs without an
	// identity. A signed request is verified as always.
	Anonymous func(r *http.Request) bool
	// ReadAhead, on a signed, owner or member route, names the reads
	// the handler will make first (from the path parameters and the
	// body). They are armed around the key lookup (guard.Ahead): when
	// the lookup reads a stored key, they go beside that read, one
	// round trip instead of two, and what the lookup itself read (an
	// owner's manifest) is kept for the handler too, even when it names
	// none; a lookup that reads nothing (a key this instance knows)
	// issues none of them. Without it nothing is kept.
	ReadAhead func(r *http.Request) []guard.Read
}

// Config builds a Dispatcher.
type Config struct {
	// Function is the functions/ folder whose routes are served.
	Function string
	// Table is the routes to serve; nil means routes.ForFunction(Function).
	// Tests set it to exercise kinds the table does not use yet.
	Table []routes.Route
	// Routes holds one Route per table entry, keyed by routes.Route.Key().
	Routes map[string]Route
	// Verifier checks signatures; required when any route is not public.
	Verifier *auth.Verifier
	// Keys looks up stored keys (registrations, memberships) on signed
	// routes without BodyKey and on owner and member routes.
	Keys auth.KeyLookup
	// ParamKeys looks up stored keys knowing the path parameters. When
	// set it replaces Keys on member routes (and on signed routes whose
	// BodyKey finds no key): the lookup itself decides membership, so a
	// member route needs it or Members.
	ParamKeys ParamKeyLookup
	// Members decides membership after the signature verifies; a member
	// route needs it or ParamKeys (both: both decide).
	Members MemberLookup
	// Render writes an error in the surface's shape; nil means
	// httperr.WriteRegistry.
	Render func(http.ResponseWriter, error)
	// MaxBody bounds the request body; zero means DefaultMaxBody.
	MaxBody int64
	// UnknownFields is what Decode does with a body's key that names no
	// field: the worlds refuse it (strictjson.RefuseUnknown), the registry
	// and the webhook routes ignore it (the zero value).
	UnknownFields strictjson.Unknown
	// Log receives server-side failures; nil discards them.
	Log *slog.Logger
}

// Dispatcher serves the routes of one function.
type Dispatcher struct {
	fn      string
	byKey   map[string]*bound
	custom  bool // Config.Table was given: match within it alone
	render  func(http.ResponseWriter, error)
	maxBody int64
	unknown strictjson.Unknown
	log     *slog.Logger
}

// bound is one route with its middleware picked.
type bound struct {
	route   routes.Route
	handler http.Handler
}

// New checks cfg against the table and wraps every route's handler in the
// middleware its auth kind names.
func New(cfg Config) (*Dispatcher, error) {
	table := cfg.Table
	if table == nil {
		table = routes.ForFunction(cfg.Function)
	}
	if len(table) == 0 {
		return nil, fmt.Errorf("access: function %q serves no route of the table", cfg.Function)
	}
	d := &Dispatcher{fn: cfg.Function, byKey: map[string]*bound{}, custom: cfg.Table != nil, render: cfg.Render, maxBody: cfg.MaxBody, unknown: cfg.UnknownFields, log: cfg.Log}
	if d.render == nil {
		d.render = httperr.WriteRegistry
	}
	if d.maxBody <= 0 {
		d.maxBody = DefaultMaxBody
	}
	if d.log == nil {
		d.log = slog.New(slog.DiscardHandler)
	}
	for _, r := range table {
		spec, ok := cfg.Routes[r.Key()]
		if !ok || spec.Handler == nil {
			return nil, fmt.Errorf("access: route %s of function %q has no handler", r.Key(), cfg.Function)
		}
		h, err := d.wrap(cfg, r, spec)
		if err != nil {
			return nil, fmt.Errorf("access: route %s: %w", r.Key(), err)
		}
		d.byKey[r.Key()] = &bound{route: r, handler: h}
	}
	for key := range cfg.Routes {
		if d.byKey[key] == nil {
			return nil, fmt.Errorf("access: handler for %s, which is not a route of function %q", key, cfg.Function)
		}
	}
	return d, nil
}

// wrap picks the middleware of r.Auth.
func (d *Dispatcher) wrap(cfg Config, r routes.Route, spec Route) (http.Handler, error) {
	if r.Auth != routes.Public && cfg.Verifier == nil {
		return nil, fmt.Errorf("auth %s needs a Verifier", r.Auth)
	}
	stored := func(*http.Request, []byte) (auth.KeyLookup, error) {
		if cfg.Keys == nil {
			return nil, errors.New("no key lookup configured")
		}
		return cfg.Keys, nil
	}
	// pathStored is the lookup of member routes and of body-key fallbacks:
	// the path-aware one when configured, else the plain stored keys.
	pathStored := stored
	if cfg.ParamKeys != nil {
		pathStored = func(r *http.Request, _ []byte) (auth.KeyLookup, error) {
			params := Params(r)
			return func(ctx context.Context, keyID string) (ed25519.PublicKey, error) {
				return cfg.ParamKeys(ctx, params, keyID)
			}, nil
		}
	}
	switch r.Auth {
	case routes.Public:
		return spec.Handler, nil
	case routes.Signed:
		keys := stored
		if spec.BodyKey != nil {
			keys = func(r *http.Request, body []byte) (auth.KeyLookup, error) {
				pub, err := spec.BodyKey(r)
				if errors.Is(err, ErrNoBodyKey) {
					if cfg.ParamKeys == nil && cfg.Keys == nil {
						return nil, apierror.New(apierror.Unauthorized, "the body carries no publicKey")
					}
					return pathStored(r, body)
				}
				if err != nil {
					return nil, err
				}
				return auth.BodyKey(pub), nil
			}
		} else if cfg.Keys == nil && cfg.ParamKeys == nil {
			return nil, errors.New("signed route needs BodyKey, Config.Keys or Config.ParamKeys")
		} else {
			keys = pathStored
		}
		return d.signed(cfg.Verifier, keys, nil, spec), nil
	case routes.Owner:
		if (cfg.Keys == nil && cfg.ParamKeys == nil) || spec.Owns == nil {
			return nil, errors.New("owner route needs Config.Keys or Config.ParamKeys, and an Owns check")
		}
		check := func(r *http.Request, id Identity) error {
			ok, err := spec.Owns(r.Context(), Params(r), id)
			if err != nil {
				return err
			}
			if !ok {
				return apierror.New(apierror.Forbidden, "the signing key does not own this resource")
			}
			return nil
		}
		// The path-aware lookup, when configured, finds the owner's key
		// (and a member's, so that a member is told 403, not 401).
		return d.signed(cfg.Verifier, pathStored, check, spec), nil
	case routes.Member:
		if cfg.ParamKeys == nil && (cfg.Keys == nil || cfg.Members == nil) {
			return nil, errors.New("member route needs Config.ParamKeys, or Config.Keys and Config.Members")
		}
		if cfg.Members == nil {
			// The path-aware lookup found the key within the world:
			// membership is proven by the signature verifying.
			return anonymous(spec, d.signed(cfg.Verifier, pathStored, nil, spec)), nil
		}
		check := func(r *http.Request, id Identity) error {
			ok, err := cfg.Members.IsMember(r.Context(), Params(r), id)
			if err != nil {
				return err
			}
			if !ok {
				return apierror.New(apierror.NotJoined, "the signing key is not a member")
			}
			return nil
		}
		return anonymous(spec, d.signed(cfg.Verifier, pathStored, check, spec)), nil
	}
	return nil, fmt.Errorf("unknown auth kind %q", r.Auth)
}

// anonymous serves the requests spec.Anonymous admits, unsigned, straight
// to the handler, and every other request through signed.
func anonymous(spec Route, signed http.Handler) http.Handler {
	if spec.Anonymous == nil {
		return signed
	}
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_, hasSig := lambdahttp.RawHeader(r, "Signature")
		_, hasInput := lambdahttp.RawHeader(r, "Signature-Input")
		if !hasSig && !hasInput && spec.Anonymous(r) {
			spec.Handler.ServeHTTP(w, r)
			return
		}
		signed.ServeHTTP(w, r)
	})
}

// signed verifies the request's signature with the key lookup keys gives,
// runs check (ownership, membership) on the identity, and only then the
// route's handler.
func (d *Dispatcher) signed(v *auth.Verifier, keys func(*http.Request, []byte) (auth.KeyLookup, error),
	check func(*http.Request, Identity) error, spec Route) http.Handler {
	next := spec.Handler
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		// The request's guard: the nonce claim, the rate-limit count
		// and the membership checks are collected here and written by
		// the handler's first store call (package guard).
		ctx, _ := guard.Begin(r.Context())
		ctx = context.WithValue(ctx, memoKey{}, &memo{})
		r = r.WithContext(ctx)
		body := Body(r)
		lookup, err := keys(r, body)
		if err != nil {
			d.fail(w, r, err)
			return
		}
		stop := func() {}
		if spec.ReadAhead != nil {
			stop = guard.Ahead(r.Context(), spec.ReadAhead(r)...)
		}
		ver, err := v.VerifyRequest(r.Context(), auth.Request{Method: r.Method, Host: r.Host, Path: r.URL.EscapedPath(), Query: r.URL.RawQuery,
			Header: func(name string) (string, bool) { return lambdahttp.RawHeader(r, name) }}, body, lookup)
		stop() // only the key lookup's read issues them
		if err != nil {
			// An *auth.Error is an *apierror.Error: its kind takes the
			// one table like any other.
			d.fail(w, r, err)
			return
		}
		id := Identity{KeyID: ver.KeyID, AWNID: ver.AWNID, PublicKey: ver.PublicKey}
		r = r.WithContext(context.WithValue(r.Context(), identityKey{}, id))
		if check != nil {
			if err := check(r, id); err != nil {
				if gerr := settle(r.Context()); gerr != nil {
					err = gerr
				}
				d.fail(w, r, err)
				return
			}
		}
		held := &heldWriter{w: w, r: r, fail: d.fail}
		next.ServeHTTP(held, r)
		held.end()
	})
}

// heldWriter holds a guarded handler's answer until the request's guard
// has settled: a guard that failed (a replayed nonce, a rate limit, a
// membership gone) answers its own error instead, exactly as when the
// guard was written before the handler ran. A handler that flushes (a
// stream) settles the guard at its first Flush and writes through from
// then on.
type heldWriter struct {
	w       http.ResponseWriter
	r       *http.Request
	fail    func(http.ResponseWriter, *http.Request, error)
	header  http.Header
	status  int
	body    bytes.Buffer
	through bool // flushed: writing straight to w
	failed  bool // the guard refused at a Flush; the rest is dropped
}

func (h *heldWriter) Header() http.Header {
	if h.through {
		return h.w.Header()
	}
	if h.header == nil {
		h.header = http.Header{}
	}
	return h.header
}

func (h *heldWriter) WriteHeader(status int) {
	if h.through {
		if !h.failed {
			h.w.WriteHeader(status)
		}
		return
	}
	if h.status == 0 {
		h.status = status
	}
}

func (h *heldWriter) Write(b []byte) (int, error) {
	if h.through {
		if h.failed {
			return 0, http.ErrHandlerTimeout
		}
		return h.w.Write(b)
	}
	if h.status == 0 {
		h.status = http.StatusOK
	}
	return h.body.Write(b)
}

// Flush settles the guard, then sends what is held and streams the rest.
func (h *heldWriter) Flush() {
	if !h.through {
		h.through = true
		if err := settle(h.r.Context()); err != nil {
			h.failed = true
			h.fail(h.w, h.r, err)
			return
		}
		h.send()
	}
	if f, ok := h.w.(http.Flusher); ok && !h.failed {
		f.Flush()
	}
}

// send writes the held answer to w.
func (h *heldWriter) send() {
	dst := h.w.Header()
	for k, v := range h.header {
		dst[k] = v
	}
	if h.status != 0 {
		h.w.WriteHeader(h.status)
	}
	if h.body.Len() > 0 {
		_, _ = h.w.Write(h.body.Bytes())
	}
}

// end settles a guard still pending (the handler answered without a store
// call) and writes the held answer, or the guard's error in its place.
func (h *heldWriter) end() {
	if h.through {
		return
	}
	if err := settle(h.r.Context()); err != nil {
		h.fail(h.w, h.r, err)
		return
	}
	h.send()
}

// settle settles the request's guard. A part's refusal is already the
// client's answer (401, 429, …); a failure of the store while writing the
// guard (busy, out of time) is the store's, and is answered as every
// domain answers one: 503 with Retry-After, not 500.
func settle(ctx context.Context) error {
	if err := guard.Settle(ctx); err != nil {
		return apierror.FromStore("request guard", err)
	}
	return nil
}

// fail renders err and logs it when it is the server's fault.
func (d *Dispatcher) fail(w http.ResponseWriter, r *http.Request, err error) {
	if e := apierror.From(err); e.Kind == apierror.Internal || e.Kind == apierror.Unavailable {
		d.log.ErrorContext(r.Context(), "request failed", "function", d.fn, "route", RouteOf(r).Key(), "err", err)
	}
	d.render(w, err)
}

// ServeHTTP finds the matched route, reads the body, and runs the route's
// wrapped handler; a request for no route of this function gets 404.
func (d *Dispatcher) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	b, params, ok := d.match(r)
	if !ok {
		d.render(w, apierror.New(apierror.NotFound, "no route %s %s", r.Method, apierror.Quote(r.URL.Path)))
		return
	}
	body, err := io.ReadAll(http.MaxBytesReader(w, r.Body, d.maxBody))
	if err != nil {
		var mbe *http.MaxBytesError
		if errors.As(err, &mbe) {
			d.render(w, apierror.New(apierror.TooLarge, "the request body is over %d bytes", d.maxBody))
			return
		}
		d.render(w, apierror.New(apierror.Invalid, "the request body could not be read"))
		return
	}
	r.Body = io.NopCloser(bytes.NewReader(body))
	ctx := context.WithValue(r.Context(), requestKey{}, &request{route: b.route, params: params, body: body, unknown: d.unknown})
	b.handler.ServeHTTP(w, r.WithContext(ctx))
}

// match returns the route the gateway matched and its path parameters.
// Behind lambdahttp.Entry both are the event's — its routeKey and
// pathParameters — and nothing is matched again. Without an event (a plain
// net/http server, as in tests) the dispatcher matches the path itself,
// exactly as the local gateway does: routes.Match on the unescaped path
// (within Config.Table when one was given).
func (d *Dispatcher) match(r *http.Request) (*bound, map[string]string, bool) {
	if rt, ok := lambdahttp.RouteOf(r.Context()); ok {
		b := d.byKey[rt.Key]
		return b, rt.Params, b != nil
	}
	if !d.custom {
		// The whole table decides, as API Gateway does: a more specific
		// route of another function must not land here.
		rt, params, ok := routes.Match(r.Method, r.URL.Path)
		if !ok {
			return nil, nil, false
		}
		b := d.byKey[rt.Key()]
		return b, params, b != nil
	}
	var b *bound
	var params map[string]string
	best := -1
	for _, cand := range d.byKey {
		if cand.route.Method != "ANY" && cand.route.Method != r.Method {
			continue
		}
		if p, score, ok := routes.MatchPattern(cand.route.Path, r.URL.Path); ok {
			score *= 2
			if cand.route.Method != "ANY" {
				score++
			}
			if score > best {
				b, params, best = cand, p, score
			}
		}
	}
	return b, params, b != nil
}

type (
	identityKey struct{}
	requestKey  struct{}
	memoKey     struct{}
)

// memo holds what one signed request's auth read and its checks may
// reuse (Remember, Recall).
type memo struct {
	mu sync.Mutex
	m  map[any]any
}

// Remember keeps v under key for the rest of the request whose context
// ctx is (its key lookup, its checks, its handler): an owner route's key
// lookup reads the world's manifest, and its ownership check need not read
// it again. Outside a signed request it keeps nothing. key is a
// comparable value of the caller's own type, as for context values.
func Remember(ctx context.Context, key, v any) {
	m, ok := ctx.Value(memoKey{}).(*memo)
	if !ok {
		return
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.m == nil {
		m.m = map[any]any{}
	}
	m.m[key] = v
}

// Recall returns what Remember kept under key in this request.
func Recall(ctx context.Context, key any) (any, bool) {
	m, ok := ctx.Value(memoKey{}).(*memo)
	if !ok {
		return nil, false
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	v, ok := m.m[key]
	return v, ok
}

// request is what the dispatcher learned about a request.
type request struct {
	route   routes.Route
	params  map[string]string
	body    []byte
	unknown strictjson.Unknown
	// decoded is the body as Decode last decoded it, so that a second
	// Decode into the same type (the handler's, after the BodyKey's)
	// reads no byte again.
	decoded *decoded
}

func requestOf(r *http.Request) *request {
	if v, ok := r.Context().Value(requestKey{}).(*request); ok {
		return v
	}
	return &request{}
}

// IdentityFrom returns the identity that signed the request, on signed,
// owner and member routes.
func IdentityFrom(ctx context.Context) (Identity, bool) {
	id, ok := ctx.Value(identityKey{}).(Identity)
	return id, ok
}

// Body returns the request body the dispatcher read (nil outside one).
func Body(r *http.Request) []byte { return requestOf(r).body }

// Params returns the path parameters of the matched route.
func Params(r *http.Request) map[string]string { return requestOf(r).params }

// Param returns one path parameter of the matched route.
func Param(r *http.Request, name string) string { return requestOf(r).params[name] }

// RouteOf returns the matched route of the table.
func RouteOf(r *http.Request) routes.Route { return requestOf(r).route }
