// Package routes is the one place an HTTP route is written down.
//
// The local harness mounts its routes from this table and the CDK app generates
// its API Gateway routes, Lambda functions and IAM grants from it, so local and
// cloud cannot drift. Paths use API Gateway's syntax: literal segments,
// "{name}" parameters and a trailing greedy "{name+}".
package routes

//go:generate go run ../../cmd/a2awire-gen

import (
	"encoding/json"
	"fmt"
	"slices"
	"strings"
)

// Auth says who may call a route; handlers enforce it, the table documents it
// and the deploy uses it nowhere else than documentation and tests.
type Auth string

// Auth kinds.
const (
	// Public routes need no identity.
	Public Auth = "public"
	// Signed routes carry an AWN-Ed25519 signature by the key named in the body.
	Signed Auth = "signed"
	// Member routes are signed by a member of the world in the path.
	Member Auth = "member"
	// Owner routes are signed by the key that owns the resource in the path.
	Owner Auth = "owner"
)

// Access is how much of the DynamoDB table a route needs. The CDK app grants a
// function the union over its routes and nothing more.
type Access int

// Table access levels, ordered so that the larger value includes the smaller.
const (
	NoTable Access = iota
	ReadOnly
	ReadWrite
)

// String names the access level for logs and test failures.
func (a Access) String() string {
	switch a {
	case NoTable:
		return "none"
	case ReadOnly:
		return "read"
	case ReadWrite:
		return "read-write"
	}
	return fmt.Sprintf("Access(%d)", int(a))
}

// Route is one HTTP route served by one function.
type Route struct {
	// Method is an HTTP method in upper case, or "ANY".
	Method string
	// Path is the API Gateway path pattern, e.g. "/api/v1/agents/{name}".
	Path string
	// Function is the folder name under functions/ that serves the route.
	Function string
	// Auth documents who may call the route.
	Auth Auth
	// Table is what the route needs of the DynamoDB table.
	Table Access
}

// Key is the API Gateway route key, e.g. "ANY /agents/a2awire-punctual/invoke".
func (r Route) Key() string { return r.Method + " " + r.Path }

// Function is the deploy-time configuration of one Lambda function. Functions
// without an entry in the function table get DefaultFunction's settings.
type Function struct {
	Name string
	// Builder names the function's builder (a function.Builder) as
	// "<package path below the module>.<func>", e.g.
	// "shared/worldhttp.BuildSend". cmd/a2awire-gen writes the function's
	// main and the harness's list of builders from it.
	Builder string
	// MemoryMB is the Lambda memory size.
	MemoryMB int
	// TimeoutSeconds is the Lambda timeout; API Gateway caps HTTP integrations at 30.
	TimeoutSeconds int
	// Env is the static environment. The deploy adds TABLE_NAME to functions
	// that touch the table; secrets never belong here.
	Env map[string]string
	// Table is table access the function needs beyond its routes' (for
	// functions driven by triggers rather than routes).
	Table Access
	// Triggers are the function's non-HTTP event sources.
	Triggers []Trigger
	// Sends names the queues the function sends to: the deploy gives it
	// each one's URL (QueueURLEnv) and sqs:SendMessage on it alone.
	Sends []string
	// Streaming functions answer as they go (Server-Sent Events): API
	// Gateway HTTP APIs buffer a whole response, so the deploy serves
	// their routes through a Lambda function URL with InvokeMode
	// RESPONSE_STREAM (auth NONE: the function checks signatures itself)
	// instead of the API, and may give them up to Lambda's 900 s. Their
	// builder is a function.StreamBuilder (an http.Handler, started with
	// aws-lambda-go's lambdaurl); the harness serves their routes on its
	// own port by calling that handler with a flushing writer.
	Streaming bool
}

// StreamBaseURLEnv is the variable the deploy fills, on the functions that
// declare it in their Env, with the URL of EventStreamFunction's function
// URL (no trailing slash): the Agent Cards name the event stream there.
// Empty (locally): the stream is on the same origin as every other route.
const StreamBaseURLEnv = "STREAM_BASE_URL"

// EventStreamFunction serves a world's event stream (Server-Sent Events).
const EventStreamFunction = "world-events-stream"

// A2ABaseURLEnv is the variable the deploy fills, on the functions that
// declare it, with the origin of A2ABridgeFunction's function URL: the
// provider cards' interface URLs, which the network card's skills link.
const A2ABaseURLEnv = "A2A_BASE_URL"

// A2ABridgeFunction serves every registered provider over A2A.
const A2ABridgeFunction = "a2a-bridge"

// Streamed reports whether the named function is a streaming one.
func Streamed(name string) bool { return Config(name).Streaming }

// TriggerKind names a non-HTTP event source.
type TriggerKind string

// Trigger kinds.
const (
	// StreamTrigger feeds the function batches from the table's DynamoDB stream.
	StreamTrigger TriggerKind = "table-stream"
	// ScheduleTrigger invokes the function on an EventBridge schedule.
	ScheduleTrigger TriggerKind = "schedule"
	// QueueTrigger feeds the function batches of messages from one of the
	// queue table's queues (an SQS event source mapping).
	QueueTrigger TriggerKind = "queue"
)

// Trigger is one non-HTTP event source of a function. The CDK app deploys it
// and the local harness drives it with the same settings.
type Trigger struct {
	Kind TriggerKind
	// Schedule is an EventBridge expression such as "rate(1 minute)"
	// (ScheduleTrigger).
	Schedule string
	// BatchSize is the most stream records per invocation (StreamTrigger;
	// 0 means DefaultStreamBatchSize).
	BatchSize int
	// BatchWindowSeconds is how long records or messages are gathered
	// before an invocation (0: hand them over as soon as polled). A
	// QueueTrigger's batch size may pass 10 (SQS's most per receive) only
	// with a window of at least 1 s, as Lambda requires: the mapping then
	// receives until the batch is full, the window ends or the batch's
	// bodies reach Lambda's 6 MB payload.
	BatchWindowSeconds int
	// ReportBatchItemFailures lets the function answer
	// {"batchItemFailures": [...]}: a stream batch is checkpointed before
	// the first failed record and retried from there; of a queue batch,
	// the messages not named are deleted and the named ones come back
	// when their visibility timeout ends.
	ReportBatchItemFailures bool
	// Queue names the queue of a QueueTrigger (a row of the queue table).
	Queue string
	// MaxConcurrency is the most concurrent invocations a QueueTrigger
	// makes (Lambda's ScalingConfig.MaximumConcurrency, 2..1000; 0 means
	// DefaultQueueConcurrency). The deploy reserves at least as much
	// concurrency for the function.
	MaxConcurrency int
	// Filters keep the stream records that match at least one of them
	// (StreamTrigger; none: every record). The deploy writes each as one
	// pattern of the mapping's FilterCriteria and the harness's stream
	// driver applies the same patterns, so a record that matches none
	// never invokes the function, in AWS and locally alike: it is passed
	// over, neither retried nor sent to the on-failure destination.
	Filters []StreamFilter
	// RetryAttempts is how many times a failed stream batch is retried
	// (Lambda's MaximumRetryAttempts) before the mapping gives up on it
	// and sends its metadata — shard, first and last sequence number — to
	// the trigger's on-failure queue (StreamTrigger; 0 means
	// DefaultStreamRetryAttempts). The harness's stream driver counts the
	// same retries and writes the same record to its own failure queue.
	RetryAttempts int
	// MaxRecordAgeSeconds: a failed batch whose oldest record is older is
	// given up on at once, as after its last retry (StreamTrigger; 0
	// means DefaultStreamMaxRecordAgeSeconds). Shorter than the stream's
	// 24 h, so a given-up batch stays re-readable for the rest of the day.
	MaxRecordAgeSeconds int
	// BisectOnError splits a failed stream batch in two before retrying
	// it, so one record that keeps failing takes down only itself.
	BisectOnError bool
}

// Stream failure defaults: the retries and record age a stream trigger
// gets when its row leaves them unset. An hour of record age leaves 23 of
// the stream's 24 hours to re-drive a given-up batch (cmd/a2awire-redrive).
const (
	DefaultStreamRetryAttempts       = 5
	DefaultStreamMaxRecordAgeSeconds = 3600
)

// StreamRetries is the trigger's RetryAttempts, or the default.
func (t Trigger) StreamRetries() int {
	if t.RetryAttempts == 0 {
		return DefaultStreamRetryAttempts
	}
	return t.RetryAttempts
}

// StreamMaxRecordAge is the trigger's MaxRecordAgeSeconds, or the default.
func (t Trigger) StreamMaxRecordAge() int {
	if t.MaxRecordAgeSeconds == 0 {
		return DefaultStreamMaxRecordAgeSeconds
	}
	return t.MaxRecordAgeSeconds
}

// StreamFilter is one filter of a stream trigger: a record matches when
// every condition set matches. Conditions left empty match anything.
type StreamFilter struct {
	// EventNames are the change kinds that match ("INSERT", "MODIFY",
	// "REMOVE").
	EventNames []string
	// KeyPrefixes maps a key attribute ("pk", "sk") to the prefix its
	// string value must start with, e.g. {"pk": "EVENTS#"}.
	KeyPrefixes map[string]string
	// NewImage maps an attribute of the record's new image to the string
	// value it must have, e.g. {"type": "event"}.
	NewImage map[string]string
}

// Pattern is the filter as a Lambda event filtering pattern over a
// DynamoDB stream record, e.g.
//
//	{"dynamodb":{"Keys":{"pk":{"S":[{"prefix":"EVENTS#"}]}}},"eventName":["INSERT"]}
//
// It is what the deploy puts in the mapping's FilterCriteria and what the
// harness matches records against.
func (f StreamFilter) Pattern() string {
	p := map[string]any{}
	if len(f.EventNames) > 0 {
		p["eventName"] = f.EventNames
	}
	change := map[string]any{}
	if len(f.KeyPrefixes) > 0 {
		keys := map[string]any{}
		for attr, prefix := range f.KeyPrefixes {
			keys[attr] = map[string]any{"S": []any{map[string]string{"prefix": prefix}}}
		}
		change["Keys"] = keys
	}
	if len(f.NewImage) > 0 {
		img := map[string]any{}
		for attr, v := range f.NewImage {
			img[attr] = map[string]any{"S": []string{v}}
		}
		change["NewImage"] = img
	}
	if len(change) > 0 {
		p["dynamodb"] = change
	}
	// Maps marshal with sorted keys, so a filter has one pattern text
	// and a redeploy changes nothing.
	b, err := json.Marshal(p)
	if err != nil {
		panic(fmt.Sprintf("routes: stream filter pattern: %v", err)) // strings and maps of strings always marshal
	}
	return string(b)
}

// Patterns are the trigger's filter patterns, one per filter.
func (t Trigger) Patterns() []string {
	var out []string
	for _, f := range t.Filters {
		out = append(out, f.Pattern())
	}
	return out
}

func (f StreamFilter) clone() StreamFilter {
	f.EventNames = slices.Clone(f.EventNames)
	f.KeyPrefixes = cloneEnv(f.KeyPrefixes)
	f.NewImage = cloneEnv(f.NewImage)
	return f
}

// EventInserts is the stream filter of the functions that act on new
// world events: the INSERT of an item in an events partition (package
// world's keys: "EVENTS#<world>" and "EVENTS#<world>#<awnId>"). Nonce
// claims, rate-limit windows, the event head, webhook items and TTL
// deletes never invoke them.
func EventInserts() StreamFilter {
	return StreamFilter{EventNames: []string{"INSERT"}, KeyPrefixes: map[string]string{"pk": "EVENTS#"}}
}

// DefaultStreamBatchSize is a stream trigger's batch size when unset.
const DefaultStreamBatchSize = 100

// DefaultQueueBatchSize is a queue trigger's batch size when unset (and
// SQS's most per receive), DefaultQueueConcurrency its concurrency.
const (
	DefaultQueueBatchSize   = 10
	DefaultQueueConcurrency = 2
)

// Queue is a message queue: an SQS standard queue in AWS (the deploy
// creates it, with its dead-letter queue and redrive policy), an
// in-process queue with the same settings in the harness.
type Queue struct {
	Name string
	// VisibilityTimeoutSeconds is how long a received message stays
	// invisible; at least six times the consuming function's timeout, as
	// Lambda advises, so a batch's retry never overlaps its first run.
	VisibilityTimeoutSeconds int
	// RetentionSeconds is how long SQS keeps a message.
	RetentionSeconds int
	// MaxReceiveCount is the receives after which a message moves to
	// DeadLetter (0: never; needs DeadLetter).
	MaxReceiveCount int
	// DeadLetter names the queue a message moves to.
	DeadLetter string
}

// Queues of a world's batched actions and messages
// (world.Manifest.BatchActions, BatchMessages).
const (
	// ActionQueue holds one message per action submitted to a world that
	// batches its actions, and per direct message sent in a world that
	// batches its messages (package world's QueuedAction).
	ActionQueue = "world-actions"
	// ActionDeadLetters holds the queued actions the committer kept
	// failing on, for SQS's redrive back to ActionQueue.
	ActionDeadLetters = "world-actions-dead"
)

// Queues of webhook delivery.
const (
	// DeliveryQueue holds one message per delivery of an event to a
	// webhook (package webhook's Job).
	DeliveryQueue = "webhook-deliveries"
	// DeliveryDeadLetters holds the deliveries the workers kept failing on.
	DeliveryDeadLetters = "webhook-deliveries-dead"
)

// queues is the queue table.
var queues = []Queue{
	// A delivery worker runs at most 15 s (six times that is 90); a
	// delivery is received at most 5 times: three for its first attempt
	// and the two early retries (5 s, 5 min, waited in the queue), two
	// spare for a worker that fails before it can settle one.
	{Name: DeliveryQueue, VisibilityTimeoutSeconds: 90, RetentionSeconds: 4 * 24 * 3600, MaxReceiveCount: 5, DeadLetter: DeliveryDeadLetters},
	{Name: DeliveryDeadLetters, VisibilityTimeoutSeconds: 60, RetentionSeconds: 14 * 24 * 3600},
	// The committer runs at most 29 s (six times that is 174). A queued
	// action lives at most 4 days, on the queue and then on its
	// dead-letter queue alike (SQS counts a dead letter's age from its
	// first send), which the markers that stop a redelivered action from
	// committing twice outlive (world.QueuedMarkerTTL).
	{Name: ActionQueue, VisibilityTimeoutSeconds: 180, RetentionSeconds: 4 * 24 * 3600, MaxReceiveCount: 5, DeadLetter: ActionDeadLetters},
	{Name: ActionDeadLetters, VisibilityTimeoutSeconds: 60, RetentionSeconds: 4 * 24 * 3600},
}

// QueueURLEnv is the variable holding the URL of the queue named name,
// which the deploy sets on the functions that send to or consume it:
// QUEUE_URL_ and the name upper-cased, '-' as '_'.
func QueueURLEnv(name string) string {
	return "QUEUE_URL_" + strings.ToUpper(strings.ReplaceAll(name, "-", "_"))
}

// Queues returns a copy of the queue table.
func Queues() []Queue { return slices.Clone(queues) }

// QueueConfig returns the named queue's settings.
func QueueConfig(name string) (Queue, bool) {
	i := slices.IndexFunc(queues, func(q Queue) bool { return q.Name == name })
	if i < 0 {
		return Queue{}, false
	}
	return queues[i], true
}

// table is the route table. Add a route here and both the harness and the
// CDK app serve it.
var table = []Route{
	{Method: "ANY", Path: "/agents/a2awire-punctual/invoke", Function: "fixture-punctual", Auth: Public, Table: NoTable},
	{Method: "ANY", Path: "/agents/a2awire-clean/invoke", Function: "fixture-clean", Auth: Public, Table: NoTable},
	{Method: "ANY", Path: "/agents/a2awire-messy/invoke", Function: "fixture-messy", Auth: Public, Table: NoTable},
	{Method: "ANY", Path: "/agents/a2awire-translator/invoke", Function: "fixture-translator", Auth: Public, Table: NoTable},
	{Method: "ANY", Path: "/agents/a2awire-ledger/invoke", Function: "fixture-ledger", Auth: Public, Table: ReadWrite},

	// The registry, the key directories and the network Agent Card.
	// Registering writes the nonce guard too.
	{Method: "POST", Path: "/api/v1/agents", Function: "registry", Auth: Signed, Table: ReadWrite},
	{Method: "GET", Path: "/api/v1/agents", Function: "registry", Auth: Public, Table: ReadOnly},
	{Method: "GET", Path: "/api/v1/agents/{name}", Function: "registry", Auth: Public, Table: ReadOnly},
	{Method: "PUT", Path: "/api/v1/agents/{name}/presence", Function: "registry", Auth: Owner, Table: ReadWrite},
	{Method: "DELETE", Path: "/api/v1/agents/{name}", Function: "registry", Auth: Owner, Table: ReadWrite},
	{Method: "GET", Path: "/api/v1/keys/{keyid}", Function: "registry", Auth: Public, Table: ReadOnly},
	{Method: "GET", Path: "/.well-known/http-message-signatures-directory", Function: "registry", Auth: Public, Table: NoTable},
	{Method: "GET", Path: "/.well-known/agent-card.json", Function: "registry", Auth: Public, Table: NoTable},
	{Method: "GET", Path: "/.well-known/agent.json", Function: "registry", Auth: Public, Table: NoTable},

	// The worlds, one function per route. Every signed route
	// writes the nonce guard, and the rate-limited ones their windows, so
	// all but the public reads are read-write.
	{Method: "PUT", Path: "/v0/worlds/{world}", Function: "world-put", Auth: Signed, Table: ReadWrite},
	{Method: "GET", Path: "/v0/worlds/{world}", Function: "world-get", Auth: Public, Table: ReadOnly},
	{Method: "GET", Path: "/v0/worlds", Function: "world-list", Auth: Public, Table: ReadOnly},
	{Method: "POST", Path: "/v0/worlds/{world}/close", Function: "world-close", Auth: Owner, Table: ReadWrite},
	{Method: "POST", Path: "/v0/worlds/{world}/reopen", Function: "world-reopen", Auth: Owner, Table: ReadWrite},
	{Method: "DELETE", Path: "/v0/worlds/{world}", Function: "world-delete", Auth: Owner, Table: ReadWrite},
	{Method: "POST", Path: "/v0/worlds/{world}/join", Function: "world-join", Auth: Signed, Table: ReadWrite},
	{Method: "POST", Path: "/v0/worlds/{world}/leave", Function: "world-leave", Auth: Member, Table: ReadWrite},
	{Method: "GET", Path: "/v0/worlds/{world}/agents", Function: "world-agents", Auth: Member, Table: ReadWrite},
	{Method: "POST", Path: "/v0/worlds/{world}/messages", Function: "world-send", Auth: Member, Table: ReadWrite},
	{Method: "GET", Path: "/v0/worlds/{world}/messages", Function: "world-messages", Auth: Member, Table: ReadWrite},
	{Method: "POST", Path: "/v0/worlds/{world}/ping", Function: "world-ping", Auth: Member, Table: ReadWrite},
	{Method: "POST", Path: "/v0/worlds/{world}/actions", Function: "world-act", Auth: Member, Table: ReadWrite},
	{Method: "GET", Path: "/v0/worlds/{world}/events", Function: "world-events", Auth: Member, Table: ReadWrite},
	{Method: "GET", Path: "/v0/worlds/{world}/events/stream", Function: EventStreamFunction, Auth: Member, Table: ReadWrite},
	{Method: "GET", Path: "/v0/worlds/{world}/.well-known/agent-card.json", Function: "world-card", Auth: Public, Table: ReadOnly},
	{Method: "GET", Path: "/v0/worlds/{world}/.well-known/agent.json", Function: "world-card", Auth: Public, Table: ReadOnly},

	// Moderation by the world's owner (members get 403, others 401), and
	// the agent's own view of its worlds, signed by that agent.
	{Method: "POST", Path: "/v0/worlds/{world}/members/{awnId}/kick", Function: "world-kick", Auth: Owner, Table: ReadWrite},
	{Method: "PUT", Path: "/v0/worlds/{world}/bans/{awnId}", Function: "world-ban", Auth: Owner, Table: ReadWrite},
	{Method: "DELETE", Path: "/v0/worlds/{world}/bans/{awnId}", Function: "world-unban", Auth: Owner, Table: ReadWrite},
	{Method: "GET", Path: "/v0/worlds/{world}/bans", Function: "world-bans", Auth: Owner, Table: ReadWrite},
	{Method: "GET", Path: "/v0/agents/{awnId}/worlds", Function: "agent-worlds", Auth: Signed, Table: ReadWrite},

	// The A2A bridge: every registered provider an A2A agent (package
	// a2abridge). Sending stores the Task.
	{Method: "GET", Path: "/a2a/{name}/.well-known/agent-card.json", Function: A2ABridgeFunction, Auth: Public, Table: ReadOnly},
	{Method: "GET", Path: "/a2a/{name}/.well-known/agent.json", Function: A2ABridgeFunction, Auth: Public, Table: ReadOnly},
	{Method: "POST", Path: "/a2a/{name}", Function: A2ABridgeFunction, Auth: Public, Table: ReadWrite},

	// A member's webhook (package webhookhttp over package webhook). Every
	// route writes: the signature's nonce guard.

	{Method: "PUT", Path: "/v0/worlds/{world}/webhook", Function: "world-webhook-set", Auth: Member, Table: ReadWrite},
	{Method: "GET", Path: "/v0/worlds/{world}/webhook", Function: "world-webhook-show", Auth: Member, Table: ReadWrite},
	{Method: "DELETE", Path: "/v0/worlds/{world}/webhook", Function: "world-webhook-remove", Auth: Member, Table: ReadWrite},
	{Method: "POST", Path: "/v0/worlds/{world}/webhook/replay", Function: "world-webhook-replay", Auth: Member, Table: ReadWrite},

	// The network's OpenAPI document (shared/openapi): static bytes.
	{Method: "GET", Path: "/openapi.json", Function: "openapi", Auth: Public, Table: NoTable},

	// Credits and escrow (docs/escrow.md). Every signed route writes the
	// nonce guard. The grant is the operator's (the network key's); the
	// escrow routes' roles (buyer, operator) are checked in the
	// transition's own conditional write.
	{Method: "GET", Path: "/api/v1/accounts/{awnId}", Function: "accounts", Auth: Signed, Table: ReadWrite},
	{Method: "POST", Path: "/api/v1/accounts/{awnId}/grant", Function: "accounts", Auth: Owner, Table: ReadWrite},
	{Method: "POST", Path: "/api/v1/escrows", Function: "escrows", Auth: Signed, Table: ReadWrite},
	{Method: "GET", Path: "/api/v1/escrows", Function: "escrows", Auth: Signed, Table: ReadWrite},
	{Method: "GET", Path: "/api/v1/escrows/{id}", Function: "escrows", Auth: Signed, Table: ReadWrite},
	{Method: "POST", Path: "/api/v1/escrows/{id}/fund", Function: "escrows", Auth: Signed, Table: ReadWrite},
	{Method: "POST", Path: "/api/v1/escrows/{id}/verify", Function: "escrows", Auth: Signed, Table: ReadWrite},
	{Method: "POST", Path: "/api/v1/escrows/{id}/release", Function: "escrows", Auth: Signed, Table: ReadWrite},
	{Method: "POST", Path: "/api/v1/escrows/{id}/refund", Function: "escrows", Auth: Signed, Table: ReadWrite},
	{Method: "POST", Path: "/api/v1/escrows/{id}/dispute", Function: "escrows", Auth: Signed, Table: ReadWrite},
}

// functions holds per-function settings that differ from DefaultFunction.
var functions = []Function{
	// The world functions. RATE_LIMIT_<OP> overrides an operation's
	// requests per agent per minute (empty: the default); BASE_URL is the
	// URL world cards name (empty: the request's). world-events long-polls
	// up to 20 s, so its 25 s timeout lets the poll return first (it stops
	// a second before the deadline).
	{Name: "world-put", Builder: "shared/worldhttp.BuildPut", MemoryMB: 256, TimeoutSeconds: 10},
	{Name: "world-get", Builder: "shared/worldhttp.BuildGet", MemoryMB: 256, TimeoutSeconds: 10},
	{Name: "world-list", Builder: "shared/worldhttp.BuildDiscover", MemoryMB: 256, TimeoutSeconds: 10, Env: map[string]string{"BASE_URL": ""}},
	{Name: "world-close", Builder: "shared/worldhttp.BuildClose", MemoryMB: 256, TimeoutSeconds: 10},
	{Name: "world-reopen", Builder: "shared/worldhttp.BuildReopen", MemoryMB: 256, TimeoutSeconds: 10},
	{Name: "world-delete", Builder: "shared/worldhttp.BuildDelete", MemoryMB: 256, TimeoutSeconds: 10},
	{Name: "world-join", Builder: "shared/worldhttp.BuildJoin", MemoryMB: 256, TimeoutSeconds: 10, Env: map[string]string{"RATE_LIMIT_JOIN": ""}},
	{Name: "world-leave", Builder: "shared/worldhttp.BuildLeave", MemoryMB: 256, TimeoutSeconds: 10},
	{Name: "world-agents", Builder: "shared/worldhttp.BuildAgents", MemoryMB: 256, TimeoutSeconds: 10, Env: map[string]string{"RATE_LIMIT_AGENTS": ""}},
	// world-send stores a message at once, or, in a world that batches
	// its messages, queues it for world-commit.
	{Name: "world-send", Builder: "shared/worldhttp.BuildSend", MemoryMB: 256, TimeoutSeconds: 10, Env: map[string]string{"RATE_LIMIT_SEND": ""},
		Sends: []string{ActionQueue}},
	{Name: "world-messages", Builder: "shared/worldhttp.BuildMessages", MemoryMB: 256, TimeoutSeconds: 10, Env: map[string]string{"RATE_LIMIT_READ": ""}},
	{Name: "world-ping", Builder: "shared/worldhttp.BuildPing", MemoryMB: 256, TimeoutSeconds: 10, Env: map[string]string{"RATE_LIMIT_PING": "", "NETWORK_SIGNING_KEY": ""}},
	// world-act commits an action at once, or, in a world that batches its
	// actions, queues it for world-commit.
	{Name: "world-act", Builder: "shared/worldhttp.BuildAct", MemoryMB: 256, TimeoutSeconds: 10, Env: map[string]string{"RATE_LIMIT_ACTIONS": ""},
		Sends: []string{ActionQueue}},
	{Name: "world-events", Builder: "shared/worldhttp.BuildEvents", MemoryMB: 256, TimeoutSeconds: 25},
	// The event stream holds one invocation per open stream: 128 MB is
	// plenty for one reader and halves the GB-s of 256; it ends a stream
	// a few seconds before the 900 s limit with a retry hint.
	{Name: EventStreamFunction, Builder: "shared/worldhttp.BuildEventStream", MemoryMB: 128, TimeoutSeconds: 900, Streaming: true},
	{Name: "world-card", Builder: "shared/worldhttp.BuildCard", MemoryMB: 256, TimeoutSeconds: 10, Env: map[string]string{"BASE_URL": "", StreamBaseURLEnv: ""}},
	{Name: "world-kick", Builder: "shared/worldhttp.BuildKick", MemoryMB: 256, TimeoutSeconds: 10},
	{Name: "world-ban", Builder: "shared/worldhttp.BuildBan", MemoryMB: 256, TimeoutSeconds: 10},
	{Name: "world-unban", Builder: "shared/worldhttp.BuildUnban", MemoryMB: 256, TimeoutSeconds: 10},
	{Name: "world-bans", Builder: "shared/worldhttp.BuildBans", MemoryMB: 256, TimeoutSeconds: 10},
	{Name: "agent-worlds", Builder: "shared/worldhttp.BuildAgentWorlds", MemoryMB: 256, TimeoutSeconds: 10},

	{Name: "fixture-punctual", Builder: "functions/fixture-punctual/punctual.Build", MemoryMB: 128, TimeoutSeconds: 10},
	{Name: "fixture-ledger", Builder: "functions/fixture-ledger/ledger.Build", MemoryMB: 256, TimeoutSeconds: 10},
	{Name: "fixture-clean", Builder: "functions/fixture-clean/clean.Build", MemoryMB: 128, TimeoutSeconds: 10},
	// messy's "slow" sleeps up to 5 s and must still answer.
	{Name: "fixture-messy", Builder: "functions/fixture-messy/messy.Build", MemoryMB: 128, TimeoutSeconds: 10},
	// The LLM call is bounded at 8 s (llm.DefaultTimeout), leaving time for
	// the fallback. TRANSLATOR_LLM_API_KEY is a secret, so it is not here.
	{Name: "fixture-translator", Builder: "functions/fixture-translator/translator.Build", MemoryMB: 256, TimeoutSeconds: 15,
		Env: map[string]string{"TRANSLATOR_LLM_URL": "", "TRANSLATOR_LLM_MODEL": ""}},
	// The A2A bridge waits for a provider (two attempts sharing the time
	// left, at most 12 s each). It streams (SendStreamingMessage is SSE),
	// so in AWS it answers on its own function URL, whose origin the
	// deploy puts in A2A_BASE_URL (empty: the request's); BASE_URL is the
	// network's.
	{Name: A2ABridgeFunction, Builder: "shared/a2abridge.Build", MemoryMB: 256, TimeoutSeconds: 29, Streaming: true,
		Env: map[string]string{A2ABaseURLEnv: "", "BASE_URL": ""}},
	// NETWORK_PUBLIC_KEY (std base64) is the network's public signing key,
	// BASE_URL the URL the Agent Card names; empty means none / the request's.
	// NETWORK_SIGNING_KEY, filled by the deploy from its secret, keys the
	// discovery cursors (a key derived from it; nothing is signed).
	{Name: "registry", Builder: "functions/registry/registryapi.Build", MemoryMB: 256, TimeoutSeconds: 10,
		Env: map[string]string{"NETWORK_PUBLIC_KEY": "", "BASE_URL": "", "NETWORK_SIGNING_KEY": "", StreamBaseURLEnv: "", A2ABaseURLEnv: ""}},
	// No routes: the deploy runs it as the fixtures' registration (a
	// CloudFormation custom resource, infra/stack Seeding), which writes
	// the registry's items and creates the world lobby; 20 s covers five
	// registrations, the lobby and retries.
	// Serves the committed OpenAPI document; no table, no settings.
	{Name: "openapi", Builder: "shared/openapi.Build", MemoryMB: 128, TimeoutSeconds: 10},
	{Name: "registry-seed", Builder: "shared/fixtures/seed.Build", MemoryMB: 128, TimeoutSeconds: 20, Table: ReadWrite},

	// The deleter of deleted worlds: its stream trigger keeps only the
	// deletion marker's inserts and changes (pk WORLDDEL#<world>), one a
	// batch. A round stops 3 s before the timeout and bumps the marker,
	// whose change starts the next round; a failed round is retried from
	// its record (batchItemFailures).
	{Name: "world-deleter", Builder: "functions/world-deleter/deleter.Build", MemoryMB: 256, TimeoutSeconds: 29, Table: ReadWrite,
		Triggers: []Trigger{{Kind: StreamTrigger, BatchSize: 1, ReportBatchItemFailures: true,
			Filters: []StreamFilter{{EventNames: []string{"INSERT", "MODIFY"}, KeyPrefixes: map[string]string{"pk": "WORLDDEL#"}}}}}},

	// Credits and escrow. NETWORK_PUBLIC_KEY names the operator (the
	// network's key, which also owns the fixtures, so their earnings land
	// in its account). verify invokes the provider within 25 s, hence 29.
	// The schedule refunds funded escrows past their deadline and
	// releases delivered ones past the dispute window (DISPUTE_WINDOW, a
	// Go duration; empty: 24h) every 5 minutes: deadlines and windows are
	// hours long, and a period unlike webhook-retry's lets a test drive
	// each schedule alone.
	{Name: "accounts", Builder: "shared/escrowhttp.BuildAccounts", MemoryMB: 256, TimeoutSeconds: 10,
		Env: map[string]string{"NETWORK_PUBLIC_KEY": ""}},
	{Name: "escrows", Builder: "shared/escrowhttp.BuildEscrows", MemoryMB: 256, TimeoutSeconds: 29,
		Env: map[string]string{"NETWORK_PUBLIC_KEY": "", "DISPUTE_WINDOW": ""}},
	{Name: "escrow-schedule", Builder: "shared/escrowhttp.BuildSchedule", MemoryMB: 256, TimeoutSeconds: 29, Table: ReadWrite,
		Env:      map[string]string{"NETWORK_PUBLIC_KEY": "", "DISPUTE_WINDOW": ""},
		Triggers: []Trigger{{Kind: ScheduleTrigger, Schedule: "rate(5 minutes)"}}},

	// A member's webhook routes.
	{Name: "world-webhook-set", Builder: "shared/webhookhttp.BuildSet", MemoryMB: 256, TimeoutSeconds: 10},
	{Name: "world-webhook-show", Builder: "shared/webhookhttp.BuildShow", MemoryMB: 256, TimeoutSeconds: 10},
	{Name: "world-webhook-remove", Builder: "shared/webhookhttp.BuildRemove", MemoryMB: 256, TimeoutSeconds: 10},
	{Name: "world-webhook-replay", Builder: "shared/webhookhttp.BuildReplay", MemoryMB: 256, TimeoutSeconds: 10},

	// Webhook delivery, off the stream's critical path. The dispatcher
	// reads the table's stream, filtered to event INSERTs, and turns each
	// event into one message per recipient webhook on the delivery queue:
	// it makes no attempt, so a slow receiver never holds up a shard.
	// The deliverer makes the attempts from the queue (batches of 10, up
	// to 100 invocations at once, partial batch failures), capped per
	// endpoint; early retries wait in the queue, later ones in the
	// table's schedule, which webhook-retry puts back on the queue every
	// minute. webhook-deadletter keeps what the deliverer kept failing on
	// (the queue's dead-letter queue) as the webhook's dead letters.
	// NETWORK_SIGNING_KEY (the network's Ed25519 seed, for v1a) is filled
	// by the deploy from a secret.
	{Name: "webhook-dispatcher", Builder: "functions/webhook-dispatcher/dispatcher.Build", MemoryMB: 256, TimeoutSeconds: 29, Table: ReadOnly,
		Sends: []string{DeliveryQueue},
		// A batch the dispatcher keeps failing on (the delivery queue or
		// the table unreachable) is retried 10 times with bisection; after
		// that, or once its oldest record is an hour old, its metadata goes
		// to the on-failure queue and cmd/a2awire-redrive replays it from
		// the stream, which still holds it for the rest of the 24 hours.
		Triggers: []Trigger{{Kind: StreamTrigger, BatchSize: 10, ReportBatchItemFailures: true, Filters: []StreamFilter{EventInserts()},
			RetryAttempts: 10, MaxRecordAgeSeconds: 3600, BisectOnError: true}}},
	{Name: "webhook-deliver", Builder: "functions/webhook-deliver/deliverer.Build", MemoryMB: 256, TimeoutSeconds: 15, Table: ReadWrite,
		Env:      map[string]string{"NETWORK_SIGNING_KEY": ""},
		Sends:    []string{DeliveryQueue},
		Triggers: []Trigger{{Kind: QueueTrigger, Queue: DeliveryQueue, BatchSize: 10, MaxConcurrency: 100, ReportBatchItemFailures: true}}},
	{Name: "webhook-deadletter", Builder: "functions/webhook-deadletter/deadletter.Build", MemoryMB: 128, TimeoutSeconds: 10, Table: ReadWrite,
		Triggers: []Trigger{{Kind: QueueTrigger, Queue: DeliveryDeadLetters, BatchSize: 10, ReportBatchItemFailures: true}}},
	{Name: "webhook-retry", Builder: "functions/webhook-retry/retry.Build", MemoryMB: 256, TimeoutSeconds: 29, Table: ReadWrite,
		Env:      map[string]string{"NETWORK_SIGNING_KEY": ""},
		Sends:    []string{DeliveryQueue},
		Triggers: []Trigger{{Kind: ScheduleTrigger, Schedule: "rate(1 minute)"}}},

	// world-commit commits the queued actions and messages of worlds that
	// batch them:
	// a world's head takes about 500 commits a second, and one at a time
	// (docs/scale.md), so its actions commit many to a transaction. Batches
	// of up to 1,000 gathered for 1 s, at most 2 invocations at once (more
	// would only contend for the same heads), partial batch failures.
	{Name: "world-commit", Builder: "functions/world-commit/committer.Build", MemoryMB: 512, TimeoutSeconds: 29, Table: ReadWrite,
		Triggers: []Trigger{{Kind: QueueTrigger, Queue: ActionQueue, BatchSize: 1000, BatchWindowSeconds: 1, MaxConcurrency: 2, ReportBatchItemFailures: true}}},

	// The presence sweep: every minute (EventBridge's finest rate) it
	// announces presence.changed offline for the members whose poll or
	// stream lapsed since, reading only their due items (gsi1), never the
	// members (shared/world, presence_sweep.go).
	{Name: "presence-sweep", Builder: "functions/presence-sweep/sweep.Build", MemoryMB: 256, TimeoutSeconds: 29, Table: ReadWrite,
		Triggers: []Trigger{{Kind: ScheduleTrigger, Schedule: "rate(1 minute)"}}},
}

// DefaultFunction returns the settings of a function named name that has no
// entry of its own.
func DefaultFunction(name string) Function {
	return Function{Name: name, MemoryMB: 256, TimeoutSeconds: 10}
}

// All returns a copy of the route table in its declared order.
func All() []Route { return slices.Clone(table) }

// Functions returns the sorted, distinct names of the functions that serve
// routes or have settings of their own (trigger-driven functions).
func Functions() []string {
	var names []string
	for _, r := range table {
		if !slices.Contains(names, r.Function) {
			names = append(names, r.Function)
		}
	}
	for _, f := range functions {
		if !slices.Contains(names, f.Name) {
			names = append(names, f.Name)
		}
	}
	slices.Sort(names)
	return names
}

// ForFunction returns the routes served by the named function.
func ForFunction(name string) []Route {
	var out []Route
	for _, r := range table {
		if r.Function == name {
			out = append(out, r)
		}
	}
	return out
}

// Config returns the deploy settings of the named function, with its Env
// copied so callers cannot change the table.
func Config(name string) Function {
	for _, f := range functions {
		if f.Name == name {
			f.Env = cloneEnv(f.Env)
			f.Triggers = slices.Clone(f.Triggers)
			f.Sends = slices.Clone(f.Sends)
			for i, tr := range f.Triggers {
				tr.Filters = slices.Clone(tr.Filters)
				for j, fl := range tr.Filters {
					tr.Filters[j] = fl.clone()
				}
				f.Triggers[i] = tr
			}
			return f
		}
	}
	return DefaultFunction(name)
}

// TableAccess is the union of the table access of the function's routes and
// of its own configuration.
func TableAccess(name string) Access {
	a := Config(name).Table
	for _, r := range ForFunction(name) {
		a = max(a, r.Table)
	}
	return a
}

func cloneEnv(m map[string]string) map[string]string {
	if m == nil {
		return nil
	}
	out := make(map[string]string, len(m))
	for k, v := range m {
		out[k] = v
	}
	return out
}

// Match finds the route for method and path the way API Gateway HTTP APIs do:
// the most specific path wins (literal segments over parameters over a greedy
// parameter) and a route with the exact method wins over ANY. It returns the
// path parameters by name.
func Match(method, path string) (Route, map[string]string, bool) {
	// Every request of the gateway (and of a function's access layer)
	// comes through here, so the path is split into a stack array and the
	// candidates are scored on the table's compiled patterns without
	// allocating; only the winner's parameters are collected.
	var buf [maxSegments]string
	segs := splitInto(buf[:0], path)
	best, bestScore := -1, -1
	for i := range compiledTable {
		c := &compiledTable[i]
		if !c.any && c.method != method {
			continue
		}
		score, ok := c.pattern.score(segs)
		if !ok {
			continue
		}
		score *= 2
		if !c.any {
			score++
		}
		if score > bestScore {
			best, bestScore = i, score
		}
	}
	if best < 0 {
		return Route{}, nil, false
	}
	return table[best], compiledTable[best].pattern.bind(segs), true
}

// maxSegments is how many path segments Match splits without allocating;
// longer paths still match, on a heap-allocated list.
const maxSegments = 16

// compiledRoute is a table route ready for matching, index for index.
type compiledRoute struct {
	method  string
	any     bool // Method is "ANY"
	pattern pattern
}

// compiledTable is the table's routes compiled once; read-only.
var compiledTable = func() []compiledRoute {
	out := make([]compiledRoute, len(table))
	for i, r := range table {
		out[i] = compiledRoute{method: r.Method, any: r.Method == "ANY", pattern: compile(r.Path)}
	}
	return out
}()

// MatchPattern reports whether a path pattern matches path, with its
// parameters and a specificity score: the higher score wins when several
// patterns match. Each literal segment counts more than any number of
// parameters, so "/a/b" beats "/a/{x}", which beats "/a/{x+}".
func MatchPattern(pattern, path string) (map[string]string, int, bool) {
	p := compile(pattern)
	segs := split(path)
	score, ok := p.score(segs)
	if !ok {
		return nil, 0, false
	}
	return p.bind(segs), score, true
}

// pattern is a path pattern split into segments, each classified once.
type pattern []segment

type segment struct {
	kind segmentKind
	text string // the literal, or the parameter's name
}

type segmentKind uint8

const (
	literal segmentKind = iota
	param               // "{id}"
	greedy              // "{rest+}"
)

func compile(path string) pattern {
	segs := split(path)
	p := make(pattern, len(segs))
	for i, s := range segs {
		switch name, ok := greedyName(s); {
		case ok:
			p[i] = segment{kind: greedy, text: name}
		case isParam(s):
			p[i] = segment{kind: param, text: s[1 : len(s)-1]}
		default:
			p[i] = segment{kind: literal, text: s}
		}
	}
	return p
}

// greedyName is the name of a greedy parameter segment ("{rest+}" → rest).
func greedyName(p string) (string, bool) {
	name, ok := strings.CutSuffix(strings.TrimPrefix(p, "{"), "+}")
	return name, ok && strings.HasPrefix(p, "{")
}

// isParam reports whether p is a parameter segment ("{id}").
func isParam(p string) bool { return strings.HasPrefix(p, "{") && strings.HasSuffix(p, "}") }

// score reports whether p matches segs and how specifically, without
// allocating. A greedy segment matches one or more segments, and only as
// the pattern's last.
func (p pattern) score(segs []string) (int, bool) {
	score := 0
	for i, s := range p {
		if s.kind == greedy {
			if i == len(p)-1 && len(segs) > i {
				return score, true
			}
			return 0, false
		}
		if i >= len(segs) {
			return 0, false
		}
		if s.kind == param {
			if segs[i] == "" {
				return 0, false
			}
			score += 1
			continue
		}
		if s.text != segs[i] {
			return 0, false
		}
		score += 1 << 10
	}
	if len(segs) != len(p) {
		return 0, false
	}
	return score, true
}

// bind collects the parameters of a pattern that matches segs (score said
// so); a pattern without parameters gives an empty, non-nil map.
func (p pattern) bind(segs []string) map[string]string {
	params := map[string]string{}
	for i, s := range p {
		switch s.kind {
		case greedy:
			params[s.text] = strings.Join(segs[i:], "/")
			return params
		case param:
			params[s.text] = segs[i]
		}
	}
	return params
}

// splitInto appends path's segments after the leading slash to dst: the
// pieces strings.Split gives, empty ones included.
func splitInto(dst []string, path string) []string {
	path = strings.TrimPrefix(path, "/")
	if path == "" {
		return dst
	}
	for {
		seg, rest, more := strings.Cut(path, "/")
		dst = append(dst, seg)
		if !more {
			return dst
		}
		path = rest
	}
}

// split returns path's segments after the leading slash (nil for none).
func split(path string) []string { return splitInto(nil, path) }

// Shape is the path with every parameter name replaced by "{}", so that two
// patterns that API Gateway would treat as the same route compare equal.
func Shape(path string) string {
	segs := split(path)
	for i, s := range segs {
		switch {
		case strings.HasSuffix(s, "+}"):
			segs[i] = "{+}"
		case strings.HasPrefix(s, "{"):
			segs[i] = "{}"
		}
	}
	return "/" + strings.Join(segs, "/")
}
