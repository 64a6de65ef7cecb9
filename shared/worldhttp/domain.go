package worldhttp

import (
	"encoding/json"
	"time"
)

// These mirror the domain types of shared/inbox and shared/ratelimit so the
// handlers' interfaces have the domains' method sets.
// TODO(merge): become aliases of ratelimit.Op, inbox.Message and
// inbox.ReadOptions once those packages are on main.

// RateOp names a rate-limited operation (ratelimit.Op).
type RateOp string

// The rate-limited operations of the world routes.
const (
	OpSend    RateOp = "send"
	OpRead    RateOp = "read"
	OpAgents  RateOp = "agents"
	OpPing    RateOp = "ping"
	OpActions RateOp = "actions"
)

// Message is one direct message (inbox.Message).
type Message struct {
	ID, From, To string
	Content      json.RawMessage
	ContentType  string
	SentAt       time.Time
}

// ReadOptions shape a read of an inbox (inbox.ReadOptions): Peek keeps what
// it returns, Since keeps only later messages, Limit caps the count.
type ReadOptions struct {
	Peek  bool
	Since time.Time
	Limit int
}
