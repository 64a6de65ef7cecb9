// Package worldhttp is the HTTP surface of the worlds (/v0/worlds/{world}/…):
// create and read a world, join and leave it, list its agents, send and read
// direct messages, ping a member, submit actions, poll events, and the
// world's A2A Agent Card. The webhook routes are package webhookhttp's.
//
// Each route is its own Lambda function (world-put, world-get, …), so there
// is one constructor per function (NewPut, NewGet, …): a function's main
// calls exactly one and the linker drops the others' code. Every handler is
// written against the small interface it consumes (Worlds, Joiner, Sender…),
// which the domains (shared/world, shared/inbox, shared/ratelimit) satisfy
// and the tests fake.
//
// Auth is the route table's, through shared/access: member routes look the
// signing key up within the world in the path (MemberKeys), so a key that is
// no member of it gets 401 NOT_JOINED; join and the first PUT of a world are
// verified against the publicKey in the body; an update by the owner may omit
// it. After auth, a rate-limited route asks the Limiter once. Answers are
// {"ok": true, "data": …} with camelCase fields; errors render through
// httperr.WriteWorld as {"ok": false, "error": {code, message}}.
package worldhttp

import (
	"bytes"
	"context"
	"crypto/ed25519"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"time"

	"github.com/a2awire/a2awire/shared/access"
	"github.com/a2awire/a2awire/shared/apierror"
	"github.com/a2awire/a2awire/shared/auth"
	"github.com/a2awire/a2awire/shared/httperr"
	"github.com/a2awire/a2awire/shared/routes"
	"github.com/a2awire/a2awire/shared/store/guard"
	"github.com/a2awire/a2awire/shared/strictjson"
)

// MemberKeys is the key lookup of member routes: the public key and awnId
// of the member of world whose keyid is keyID; no such member is an
// *apierror.Error of kind NotJoined (world.Service.MemberKey).
type MemberKeys interface {
	MemberKey(ctx context.Context, world, keyID string) (ed25519.PublicKey, string, error)
}

// Limiter admits one request of op by awnID in world, or answers an
// *apierror.Error of kind RateLimited with RetryAfter
// (ratelimit.Limiter.Allow).
type Limiter interface {
	Allow(ctx context.Context, world, awnID string, op RateOp) error
}

// Options are the dependencies every world handler shares; EnvOptions
// builds them in Lambda, the harness from its store.
type Options struct {
	// Log receives server-side failures; nil discards them.
	Log *slog.Logger
	// Verifier checks signatures (signed and member routes).
	Verifier *auth.Verifier
	// Members finds signing keys within a world (member routes).
	Members MemberKeys
	// Limiter enforces the per-agent rate limits (agents, messages,
	// ping, actions).
	Limiter Limiter
	// BaseURL is the deployment's public URL (BASE_URL) the world Agent
	// Card names; NewCard requires it.
	BaseURL string
	// Now is the clock the handlers' domains run on (NewDeps passes it to
	// them); nil means time.Now.
	Now func() time.Time
	// MaxBody bounds request bodies; zero means access.DefaultMaxBody.
	MaxBody int64
	// Function is the function the handler is (its folder under
	// functions/): the handler serves that function's routes of the table.
	Function string
	// Table overrides the route table (tests); each function serves its
	// own routes of it.
	Table []routes.Route
}

func (o Options) logger() *slog.Logger {
	if o.Log != nil {
		return o.Log
	}
	return slog.New(slog.DiscardHandler)
}

// handlerFunc is a route's handler that returns its error for rendering.
type handlerFunc func(http.ResponseWriter, *http.Request) error

// serve builds the dispatcher of function o.Function: f serves each of its
// routes in the table (bodyKey, on signed routes, reads the signing key
// from the body). Member routes verify against o.Members, signed ones
// against their body key (and paramKeys when the body carries none).
func serve(o Options, paramKeys access.ParamKeyLookup, f handlerFunc, bodyKey func(*http.Request) (ed25519.PublicKey, error), more ...func(*access.Route)) (http.Handler, error) {
	fn := o.Function
	if fn == "" {
		return nil, errors.New("worldhttp: Options.Function names no function")
	}
	log := o.Log
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	table := o.Table
	if table == nil {
		table = routes.All()
	}
	rs := map[string]access.Route{}
	var own []routes.Route
	for _, rt := range table {
		if rt.Function != fn {
			continue
		}
		own = append(own, rt)
		key := rt.Key()
		route := access.Route{BodyKey: bodyKey, Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			if err := f(w, r); err != nil {
				if k := apierror.KindOf(err); k == apierror.Internal || k == apierror.Unavailable {
					log.ErrorContext(r.Context(), "world request failed", "function", fn, "route", key, "err", err)
				}
				httperr.WriteWorld(w, err)
			}
		})}
		for _, m := range more {
			m(&route)
		}
		rs[key] = route
	}
	if len(own) == 0 {
		return nil, fmt.Errorf("worldhttp: function %s serves no route of the table", fn)
	}
	if paramKeys == nil && o.Members != nil {
		members := o.Members
		paramKeys = func(ctx context.Context, params map[string]string, keyID string) (ed25519.PublicKey, error) {
			pub, _, err := members.MemberKey(ctx, params["world"], keyID)
			if err != nil {
				return nil, fmt.Errorf("worldhttp: member key: %w", err)
			}
			return pub, nil
		}
	}
	d, err := access.New(access.Config{
		Function:  fn,
		Table:     custom(o.Table, own),
		Routes:    rs,
		Verifier:  o.Verifier,
		ParamKeys: paramKeys,
		Render:    httperr.WriteWorld,
		MaxBody:   o.MaxBody,
		// A misspelt field is an error the client sees, never
		// silently dropped.
		UnknownFields: strictjson.RefuseUnknown,
		Log:           log,
	})
	if err != nil {
		return nil, fmt.Errorf("worldhttp: %s: %w", fn, err)
	}
	return d, nil
}

// readAhead names a route's first reads, read ahead beside its key
// lookup's read (access.Route.ReadAhead).
func readAhead(f func(r *http.Request) []guard.Read) func(*access.Route) {
	return func(rt *access.Route) { rt.ReadAhead = f }
}

// caller is the world in the path and the awnId that signed.
func caller(r *http.Request) (world, awnID string, err error) {
	id, ok := access.IdentityFrom(r.Context())
	if !ok {
		return "", "", errors.New("worldhttp: no identity on an authenticated route")
	}
	return access.Param(r, "world"), id.AWNID, nil
}

// limited runs the rate limit of op for the caller, then next.
func limited(o Options, op RateOp, next func(w http.ResponseWriter, r *http.Request, world, awnID string) error) handlerFunc {
	return func(w http.ResponseWriter, r *http.Request) error {
		world, awnID, err := caller(r)
		if err != nil {
			return err
		}
		if o.Limiter != nil {
			if err := o.Limiter.Allow(r.Context(), world, awnID, op); err != nil {
				return fmt.Errorf("worldhttp: rate limit %s: %w", op, err)
			}
		}
		return next(w, r, world, awnID)
	}
}

// needLimiter is the start-up check of a rate-limited route.
func needLimiter(o Options) error {
	if o.Limiter == nil {
		return fmt.Errorf("worldhttp: %s: no rate limiter", o.Function)
	}
	return nil
}

// reply writes the world envelope {"ok": true, "data": v}.
func reply(w http.ResponseWriter, status int, v any) error {
	b, err := json.Marshal(struct {
		OK   bool `json:"ok"`
		Data any  `json:"data"`
	}{true, v})
	if err != nil {
		return fmt.Errorf("worldhttp: encode answer: %w", err)
	}
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("Cache-Control", "no-store")
	w.WriteHeader(status)
	_, _ = w.Write(append(b, '\n'))
	return nil
}

// created is 201 for something new, 200 for what was there.
func created(isNew bool) int {
	if isNew {
		return http.StatusCreated
	}
	return http.StatusOK
}

// emptyBody accepts an empty body or an empty JSON object (leave).
func emptyBody(r *http.Request) error {
	if len(bytes.TrimSpace(access.Body(r))) == 0 {
		return nil
	}
	var none struct{}
	return access.Decode(r, &none)
}

// timestamp renders t for clients: RFC 3339 in UTC with the precision kept.
func timestamp(t time.Time) string { return t.UTC().Format(time.RFC3339Nano) }

// object is raw when it is a JSON object, else nil (rendered null).
func object(raw json.RawMessage) json.RawMessage {
	t := bytes.TrimSpace(raw)
	if len(t) == 0 || t[0] != '{' {
		return nil
	}
	return raw
}

// custom is the table access matches within: nil (the route table, as
// deployed) unless a test gave its own, then that function's rows of it.
func custom(given, own []routes.Route) []routes.Route {
	if given == nil {
		return nil
	}
	return own
}
