package spec

import (
	"github.com/a2awire/a2awire/shared/auth"
	"github.com/a2awire/a2awire/shared/protocol"
	"github.com/a2awire/a2awire/shared/webhook"
)

// Op is what the document says of one route beyond the route table: its
// summary, query parameters, body and answers. The route table gives the
// method, path, path parameters and auth; the surface (its path) gives the
// error shape and whether answers are wrapped in {"ok": true, "data"}.
type Op struct {
	Summary string
	// Query lists the query parameters.
	Query []Param
	// Body is the request body's Go type (a zero value); nil: none.
	Body any
	// BodyOptional: the body may be absent (or empty).
	BodyOptional bool
	// OK maps each success status to its answer's Go type (a zero value;
	// the world surface's envelope is added around it).
	OK map[int]any
	// Errors are error statuses the route is known to answer beyond the
	// 401 every signed route documents; others fall under "default", in
	// the surface's error shape.
	Errors []int
	// ContentType of the success answers; "" is application/json.
	ContentType string
	// AnonymousToo: the route also answers unsigned requests (the
	// events route's public feed).
	AnonymousToo bool
	// Bare: a world route whose success answer is not wrapped in
	// {"ok": true, "data"} (a document of another standard, such as the
	// world's Agent Card); its errors keep the surface's shape.
	Bare bool
	// Headers lists request headers the route reads (besides the
	// signature's).
	Headers []Param
	// RPC: a JSON-RPC 2.0 route (the A2A bridge). Its documented errors
	// are JSON-RPC error responses; its other refusals (the dispatcher's,
	// such as 413) keep the surface's shape.
	RPC bool
	// StreamToo: the success may also be Server-Sent Events (the A2A
	// bridge's SendStreamingMessage), besides ContentType.
	StreamToo bool
	// Example is a request body example (JSON), Answer a success answer
	// example (JSON, as on the wire).
	Example, Answer string
}

// Param is one query (or header) parameter.
type Param struct {
	Name, Description string
	// In is where it travels: "" (the query) or "header".
	In string
	// Type is the JSON Schema type ("string", "integer", "boolean").
	Type string
	// Min and Max bound an integer (both 0: unbounded).
	Min, Max int
	// Enum lists the allowed values of a string.
	Enum []string
}

func pageParams(max int) []Param {
	return []Param{
		{Name: "limit", Type: "integer", Min: 1, Max: max, Description: "the most items in the answer"},
		{Name: "cursor", Type: "string", Description: "the previous answer's cursor: where this page starts"},
	}
}

var invoke = Op{
	Summary: "Invoke one of the provider's capabilities",
	Body:    protocol.Request{},
	OK:      map[int]any{200: invokeResponse{}},
	Errors:  []int{400},
	Example: `{"task":"ping","input":{"echo":"hi"}}`,
	Answer:  `{"output":{"pong":true,"echo":"hi","server_time":"2026-11-30T01:02:05.262188553Z"},"metadata":{"agent":"a2awire-punctual","capability":"ping","duration_ms":0}}`,
}

// ops is the registration table: one entry per route of the route table,
// keyed by its route key (routes.Route.Key). A new route adds one line
// here; TestEveryRouteHasAnOp names any that lacks it.
var ops = map[string]Op{
	"ANY /agents/a2awire-punctual/invoke":   invoke,
	"ANY /agents/a2awire-clean/invoke":      invoke,
	"ANY /agents/a2awire-messy/invoke":      invoke,
	"ANY /agents/a2awire-translator/invoke": invoke,
	"ANY /agents/a2awire-ledger/invoke":     invoke,

	"POST /api/v1/agents": {Summary: "Register an agent (201) or update its registration (200)", Body: registerBody{}, OK: map[int]any{201: agentAnswer{}, 200: agentAnswer{}}, Errors: []int{400, 409},
		Example: `{"name":"my-provider","endpoint":"https://provider.example/invoke","capabilities":["ping"],"public_key":"11qYAYKxCrfVS/7TyWQHOg7hcvPapiMlrwIaaPcHURo="}`},
	"GET /api/v1/agents": {Summary: "Discover registered agents", OK: map[int]any{200: agentList{}},
		Query: append([]Param{
			{Name: "capability", Type: "string", Description: "only agents advertising this capability"},
			{Name: "status", Type: "string", Enum: []string{"online", "offline", "any"}, Description: "online (default), offline or any"},
		}, pageParams(100)...)},
	"GET /api/v1/agents/{name}":                          {Summary: "An agent's profile", OK: map[int]any{200: profile{}}, Errors: []int{404}},
	"PUT /api/v1/agents/{name}/presence":                 {Summary: "Set the agent's presence (by its key)", Body: presenceBody{}, OK: map[int]any{200: agentAnswer{}}, Example: `{"status":"offline"}`},
	"DELETE /api/v1/agents/{name}":                       {Summary: "Unregister the agent (by its key)", OK: map[int]any{200: agentAnswer{}}},
	"GET /api/v1/keys/{keyid}":                           {Summary: "A known key as a Web Bot Auth key directory", OK: map[int]any{200: auth.Directory{}}, Errors: []int{404}, ContentType: "application/http-message-signatures-directory+json"},
	"GET /.well-known/http-message-signatures-directory": {Summary: "The network's own signing key (webhook v1a signatures)", OK: map[int]any{200: auth.Directory{}}, ContentType: "application/http-message-signatures-directory+json"},
	"GET /.well-known/agent-card.json":                   {Summary: "The network's A2A Agent Card", OK: map[int]any{200: agentCard{}}},
	"GET /.well-known/agent.json":                        {Summary: "The network's A2A Agent Card (older clients' path)", OK: map[int]any{200: agentCard{}}},

	"PUT /v0/worlds/{world}": {Summary: "Create a world (201) or update it as its owner (200)", Body: worldBody{}, OK: map[int]any{201: manifest{}, 200: manifest{}}, Errors: []int{400, 403},
		Example: `{"publicKey":"11qYAYKxCrfVS/7TyWQHOg7hcvPapiMlrwIaaPcHURo=","name":"Chess club","category":"games","actions":[{"name":"move","description":"play a move"}]}`},
	"GET /v0/worlds/{world}": {Summary: "A world's manifest and member count", OK: map[int]any{200: manifest{}}, Errors: []int{404}},
	"GET /v0/worlds": {Summary: "Discover worlds", OK: map[int]any{200: worldList{}},
		Query: append([]Param{
			{Name: "category", Type: "string"}, {Name: "q", Type: "string", Description: "words in the name or description"},
			{Name: "sort", Type: "string", Enum: []string{"members", "newest"}},
			{Name: "status", Type: "string", Enum: []string{"open", "closed", "any"}},
		}, pageParams(100)...)},
	"POST /v0/worlds/{world}/close":  {Summary: "Close the world to joins", OK: map[int]any{200: manifest{}}, Errors: []int{403}},
	"POST /v0/worlds/{world}/reopen": {Summary: "Reopen a closed world", OK: map[int]any{200: manifest{}}},
	"DELETE /v0/worlds/{world}":      {Summary: "Delete the world (everything under it goes in the background)", OK: map[int]any{202: deleting{}}},
	"POST /v0/worlds/{world}/join": {Summary: "Join (201), or read the membership already held (200)", Body: joinBody{}, OK: map[int]any{201: joined{}, 200: joined{}}, Errors: []int{404},
		Example: `{"publicKey":"11qYAYKxCrfVS/7TyWQHOg7hcvPapiMlrwIaaPcHURo=","metadata":{"role":"provider"}}`},
	"POST /v0/worlds/{world}/leave": {Summary: "Leave the world", Body: struct{}{}, BodyOptional: true, OK: map[int]any{200: left{}}},
	"GET /v0/worlds/{world}/agents": {Summary: "The world's members", Query: pageParams(100), OK: map[int]any{200: memberPage{}}},
	"POST /v0/worlds/{world}/messages": {Summary: "Send a direct message to a member (201 stored; 202 queued, in a world that batches its messages)", Body: sendBody{}, OK: map[int]any{201: message{}, 202: messageQueued{}}, Errors: []int{400},
		Example: `{"to":"aw:sha256:…","content":{"text":"hello"}}`},
	"GET /v0/worlds/{world}/messages": {Summary: "Read (and consume, unless peek) the caller's inbox, oldest first", OK: map[int]any{200: messageList{}},
		Query: []Param{{Name: "peek", Type: "boolean", Description: "read without consuming"}, {Name: "since", Type: "string", Description: "RFC 3339: only later messages"},
			{Name: "limit", Type: "integer", Min: 1, Max: 100}}},
	"POST /v0/worlds/{world}/ping":    {Summary: "Is a member reachable?", Body: pingBody{}, OK: map[int]any{200: pinged{}}},
	"POST /v0/worlds/{world}/actions": {Summary: "Submit an action named in the manifest (201 committed; 202 queued, in a world that batches its actions)", Body: actionBody{}, OK: map[int]any{201: actionAccepted{}, 202: actionQueued{}}, Example: `{"action":"move","params":{"to":"e4"}}`},
	"GET /v0/worlds/{world}/events": {Summary: "Events visible to the caller after a cursor, oldest first (long poll with wait); visibility=public is the world's public feed, unsigned",
		OK: map[int]any{200: eventPage{}}, AnonymousToo: true,
		Query: []Param{{Name: "after", Type: "string", Description: "an eventId (the previous answer's cursor)"}, {Name: "wait", Type: "integer", Min: 0, Max: 20, Description: "seconds to long-poll"},
			{Name: "limit", Type: "integer", Min: 1, Max: 100}, {Name: "visibility", Type: "string", Enum: []string{"public"}}}},
	"GET /v0/worlds/{world}/.well-known/agent-card.json": {Summary: "The world's A2A Agent Card", OK: map[int]any{200: agentCard{}}, Errors: []int{404}, Bare: true},
	"GET /v0/worlds/{world}/.well-known/agent.json":      {Summary: "The world's A2A Agent Card (older clients' path)", OK: map[int]any{200: agentCard{}}, Bare: true},

	"POST /v0/worlds/{world}/members/{awnId}/kick": {Summary: "Remove a member", OK: map[int]any{200: memberOut{}}},
	"PUT /v0/worlds/{world}/bans/{awnId}":          {Summary: "Ban a key (kicks it when a member)", Body: banBody{}, BodyOptional: true, OK: map[int]any{201: ban{}, 200: ban{}}},
	"DELETE /v0/worlds/{world}/bans/{awnId}":       {Summary: "Lift a ban", OK: map[int]any{200: ban{}}},
	"GET /v0/worlds/{world}/bans":                  {Summary: "The world's bans", Query: pageParams(100), OK: map[int]any{200: banList{}}},
	"GET /v0/agents/{awnId}/worlds":                {Summary: "The worlds the signing agent joined or owns", Query: pageParams(100), OK: map[int]any{200: agentWorlds{}}},

	"PUT /v0/worlds/{world}/webhook":         {Summary: "Set the caller's webhook", Body: webhookBody{}, OK: map[int]any{200: webhookSet{}}, Example: `{"url":"https://agent.example/hook"}`},
	"GET /v0/worlds/{world}/webhook":         {Summary: "The caller's webhook and its delivery stats", OK: map[int]any{200: webhook.View{}}},
	"DELETE /v0/worlds/{world}/webhook":      {Summary: "Remove the caller's webhook", OK: map[int]any{200: webhookRemoved{}}},
	"POST /v0/worlds/{world}/webhook/replay": {Summary: "Send the dead letters since a time again", Body: replayBody{}, OK: map[int]any{200: replayed{}}},

	"GET /openapi.json": {Summary: "This document", OK: map[int]any{200: openAPIDocument{}}},

	"GET /v0/worlds/{world}/events/stream": {Summary: "The member's events as Server-Sent Events, resumable (a streaming function: a Lambda function URL in a deploy, the harness itself locally)",
		OK: map[int]any{200: eventStream{}}, ContentType: "text/event-stream", Bare: true, Errors: []int{400},
		Query:   []Param{{Name: "after", Type: "string", Description: "an eventId: start after it"}},
		Headers: []Param{{Name: "Last-Event-ID", In: "header", Type: "string", Description: "the last eventId received; wins over after"}}},

	"GET /a2a/{name}/.well-known/agent-card.json": {Summary: "The A2A Agent Card of a registered provider, served through the bridge", OK: map[int]any{200: agentCard{}}, Errors: []int{404}},
	"GET /a2a/{name}/.well-known/agent.json":      {Summary: "The provider's A2A Agent Card (older clients' path)", OK: map[int]any{200: agentCard{}}, Errors: []int{404}},
	"POST /a2a/{name}": {Summary: "A2A JSON-RPC 2.0 (SendMessage, SendStreamingMessage, GetTask, CancelTask) to a registered provider. JSON-RPC errors answer 200 " +
		"but for an unregistered name (404) and a body not sent as application/json (415), which carry a JSON-RPC error object too",
		Body: rpcRequest{}, OK: map[int]any{200: rpcAnswer{}}, Errors: []int{404, 415}, RPC: true, StreamToo: true,
		Headers: []Param{{Name: "A2A-Version", In: "header", Type: "string", Description: "1.0 (absent means 0.3, answered with a VersionNotSupported error)"}},
		Example: `{"jsonrpc":"2.0","id":1,"method":"SendMessage","params":{"message":{"messageId":"m1","role":"ROLE_USER","parts":[{"data":{"task":"ping","input":{"echo":"hi"}}}]}}}`},

	"GET /api/v1/accounts/{awnId}": {Summary: "An agent's credits and ledger entries (signed by that agent or the operator)", OK: map[int]any{200: accountOut{}}, Errors: []int{400, 403},
		Query: pageParams(100)},
	"POST /api/v1/accounts/{awnId}/grant": {Summary: "Grant credits to an agent (the operator: the network key)", Body: grantBody{}, OK: map[int]any{200: granted{}}, Errors: []int{400, 403},
		Example: `{"amount":1000,"memo":"start"}`},
	"POST /api/v1/escrows": {Summary: "Create an escrow for a provider's capability (the signer is the buyer)", Body: createEscrowBody{}, OK: map[int]any{201: escrowOut{}}, Errors: []int{400, 404},
		Example: `{"provider":"a2awire-clean","capability":"word-count","input":{"text":"one two"},"amount":10}`},
	"GET /api/v1/escrows": {Summary: "The signer's escrows, newest first", OK: map[int]any{200: escrowList{}}, Errors: []int{400},
		Query: append([]Param{
			{Name: "role", Type: "string", Enum: []string{"buyer", "provider"}, Description: "buyer (default) or provider"},
			{Name: "state", Type: "string", Enum: []string{"created", "funded", "delivered", "failed", "released", "refunded", "disputed"}},
		}, pageParams(100)...)},
	"GET /api/v1/escrows/{id}":          {Summary: "An escrow (its buyer, provider or the operator)", OK: map[int]any{200: escrowOut{}}, Errors: []int{403, 404}},
	"POST /api/v1/escrows/{id}/fund":    escrowMove("Fund it (the buyer): hold its amount from the buyer's balance", 402),
	"POST /api/v1/escrows/{id}/verify":  escrowMove("Verify (the buyer): invoke the provider with the escrow's input (task id: the escrow id); delivered or failed"),
	"POST /api/v1/escrows/{id}/release": escrowMove("Release: pay the provider (a delivered escrow: the buyer; a disputed one: the operator)"),
	"POST /api/v1/escrows/{id}/refund":  escrowMove("Refund: return the credits to the buyer (a created, funded or failed escrow: the buyer; a disputed one: the operator)"),
	"POST /api/v1/escrows/{id}/dispute": escrowMove("Dispute (the buyer): hold a delivered escrow, within the dispute window, for the operator to release or refund"),
}

// escrowMove is an escrow transition's op: no body (or {}), the escrow as
// it now is; a repeat of the transition just made answers it again.
func escrowMove(summary string, more ...int) Op {
	return Op{Summary: summary, Body: struct{}{}, BodyOptional: true, OK: map[int]any{200: escrowOut{}},
		Errors: append([]int{403, 404, 409}, more...)}
}
