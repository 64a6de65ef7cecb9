package protocol

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"unicode/utf8"

	"github.com/a2awire/a2awire/shared/strictjson"
)

// JSONError is why a text is not strict JSON (JSON in is strict): a
// syntax error, invalid UTF-8, a lone surrogate escape, a duplicated object
// key, or data after the value. Msg is in words a buyer can act on; Loc is
// the path of keys (and array indexes) to the problem. It is the one strict
// reader's error, shared/strictjson.
type JSONError = strictjson.Error

// CheckJSON reports whether data is exactly one strict JSON value
// (strictjson.Check): valid UTF-8, no lone surrogate escape, no object
// repeating a key at any depth. It returns a *JSONError or nil.
func CheckJSON(data []byte) error { return strictjson.Check(data) }

// DecodeInput decodes a capability's input object into v (a pointer) with
// the one strict reader (strictjson.Decode): object keys match field names
// case-sensitively — encoding/json would let "AMOUNT_CENTS" fill the field
// amount_cents — and keys that name no field are ignored. A value of the
// wrong type is a 400 invalid_input naming the field ("input.n must be a
// JSON integer"); the *strictjson.Error is its Err.
func DecodeInput(input json.RawMessage, v any) error {
	err := strictjson.Decode(input, v, strictjson.IgnoreUnknown)
	var se *strictjson.Error
	if err == nil || !errors.As(err, &se) {
		return err
	}
	switch {
	case se.Kind == strictjson.WrongType && se.Field != "":
		return &Error{Code: InvalidInput, Message: "input." + se.Msg, Err: se}
	case se.Kind == strictjson.Syntax || se.Kind == strictjson.BadUTF8:
		return &Error{Code: InvalidInput, Message: "input is not strict JSON: " + se.Error(), Err: se}
	case se.Kind == strictjson.NotObject:
		return &Error{Code: InvalidInput, Message: "input must be a JSON object", Err: se}
	}
	return &Error{Code: InvalidInput, Message: "input has a value of the wrong type", Err: se}
}

// NumberOutOfRange finds a number in the JSON value data whose magnitude
// is beyond a 64-bit float's (1e999999, say): valid JSON, but one that
// encoding/json refuses to decode into any, JavaScript reads as Infinity and
// RFC 8259 section 6 calls not interoperable. It returns the path to the
// first such number (keys in sorted order) as ".key[2].key", "" for the
// value itself, and false when there is none or data is not JSON.
func NumberOutOfRange(data []byte) (string, bool) {
	if !json.Valid(data) {
		return "", false
	}
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.UseNumber()
	var v any
	if dec.Decode(&v) != nil {
		return "", false
	}
	return outOfRange(v, "")
}

func outOfRange(v any, path string) (string, bool) {
	switch x := v.(type) {
	case json.Number:
		if _, err := strconv.ParseFloat(string(x), 64); err != nil {
			return path, true
		}
	case map[string]any:
		keys := make([]string, 0, len(x))
		for k := range x {
			keys = append(keys, k)
		}
		slices.Sort(keys)
		for _, k := range keys {
			if p, ok := outOfRange(x[k], path+"."+k); ok {
				return p, true
			}
		}
	case []any:
		for i, e := range x {
			if p, ok := outOfRange(e, path+"["+strconv.Itoa(i)+"]"); ok {
				return p, true
			}
		}
	}
	return "", false
}

// maxQuoted is how many bytes of a client-supplied value an error message
// quotes.
const maxQuoted = 64

// Quote renders a client-supplied value for an error message: Go-quoted with
// every non-ASCII and control character escaped, and cut to a short prefix
// (with the full length said) so that a 1 MB task name is not echoed back.
func Quote(s string) string {
	if len(s) <= maxQuoted {
		return strconv.QuoteToASCII(s)
	}
	cut := maxQuoted
	for cut > 0 && !utf8.RuneStart(s[cut]) {
		cut--
	}
	return strconv.QuoteToASCII(s[:cut]) + fmt.Sprintf("… (%d bytes)", len(s))
}

func firstByte(raw []byte) byte {
	t := bytes.TrimLeft(raw, " \t\r\n")
	if len(t) == 0 {
		return 0
	}
	return t[0]
}
