// Package registryapi is the HTTP surface of the registry function (the
// registry, the network's Agent Card, the key directories): agents register
// under a name bound to their first key, are discovered by capability and
// status, go online and offline, and their keys are served as Web Bot Auth
// key directories. The domain is shared/registry; this package only decodes,
// dispatches and renders.
//
// Every route and its auth come from the route table through
// shared/access: the registry POST is signed by the key in its body, the
// presence PUT and the DELETE by the name's owner, the rest is public. Errors use the
// registry surface's {"error", "message"} shape.
package registryapi

import (
	"bytes"
	"context"
	"crypto/ed25519"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"strconv"
	"sync"
	"time"

	"github.com/a2awire/a2awire/shared/access"
	"github.com/a2awire/a2awire/shared/agentcard"
	"github.com/a2awire/a2awire/shared/apierror"
	"github.com/a2awire/a2awire/shared/auth"
	"github.com/a2awire/a2awire/shared/httperr"
	"github.com/a2awire/a2awire/shared/registry"
	"github.com/a2awire/a2awire/shared/store"
	"github.com/a2awire/a2awire/shared/store/guard"
	"github.com/a2awire/a2awire/shared/world"
)

// Function is the functions/ folder (and route-table name) this package
// serves.
const Function = "registry"

// Discovery page sizes, the domain's.
const (
	DefaultLimit = registry.DefaultLimit
	MaxLimit     = registry.MaxLimit
)

// Options are the handler's dependencies, which main builds from env.
type Options struct {
	// Log receives server-side failures.
	Log *slog.Logger
	// Store holds registrations and the nonce guard's items.
	Store store.Store
	// NetworkKey is the network's own public signing key, served at
	// /.well-known/http-message-signatures-directory; nil answers 404.
	NetworkKey ed25519.PublicKey
	// BaseURL is the deployment's public URL (BASE_URL) the network Agent
	// Card names (agentcard.ParseBaseURL); empty answers the card 404, as
	// the card is never built from the request's Host.
	BaseURL string
	// A2ABaseURL is the base URL the A2A bridge answers below
	// (A2A_BASE_URL: the bridge's function URL in the cloud); empty means
	// BaseURL, the same origin (the harness).
	A2ABaseURL string
	// AllowInsecureEndpoints lets agents register http:// endpoints (the
	// local harness).
	AllowInsecureEndpoints bool
	// CursorSecret keys discovery cursors (registry.WithCursorSecret): the
	// network's signing key, the deploy's secret in the cloud and the
	// harness's key file locally, so that every instance accepts the
	// cursors of the others. Empty: a random key per instance.
	CursorSecret []byte
	// Now is the clock of the verifier and the registry; nil means
	// time.Now.
	Now func() time.Time
}

// handler holds the routes' dependencies.
type handler struct {
	log *slog.Logger
	reg *registry.Registry
	// keys finds an owner route's signing key, remembering those
	// verified here (registry.KeyLookup).
	keys *registry.KeyLookup
	// joined guesses the worlds an agent joined (joinedCache).
	joined *joinedCache
	// worlds carries a registration's presence to the worlds its agent
	// joined (world.Service.SetRegistryPresence).
	worlds     *world.Service
	networkKey ed25519.PublicKey
	baseURL    string
	// a2aBaseURL is where the A2A bridge answers (A2ABaseURL); "" is
	// baseURL.
	a2aBaseURL string
}

// New returns the registry function's http.Handler: every route of the
// function in the route table, behind the auth middleware the table names.
func New(o Options) (http.Handler, error) {
	if o.Store == nil {
		return nil, errors.New("registryapi: no store")
	}
	if o.Log == nil {
		o.Log = slog.New(slog.DiscardHandler)
	}
	if o.Now == nil {
		o.Now = time.Now
	}
	if o.NetworkKey != nil && len(o.NetworkKey) != ed25519.PublicKeySize {
		return nil, errors.New("registryapi: network key is not a 32-byte Ed25519 public key")
	}
	var base string
	if o.BaseURL != "" {
		var err error
		if base, err = agentcard.ParseBaseURL(o.BaseURL); err != nil {
			return nil, fmt.Errorf("registryapi: %w", err)
		}
	}
	var a2aBase string
	if o.A2ABaseURL != "" {
		var err error
		if a2aBase, err = agentcard.ParseBaseURL(o.A2ABaseURL); err != nil {
			return nil, fmt.Errorf("registryapi: A2A base URL: %w", err)
		}
	}
	opts := []registry.Option{registry.WithClock(o.Now)}
	if o.AllowInsecureEndpoints {
		opts = append(opts, registry.AllowInsecureEndpoints())
	}
	if o.NetworkKey != nil {
		// The network key owns the five fixtures (fixtures/seed); any other
		// key registers one name.
		opts = append(opts, registry.SharedKey(o.NetworkKey))
	}
	opts = append(opts, registry.WithCursorSecret(o.CursorSecret))
	h := &handler{
		log:        o.Log,
		reg:        registry.New(o.Store, opts...),
		worlds:     world.New(o.Store, world.WithClock(o.Now)),
		networkKey: o.NetworkKey,
		baseURL:    base,
		a2aBaseURL: a2aBase,
	}
	h.keys = h.reg.NewKeyLookup()
	h.joined = newJoinedCache()
	d, err := access.New(access.Config{
		Function: Function,
		Routes: map[string]access.Route{
			"POST /api/v1/agents":                                {Handler: h.fn(h.register), BodyKey: registerKey},
			"GET /api/v1/agents":                                 {Handler: h.fn(h.discover)},
			"GET /api/v1/agents/{name}":                          {Handler: h.fn(h.profile)},
			"PUT /api/v1/agents/{name}/presence":                 {Handler: h.fn(h.presence), Owns: h.ownsWithWorlds(carriedAlways), ReadAhead: profileAhead},
			"DELETE /api/v1/agents/{name}":                       {Handler: h.fn(h.unregister), Owns: h.ownsWithWorlds(carriedWhenOffline), ReadAhead: profileAhead},
			"GET /api/v1/keys/{keyid}":                           {Handler: h.fn(h.key)},
			"GET /.well-known/http-message-signatures-directory": {Handler: h.fn(h.networkDirectory)},
			"GET /.well-known/agent-card.json":                   {Handler: h.fn(h.card)},
			"GET /.well-known/agent.json":                        {Handler: h.fn(h.card)},
		},
		Verifier: auth.NewVerifier(auth.NewNonces(o.Store), o.Now),
		Keys:     h.lookupKey,
		Render:   httperr.WriteRegistry,
		Log:      o.Log,
	})
	if err != nil {
		return nil, fmt.Errorf("registryapi: %w", err)
	}
	return d, nil
}

// fn adapts a handler that returns its error; the error is rendered in
// the registry's shape and logged when it is the server's fault.
func (h *handler) fn(f func(http.ResponseWriter, *http.Request) error) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if err := f(w, r); err != nil {
			if k := apierror.KindOf(err); k == apierror.Internal || k == apierror.Unavailable {
				h.log.ErrorContext(r.Context(), "registry request failed", "route", access.RouteOf(r).Key(), "err", err)
			}
			httperr.WriteRegistry(w, err)
		}
	})
}

// registerBody is the body of POST /api/v1/agents.
type registerBody struct {
	Name         string   `json:"name"`
	Description  string   `json:"description"`
	Endpoint     string   `json:"endpoint"`
	Capabilities []string `json:"capabilities"`
	PublicKey    string   `json:"public_key"`
}

// registerKey is the registry POST's key: the body's public_key, whose
// thumbprint the verifier then requires to be the signature's keyid. The
// body is decoded here, once: register's access.Decode takes the value.
func registerKey(r *http.Request) (ed25519.PublicKey, error) {
	var b registerBody
	if err := access.Decode(r, &b); err != nil {
		return nil, err
	}
	if b.PublicKey == "" {
		return nil, apierror.New(apierror.Invalid, "public_key is required")
	}
	pub, err := auth.DecodePublicKey(b.PublicKey)
	if errors.Is(err, auth.ErrUnsafeKey) {
		return nil, apierror.New(apierror.Invalid, "public_key must be a safe Ed25519 public key (not small-order, canonically encoded)")
	}
	if err != nil {
		return nil, apierror.New(apierror.Invalid, "public_key must be the standard base64 of a 32-byte Ed25519 key")
	}
	return pub, nil
}

// profileAhead names the profile in an owner route's path as its first
// read, read beside the key lookup's on an instance that has not seen the
// key.
func profileAhead(r *http.Request) []guard.Read {
	return registry.ProfileReads(access.Param(r, "name"))
}

// lookupKey is the stored-key lookup of owner routes: a registered key by
// its keyid.
func (h *handler) lookupKey(ctx context.Context, keyID string) (ed25519.PublicKey, error) {
	return h.keys.Lookup(ctx, keyID)
}

// owns: the name in the path is bound to the signing key. A name that is
// not registered is 404, as for everyone. The profile it read is kept for
// the handler's change (owned), which is conditioned on it.
func (h *handler) owns(ctx context.Context, params map[string]string, id access.Identity) (bool, error) {
	read, err := h.reg.Read(ctx, params["name"])
	if err != nil {
		return false, err
	}
	access.Remember(ctx, ownedKey(params["name"]), read)
	return read.Agent.KeyID == id.KeyID, nil
}

// ownsWithWorlds is owns for a change that may be carried to the worlds
// the agent joined (a presence change always; a delete when the agent is
// offline: carried says which, of the profile as read). The worlds'
// listing runs beside the profile's read, so the change's first reads of
// those worlds go beside its write.
//
// When this instance has seen the agent's worlds before (joinedCache), it
// reads the agent's member and webhook in each of them beside too, so
// that the change's writes to the worlds go beside its own write: the
// route is then 2 round trips, whatever the number of worlds.
//
// When the profile was read ahead beside the key (an instance that had
// not seen the key), it is known at once: the worlds are listed only if
// the change is carried there.
func (h *handler) ownsWithWorlds(carried func(registry.Revision) bool) func(context.Context, map[string]string, access.Identity) (bool, error) {
	return func(ctx context.Context, params map[string]string, id access.Identity) (bool, error) {
		if _, kept := guard.Kept(ctx, registry.ProfileKey(params["name"])); kept {
			ok, err := h.owns(ctx, params, id)
			if read, known := owned(ctx, params["name"]); err == nil && ok && known && carried(read) {
				// A failed listing is made again by the change.
				if worlds, err := h.worlds.JoinedWorlds(ctx, auth.AWNID(id.PublicKey)); err == nil {
					access.Remember(ctx, joinedKey(params["name"]), worlds)
				}
			}
			return ok, err
		}
		return h.ownsListing(ctx, params, id)
	}
}

// carriedAlways and carriedWhenOffline say whether a change of the profile
// as read is carried to the worlds its agent joined: a presence change
// always, a delete when it lifts an offline override.
func carriedAlways(registry.Revision) bool { return true }
func carriedWhenOffline(r registry.Revision) bool {
	return r.Agent.Status == registry.Offline
}

// ownsListing is ownsWithWorlds on a profile not yet read: the owner
// check, the worlds' listing and the guessed worlds' reads side by side.
func (h *handler) ownsListing(ctx context.Context, params map[string]string, id access.Identity) (bool, error) {
	awnID := auth.AWNID(id.PublicKey)
	var worlds []string
	var werr error
	var ahead *world.PresenceReads
	var wg sync.WaitGroup
	wg.Go(func() { worlds, werr = h.worlds.JoinedWorlds(ctx, awnID) })
	if guess, ok := h.joined.get(awnID); ok && len(guess) > 0 {
		wg.Go(func() { ahead = h.worlds.ReadPresenceIn(ctx, awnID, guess) })
	}
	ok, err := h.owns(ctx, params, id)
	wg.Wait()
	if err == nil && werr == nil {
		access.Remember(ctx, joinedKey(params["name"]), worlds)
		if ahead != nil {
			access.Remember(ctx, aheadKey(params["name"]), ahead)
		}
	}
	return ok, err
}

// ownedKey, joinedKey and aheadKey are the request memo's keys of the
// profile owns read, of the worlds ownsWithWorlds listed and of what it
// read of them.
type (
	ownedKey  string
	joinedKey string
	aheadKey  string
)

// owned returns the profile owns read in this request for name.
func owned(ctx context.Context, name string) (registry.Revision, bool) {
	v, ok := access.Recall(ctx, ownedKey(name))
	if !ok {
		return registry.Revision{}, false
	}
	read, ok := v.(registry.Revision)
	return read, ok
}

// register binds a name to the signing key (201) or updates the owner's
// registration (200); another key's name is 409 name_taken.
func (h *handler) register(w http.ResponseWriter, r *http.Request) error {
	var b registerBody
	if err := access.Decode(r, &b); err != nil {
		return err
	}
	id, ok := access.IdentityFrom(r.Context())
	if !ok {
		return apierror.New(apierror.Unauthorized, "request is not signed")
	}
	a, created, err := h.reg.Register(r.Context(), registry.Agent{
		Name:         b.Name,
		Description:  b.Description,
		Endpoint:     b.Endpoint,
		Capabilities: b.Capabilities,
		PublicKey:    id.PublicKey,
	})
	if err != nil {
		return err
	}
	h.keys.Remember(id.PublicKey) // verified, and now registered
	status := http.StatusOK
	if created {
		status = http.StatusCreated
	}
	writeJSON(w, status, map[string]any{"agent": toProfile(a)})
	return nil
}

// discover lists agents by capability and status, a page at a time.
func (h *handler) discover(w http.ResponseWriter, r *http.Request) error {
	q := r.URL.Query()
	for k, v := range q {
		if len(v) > 1 {
			return apierror.New(apierror.Invalid, "query parameter %s is repeated", apierror.Quote(k))
		}
	}
	f := registry.Filter{Capability: q.Get("capability"), Cursor: q.Get("cursor"), Limit: DefaultLimit}
	switch s := q.Get("status"); s {
	case "", "online", "offline", "any":
		f.Status = s
	default:
		return apierror.New(apierror.Invalid, "status must be online, offline or any")
	}
	if s, ok := q["limit"]; ok {
		n, err := strconv.Atoi(s[0])
		if err != nil || n < 1 || n > MaxLimit {
			return apierror.New(apierror.Invalid, "limit must be an integer from 1 to %d", MaxLimit)
		}
		f.Limit = n
	}
	page, err := h.reg.Discover(r.Context(), f)
	if err != nil {
		return err
	}
	agents := make([]profile, 0, len(page.Agents))
	for _, a := range page.Agents {
		agents = append(agents, toProfile(a))
	}
	var next *string
	if page.Next != "" {
		next = &page.Next
	}
	writeJSON(w, http.StatusOK, map[string]any{"agents": agents, "next_cursor": next})
	return nil
}

// profile serves one agent's profile.
func (h *handler) profile(w http.ResponseWriter, r *http.Request) error {
	a, err := h.reg.Get(r.Context(), access.Param(r, "name"))
	if err != nil {
		return err
	}
	writeJSON(w, http.StatusOK, toProfile(a))
	return nil
}

// presence sets the owner's status.
func (h *handler) presence(w http.ResponseWriter, r *http.Request) error {
	var b struct {
		Status string `json:"status"`
	}
	if err := access.Decode(r, &b); err != nil {
		return err
	}
	// The registry checks the status (SetPresence): once, in the domain.
	id, ok := access.IdentityFrom(r.Context())
	if !ok {
		return apierror.New(apierror.Unauthorized, "request is not signed")
	}
	// Offline overrides the agent's presence in every world it joined;
	// online lifts that. Retrying the PUT finishes a fan-out cut short.
	s := registry.Status(b.Status)
	a, err := h.apply(r, ownerChange{
		carried: carriedAlways, offline: s == registry.Offline,
		valid: s == registry.Online || s == registry.Offline, // else the registry's 400
		from: func(read registry.Revision) (registry.Agent, error) {
			return h.reg.SetPresenceFrom(r.Context(), read, id.PublicKey, s)
		},
		fresh: func() (registry.Agent, error) {
			return h.reg.SetPresence(r.Context(), access.Param(r, "name"), id.PublicKey, s)
		},
	}, id)
	if err != nil {
		return err
	}
	writeJSON(w, http.StatusOK, map[string]any{"agent": toProfile(a)})
	return nil
}

// unregister removes the owner's registration: 200 {"agent": the profile
// as it was}. The name and the key are free at once; the agent stays
// joined to its worlds (no longer overridden offline there).
func (h *handler) unregister(w http.ResponseWriter, r *http.Request) error {
	if len(bytes.TrimSpace(access.Body(r))) > 0 {
		var none struct{}
		if err := access.DecodeJSON(access.Body(r), &none); err != nil {
			return err
		}
	}
	id, ok := access.IdentityFrom(r.Context())
	if !ok {
		return apierror.New(apierror.Unauthorized, "request is not signed")
	}
	// An offline agent's override is lifted in its worlds.
	a, err := h.apply(r, ownerChange{
		carried: carriedWhenOffline, offline: false, valid: true,
		from: func(read registry.Revision) (registry.Agent, error) {
			return h.reg.UnregisterFrom(r.Context(), read, id.PublicKey)
		},
		fresh: func() (registry.Agent, error) {
			return h.reg.Unregister(r.Context(), access.Param(r, "name"), id.PublicKey)
		},
	}, id)
	if err != nil {
		return err
	}
	writeJSON(w, http.StatusOK, map[string]any{"agent": toProfile(a)})
	return nil
}

// ownerChange is an owner route's change of the profile in its path, and
// how it is carried to the worlds its agent joined.
type ownerChange struct {
	// carried says, of the profile as read, whether the change goes to
	// the worlds; offline is the override they get.
	carried func(registry.Revision) bool
	offline bool
	// valid says the change is one the registry takes, so the worlds'
	// writes may go beside the registry's.
	valid bool
	// from makes the change of the profile owns read; fresh reads it
	// first (a request owns did not check).
	from  func(registry.Revision) (registry.Agent, error)
	fresh func() (registry.Agent, error)
}

// apply makes c and carries it to the worlds the agent joined, in as few
// round trips as what ownsWithWorlds read allows:
//
//   - it read every world the agent joined (its guess was right): the
//     worlds' writes go beside the registry's, in the second round trip.
//     Ownership was settled by owns; a registry write that fails after
//     the worlds' (the profile changed meanwhile, more than the
//     registry's attempts) answers its error, and the retry the client
//     makes finishes both, as a fan-out cut short does;
//   - it listed the worlds: their member and webhook reads go beside the
//     registry's write, their writes after it;
//   - else the listing goes beside the registry's write.
//
// Both are of the signing key's agent, the only one the change can be of
// (the registry refuses any other key).
func (h *handler) apply(r *http.Request, c ownerChange, id access.Identity) (registry.Agent, error) {
	ctx, name := r.Context(), access.Param(r, "name")
	read, ok := owned(ctx, name)
	if !ok {
		a, err := c.fresh()
		if err != nil || !c.carried(registry.Revision{Agent: a}) {
			return a, err
		}
		worlds, err := h.worlds.JoinedWorlds(ctx, a.AWNID)
		if err != nil {
			return registry.Agent{}, err
		}
		return a, h.carry(ctx, a.AWNID, worlds, c.offline, nil)
	}
	if !c.carried(read) {
		return c.from(read)
	}
	awnID := auth.AWNID(id.PublicKey)
	var worlds []string
	var reads *world.PresenceReads
	listed, isListed := access.Recall(ctx, joinedKey(name))
	if isListed {
		worlds = listed.([]string)
		if v, ok := access.Recall(ctx, aheadKey(name)); ok && c.valid && v.(*world.PresenceReads).Cover(worlds) {
			reads = v.(*world.PresenceReads)
		}
	}
	beside := reads != nil
	var werr error
	var wg sync.WaitGroup
	switch {
	case beside:
		wg.Go(func() { werr = h.worlds.SetRegistryPresenceIn(ctx, awnID, worlds, c.offline, reads) })
	case isListed:
		wg.Go(func() { reads = h.worlds.ReadPresenceIn(ctx, awnID, worlds) })
	default:
		wg.Go(func() { worlds, werr = h.worlds.JoinedWorlds(ctx, awnID) })
	}
	a, err := c.from(read)
	wg.Wait()
	if err != nil {
		return registry.Agent{}, err
	}
	if werr != nil {
		return registry.Agent{}, werr
	}
	if beside {
		h.joined.put(awnID, worlds)
		return a, nil
	}
	return a, h.carry(ctx, awnID, worlds, c.offline, reads)
}

// carry changes the agent's override in worlds (reads: what was read of
// them, or nil) and remembers them as the agent's.
func (h *handler) carry(ctx context.Context, awnID string, worlds []string, offline bool, reads *world.PresenceReads) error {
	if err := h.worlds.SetRegistryPresenceIn(ctx, awnID, worlds, offline, reads); err != nil {
		return err
	}
	h.joined.put(awnID, worlds)
	return nil
}

// key serves a registered key as a Web Bot Auth key directory.
func (h *handler) key(w http.ResponseWriter, r *http.Request) error {
	pub, err := h.reg.LookupKey(r.Context(), access.Param(r, "keyid"))
	if err != nil {
		return err
	}
	writeDirectory(w, pub)
	return nil
}

// networkDirectory serves the network's own key (webhook signatures, §8).
func (h *handler) networkDirectory(w http.ResponseWriter, _ *http.Request) error {
	if h.networkKey == nil {
		return apierror.New(apierror.NotFound, "this deployment has no network signing key configured")
	}
	writeDirectory(w, h.networkKey)
	return nil
}

func writeDirectory(w http.ResponseWriter, pub ed25519.PublicKey) {
	w.Header().Set("Content-Type", auth.DirectoryMediaType)
	w.WriteHeader(http.StatusOK)
	_ = json.NewEncoder(w).Encode(auth.NewDirectory(pub))
}

// profile is an agent as the registry surface shows it.
type profile struct {
	Name         string   `json:"name"`
	Description  string   `json:"description"`
	Endpoint     string   `json:"endpoint"`
	Capabilities []string `json:"capabilities"`
	AWNID        string   `json:"awn_id"`
	KeyID        string   `json:"key_id"`
	Status       string   `json:"status"`
	RegisteredAt string   `json:"registered_at"`
	UpdatedAt    string   `json:"updated_at"`
}

func toProfile(a registry.Agent) profile {
	caps := a.Capabilities
	if caps == nil {
		caps = []string{}
	}
	return profile{
		Name:         a.Name,
		Description:  a.Description,
		Endpoint:     a.Endpoint,
		Capabilities: caps,
		AWNID:        a.AWNID,
		KeyID:        a.KeyID,
		Status:       string(a.Status),
		RegisteredAt: a.RegisteredAt.UTC().Format(time.RFC3339),
		UpdatedAt:    a.UpdatedAt.UTC().Format(time.RFC3339),
	}
}

func writeJSON(w http.ResponseWriter, status int, v any) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	_ = json.NewEncoder(w).Encode(v)
}
