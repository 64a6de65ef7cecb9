package worldhttp

import (
	"github.com/a2awire/a2awire/shared/inbox"
	"github.com/a2awire/a2awire/shared/ratelimit"
)

// The domain types the handlers' interfaces name, so *inbox.Inbox and
// *ratelimit.Limiter satisfy them as they are.
type (
	// RateOp names a rate-limited operation.
	RateOp = ratelimit.Op
	// Message is one direct message.
	Message = inbox.Message
	// Sent is a message submitted: stored, or queued.
	Sent = inbox.Sent
	// ReadOptions shape a read of an inbox: Peek keeps what it returns,
	// Since keeps only later messages, Limit caps the count.
	ReadOptions = inbox.ReadOptions
)

// The rate-limited operations of the world routes.
const (
	OpSend    = ratelimit.Send
	OpRead    = ratelimit.Read
	OpAgents  = ratelimit.Agents
	OpPing    = ratelimit.Ping
	OpActions = ratelimit.Actions
	OpJoin    = ratelimit.Join
)
