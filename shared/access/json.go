package access

import (
	"errors"
	"fmt"
	"net/http"

	"github.com/a2awire/a2awire/shared/apierror"
	"github.com/a2awire/a2awire/shared/strictjson"
)

// Decode decodes the request's body (Body) into v, a pointer to a struct,
// with the one strict reader, strictjson.Decode: one JSON object, valid
// UTF-8, no key repeated at any depth, keys matched to fields
// case-sensitively, and a key that names no field ignored or refused as the
// surface's Config.UnknownFields says. Every failure is an apierror Invalid
// (400 invalid_input on the registry, INVALID_REQUEST on the worlds) whose
// message says what was wrong. A handler calls it once; the values it
// checks beyond their JSON kinds (required, ranges, formats) are the
// domain's to check.
func Decode(r *http.Request, v any) error {
	req := requestOf(r)
	return decode(req.body, v, req.unknown)
}

// DecodeJSON decodes body into v as Decode does, ignoring keys that name no
// field: for a Route.BodyKey, which reads only the key from a body the
// handler then decodes whole.
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
