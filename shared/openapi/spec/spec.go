// Package spec writes the network's OpenAPI 3.1 document from the route
// table (shared/routes: methods, paths, path parameters, auth) and the
// Go types of each route's request and answers (ops, one entry per route,
// turned into JSON Schema by reflection). Package openapi serves the
// committed result; this package's tests keep it current and check it
// with an independent OpenAPI validator.
package spec

import (
	"bytes"
	"encoding/json"
	"fmt"
	"net/http"
	"reflect"
	"slices"
	"strconv"
	"strings"

	"github.com/a2awire/a2awire/shared/protocol"
	"github.com/a2awire/a2awire/shared/routes"
)

// Surface is an API surface: each has its own error shape.
type Surface string

// The surfaces.
const (
	// Invocation is the provider protocol: {"error", "message", "details"?}.
	Invocation Surface = "invocation"
	// Registry is the registry and the key directories: {"error", "message"}.
	Registry Surface = "registry"
	// Worlds answers {"ok": true, "data"} and {"ok": false, "error": {"code", "message"}}.
	Worlds Surface = "worlds"
	// Document is /openapi.json itself.
	Document Surface = "document"
	// A2A is the A2A bridge: Agent Cards (errors as the registry's) and
	// JSON-RPC (errors as JSON-RPC error objects).
	A2A Surface = "a2a"
)

// SurfaceOf is the surface a path belongs to.
func SurfaceOf(path string) Surface {
	switch {
	case strings.HasPrefix(path, "/agents/"):
		return Invocation
	case strings.HasPrefix(path, "/v0/"):
		return Worlds
	case path == "/openapi.json":
		return Document
	case strings.HasPrefix(path, "/a2a/"):
		return A2A
	}
	return Registry
}

// SecurityScheme is the name of the signature scheme in the document.
const SecurityScheme = "awnSignature"

// Missing lists the route keys of table that have no entry in ops, each
// as the line to add.
func Missing(table []routes.Route) []string {
	var out []string
	for _, r := range table {
		if _, ok := ops[r.Key()]; !ok {
			out = append(out, fmt.Sprintf("%q: {Summary: \"…\", Body: yourRequest{} /* or omit */, OK: map[int]any{200: yourAnswer{}}},", r.Key()))
		}
	}
	return out
}

// Unexercised lists the route keys of table that seen (route key → how
// many recorded exchanges reached it) does not hold, in table order: the
// routes a test of the whole API left out.
func Unexercised(table []routes.Route, seen map[string]int) []string {
	var out []string
	for _, r := range table {
		if seen[r.Key()] == 0 {
			out = append(out, r.Key())
		}
	}
	return out
}

// Stale lists the keys of ops that name no route of table.
func Stale(table []routes.Route) []string {
	var out []string
	for k := range ops {
		if !slices.ContainsFunc(table, func(r routes.Route) bool { return r.Key() == k }) {
			out = append(out, k)
		}
	}
	slices.Sort(out)
	return out
}

// Documented is every success and error status the document names for
// each route key (not "default"): what the tests must see answered.
func Documented(table []routes.Route) map[string][]int {
	out := map[string][]int{}
	for _, r := range table {
		op := ops[r.Key()]
		out[r.Key()] = statuses(r, op)
	}
	return out
}

func statuses(r routes.Route, op Op) []int {
	var s []int
	for st := range op.OK {
		s = append(s, st)
	}
	s = append(s, op.Errors...)
	if r.Auth != routes.Public {
		s = append(s, http.StatusUnauthorized)
	}
	slices.Sort(s)
	return slices.Compact(s)
}

// Generate writes the document for the route table: indented JSON, keys
// sorted, so the same table always gives the same bytes.
func Generate() ([]byte, error) { return generate(routes.All()) }

func generate(table []routes.Route) ([]byte, error) {
	if m := Missing(table); len(m) > 0 {
		return nil, fmt.Errorf("openapi: routes with no entry in ops (shared/openapi/spec/ops.go); add:\n\t%s", strings.Join(m, "\n\t"))
	}
	s := newSchemas()
	paths := map[string]any{}
	for _, r := range table {
		item, _ := paths[r.Path].(map[string]any)
		if item == nil {
			item = map[string]any{}
			paths[r.Path] = item
		}
		method := strings.ToLower(r.Method)
		if r.Method == "ANY" {
			method = "post" // the invocation protocol is POST; other methods answer 405
		}
		item[method] = operation(s, r, ops[r.Key()])
	}
	s.components["InvocationError"] = s.of(reflect.TypeFor[protocol.ErrorBody]())
	s.components["RegistryError"] = map[string]any{
		"type": "object", "required": []any{"error", "message"}, "additionalProperties": false,
		"properties": map[string]any{
			"error":   map[string]any{"type": "string", "pattern": "^[a-z][a-z0-9_]*$", "description": "snake_case code", "examples": []any{"not_found"}},
			"message": map[string]any{"type": "string"},
		},
	}
	s.components[rpcErrorSchema] = rpcErrorComponent()
	s.components["WorldError"] = map[string]any{
		"type": "object", "required": []any{"ok", "error"}, "additionalProperties": false,
		"properties": map[string]any{
			"ok": map[string]any{"const": false},
			"error": map[string]any{
				"type": "object", "required": []any{"code", "message"}, "additionalProperties": false,
				"properties": map[string]any{
					"code":    map[string]any{"type": "string", "pattern": "^[A-Z][A-Z0-9_]*$", "description": "UPPER_SNAKE code", "examples": []any{"NOT_JOINED"}},
					"message": map[string]any{"type": "string"},
				},
			},
		},
	}
	doc := map[string]any{
		"openapi": "3.1.1",
		"info": map[string]any{
			"title":   "a2awire",
			"version": "0",
			"description": "The a2awire agent network: the provider invocation protocol, the registry and key directories, " +
				"the worlds, the A2A bridge, and credits and escrow. Generated from the route table (shared/routes) and the handlers' types (shared/openapi/spec); " +
				"do not edit by hand: make openapi rewrites it.",
		},
		"servers": []any{map[string]any{"url": "/", "description": "the deployment's base URL (make local: http://127.0.0.1:8080)"}},
		"tags": []any{
			map[string]any{"name": string(Invocation), "description": "providers: POST {task, input} → {output, metadata}; errors {error, message, details?}"},
			map[string]any{"name": string(Registry), "description": "the registry, key directories and the network's Agent Card; errors {error, message} with snake_case codes"},
			map[string]any{"name": string(Worlds), "description": "worlds: answers {ok: true, data}; errors {ok: false, error: {code, message}} with UPPER_SNAKE codes"},
			map[string]any{"name": string(A2A), "description": "the A2A bridge: each registered provider as an A2A agent (Agent Card, JSON-RPC); " +
				"card errors {error, message}, JSON-RPC errors {jsonrpc, id, error: {code, message, data}}"},
			map[string]any{"name": string(Document), "description": "this document"},
		},
		"paths": paths,
		"components": map[string]any{
			"schemas": s.components,
			"securitySchemes": map[string]any{
				SecurityScheme: map[string]any{
					"type": "apiKey", "in": "header", "name": "Signature",
					"description": "AWN-Ed25519: an HTTP Message Signature (RFC 9421) in the Web Bot Auth profile: Ed25519, tag=\"web-bot-auth\", " +
						"keyid the key's JWK thumbprint, created/expires (at most 300 s apart), a single-use nonce; covering @method, @authority, @path, " +
						"@query and content-digest (and signature-agent when sent). Sent as the Signature, Signature-Input and Content-Digest headers " +
						"(Signature-Agent optional). Signed routes verify against the key in the body (register, create a world, join) or the " +
						"registration's or membership's key; member routes need a member of the world in the path (401 NOT_JOINED otherwise), " +
						"owner routes its owner (members 403, others 401).",
				},
			},
		},
	}
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	enc.SetEscapeHTML(false)
	enc.SetIndent("", "  ")
	if err := enc.Encode(doc); err != nil {
		return nil, fmt.Errorf("openapi: encode: %w", err)
	}
	return buf.Bytes(), nil
}

// operation is one route's operation object.
func operation(s *schemas, r routes.Route, op Op) map[string]any {
	surface := SurfaceOf(r.Path)
	o := map[string]any{
		"operationId": operationID(r),
		"summary":     op.Summary,
		"tags":        []any{string(surface)},
		"x-function":  r.Function,
		"x-auth":      string(r.Auth),
	}
	if desc := authText(r.Auth); desc != "" {
		o["description"] = desc
	}
	var params []any
	for _, seg := range strings.Split(r.Path, "/") {
		if strings.HasPrefix(seg, "{") {
			params = append(params, map[string]any{"name": strings.Trim(seg, "{}+"), "in": "path", "required": true, "schema": map[string]any{"type": "string"}})
		}
	}
	for _, q := range append(slices.Clone(op.Query), op.Headers...) {
		sch := map[string]any{"type": q.Type}
		if q.Type == "integer" && (q.Min != 0 || q.Max != 0) {
			sch["minimum"], sch["maximum"] = q.Min, q.Max
		}
		if len(q.Enum) > 0 {
			sch["enum"] = q.Enum
		}
		in := q.In
		if in == "" {
			in = "query"
		}
		p := map[string]any{"name": q.Name, "in": in, "schema": sch}
		if q.Description != "" {
			p["description"] = q.Description
		}
		params = append(params, p)
	}
	if r.Auth != routes.Public {
		for _, h := range []string{"Signature-Input", "Content-Digest"} {
			params = append(params, map[string]any{"name": h, "in": "header", "required": !op.AnonymousToo, "schema": map[string]any{"type": "string"},
				"description": "part of the AWN-Ed25519 signature (see the " + SecurityScheme + " security scheme)"})
		}
		sec := []any{map[string]any{SecurityScheme: []any{}}}
		if op.AnonymousToo {
			sec = append(sec, map[string]any{})
		}
		o["security"] = sec
	} else {
		o["security"] = []any{}
	}
	if len(params) > 0 {
		o["parameters"] = params
	}
	if op.Body != nil {
		media := map[string]any{"schema": s.of(reflect.TypeOf(op.Body))}
		if op.Example != "" {
			media["example"] = json.RawMessage(op.Example)
		}
		o["requestBody"] = map[string]any{"required": !op.BodyOptional, "content": map[string]any{"application/json": media}}
	}
	responses := map[string]any{}
	for st, typ := range op.OK {
		sch := s.of(reflect.TypeOf(typ))
		if surface == Worlds && !op.Bare {
			sch = map[string]any{"type": "object", "required": []any{"ok", "data"}, "additionalProperties": false,
				"properties": map[string]any{"ok": map[string]any{"const": true}, "data": sch}}
		}
		ct := op.ContentType
		if ct == "" {
			ct = "application/json"
		}
		media := map[string]any{"schema": sch}
		if op.Answer != "" && st == http.StatusOK {
			media["example"] = json.RawMessage(op.Answer)
		}
		content := map[string]any{ct: media}
		if op.StreamToo {
			content["text/event-stream"] = map[string]any{"schema": map[string]any{"type": "string",
				"description": "Server-Sent Events (SendStreamingMessage): each data line one JSON-RPC response with the request's id"}}
		}
		responses[strconv.Itoa(st)] = map[string]any{"description": http.StatusText(st), "content": content}
	}
	if surface != Document {
		ref := map[string]any{"$ref": "#/components/schemas/" + errorSchema(surface)}
		errResp := func(desc string, sch map[string]any) map[string]any {
			return map[string]any{"description": desc, "content": map[string]any{"application/json": map[string]any{"schema": sch}}}
		}
		errRef, otherRef, otherText := ref, ref, "any other error, in the surface's error shape (429 and 503 carry Retry-After)"
		if op.RPC {
			errRef = map[string]any{"$ref": "#/components/schemas/" + rpcErrorSchema}
			otherRef = map[string]any{"oneOf": []any{errRef, ref}}
			otherText = "a JSON-RPC error response, or a refusal before JSON-RPC (such as 413) in the registry's shape"
		}
		for _, st := range statuses(r, op) {
			if st >= 400 {
				responses[strconv.Itoa(st)] = errResp(errorText(st, surface), errRef)
			}
		}
		responses["default"] = errResp(otherText, otherRef)
	}
	o["responses"] = responses
	return o
}

func errorSchema(s Surface) string {
	switch s {
	case Invocation:
		return "InvocationError"
	case Worlds:
		return "WorldError"
	}
	return "RegistryError"
}

func errorText(st int, s Surface) string {
	switch {
	case st == http.StatusUnauthorized && s == Worlds:
		return "the signature is missing or fails (UNAUTHORIZED), or the key is no member of the world (NOT_JOINED)"
	case st == http.StatusUnauthorized:
		return "the signature is missing or fails (unauthorized)"
	}
	return http.StatusText(st)
}

func authText(a routes.Auth) string {
	switch a {
	case routes.Signed:
		return "Signed (AWN-Ed25519)."
	case routes.Member:
		return "Signed by a member of the world (AWN-Ed25519)."
	case routes.Owner:
		return "Signed by the owner of the resource in the path (AWN-Ed25519)."
	}
	return ""
}

// operationID is the method and the path's words in camel case, e.g.
// putV0WorldsWorldBansAwnId.
func operationID(r routes.Route) string {
	m := strings.ToLower(r.Method)
	if m == "any" {
		m = "post"
	}
	var b strings.Builder
	b.WriteString(m)
	up := true
	for _, c := range r.Path {
		switch {
		case c >= 'a' && c <= 'z', c >= 'A' && c <= 'Z', c >= '0' && c <= '9':
			if up && c >= 'a' && c <= 'z' {
				c -= 'a' - 'A'
			}
			b.WriteRune(c)
			up = false
		default:
			up = true
		}
	}
	return b.String()
}
