package protocol

import (
	"bytes"
	"encoding/json"
	"fmt"
	"reflect"
	"slices"
	"strconv"
	"strings"
	"unicode/utf8"
)

// JSONError is why a text is not strict JSON (JSON in is strict): a
// syntax error, invalid UTF-8, a lone surrogate escape, a
// duplicated object key, or data after the value. Msg is in words a buyer can
// act on; Loc is the path of keys (and array indexes) to the problem.
type JSONError struct {
	// Offset is the byte offset of the problem in the text.
	Offset int
	Msg    string
	Loc    []string
}

func (e *JSONError) Error() string {
	return fmt.Sprintf("%s (at byte %d)", e.Msg, e.Offset)
}

// maxJSONDepth bounds nesting, so a hostile body of a million '[' costs a
// bounded stack.
const maxJSONDepth = 1000

// CheckJSON reports whether data is exactly one strict JSON value, with
// optional surrounding whitespace. Beyond RFC 8259 syntax it refuses what
// encoding/json lets through and what would let two readers of one body
// disagree: invalid UTF-8 anywhere, escapes of lone surrogates, and an object
// that repeats a key (compared after unescaping, case-sensitively), at any
// depth. It returns a *JSONError or nil.
func CheckJSON(data []byte) error {
	s := scanner{data: data}
	s.space()
	if err := s.value(0); err != nil {
		return err
	}
	s.space()
	if s.pos < len(s.data) {
		return s.fail("there is data after the JSON value")
	}
	return nil
}

type scanner struct {
	data []byte
	pos  int
	path []string
	key  []byte // scratch for unescaped keys
}

func (s *scanner) fail(msg string) *JSONError {
	return &JSONError{Offset: s.pos, Msg: msg, Loc: append([]string(nil), s.path...)}
}

// unexpected describes the byte at pos, or the end of the text.
func (s *scanner) unexpected(want string) *JSONError {
	if s.pos >= len(s.data) {
		return s.fail("the JSON ends early; expected " + want)
	}
	return s.fail(fmt.Sprintf("unexpected %s; expected %s", describeByte(s.data[s.pos:]), want))
}

func describeByte(b []byte) string {
	r, n := utf8.DecodeRune(b)
	switch {
	case r == utf8.RuneError && n <= 1:
		return fmt.Sprintf("byte 0x%02x", b[0])
	case r < 0x20 || r == 0x7f:
		return fmt.Sprintf("control character %U", r)
	}
	return "character " + strconv.QuoteRuneToASCII(r)
}

func (s *scanner) space() {
	for s.pos < len(s.data) {
		switch s.data[s.pos] {
		case ' ', '\t', '\n', '\r':
			s.pos++
		default:
			return
		}
	}
}

func (s *scanner) value(depth int) *JSONError {
	if depth > maxJSONDepth {
		return s.fail(fmt.Sprintf("the JSON is nested more than %d levels deep", maxJSONDepth))
	}
	if s.pos >= len(s.data) {
		return s.unexpected("a value")
	}
	switch c := s.data[s.pos]; {
	case c == '{':
		return s.object(depth)
	case c == '[':
		return s.array(depth)
	case c == '"':
		_, err := s.str(false)
		return err
	case c == '-' || (c >= '0' && c <= '9'):
		return s.number()
	case c == 't':
		return s.literal("true")
	case c == 'f':
		return s.literal("false")
	case c == 'n':
		return s.literal("null")
	}
	return s.unexpected("a value (object, array, string, number, true, false or null)")
}

func (s *scanner) literal(word string) *JSONError {
	if !bytes.HasPrefix(s.data[s.pos:], []byte(word)) {
		return s.unexpected(word)
	}
	s.pos += len(word)
	return nil
}

func (s *scanner) object(depth int) *JSONError {
	s.pos++ // {
	s.space()
	if s.pos < len(s.data) && s.data[s.pos] == '}' {
		s.pos++
		return nil
	}
	seen := map[string]struct{}{}
	for {
		if s.pos >= len(s.data) || s.data[s.pos] != '"' {
			return s.unexpected("a quoted key")
		}
		at := s.pos
		key, err := s.str(true)
		if err != nil {
			return err
		}
		if _, dup := seen[string(key)]; dup {
			e := &JSONError{Offset: at, Msg: "duplicate key " + Quote(string(key)) + " in an object",
				Loc: append(append([]string(nil), s.path...), string(key))}
			return e
		}
		seen[string(key)] = struct{}{}
		s.space()
		if s.pos >= len(s.data) || s.data[s.pos] != ':' {
			return s.unexpected("':' after a key")
		}
		s.pos++
		s.space()
		s.path = append(s.path, string(key))
		if err := s.value(depth + 1); err != nil {
			return err
		}
		s.path = s.path[:len(s.path)-1]
		s.space()
		if s.pos < len(s.data) && s.data[s.pos] == ',' {
			s.pos++
			s.space()
			continue
		}
		if s.pos < len(s.data) && s.data[s.pos] == '}' {
			s.pos++
			return nil
		}
		return s.unexpected("',' or '}' in an object")
	}
}

func (s *scanner) array(depth int) *JSONError {
	s.pos++ // [
	s.space()
	if s.pos < len(s.data) && s.data[s.pos] == ']' {
		s.pos++
		return nil
	}
	for i := 0; ; i++ {
		s.path = append(s.path, strconv.Itoa(i))
		if err := s.value(depth + 1); err != nil {
			return err
		}
		s.path = s.path[:len(s.path)-1]
		s.space()
		if s.pos < len(s.data) && s.data[s.pos] == ',' {
			s.pos++
			s.space()
			continue
		}
		if s.pos < len(s.data) && s.data[s.pos] == ']' {
			s.pos++
			return nil
		}
		return s.unexpected("',' or ']' in an array")
	}
}

// str scans a string starting at its opening quote. With keep it returns the
// unescaped text (in a scratch buffer valid until the next call).
func (s *scanner) str(keep bool) ([]byte, *JSONError) {
	s.pos++ // "
	s.key = s.key[:0]
	for {
		if s.pos >= len(s.data) {
			return nil, s.fail("the JSON ends inside a string")
		}
		c := s.data[s.pos]
		switch {
		case c == '"':
			s.pos++
			return s.key, nil
		case c == '\\':
			if err := s.escape(keep); err != nil {
				return nil, err
			}
		case c < 0x20:
			return nil, s.fail(fmt.Sprintf("control character %U inside a string; escape it", rune(c)))
		case c < utf8.RuneSelf:
			if keep {
				s.key = append(s.key, c)
			}
			s.pos++
		default:
			r, n := utf8.DecodeRune(s.data[s.pos:])
			if r == utf8.RuneError && n <= 1 {
				return nil, s.fail("the text is not valid UTF-8")
			}
			if keep {
				s.key = append(s.key, s.data[s.pos:s.pos+n]...)
			}
			s.pos += n
		}
	}
}

func (s *scanner) escape(keep bool) *JSONError {
	if s.pos+1 >= len(s.data) {
		s.pos = len(s.data)
		return s.fail("the JSON ends inside a string")
	}
	var r rune
	switch e := s.data[s.pos+1]; e {
	case '"', '\\', '/':
		r = rune(e)
	case 'b':
		r = '\b'
	case 'f':
		r = '\f'
	case 'n':
		r = '\n'
	case 'r':
		r = '\r'
	case 't':
		r = '\t'
	case 'u':
		u, ok := hex4(s.data[s.pos+2:])
		if !ok {
			return s.fail(`invalid \u escape; it takes four hexadecimal digits`)
		}
		switch {
		case u >= 0xD800 && u < 0xDC00:
			lo, ok := -1, false
			if rest := s.data[s.pos+6:]; len(rest) >= 6 && rest[0] == '\\' && rest[1] == 'u' {
				lo, ok = hex4(rest[2:])
			}
			if !ok || lo < 0xDC00 || lo > 0xDFFF {
				return s.fail(`a \u escape of a high surrogate is not followed by a low one`)
			}
			r = 0x10000 + (rune(u)-0xD800)<<10 + (rune(lo) - 0xDC00)
			s.pos += 6
		case u >= 0xDC00 && u <= 0xDFFF:
			return s.fail(`a \u escape of a lone low surrogate is not a character`)
		default:
			r = rune(u)
		}
		s.pos += 6
		if keep {
			s.key = utf8.AppendRune(s.key, r)
		}
		return nil
	default:
		s.pos++
		return s.fail(fmt.Sprintf(`invalid escape \%s inside a string`, string(rune(e))))
	}
	s.pos += 2
	if keep {
		s.key = utf8.AppendRune(s.key, r)
	}
	return nil
}

func hex4(b []byte) (int, bool) {
	if len(b) < 4 {
		return 0, false
	}
	n := 0
	for _, c := range b[:4] {
		switch {
		case c >= '0' && c <= '9':
			n = n<<4 | int(c-'0')
		case c >= 'a' && c <= 'f':
			n = n<<4 | int(c-'a'+10)
		case c >= 'A' && c <= 'F':
			n = n<<4 | int(c-'A'+10)
		default:
			return 0, false
		}
	}
	return n, true
}

func (s *scanner) number() *JSONError {
	if s.data[s.pos] == '-' {
		s.pos++
	}
	switch {
	case s.pos < len(s.data) && s.data[s.pos] == '0':
		s.pos++
	case s.pos < len(s.data) && s.data[s.pos] >= '1' && s.data[s.pos] <= '9':
		s.digits()
	default:
		return s.unexpected("a digit")
	}
	if s.pos < len(s.data) && s.data[s.pos] == '.' {
		s.pos++
		if !s.digits() {
			return s.unexpected("a digit after the decimal point")
		}
	}
	if s.pos < len(s.data) && (s.data[s.pos] == 'e' || s.data[s.pos] == 'E') {
		s.pos++
		if s.pos < len(s.data) && (s.data[s.pos] == '+' || s.data[s.pos] == '-') {
			s.pos++
		}
		if !s.digits() {
			return s.unexpected("a digit in the exponent")
		}
	}
	return nil
}

func (s *scanner) digits() bool {
	start := s.pos
	for s.pos < len(s.data) && s.data[s.pos] >= '0' && s.data[s.pos] <= '9' {
		s.pos++
	}
	return s.pos > start
}

// DecodeInput decodes a capability's input object into v (a pointer), with
// object keys matched case-sensitively: encoding/json would let
// "AMOUNT_CENTS" fill the field amount_cents, and with it a second spelling
// of a key decide what the first one said. Keys that do not name a field
// exactly are ignored, like any unknown key. Input that reached a capability
// has passed CheckJSON, so it has no duplicated keys. A value of the wrong
// type is a 400 invalid_input naming the field.
func DecodeInput(input json.RawMessage, v any) error {
	rv := reflect.ValueOf(v)
	if rv.Kind() != reflect.Pointer || rv.IsNil() {
		return fmt.Errorf("protocol: DecodeInput needs a non-nil pointer, got %T", v)
	}
	exact, err := exactKeys(input, rv.Type().Elem())
	if err != nil {
		return inputError(err)
	}
	if err := json.Unmarshal(exact, v); err != nil {
		return inputError(err)
	}
	return nil
}

var unmarshalerType = reflect.TypeFor[json.Unmarshaler]()

// exactKeys rewrites raw so that every object decoded into a struct keeps
// only the keys that name one of its fields exactly.
func exactKeys(raw []byte, t reflect.Type) ([]byte, error) {
	for t.Kind() == reflect.Pointer {
		t = t.Elem()
	}
	if reflect.PointerTo(t).Implements(unmarshalerType) || t.Implements(unmarshalerType) {
		return raw, nil // the type reads its own JSON
	}
	first := firstByte(raw)
	switch {
	case t.Kind() == reflect.Struct && first == '{':
		var m map[string]json.RawMessage
		if err := json.Unmarshal(raw, &m); err != nil {
			return nil, err
		}
		fields := jsonFields(t)
		for k, v := range m {
			ft, ok := fields[k]
			if !ok {
				delete(m, k)
				continue
			}
			nv, err := exactKeys(v, ft)
			if err != nil {
				return nil, err
			}
			m[k] = nv
		}
		return marshalAsSent(m)
	case t.Kind() == reflect.Map && first == '{':
		var m map[string]json.RawMessage
		if err := json.Unmarshal(raw, &m); err != nil {
			return nil, err
		}
		for k, v := range m {
			nv, err := exactKeys(v, t.Elem())
			if err != nil {
				return nil, err
			}
			m[k] = nv
		}
		return marshalAsSent(m)
	case (t.Kind() == reflect.Slice || t.Kind() == reflect.Array) && t.Elem().Kind() != reflect.Uint8 && first == '[':
		var list []json.RawMessage
		if err := json.Unmarshal(raw, &list); err != nil {
			return nil, err
		}
		for i, v := range list {
			nv, err := exactKeys(v, t.Elem())
			if err != nil {
				return nil, err
			}
			list[i] = nv
		}
		return marshalAsSent(list)
	}
	return raw, nil
}

// marshalAsSent is json.Marshal without its HTML escaping: the raw values
// exactKeys reassembles keep the bytes the client sent ("<" stays one byte,
// not the six of "\u003c"), so what a caller measures, stores and forwards
// is what was sent.
func marshalAsSent(v any) ([]byte, error) {
	var b bytes.Buffer
	enc := json.NewEncoder(&b)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(v); err != nil {
		return nil, err
	}
	return bytes.TrimSuffix(b.Bytes(), []byte{'\n'}), nil
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

func firstByte(raw []byte) byte {
	t := bytes.TrimLeft(raw, " \t\r\n")
	if len(t) == 0 {
		return 0
	}
	return t[0]
}

// jsonFields maps the JSON names of a struct's fields, embedded structs'
// fields included, to their types, as encoding/json names them.
func jsonFields(t reflect.Type) map[string]reflect.Type {
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
	return out
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
