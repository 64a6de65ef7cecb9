package awn

import (
	"context"
	"encoding/json"
	"net/http"
	"net/url"
	"time"
)

// Escrow is one escrow as the network shows it to its buyer, provider or
// operator; its fields are the server's JSON fields of the same names
// (docs/escrow.md).
type Escrow struct {
	ID           string          `json:"id"`
	State        string          `json:"state"`
	Buyer        string          `json:"buyer"`
	Provider     string          `json:"provider"`
	Capability   string          `json:"capability"`
	Amount       int64           `json:"amount"`
	Deadline     string          `json:"deadline"`
	Output       json.RawMessage `json:"output"`
	OutputSHA256 string          `json:"outputSha256"`
	Status       int             `json:"status"`
	Reason       string          `json:"reason"`
	Transitions  []struct {
		From string `json:"from"`
		To   string `json:"to"`
		By   string `json:"by"`
		At   string `json:"at"`
	} `json:"transitions"`
	Reply Reply `json:"-"` // the answer: its status, and its JSON as sent
}

// EscrowPath is the path of escrow id, or of a route under it.
func EscrowPath(id string, sub ...string) string {
	p := "/api/v1/escrows/" + url.PathEscape(id)
	for _, s := range sub {
		p += "/" + s
	}
	return p
}

// Hire is an escrow to open (its fields are CreateEscrow's body): the buyer (the identity) hires provider (a
// registered agent name) for capability with input, holding amount credits
// until the work is verified, or until deadline (zero: the server's
// default) passes.
type Hire struct {
	Provider, Capability string
	Input                json.RawMessage
	Amount               int64
	Deadline             time.Time
}

func (c *Client) escrow(ctx context.Context, method, path string, body any) (Escrow, error) {
	if _, err := c.signed("escrow"); err != nil {
		return Escrow{}, err
	}
	var e Escrow
	rep, err := c.call(ctx, request{method: method, path: path, body: body}, &e)
	e.Reply = rep
	return e, err
}

// createBody is the body of POST /api/v1/escrows and grantBody of POST
// …/grant: the server's escrowhttp.CreateBody and GrantBody, which a test
// holds this package to, written here so that an agent's binary does not
// link the server's handlers.
type (
	createBody struct {
		Provider   string          `json:"provider"`
		Capability string          `json:"capability"`
		Input      json.RawMessage `json:"input"`
		Amount     int64           `json:"amount"`
		Deadline   string          `json:"deadline,omitempty"`
	}
	grantBody struct {
		Amount int64  `json:"amount"`
		Memo   string `json:"memo"`
	}
)

// CreateEscrow opens an escrow as its buyer (signed); Fund it next.
func (c *Client) CreateEscrow(ctx context.Context, h Hire) (Escrow, error) {
	body := createBody{Provider: h.Provider, Capability: h.Capability, Input: h.Input, Amount: h.Amount}
	if !h.Deadline.IsZero() {
		body.Deadline = h.Deadline.UTC().Format(time.RFC3339)
	}
	return c.escrow(ctx, http.MethodPost, "/api/v1/escrows", body)
}

// CreateEscrowDeadline is CreateEscrow with the deadline as the RFC 3339
// text a person typed ("" is the server's default).
func (c *Client) CreateEscrowDeadline(ctx context.Context, h Hire, deadline string) (Escrow, error) {
	body := createBody{Provider: h.Provider, Capability: h.Capability, Input: h.Input, Amount: h.Amount, Deadline: deadline}
	return c.escrow(ctx, http.MethodPost, "/api/v1/escrows", body)
}

// GetEscrow shows an escrow and its transitions (buyer, provider or operator).
func (c *Client) GetEscrow(ctx context.Context, id string) (Escrow, error) {
	return c.escrow(ctx, http.MethodGet, EscrowPath(id), nil)
}

// MoveEscrow applies one transition to an escrow: "fund" (buyer: hold the
// credits and invoke the provider), "verify", "release", "refund" or
// "dispute", each by the party the network allows.
func (c *Client) MoveEscrow(ctx context.Context, id, transition string) (Escrow, error) {
	return c.escrow(ctx, http.MethodPost, EscrowPath(id, transition), nil)
}

// EscrowPage is one page of Escrows.
type EscrowPage struct {
	Escrows    []json.RawMessage `json:"escrows"`
	NextCursor string            `json:"next_cursor"`
	Reply      Reply             `json:"-"` // the answer: its status, and its JSON as sent
}

// Escrows lists a page of the identity's escrows as role ("buyer" or
// "provider"), newest first; state "" is every state.
func (c *Client) Escrows(ctx context.Context, role, state string, limit int, cursor string) (EscrowPage, error) {
	if _, err := c.signed("escrows"); err != nil {
		return EscrowPage{}, err
	}
	q := pageQuery(limit, cursor)
	q.Set("role", role)
	if state != "" {
		q.Set("state", state)
	}
	var p EscrowPage
	rep, err := c.call(ctx, request{method: http.MethodGet, path: "/api/v1/escrows", query: q}, &p)
	p.Reply = rep
	return p, err
}

// Account is an agent's credits: its Balance, what is Held in escrows, and
// (in Reply.Raw) its recent entries.
type Account struct {
	Balance int64 `json:"balance"`
	Held    int64 `json:"held"`
	Reply   Reply `json:"-"` // the answer: its status, and its JSON as sent
}

// Account reads the credits of awnID ("" is the identity's own).
func (c *Client) Account(ctx context.Context, awnID string) (Account, error) {
	me, err := c.signed("account")
	if err != nil {
		return Account{}, err
	}
	if awnID == "" {
		awnID = me.AWNID()
	}
	var a Account
	rep, err := c.call(ctx, request{method: http.MethodGet, path: "/api/v1/accounts/" + url.PathEscape(awnID)}, &a)
	a.Reply = rep
	return a, err
}

// Grant mints amount credits to awnID (signed by the network's operator key).
func (c *Client) Grant(ctx context.Context, awnID string, amount int64, memo string) (Reply, error) {
	if _, err := c.signed("grant"); err != nil {
		return Reply{}, err
	}
	return c.do(ctx, request{method: http.MethodPost, path: "/api/v1/accounts/" + url.PathEscape(awnID) + "/grant",
		body: grantBody{Amount: amount, Memo: memo}})
}
