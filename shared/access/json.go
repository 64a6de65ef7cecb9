package access

import (
	"errors"
	"fmt"
	"net/http"
	"reflect"

	"github.com/a2awire/a2awire/shared/apierror"
	"github.com/a2awire/a2awire/shared/strictjson"
)

// Decode decodes the request's body (Body) into v, a pointer to a struct,
// with the one strict reader, strictjson.Decode: one JSON object, valid
// UTF-8, no key repeated at any depth, keys matched to fields
// case-sensitively, and a key that names no field ignored or refused as the
// surface's Config.UnknownFields says. Every failure is an apierror Invalid
// (400 invalid_input on the registry, INVALID_REQUEST on the worlds) whose
// message says what was wrong. The values it checks beyond their JSON kinds
// (required, ranges, formats) are the domain's to check.
//
// The body is decoded once per request: a second Decode into the same type
// (the handler's, after its route's BodyKey) copies the first's value and
// answers its error.
func Decode(r *http.Request, v any) error {
	req := requestOf(r)
	rv := reflect.ValueOf(v)
	ptr := rv.Kind() == reflect.Pointer && !rv.IsNil()
	if d := req.decoded; d != nil && ptr && d.v.Type() == rv.Type() {
		rv.Elem().Set(d.v.Elem())
		return d.err
	}
	err := decode(req.body, v, req.unknown)
	if ptr {
		keep := reflect.New(rv.Type().Elem())
		keep.Elem().Set(rv.Elem())
		req.decoded = &decoded{v: keep, err: err}
	}
	return err
}

// DecodeKey is Decode for a Route.BodyKey, which runs before the signature
// is verified and needs only the field key (its JSON name) of v: a failure
// of another field — a key that names none, a value of the wrong kind — is
// not its to report; the handler's Decode, after the signature verified,
// answers it, as when the key was read alone. A body that is not strict
// JSON, or a key of the wrong kind, is its error.
func DecodeKey(r *http.Request, v any, key string) error {
	err := Decode(r, v)
	var se *strictjson.Error
	if errors.As(err, &se) && (se.Kind == strictjson.UnknownField || se.Kind == strictjson.WrongType && se.Field != key) {
		return nil
	}
	return err
}

// decoded is a body Decode decoded: a copy of the value, and its error.
type decoded struct {
	v   reflect.Value
	err error
}

// DecodeJSON decodes body into v as Decode does, ignoring keys that name no
// field, for a body that is not the request's; handlers use Decode.
func DecodeJSON(body []byte, v any) error {
	return decode(body, v, strictjson.IgnoreUnknown)
}

func decode(body []byte, v any, unknown strictjson.Unknown) error {
	err := strictjson.Decode(body, v, unknown)
	var se *strictjson.Error
	if err == nil || !errors.As(err, &se) {
		return err
	}
	switch se.Kind {
	case strictjson.BadUTF8:
		return &apierror.Error{Kind: apierror.Invalid, Message: fmt.Sprintf("the body is not valid UTF-8 (at byte %d)", se.Offset), Err: se}
	case strictjson.Syntax:
		return &apierror.Error{Kind: apierror.Invalid, Message: "the body is not valid JSON: " + se.Msg, Err: se}
	case strictjson.NotObject:
		return &apierror.Error{Kind: apierror.Invalid, Message: "the body must be a JSON object", Err: se}
	case strictjson.UnknownField:
		return &apierror.Error{Kind: apierror.Invalid, Message: "unknown field " + apierror.Quote(se.Field), Err: se}
	}
	if se.Field == "" {
		return &apierror.Error{Kind: apierror.Invalid, Message: "the body has a value of the wrong type", Err: se}
	}
	return &apierror.Error{Kind: apierror.Invalid, Message: se.Msg, Err: se}
}
