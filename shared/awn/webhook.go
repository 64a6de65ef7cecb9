package awn

import (
	"context"
	"crypto/ed25519"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"time"

	"github.com/a2awire/a2awire/shared/apierror"
	"github.com/a2awire/a2awire/shared/auth"
	"github.com/a2awire/a2awire/shared/webhook/delivery"
	"github.com/a2awire/a2awire/shared/webhook/signature"
)

// NetworkKeyPath is where the network publishes the key of its v1a webhook
// signatures, as a Web Bot Auth key directory.
const NetworkKeyPath = "/.well-known/http-message-signatures-directory"

// MaxDelivery bounds the body a Receiver reads: deliveries are small JSON.
const MaxDelivery = 1 << 20

// ValidSecret reports whether s is a webhook secret: "whsec_" and the
// base64 of 32 bytes, as SetWebhook returns it.
func ValidSecret(s string) bool {
	_, err := signature.ParseSecret(s)
	return err == nil
}

// WebhookSet is the answer to SetWebhook: the URL and its Secret, which
// signs every delivery (v1). The secret is shown this once.
type WebhookSet struct {
	URL    string `json:"url"`
	Secret string `json:"secret"`
	Reply  Reply  `json:"-"` // the answer: its status, and its JSON as sent
}

// SetWebhook has world POST the identity's events to url (signed by a
// member). Setting it again replaces the URL and makes a new secret.
func (c *Client) SetWebhook(ctx context.Context, worldID, url string) (WebhookSet, error) {
	var s WebhookSet
	rep, err := c.world(ctx, http.MethodPut, WorldPath(worldID, "webhook"), nil, map[string]string{"url": url}, &s)
	s.Reply = rep
	return s, err
}

// WebhookStats are a webhook's delivery counters (the server's JSON
// fields of the same names).
type WebhookStats struct {
	Delivered    int64 `json:"delivered"`
	Failed       int64 `json:"failed"`
	DeadLettered int64 `json:"deadLettered"`
	// ActionsDropped counts answered actions that were not forwarded.
	ActionsDropped int64      `json:"actionsDropped"`
	LastError      string     `json:"lastError,omitempty"`
	LastErrorAt    *time.Time `json:"lastErrorAt,omitempty"`
	LastSuccessAt  *time.Time `json:"lastSuccessAt,omitempty"`
}

// WebhookView is what a member sees of its webhook: its URL, whether it is
// enabled (and why not), and its Stats; never the secret. (It
// is the shape of the server's webhook.View, read here without importing
// the server's webhook package and the AWS SDK behind it.)
type WebhookView struct {
	URL            string       `json:"url"`
	Enabled        bool         `json:"enabled"`
	DisabledReason string       `json:"disabledReason,omitempty"`
	CreatedAt      time.Time    `json:"createdAt"`
	Stats          WebhookStats `json:"stats"`
	Reply          Reply        `json:"-"` // the answer: its status, and its JSON as sent
}

// Webhook shows the identity's webhook in world: its URL and delivery
// stats. None set is an *Error with status 404.
func (c *Client) Webhook(ctx context.Context, worldID string) (WebhookView, error) {
	var v WebhookView
	rep, err := c.world(ctx, http.MethodGet, WorldPath(worldID, "webhook"), nil, nil, &v)
	v.Reply = rep
	return v, err
}

// RemoveWebhook stops world's deliveries to the identity.
func (c *Client) RemoveWebhook(ctx context.Context, worldID string) (Reply, error) {
	return c.world(ctx, http.MethodDelete, WorldPath(worldID, "webhook"), nil, nil, nil)
}

// ReplayWebhook sends again the identity's dead-lettered deliveries in
// world made since then, and returns how many it queued.
func (c *Client) ReplayWebhook(ctx context.Context, worldID string, since time.Time) (int, error) {
	var out struct {
		Replayed int `json:"replayed"`
	}
	_, err := c.world(ctx, http.MethodPost, WorldPath(worldID, "webhook", "replay"), nil,
		map[string]string{"since": since.UTC().Format(time.RFC3339Nano)}, &out)
	return out.Replayed, err
}

// NetworkKeys fetches the network's webhook signing keys (v1a) from the
// key directory at keyURL ("" is the client's NetworkKeyPath).
func (c *Client) NetworkKeys(ctx context.Context, keyURL string) ([]ed25519.PublicKey, error) {
	if keyURL == "" {
		keyURL = c.base + NetworkKeyPath
	}
	ctx, cancel := context.WithTimeout(ctx, requestTimeout)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, keyURL, nil)
	if err != nil {
		return nil, fmt.Errorf("GET %s: %w", keyURL, err)
	}
	req.Header.Set("Accept", auth.DirectoryMediaType+", application/json")
	// Unsigned: the directory is public, and it may be another origin.
	rt := c.transport
	if rt == nil {
		rt = http.DefaultTransport
	}
	resp, err := (&http.Client{Transport: rt}).Do(req)
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(io.LimitReader(resp.Body, MaxResponse))
	if err != nil {
		return nil, fmt.Errorf("GET %s: %w", keyURL, err)
	}
	if resp.StatusCode != http.StatusOK {
		return nil, fmt.Errorf("GET %s: %d %s", keyURL, resp.StatusCode, http.StatusText(resp.StatusCode))
	}
	var dir auth.Directory
	if err := json.Unmarshal(b, &dir); err != nil {
		return nil, fmt.Errorf("GET %s: not a key directory {\"keys\": […]}", keyURL)
	}
	var keys []ed25519.PublicKey
	for _, j := range dir.Keys {
		if k, err := j.PublicKey(); err == nil {
			keys = append(keys, k)
		}
	}
	if len(keys) == 0 {
		return nil, fmt.Errorf("GET %s: the directory holds no Ed25519 key", keyURL)
	}
	return keys, nil
}

// Delivery is one verified webhook delivery: the event, as the world sent it.
type Delivery = delivery.Body

// Answer is what a receiver may answer a delivery with: an action the
// world takes as the agent's own (one hop: an action answered to a
// forwarded action is dropped).
type Answer = delivery.Action

// Receiver is an http.Handler for world webhook deliveries. It verifies
// each one with every means it is given — v1 (HMAC-SHA256 with the
// webhook's secret) when Secret is set, v1a (Ed25519 by the network's key)
// when NetworkKeys are — and refuses it (401) unless all pass; a receiver
// given neither refuses everything. A verified delivery goes to Handle;
// its Answer (nil: none) is the HTTP answer, 200 with the action or 204.
type Receiver struct {
	// Secret is the webhook's whsec_ secret, as SetWebhook returned it.
	Secret string
	// NetworkKeys are the network's signing keys (Client.NetworkKeys).
	NetworkKeys []ed25519.PublicKey
	// Tolerance is how far webhook-timestamp may be from now
	// (0: signature.DefaultTolerance, 5 minutes).
	Tolerance time.Duration
	// Handle gets each verified delivery and its raw body. An error
	// answers 500, which the network retries later.
	Handle func(ctx context.Context, d Delivery, raw []byte) (*Answer, error)
	// OnRefused, when set, hears each refused delivery (its webhook-id, as
	// sent, unverified): the status
	// answered and why, in words.
	OnRefused func(deliveryID string, status int, reason string)
}

// ServeHTTP verifies and handles one delivery.
func (rc *Receiver) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if r.Method != http.MethodPost {
		w.Header().Set("Allow", http.MethodPost)
		http.Error(w, "deliveries are POSTed", http.StatusMethodNotAllowed)
		return
	}
	body, err := io.ReadAll(http.MaxBytesReader(w, r.Body, MaxDelivery))
	if err != nil {
		rc.refuse(w, r, http.StatusRequestEntityTooLarge, fmt.Sprintf("body larger than %d KiB or unreadable", MaxDelivery>>10))
		return
	}
	if reason := rc.Verify(r.Header, body); reason != "" {
		rc.refuse(w, r, http.StatusUnauthorized, reason)
		return
	}
	var d Delivery
	if err := json.Unmarshal(body, &d); err != nil || d.EventID == "" {
		rc.refuse(w, r, http.StatusBadRequest, "signed, but the body is not a delivery {worldId, eventId, event, payload, timestamp}")
		return
	}
	var ans *Answer
	if rc.Handle != nil {
		if ans, err = rc.Handle(r.Context(), d, body); err != nil {
			rc.refuse(w, r, http.StatusInternalServerError, "the handler failed")
			return
		}
	}
	if ans == nil {
		w.WriteHeader(http.StatusNoContent)
		return
	}
	if ans.Params == nil {
		ans.Params = json.RawMessage(`{}`)
	}
	b, err := json.Marshal(ans)
	if err != nil {
		rc.refuse(w, r, http.StatusInternalServerError, "the answer is not JSON")
		return
	}
	w.Header().Set("Content-Type", "application/json")
	_, _ = w.Write(b)
}

// Verify returns why a delivery fails its checks, "" when it passes them
// all: v1 when there is a secret, v1a when there are network keys (any one
// of them).
func (rc *Receiver) Verify(h http.Header, body []byte) string {
	if rc.Secret == "" && len(rc.NetworkKeys) == 0 {
		return "the receiver has no secret and no network key to verify with"
	}
	tol := rc.Tolerance
	if rc.Secret != "" {
		if err := signature.VerifyV1(h, body, rc.Secret, tol); err != nil {
			return "v1: " + reason(err)
		}
	}
	if len(rc.NetworkKeys) > 0 {
		var last error
		for _, k := range rc.NetworkKeys {
			if last = signature.VerifyV1a(h, body, k, tol); last == nil {
				return ""
			}
		}
		return "v1a: " + reason(last)
	}
	return ""
}

// reason is a verification failure in words.
func reason(err error) string {
	var ae *apierror.Error
	if errors.As(err, &ae) && ae.Message != "" {
		return ae.Message
	}
	return err.Error()
}

func (rc *Receiver) refuse(w http.ResponseWriter, r *http.Request, status int, why string) {
	if rc.OnRefused != nil {
		rc.OnRefused(r.Header.Get(signature.HeaderID), status, why)
	}
	http.Error(w, why, status)
}
