package access

import (
	"bytes"
	"errors"
	"unicode/utf8"

	"github.com/a2awire/a2awire/shared/apierror"
	"github.com/a2awire/a2awire/shared/protocol"
)

// DecodeJSON decodes a request body into v (a pointer to a struct) under
// the strict rules for JSON in, reusing the invocation kit's checker: one JSON
// object, valid UTF-8, no key repeated at any depth, keys matched to fields
// case-sensitively (other keys are ignored). Every failure is an apierror
// Invalid (400 invalid_input on the registry, INVALID_REQUEST on worlds)
// whose message says what was wrong.
func DecodeJSON(body []byte, v any) error {
	if !utf8.Valid(body) {
		return apierror.New(apierror.Invalid, "the body is not valid UTF-8 (at byte %d)", invalidUTF8At(body))
	}
	if err := protocol.CheckJSON(body); err != nil {
		var je *protocol.JSONError
		if errors.As(err, &je) {
			return apierror.New(apierror.Invalid, "the body is not valid JSON: %s", je.Msg)
		}
		return apierror.New(apierror.Invalid, "the body is not valid JSON")
	}
	if t := bytes.TrimLeft(body, " \t\r\n"); len(t) == 0 || t[0] != '{' {
		return apierror.New(apierror.Invalid, "the body must be a JSON object")
	}
	if err := protocol.DecodeInput(body, v); err != nil {
		msg := "the body has a value of the wrong type"
		var fe *protocol.FieldTypeError
		if errors.As(err, &fe) {
			msg = fe.Error()
		}
		return &apierror.Error{Kind: apierror.Invalid, Message: msg, Err: err}
	}
	return nil
}

// invalidUTF8At is the offset of the first byte of b that does not start
// a valid UTF-8 sequence.
func invalidUTF8At(b []byte) int {
	for i := 0; i < len(b); {
		r, n := utf8.DecodeRune(b[i:])
		if r == utf8.RuneError && n <= 1 {
			return i
		}
		i += n
	}
	return len(b)
}
