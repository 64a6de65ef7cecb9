// Package strictjson is the one reader of the JSON clients send, on every
// surface: the invocation protocol, the registry, the worlds and their
// webhooks. Decode reads a body into a Go value in one call, under one set
// of rules:
//
//   - the text is valid UTF-8 and exactly one JSON value (RFC 8259), with
//     no escape of a lone surrogate;
//   - no object repeats a key, at any depth (compared after unescaping);
//   - keys name struct fields case-exactly: encoding/json would let
//     "AMOUNT_CENTS" fill amount_cents, and with it a second spelling of a
//     key decide what the first one said;
//   - a key that names no field is ignored or refused, as the caller's
//     surface says (Unknown);
//   - a value of the wrong JSON kind names the field and the kind wanted.
//
// The text is walked once by a strict scanner that, knowing the target's
// type, checks every key against the struct it lands in; then
// encoding/json decodes it once, with the keys that name no field blanked
// out. Every failure is an *Error whose Kind says which rule failed, so a
// surface words and renders it without reading message text.
//
// The package imports nothing but the standard library: the provider kit,
// the HTTP layer and the domains all use it.
package strictjson

import (
	"encoding/json"
	"errors"
	"fmt"
	"reflect"
	"strings"
)

// Kind is the rule a text broke.
type Kind int

// The kinds of Error.
const (
	// Syntax: not strict JSON (a syntax error, a lone surrogate escape, a
	// repeated key, data after the value, nesting too deep). Msg, Offset
	// and Loc locate it.
	Syntax Kind = iota
	// BadUTF8: a string is not valid UTF-8 (Offset, Loc locate it; a
	// byte that is not UTF-8 outside any string is a Syntax error).
	BadUTF8
	// NotObject: the value decodes into a struct or map and is no object.
	NotObject
	// WrongType: a value is not the JSON kind its field takes (Field,
	// Want); Field is empty when encoding/json named none.
	WrongType
	// UnknownField: a key names no field and the surface refuses those
	// (Field is its path, as "actions[0].desc").
	UnknownField
)

// Error is why a text was refused. Msg is in words a client can act on.
type Error struct {
	Kind Kind
	// Offset is the byte offset of the problem (Syntax, BadUTF8).
	Offset int
	Msg    string
	// Loc is the path of keys (and array indexes) to a Syntax or BadUTF8
	// problem.
	Loc []string
	// Field is the path of the field of a WrongType or UnknownField.
	Field string
	// Want is the JSON kind the field takes (WrongType).
	Want string
}

func (e *Error) Error() string {
	if e.Kind == Syntax || e.Kind == BadUTF8 {
		return fmt.Sprintf("%s (at byte %d)", e.Msg, e.Offset)
	}
	return e.Msg
}

// Unknown says what Decode does with a key that names no field.
type Unknown int

const (
	// IgnoreUnknown drops such keys, as encoding/json does (the invocation
	// protocol, the registry, the webhook routes).
	IgnoreUnknown Unknown = iota
	// RefuseUnknown refuses the text with an UnknownField error naming the
	// first such key: a misspelt field is an error the client sees, never
	// silently dropped (the worlds).
	RefuseUnknown
)

// Decode decodes data into v, a non-nil pointer, under the package's rules.
// A failure of the text is an *Error; a v that is not a non-nil pointer is
// a plain error (a programming mistake, not the client's).
func Decode(data []byte, v any, unknown Unknown) error {
	rv := reflect.ValueOf(v)
	if rv.Kind() != reflect.Pointer || rv.IsNil() {
		return fmt.Errorf("strictjson: Decode needs a non-nil pointer, got %T", v)
	}
	t := rv.Type().Elem()
	s := scanner{data: data}
	if err := s.run(t); err != nil {
		return err
	}
	if k := target(t); k != nil && (k.Kind() == reflect.Struct || k.Kind() == reflect.Map) && firstByte(data) != '{' {
		return &Error{Kind: NotObject, Msg: "must be a JSON object"}
	}
	text := data
	if len(s.unknown) > 0 {
		// "" names no field (a field's JSON name is never empty), and the
		// spaces keep every offset where it was.
		text = append([]byte(nil), data...)
		for _, span := range s.unknown {
			text[span[0]], text[span[0]+1] = '"', '"'
			for i := span[0] + 2; i < span[1]; i++ {
				text[i] = ' '
			}
		}
	}
	if err := json.Unmarshal(text, v); err != nil {
		var te *json.UnmarshalTypeError
		if errors.As(err, &te) && te.Field != "" {
			want := jsonKind(te.Type)
			return &Error{Kind: WrongType, Field: te.Field, Want: want, Msg: te.Field + " must be a JSON " + want}
		}
		return &Error{Kind: WrongType, Msg: "a value is of the wrong type"}
	}
	if unknown == RefuseUnknown && len(s.unknown) > 0 {
		return &Error{Kind: UnknownField, Field: s.firstUnknown, Msg: "unknown field " + quote(s.firstUnknown)}
	}
	return nil
}

var unmarshalerType = reflect.TypeFor[json.Unmarshaler]()

// target is the type whose keys an object of t is checked against: t
// without its pointers, or nil when below it nothing is checked (no type,
// an interface, or a type that reads its own JSON).
func target(t reflect.Type) reflect.Type {
	if t == nil {
		return nil
	}
	for t.Kind() == reflect.Pointer {
		t = t.Elem()
	}
	if t.Kind() == reflect.Interface || t.Implements(unmarshalerType) || reflect.PointerTo(t).Implements(unmarshalerType) {
		return nil
	}
	return t
}

// fieldsOf maps the JSON names of a struct's fields, embedded structs'
// fields included, to their types, as encoding/json names them; computed
// once per type and scan.
func (s *scanner) fieldsOf(t reflect.Type) map[string]reflect.Type {
	if f, ok := s.fields[t]; ok {
		return f
	}
	out := map[string]reflect.Type{}
	var walk func(t reflect.Type, depth int)
	walk = func(t reflect.Type, depth int) {
		for i := range t.NumField() {
			f := t.Field(i)
			tag := f.Tag.Get("json")
			if tag == "-" {
				continue
			}
			name, _, _ := strings.Cut(tag, ",")
			ft := f.Type
			if f.Anonymous && name == "" {
				for ft.Kind() == reflect.Pointer {
					ft = ft.Elem()
				}
				if ft.Kind() == reflect.Struct && depth < 16 {
					walk(ft, depth+1)
					continue
				}
			}
			if !f.IsExported() {
				continue
			}
			if name == "" {
				name = f.Name
			}
			if _, taken := out[name]; !taken || depth == 0 {
				out[name] = f.Type
			}
		}
	}
	walk(t, 0)
	if s.fields == nil {
		s.fields = map[reflect.Type]map[string]reflect.Type{}
	}
	s.fields[t] = out
	return out
}

// jsonKind names the JSON kind a Go type takes, without Go type names.
func jsonKind(t reflect.Type) string {
	switch k := t.Kind(); {
	case k == reflect.String:
		return "string"
	case k == reflect.Bool:
		return "boolean"
	case k >= reflect.Int && k <= reflect.Uintptr:
		return "integer"
	case k == reflect.Float32 || k == reflect.Float64:
		return "number"
	case k == reflect.Slice || k == reflect.Array:
		return "array"
	}
	return "object"
}

func firstByte(b []byte) byte {
	for _, c := range b {
		switch c {
		case ' ', '\t', '\r', '\n':
			continue
		}
		return c
	}
	return 0
}
