package spec

import (
	"encoding/json"
	"fmt"
	"reflect"
	"strings"
	"time"
)

// Schemer is a type that gives its own JSON Schema: a wire shape Go's
// reflection cannot see (a custom MarshalJSON, a document of another
// standard).
type Schemer interface {
	OpenAPISchema() map[string]any
}

var (
	rawMessage = reflect.TypeFor[json.RawMessage]()
	timeType   = reflect.TypeFor[time.Time]()
	schemer    = reflect.TypeFor[Schemer]()
	ownPkg     = reflect.TypeFor[Op]().PkgPath()
)

// schemas turns Go types into JSON Schema (the 2020-12 dialect OpenAPI 3.1
// uses) by reflection, as encoding/json would encode them: json tags name
// the properties, a field without omitempty is required, a pointer may be
// null, json.RawMessage and interfaces are any JSON. Named structs become
// components (refs), so the document names each shape once.
type schemas struct {
	components map[string]any
	names      map[reflect.Type]string
}

func newSchemas() *schemas {
	return &schemas{components: map[string]any{}, names: map[reflect.Type]string{}}
}

// of is the schema of t.
func (s *schemas) of(t reflect.Type) map[string]any {
	if t.Implements(schemer) {
		return reflect.Zero(t).Interface().(Schemer).OpenAPISchema()
	}
	switch {
	case t == rawMessage:
		return map[string]any{"description": "any JSON value"}
	case t == timeType:
		return map[string]any{"type": "string", "format": "date-time"}
	}
	switch t.Kind() {
	case reflect.Pointer:
		return nullable(s.of(t.Elem()))
	case reflect.String:
		return map[string]any{"type": "string"}
	case reflect.Bool:
		return map[string]any{"type": "boolean"}
	case reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64,
		reflect.Uint, reflect.Uint8, reflect.Uint16, reflect.Uint32, reflect.Uint64:
		return map[string]any{"type": "integer"}
	case reflect.Float32, reflect.Float64:
		return map[string]any{"type": "number"}
	case reflect.Interface:
		return map[string]any{"description": "any JSON value"}
	case reflect.Slice, reflect.Array:
		if t.Elem().Kind() == reflect.Uint8 {
			return map[string]any{"type": "string", "contentEncoding": "base64"}
		}
		return map[string]any{"type": "array", "items": s.of(t.Elem())}
	case reflect.Map:
		return map[string]any{"type": "object", "additionalProperties": s.of(t.Elem())}
	case reflect.Struct:
		if t.Name() == "" {
			return s.object(t)
		}
		return s.ref(t)
	}
	panic(fmt.Sprintf("openapi: no schema for Go type %s", t)) // a new shape needs a case here; the tests run every registered type
}

// ref registers the named struct t as a component and refers to it.
func (s *schemas) ref(t reflect.Type) map[string]any {
	name, ok := s.names[t]
	if !ok {
		// Component names read as types (Profile, not profile), whichever
		// package keeps the Go type unexported.
		// A type of another package is named with it (WebhookView, not
		// View), so the document's names say where each shape comes from.
		name = strings.ToUpper(t.Name()[:1]) + t.Name()[1:]
		if t.PkgPath() != ownPkg {
			name = lastElem(t.PkgPath()) + name
		}
		for other, n := range s.names {
			if n == name {
				panic(fmt.Sprintf("openapi: %s and %s would both be the component %s; rename one", t, other, name))
			}
		}
		s.names[t] = name
		s.components[name] = s.object(t)
	}
	return map[string]any{"$ref": "#/components/schemas/" + name}
}

// object is a struct's schema: its json fields, embedded structs
// flattened, nothing else allowed (a field the document does not know is
// a change the document missed).
func (s *schemas) object(t reflect.Type) map[string]any {
	props := map[string]any{}
	var required []string
	var walk func(reflect.Type)
	walk = func(t reflect.Type) {
		for i := range t.NumField() {
			f := t.Field(i)
			if !f.IsExported() && !f.Anonymous {
				continue
			}
			tag := f.Tag.Get("json")
			if tag == "-" {
				continue
			}
			name, opts, _ := strings.Cut(tag, ",")
			if f.Anonymous && name == "" && f.Type.Kind() == reflect.Struct {
				walk(f.Type)
				continue
			}
			if name == "" {
				name = f.Name
			}
			p := s.of(f.Type)
			if d := f.Tag.Get("doc"); d != "" {
				p = withKey(p, "description", d)
			}
			if e := f.Tag.Get("example"); e != "" {
				var v any
				if err := json.Unmarshal([]byte(e), &v); err != nil {
					v = e
				}
				p = withKey(p, "examples", []any{v})
			}
			if c := f.Tag.Get("const"); c != "" {
				var v any
				if err := json.Unmarshal([]byte(c), &v); err != nil {
					panic(fmt.Sprintf("openapi: %s.%s: const tag %q is not JSON", t, f.Name, c))
				}
				p = withKey(p, "const", v)
			}
			props[name] = p
			if !strings.Contains(opts, "omitempty") && !strings.Contains(opts, "omitzero") {
				required = append(required, name)
			}
		}
	}
	walk(t)
	o := map[string]any{"type": "object", "properties": props, "additionalProperties": false}
	if len(required) > 0 {
		o["required"] = required
	}
	return o
}

// nullable lets p also be null.
func nullable(p map[string]any) map[string]any {
	if typ, ok := p["type"].(string); ok {
		q := withKey(p, "type", []any{typ, "null"})
		return q
	}
	return map[string]any{"anyOf": []any{p, map[string]any{"type": "null"}}}
}

// withKey is a copy of p with k set: schemas of components are shared, so
// one use never changes another's.
func withKey(p map[string]any, k string, v any) map[string]any {
	if _, isRef := p["$ref"]; isRef && k != "description" {
		return map[string]any{"allOf": []any{p}, k: v}
	}
	q := make(map[string]any, len(p)+1)
	for key, val := range p {
		q[key] = val
	}
	q[k] = v
	return q
}

func lastElem(path string) string {
	if i := strings.LastIndexByte(path, '/'); i >= 0 {
		path = path[i+1:]
	}
	return strings.ToUpper(path[:1]) + path[1:]
}
