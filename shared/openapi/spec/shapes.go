package spec

import (
	"encoding/json"
	"time"
)

// The wire shapes of the routes whose handlers encode or decode an
// unexported type or a map. Each mirrors its handler's type field for
// field (named after it in the comment); the harness's tests validate
// every recorded request and answer against the document with
// additionalProperties false, so a field added to, renamed in or dropped
// from a handler without this file fails them.

// invokeResponse mirrors protocol.Response, whose Metadata marshals
// itself (standard fields first, then its extra ones).
type invokeResponse struct {
	Output   json.RawMessage `json:"output" doc:"the capability's result (a JSON object)" example:"{\"pong\":true,\"echo\":\"hi\"}"`
	Metadata invokeMetadata  `json:"metadata"`
}

// invokeMetadata is protocol.Metadata as it marshals.
type invokeMetadata struct{}

// OpenAPISchema: the standard fields, and any others a provider adds.
func (invokeMetadata) OpenAPISchema() map[string]any {
	return map[string]any{
		"type":     "object",
		"required": []any{"agent", "capability", "duration_ms"},
		"properties": map[string]any{
			"agent":       map[string]any{"type": "string", "examples": []any{"a2awire-punctual"}},
			"capability":  map[string]any{"type": "string", "examples": []any{"ping"}},
			"duration_ms": map[string]any{"type": "integer", "minimum": 0},
			"tokens_used": map[string]any{"type": "integer", "minimum": 0},
			"model":       map[string]any{"type": "string"},
		},
		"additionalProperties": true,
	}
}

// profile mirrors registryapi's profile.
type profile struct {
	Name         string   `json:"name" example:"my-provider"`
	Description  string   `json:"description"`
	Endpoint     string   `json:"endpoint" example:"https://provider.example/invoke"`
	Capabilities []string `json:"capabilities" example:"[\"ping\"]"`
	AWNID        string   `json:"awn_id" doc:"aw:sha256: and the lower-case hex SHA-256 of the public key"`
	KeyID        string   `json:"key_id" doc:"the key's RFC 7638 JWK thumbprint"`
	Status       string   `json:"status" doc:"online or offline"`
	RegisteredAt string   `json:"registered_at" doc:"RFC 3339"`
	UpdatedAt    string   `json:"updated_at" doc:"RFC 3339"`
}

// registerBody mirrors registryapi's registerBody.
type registerBody struct {
	Name         string   `json:"name" example:"my-provider"`
	Description  string   `json:"description,omitempty"`
	Endpoint     string   `json:"endpoint" example:"https://provider.example/invoke"`
	Capabilities []string `json:"capabilities" example:"[\"ping\"]"`
	PublicKey    string   `json:"public_key" doc:"standard base64 of the 32-byte Ed25519 public key that signs the request"`
}

// agentAnswer is the registry's {"agent": profile}.
type agentAnswer struct {
	Agent profile `json:"agent"`
}

// agentList is the registry's list answer.
type agentList struct {
	Agents     []profile `json:"agents"`
	NextCursor *string   `json:"next_cursor" doc:"the next page's cursor; null on the last page"`
}

// presenceBody is PUT …/presence's body.
type presenceBody struct {
	Status string `json:"status" doc:"online or offline" example:"offline"`
}

// agentCard is an A2A v1.0 Agent Card (package agentcard builds it).
type agentCard struct{}

// OpenAPISchema: the card's required fields; the rest is A2A's.
func (agentCard) OpenAPISchema() map[string]any {
	return map[string]any{
		"type":        "object",
		"description": "an A2A v1.0 Agent Card",
		"required":    []any{"name", "description", "version", "supportedInterfaces", "capabilities", "defaultInputModes", "defaultOutputModes", "skills"},
		"properties": map[string]any{
			"name":                map[string]any{"type": "string"},
			"description":         map[string]any{"type": "string"},
			"version":             map[string]any{"type": "string"},
			"supportedInterfaces": map[string]any{"type": "array"},
			"capabilities":        map[string]any{"type": "object"},
			"defaultInputModes":   map[string]any{"type": "array", "items": map[string]any{"type": "string"}},
			"defaultOutputModes":  map[string]any{"type": "array", "items": map[string]any{"type": "string"}},
			"skills":              map[string]any{"type": "array"},
			"securitySchemes":     map[string]any{"type": "object"},
		},
		"additionalProperties": true,
	}
}

// openAPIDocument is this document.
type openAPIDocument struct{}

// OpenAPISchema: an OpenAPI 3.1 document.
func (openAPIDocument) OpenAPISchema() map[string]any {
	return map[string]any{
		"type":                 "object",
		"description":          "this OpenAPI 3.1 document",
		"required":             []any{"openapi", "info", "paths"},
		"properties":           map[string]any{"openapi": map[string]any{"type": "string", "pattern": "^3\\.1\\."}},
		"additionalProperties": true,
	}
}

// actionSpec mirrors world.ActionSpec.
type actionSpec struct {
	Name        string `json:"name" example:"move"`
	Description string `json:"description"`
}

// worldBody mirrors worldhttp's putBody.
type worldBody struct {
	PublicKey     *string      `json:"publicKey,omitempty" doc:"the owner's key (standard base64, 32 bytes); required to create, optional to update"`
	Name          string       `json:"name,omitempty" example:"Lobby"`
	Description   string       `json:"description,omitempty"`
	Category      string       `json:"category,omitempty" example:"social"`
	Actions       []actionSpec `json:"actions,omitempty"`
	MaxMembers    *int64       `json:"maxMembers,omitempty" doc:"the most members (absent or null: no cap)"`
	EventShards   *int         `json:"eventShards,omitempty" doc:"partitions the world's events are written across, 1 to 16 (absent or null: 1 at creation, unchanged at an update); only grows, fewer is 409" example:"1"`
	BatchActions  bool         `json:"batchActions,omitempty" doc:"queue the world's actions and commit them many to a transaction: POST …/actions answers 202 and the event follows within about a second (absent: false); for worlds past a few hundred actions a second"`
	BatchMessages bool         `json:"batchMessages,omitempty" doc:"queue the world's direct messages the same way: POST …/messages answers 202 and the message reaches the inbox within about a second (absent: false); for an inbox past a few hundred messages a second, with eventShards"`
}

// manifest mirrors worldhttp's manifestOut.
type manifest struct {
	WorldID       string       `json:"worldId" example:"lobby"`
	Name          string       `json:"name"`
	Description   string       `json:"description"`
	Category      string       `json:"category"`
	Actions       []actionSpec `json:"actions"`
	OwnerKeyID    string       `json:"ownerKeyId"`
	OwnerAWNID    string       `json:"ownerAwnId"`
	Status        string       `json:"status" doc:"open or closed"`
	MaxMembers    *int64       `json:"maxMembers"`
	EventShards   int          `json:"eventShards" doc:"partitions the world's events are written across (1 unless raised)"`
	BatchActions  bool         `json:"batchActions" doc:"the world's actions are queued and committed in batches"`
	BatchMessages bool         `json:"batchMessages" doc:"the world's direct messages are queued and committed in batches"`
	Members       int64        `json:"members" doc:"memberCount under its first name"`
	MemberCount   int64        `json:"memberCount"`
	CreatedAt     string       `json:"createdAt"`
	UpdatedAt     string       `json:"updatedAt"`
	CardURL       string       `json:"cardUrl"`
}

// worldSummary mirrors worldhttp's summaryOut.
type worldSummary struct {
	WorldID     string `json:"worldId"`
	Name        string `json:"name"`
	Description string `json:"description"`
	Category    string `json:"category"`
	Status      string `json:"status"`
	MemberCount int64  `json:"memberCount"`
	CreatedAt   string `json:"createdAt"`
	OwnerAWNID  string `json:"ownerAwnId"`
	CardURL     string `json:"cardUrl"`
}

// worldList is discovery's answer.
type worldList struct {
	Worlds []worldSummary `json:"worlds"`
	Cursor *string        `json:"cursor"`
}

// deleting is DELETE /v0/worlds/{world}'s answer.
type deleting struct {
	WorldID string `json:"worldId"`
	Status  string `json:"status" const:"\"deleting\""`
}

// joinBody mirrors worldhttp's joinBody.
type joinBody struct {
	PublicKey string          `json:"publicKey" doc:"the joining key (standard base64, 32 bytes)"`
	Metadata  json.RawMessage `json:"metadata,omitempty" doc:"a JSON object shown to the other members"`
}

// member mirrors worldhttp's agentOut.
type member struct {
	AWNID     string          `json:"awnId"`
	SubjectID *string         `json:"subjectId" doc:"the registry name bound to the same key, or null"`
	Slot      int64           `json:"slot"`
	JoinedAt  string          `json:"joinedAt"`
	Presence  string          `json:"presence" doc:"online or offline"`
	Metadata  json.RawMessage `json:"metadata"`
}

// memberPage mirrors worldhttp's agentsOut.
type memberPage struct {
	Agents []member `json:"agents"`
	Count  int      `json:"count"`
	Cursor *string  `json:"cursor"`
}

// joined mirrors worldhttp's joinOut (players is null when the page
// could not be read: joinNoPlayers).
type joined struct {
	AWNID    string      `json:"awnId"`
	Slot     int64       `json:"slot"`
	JoinedAt string      `json:"joinedAt"`
	Players  *memberPage `json:"players"`
}

// left is leave's answer.
type left struct {
	Left bool `json:"left" const:"true"`
}

// sendBody mirrors worldhttp's sendBody.
type sendBody struct {
	To          string          `json:"to" doc:"the recipient's awnId"`
	Content     json.RawMessage `json:"content" example:"{\"text\":\"hello\"}"`
	ContentType string          `json:"contentType,omitempty"`
}

// message mirrors worldhttp's messageOut.
type message struct {
	MessageID   string          `json:"messageId"`
	From        string          `json:"from"`
	To          string          `json:"to"`
	Content     json.RawMessage `json:"content"`
	ContentType string          `json:"contentType"`
	SentAt      string          `json:"sentAt"`
}

// messageQueued mirrors worldhttp's queued message: the message as it
// will be stored, and queued.
type messageQueued struct {
	MessageID   string          `json:"messageId"`
	From        string          `json:"from"`
	To          string          `json:"to"`
	Content     json.RawMessage `json:"content"`
	ContentType string          `json:"contentType"`
	SentAt      string          `json:"sentAt"`
	Queued      bool            `json:"queued" doc:"true: the message reaches the recipient's inbox when the world's committer commits it, within about a second"`
}

// messageList is the inbox read's answer.
type messageList struct {
	Messages []message `json:"messages"`
	Count    int       `json:"count"`
}

// pingBody is ping's body.
type pingBody struct {
	Target string `json:"target" doc:"the awnId of the member to ping"`
}

// pinged is ping's answer.
type pinged struct {
	Target    string `json:"target"`
	Reachable bool   `json:"reachable"`
	LatencyMS *int64 `json:"latencyMs" doc:"the live probe's round trip; null when reachability came from polling"`
}

// actionBody is an action's body.
type actionBody struct {
	Action string          `json:"action" example:"move"`
	Params json.RawMessage `json:"params,omitempty"`
}

// actionAccepted is an action's answer.
type actionAccepted struct {
	ActionID string `json:"actionId"`
}

// actionQueued is an action's answer in a world that batches its actions.
type actionQueued struct {
	ActionID string `json:"actionId" doc:"the action.submitted event's actionId once committed"`
	Queued   bool   `json:"queued" doc:"always true: the action waits to be committed with others"`
}

// event mirrors worldhttp's eventOut.
type event struct {
	EventID    string          `json:"eventId" doc:"a ULID: sortable"`
	Type       string          `json:"type" example:"agent.joined"`
	WorldID    string          `json:"worldId"`
	Data       json.RawMessage `json:"data"`
	Visibility string          `json:"visibility" doc:"public, agents or private"`
	CreatedAt  string          `json:"createdAt"`
}

// eventPage is the events poll's answer.
type eventPage struct {
	Events []event `json:"events"`
	Count  int     `json:"count"`
	Cursor string  `json:"cursor" doc:"where the next poll starts (after=)"`
}

// memberOut mirrors worldhttp's memberOut (kick's answer).
type memberOut struct {
	AWNID     string  `json:"awnId"`
	SubjectID *string `json:"subjectId"`
	Slot      int64   `json:"slot"`
	JoinedAt  string  `json:"joinedAt"`
}

// banBody is a ban's optional body.
type banBody struct {
	Reason string `json:"reason,omitempty"`
}

// ban mirrors worldhttp's banOut.
type ban struct {
	AWNID    string `json:"awnId"`
	Reason   string `json:"reason,omitempty"`
	BannedAt string `json:"bannedAt"`
}

// banList is the bans list's answer.
type banList struct {
	Bans   []ban   `json:"bans"`
	Count  int     `json:"count"`
	Cursor *string `json:"cursor"`
}

// hookHealth mirrors worldhttp's hookOut.
type hookHealth struct {
	URL           string  `json:"url"`
	Enabled       bool    `json:"enabled"`
	Healthy       bool    `json:"healthy"`
	Delivered     int64   `json:"delivered"`
	Failed        int64   `json:"failed"`
	LastError     string  `json:"lastError,omitempty"`
	LastSuccessAt *string `json:"lastSuccessAt"`
	LastErrorAt   *string `json:"lastErrorAt"`
}

// agentWorld mirrors worldhttp's agentWorldOut.
type agentWorld struct {
	WorldID  string      `json:"worldId"`
	Role     string      `json:"role" doc:"member or owner"`
	Slot     *int64      `json:"slot,omitempty"`
	JoinedAt string      `json:"joinedAt,omitempty"`
	Presence string      `json:"presence,omitempty"`
	Webhook  *hookHealth `json:"webhook,omitempty"`
	Name     string      `json:"name,omitempty"`
	Members  *int64      `json:"members,omitempty"`
}

// agentWorlds is the agent's own view.
type agentWorlds struct {
	AWNID  string       `json:"awnId"`
	Worlds []agentWorld `json:"worlds"`
	Count  int          `json:"count"`
	Cursor *string      `json:"cursor"`
}

// webhookBody is PUT …/webhook's body.
type webhookBody struct {
	URL string `json:"url" example:"https://agent.example/hook"`
}

// webhookSet is PUT …/webhook's answer: the secret is shown here only.
type webhookSet struct {
	URL    string `json:"url"`
	Secret string `json:"secret" doc:"the signing secret (whsec_…), shown once"`
}

// webhookRemoved is DELETE …/webhook's answer.
type webhookRemoved struct {
	Removed bool `json:"removed" const:"true"`
}

// replayBody is POST …/webhook/replay's body.
type replayBody struct {
	Since time.Time `json:"since" doc:"RFC 3339: dead letters from then on are sent again"`
}

// replayed is the replay's answer.
type replayed struct {
	Replayed int `json:"replayed"`
}

// accountOut mirrors escrowhttp's accountOut.
type accountOut struct {
	Balance    int64      `json:"balance" doc:"credits the agent can spend"`
	Held       int64      `json:"held" doc:"credits held in the agent's funded escrows"`
	Entries    []entryOut `json:"entries" doc:"newest first"`
	NextCursor *string    `json:"next_cursor" doc:"the cursor of the next page; null: none"`
}

// entryOut mirrors escrowhttp's entryOut: one ledger entry.
type entryOut struct {
	ID           string `json:"id"`
	Tx           string `json:"tx"`
	Amount       int64  `json:"amount" doc:"positive: credited, negative: debited"`
	Counterparty string `json:"counterparty"`
	Memo         string `json:"memo"`
	At           string `json:"at" doc:"RFC 3339"`
}

// grantBody mirrors escrowhttp.GrantBody, whose memo may be left out.
type grantBody struct {
	Amount int64  `json:"amount" example:"1000"`
	Memo   string `json:"memo,omitempty"`
}

// granted is the grant's answer (a map in escrowhttp's grant).
type granted struct {
	AWNID   string `json:"awnId"`
	Balance int64  `json:"balance"`
	Held    int64  `json:"held"`
}

// createEscrowBody mirrors escrowhttp.CreateBody, whose deadline may be
// left out (the service's default applies).
type createEscrowBody struct {
	Provider   string          `json:"provider" doc:"a registered agent's name" example:"a2awire-clean"`
	Capability string          `json:"capability" example:"word-count"`
	Input      json.RawMessage `json:"input" doc:"the capability's input, sent to the provider on verify"`
	Amount     int64           `json:"amount" doc:"credits, held from the buyer's balance on fund" example:"10"`
	Deadline   string          `json:"deadline,omitempty" doc:"RFC 3339: when an undelivered escrow is refunded"`
}

// escrowOut mirrors escrowhttp's escrowOut.
type escrowOut struct {
	ID              string          `json:"id"`
	State           string          `json:"state" doc:"created, funded, delivered, failed, released, refunded or disputed"`
	Buyer           string          `json:"buyer"`
	Provider        string          `json:"provider"`
	ProviderAccount string          `json:"providerAccount" doc:"the account paid on release"`
	Capability      string          `json:"capability"`
	Input           json.RawMessage `json:"input"`
	Amount          int64           `json:"amount"`
	Deadline        string          `json:"deadline" doc:"RFC 3339"`
	CreatedAt       string          `json:"createdAt" doc:"RFC 3339"`
	Output          json.RawMessage `json:"output,omitempty" doc:"the provider's output (after verify)"`
	OutputSHA256    string          `json:"outputSha256,omitempty"`
	Status          int             `json:"status,omitempty" doc:"the provider's HTTP status (after verify)"`
	Reason          string          `json:"reason,omitempty" doc:"why verification failed"`
	Transitions     []transitionOut `json:"transitions"`
}

// transitionOut mirrors escrowhttp's transitionOut.
type transitionOut struct {
	From string `json:"from"`
	To   string `json:"to"`
	By   string `json:"by" doc:"the awnId that moved it, or schedule"`
	At   string `json:"at" doc:"RFC 3339"`
}

// escrowList is the list's answer (a map in escrowhttp's list).
type escrowList struct {
	Escrows    []escrowOut `json:"escrows"`
	NextCursor *string     `json:"next_cursor"`
}

// eventStream is a world's event stream: Server-Sent Events, not JSON.
type eventStream struct{}

// OpenAPISchema: the body is text; its format is in the description.
func (eventStream) OpenAPISchema() map[string]any {
	return map[string]any{"type": "string", "description": "Server-Sent Events: per world event `id:` its eventId, `event:` its type, " +
		"`data:` the event's JSON as GET …/events answers it; comment heartbeats; before the stream ends a `retry:` hint " +
		"(reconnect with Last-Event-ID)."}
}

// rpcRequest mirrors a2abridge's rpcRequest as it arrives: a JSON-RPC 2.0
// request (no batch, no notification).
type rpcRequest struct{}

// OpenAPISchema: JSON-RPC 2.0's request object as the bridge accepts it.
func (rpcRequest) OpenAPISchema() map[string]any {
	return map[string]any{
		"type": "object", "required": []any{"jsonrpc", "id", "method"}, "additionalProperties": false,
		"properties": map[string]any{
			"jsonrpc": map[string]any{"const": "2.0"},
			"id":      map[string]any{"type": []any{"string", "integer"}},
			"method":  map[string]any{"type": "string", "enum": []any{"SendMessage", "SendStreamingMessage", "GetTask", "CancelTask"}},
			"params":  map[string]any{"type": "object", "description": "the A2A method's params (a2a.proto's request message as JSON)"},
		},
	}
}

// rpcAnswer mirrors a2abridge's response: a JSON-RPC 2.0 result, or an
// error object answered with 200 (or 404/415, see the route's errors).
type rpcAnswer struct{}

// OpenAPISchema: a result or a JSON-RPC error, never both.
func (rpcAnswer) OpenAPISchema() map[string]any {
	return map[string]any{"oneOf": []any{
		map[string]any{
			"type": "object", "required": []any{"jsonrpc", "id", "result"}, "additionalProperties": false,
			"properties": map[string]any{
				"jsonrpc": map[string]any{"const": "2.0"},
				"id":      map[string]any{"type": []any{"string", "integer"}},
				"result":  map[string]any{"type": "object", "description": "the A2A method's answer (a Task or Message; a StreamResponse per event when streamed)"},
			},
		},
		map[string]any{"$ref": "#/components/schemas/" + rpcErrorSchema},
	}}
}

// rpcErrorSchema is the component of a JSON-RPC error response.
const rpcErrorSchema = "JSONRPCErrorResponse"

// rpcErrorComponent mirrors a2abridge's response with its error set
// (rpcError marshals as {code, message, data}).
func rpcErrorComponent() map[string]any {
	return map[string]any{
		"type": "object", "required": []any{"jsonrpc", "id", "error"}, "additionalProperties": false,
		"properties": map[string]any{
			"jsonrpc": map[string]any{"const": "2.0"},
			"id":      map[string]any{"type": []any{"string", "integer", "null"}, "description": "the request's id; null when it could not be read"},
			"error": map[string]any{
				"type": "object", "required": []any{"code", "message", "data"}, "additionalProperties": false,
				"properties": map[string]any{
					"code":    map[string]any{"type": "integer", "description": "JSON-RPC's (-32700 … -32600) or A2A's (-32001 task not found, -32002 not cancelable, -32004 unsupported, -32009 version not supported)"},
					"message": map[string]any{"type": "string"},
					"data": map[string]any{"type": "array", "description": "A2A v1.0 error details: a google.rpc.ErrorInfo naming the reason first",
						"items": map[string]any{"type": "object", "required": []any{"@type"}, "properties": map[string]any{"@type": map[string]any{"type": "string"}}}},
				},
			},
		},
	}
}
