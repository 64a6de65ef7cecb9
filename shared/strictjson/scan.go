package strictjson

import (
	"bytes"
	"fmt"
	"reflect"
	"strconv"
	"strings"
	"unicode/utf8"
)

// maxJSONDepth bounds nesting, so a hostile body of a million '[' costs a
// bounded stack.
const maxJSONDepth = 1000

// Check reports whether data is exactly one strict JSON value, with
// optional surrounding whitespace. Beyond RFC 8259 syntax it refuses what
// encoding/json lets through and what would let two readers of one body
// disagree: invalid UTF-8 anywhere, escapes of lone surrogates, and an object
// that repeats a key (compared after unescaping, case-sensitively), at any
// depth. It returns an *Error of kind Syntax (BadUTF8 for a string that is
// not UTF-8), or nil.
func Check(data []byte) error {
	s := scanner{data: data}
	if err := s.run(nil); err != nil {
		return err
	}
	return nil
}

// scanner walks one JSON text once. Given a Go type (Decode) it also
// checks every object's keys against the struct that will receive them:
// keys that name no field exactly are recorded in unknown, so that
// encoding/json, which would match them ignoring case, never sees them.
type scanner struct {
	data []byte
	pos  int
	path []string
	// index marks the elements of path that are array indexes.
	index []bool
	key   []byte // scratch for unescaped keys
	// unknown are the byte spans of the keys that name no field of the
	// struct their object decodes into; firstUnknown is the path of the
	// first, as "a.b[0].c".
	unknown      [][2]int
	firstUnknown string
	fields       map[reflect.Type]map[string]reflect.Type
}

// run scans the whole text: one value, surrounded by whitespace only. t is
// the type the value decodes into, or nil.
func (s *scanner) run(t reflect.Type) *Error {
	s.space()
	if err := s.value(0, t); err != nil {
		return err
	}
	s.space()
	if s.pos < len(s.data) {
		return s.fail("there is data after the JSON value")
	}
	return nil
}

func (s *scanner) fail(msg string) *Error {
	return &Error{Kind: Syntax, Offset: s.pos, Msg: msg, Loc: append([]string(nil), s.path...)}
}

func (s *scanner) push(elem string, isIndex bool) {
	s.path = append(s.path, elem)
	s.index = append(s.index, isIndex)
}

func (s *scanner) pop() {
	s.path = s.path[:len(s.path)-1]
	s.index = s.index[:len(s.index)-1]
}

// field is the path of the current value as "a.b[0].c".
func (s *scanner) field() string {
	var b strings.Builder
	for i, e := range s.path {
		switch {
		case s.index[i]:
			b.WriteString("[" + e + "]")
		case i > 0:
			b.WriteString("." + e)
		default:
			b.WriteString(e)
		}
	}
	return b.String()
}

// unexpected describes the byte at pos, or the end of the text.
func (s *scanner) unexpected(want string) *Error {
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

func (s *scanner) value(depth int, t reflect.Type) *Error {
	if depth > maxJSONDepth {
		return s.fail(fmt.Sprintf("the JSON is nested more than %d levels deep", maxJSONDepth))
	}
	if s.pos >= len(s.data) {
		return s.unexpected("a value")
	}
	switch c := s.data[s.pos]; {
	case c == '{':
		return s.object(depth, t)
	case c == '[':
		return s.array(depth, t)
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

func (s *scanner) literal(word string) *Error {
	if !bytes.HasPrefix(s.data[s.pos:], []byte(word)) {
		return s.unexpected(word)
	}
	s.pos += len(word)
	return nil
}

func (s *scanner) object(depth int, t reflect.Type) *Error {
	t = target(t)
	var fields map[string]reflect.Type
	var elem reflect.Type
	switch {
	case t == nil:
	case t.Kind() == reflect.Struct:
		fields = s.fieldsOf(t)
	case t.Kind() == reflect.Map:
		elem = t.Elem()
	}
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
			e := &Error{Kind: Syntax, Offset: at, Msg: "duplicate key " + quote(string(key)) + " in an object",
				Loc: append(append([]string(nil), s.path...), string(key))}
			return e
		}
		seen[string(key)] = struct{}{}
		vt := elem
		if fields != nil {
			ft, ok := fields[string(key)]
			if !ok {
				s.push(string(key), false)
				if len(s.unknown) == 0 {
					s.firstUnknown = s.field()
				}
				s.pop()
				s.unknown = append(s.unknown, [2]int{at, s.pos})
			}
			vt = ft
		}
		s.space()
		if s.pos >= len(s.data) || s.data[s.pos] != ':' {
			return s.unexpected("':' after a key")
		}
		s.pos++
		s.space()
		s.push(string(key), false)
		if err := s.value(depth+1, vt); err != nil {
			return err
		}
		s.pop()
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

func (s *scanner) array(depth int, t reflect.Type) *Error {
	t = target(t)
	var elem reflect.Type
	if t != nil && (t.Kind() == reflect.Slice || t.Kind() == reflect.Array) {
		elem = t.Elem()
	}
	s.pos++ // [
	s.space()
	if s.pos < len(s.data) && s.data[s.pos] == ']' {
		s.pos++
		return nil
	}
	for i := 0; ; i++ {
		s.push(strconv.Itoa(i), true)
		if err := s.value(depth+1, elem); err != nil {
			return err
		}
		s.pop()
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
func (s *scanner) str(keep bool) ([]byte, *Error) {
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
				e := s.fail("the text is not valid UTF-8")
				e.Kind = BadUTF8
				return nil, e
			}
			if keep {
				s.key = append(s.key, s.data[s.pos:s.pos+n]...)
			}
			s.pos += n
		}
	}
}

func (s *scanner) escape(keep bool) *Error {
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

func (s *scanner) number() *Error {
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

// maxQuoted is how many bytes of a client-supplied key an error message
// quotes.
const maxQuoted = 64

// quote renders a client-supplied key for an error message: Go-quoted with
// every non-ASCII and control character escaped, and cut to a short prefix
// (with the full length said) so that a 1 MB key is not echoed back.
func quote(s string) string {
	if len(s) <= maxQuoted {
		return strconv.QuoteToASCII(s)
	}
	cut := maxQuoted
	for cut > 0 && !utf8.RuneStart(s[cut]) {
		cut--
	}
	return strconv.QuoteToASCII(s[:cut]) + fmt.Sprintf("… (%d bytes)", len(s))
}
