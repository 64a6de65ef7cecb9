// Package webhookhttp is the HTTP surface of a member's webhook
// (docs/webhooks.md): PUT registers the URL and shows the new secret once,
// GET shows the URL and delivery stats, DELETE removes it, POST …/replay
// re-sends dead letters. One constructor per function (world-webhook-set,
// -show, -remove,
// -replay), so each Lambda's main calls exactly one and the linker drops the
// others.
//
// The storage is helper G's shared/webhook; this package names only what it
// needs of it (the Store interfaces below), so the wiring adapts one to the
// other. Auth is the route table's "member" through shared/access.
package webhookhttp

import (
	"context"
	"crypto/ed25519"
	"encoding/json"
	"errors"
	"fmt"
	"github.com/a2awire/a2awire/shared/webhook"
	"log/slog"
	"net/http"
	"time"

	"github.com/a2awire/a2awire/shared/access"
	"github.com/a2awire/a2awire/shared/apierror"
	"github.com/a2awire/a2awire/shared/auth"
	"github.com/a2awire/a2awire/shared/egress"
	"github.com/a2awire/a2awire/shared/httperr"
	"github.com/a2awire/a2awire/shared/routes"
)

// Setter stores a member's webhook URL with a fresh secret, replacing any
// earlier one, and returns the secret.
type Setter interface {
	Set(ctx context.Context, world, awnID, url string) (secret string, err error)
}

// Shower reads a member's webhook; none is a NotFound *apierror.Error.
type Shower interface {
	Show(ctx context.Context, world, awnID string) (webhook.View, error)
}

// Remover deletes a member's webhook; none is a NotFound *apierror.Error.
type Remover interface {
	Remove(ctx context.Context, world, awnID string) error
}

// Replayer re-sends a member's dead-lettered deliveries made since a time
// and returns how many it scheduled.
type Replayer interface {
	Replay(ctx context.Context, world, awnID string, since time.Time) (int, error)
}

// Auth is what the member routes' middleware needs: the verifier and the
// member key lookup of every world function (MemberKeys over
// worldhttp.Deps).
type Auth struct {
	Verifier *auth.Verifier
	Keys     auth.KeyLookup
	// ParamKeys finds the signing key of a member of the world in the
	// path (world.Service.MemberKey); it decides membership itself, so
	// Keys and Members may then be left nil.
	ParamKeys access.ParamKeyLookup
	Members   access.MemberLookup
	// Table overrides the route table (tests); each function serves its
	// own routes of it.
	Table []routes.Route
}

// Options are a handler's dependencies.
type Options struct {
	Log  *slog.Logger
	Auth Auth
	// URLs is the policy PUT validates URLs with (egress.ValidateURL): the
	// zero value (https, public hosts) in Lambda; the harness allows http
	// and loopback.
	URLs egress.Options
	// Function is the function the handler is (its folder under
	// functions/): the handler serves that function's routes of the table.
	Function string
}

// serve builds the access dispatcher of function o.Function: f serves its
// routes of the table.
func serve(o Options, f func(http.ResponseWriter, *http.Request) error) (http.Handler, error) {
	fn := o.Function
	if fn == "" {
		return nil, errors.New("webhookhttp: Options.Function names no function")
	}
	if o.Log == nil {
		o.Log = slog.New(slog.DiscardHandler)
	}
	log := o.Log
	wrapped := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if err := f(w, r); err != nil {
			if k := apierror.KindOf(err); k == apierror.Internal || k == apierror.Unavailable {
				log.ErrorContext(r.Context(), "webhook request failed", "function", fn, "err", err)
			}
			httperr.WriteWorld(w, err)
		}
	})
	table := o.Auth.Table
	if table == nil {
		table = routes.All()
	}
	var own []routes.Route
	rs := map[string]access.Route{}
	for _, r := range table {
		if r.Function == fn {
			own = append(own, r)
			rs[r.Key()] = access.Route{Handler: wrapped}
		}
	}
	if len(own) == 0 {
		return nil, fmt.Errorf("webhookhttp: function %s serves no route of the table", fn)
	}
	d, err := access.New(access.Config{
		Function:  fn,
		Table:     custom(o.Auth.Table, own),
		Routes:    rs,
		Verifier:  o.Auth.Verifier,
		Keys:      o.Auth.Keys,
		ParamKeys: o.Auth.ParamKeys,
		Members:   o.Auth.Members,
		Render:    httperr.WriteWorld,
		Log:       o.Log,
	})
	if err != nil {
		return nil, fmt.Errorf("webhookhttp: %s: %w", fn, err)
	}
	return d, nil
}

// caller is the world in the path and the member who signed.
func caller(r *http.Request) (world, awnID string, err error) {
	id, ok := access.IdentityFrom(r.Context())
	if !ok {
		return "", "", errors.New("webhookhttp: no identity on a member route")
	}
	return access.Param(r, "world"), id.AWNID, nil
}

// MemberKeys is the path-aware key lookup of member routes over a world
// member lookup (world.Service.MemberKey): the key of keyID's member of the
// world in the path, NotJoined when there is none.
func MemberKeys(m interface {
	MemberKey(ctx context.Context, world, keyID string) (ed25519.PublicKey, string, error)
}) access.ParamKeyLookup {
	return func(ctx context.Context, params map[string]string, keyID string) (ed25519.PublicKey, error) {
		pub, _, err := m.MemberKey(ctx, params["world"], keyID)
		if err != nil {
			return nil, fmt.Errorf("webhookhttp: member key: %w", err)
		}
		return pub, nil
	}
}

// ok writes the world envelope {"ok": true, "data": v}.
func ok(w http.ResponseWriter, status int, v any) error {
	b, err := json.Marshal(struct {
		OK   bool `json:"ok"`
		Data any  `json:"data"`
	}{true, v})
	if err != nil {
		return fmt.Errorf("webhookhttp: encode answer: %w", err)
	}
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("Cache-Control", "no-store")
	w.WriteHeader(status)
	_, _ = w.Write(b)
	return nil
}

// NewSet serves PUT /v0/worlds/{world}/webhook: {"url"} → {url, secret}.
// The secret is in this answer only.
func NewSet(o Options, store Setter) (http.Handler, error) {
	if store == nil {
		return nil, errors.New("webhookhttp: no webhook store")
	}
	return serve(o, func(w http.ResponseWriter, r *http.Request) error {
		world, awnID, err := caller(r)
		if err != nil {
			return err
		}
		var in struct {
			URL *string `json:"url"`
		}
		if err := access.Decode(r, &in); err != nil {
			return err
		}
		if in.URL == nil || *in.URL == "" {
			return apierror.New(apierror.Invalid, "url is required")
		}
		u, err := egress.ValidateURL(*in.URL, o.URLs)
		if err != nil {
			return err
		}
		secret, err := store.Set(r.Context(), world, awnID, u.String())
		if err != nil {
			return fmt.Errorf("webhookhttp: set webhook: %w", err)
		}
		return ok(w, http.StatusOK, map[string]string{"url": u.String(), "secret": secret})
	})
}

// NewShow serves GET /v0/worlds/{world}/webhook: the URL and its stats.
func NewShow(o Options, store Shower) (http.Handler, error) {
	if store == nil {
		return nil, errors.New("webhookhttp: no webhook store")
	}
	return serve(o, func(w http.ResponseWriter, r *http.Request) error {
		world, awnID, err := caller(r)
		if err != nil {
			return err
		}
		v, err := store.Show(r.Context(), world, awnID)
		if err != nil {
			return fmt.Errorf("webhookhttp: show webhook: %w", err)
		}
		return ok(w, http.StatusOK, v)
	})
}

// NewRemove serves DELETE /v0/worlds/{world}/webhook.
func NewRemove(o Options, store Remover) (http.Handler, error) {
	if store == nil {
		return nil, errors.New("webhookhttp: no webhook store")
	}
	return serve(o, func(w http.ResponseWriter, r *http.Request) error {
		world, awnID, err := caller(r)
		if err != nil {
			return err
		}
		if err := store.Remove(r.Context(), world, awnID); err != nil {
			return fmt.Errorf("webhookhttp: remove webhook: %w", err)
		}
		return ok(w, http.StatusOK, map[string]bool{"removed": true})
	})
}

// NewReplay serves POST /v0/worlds/{world}/webhook/replay: {"since"}
// (RFC 3339, required) → {replayed}.
func NewReplay(o Options, store Replayer) (http.Handler, error) {
	if store == nil {
		return nil, errors.New("webhookhttp: no webhook store")
	}
	return serve(o, func(w http.ResponseWriter, r *http.Request) error {
		world, awnID, err := caller(r)
		if err != nil {
			return err
		}
		var in struct {
			Since *string `json:"since"`
		}
		if err := access.Decode(r, &in); err != nil {
			return err
		}
		if in.Since == nil {
			return apierror.New(apierror.Invalid, "since is required (RFC 3339)")
		}
		since, err := time.Parse(time.RFC3339Nano, *in.Since)
		if err != nil {
			return apierror.New(apierror.Invalid, "since is not an RFC 3339 time")
		}
		n, err := store.Replay(r.Context(), world, awnID, since)
		if err != nil {
			return fmt.Errorf("webhookhttp: replay: %w", err)
		}
		return ok(w, http.StatusOK, map[string]int{"replayed": n})
	})
}

// custom is the table access matches within: nil (the route table, as
// deployed) unless a test gave its own, then that function's rows of it.
func custom(given, own []routes.Route) []routes.Route {
	if given == nil {
		return nil
	}
	return own
}
