package auth

import (
	"encoding/base64"
	"errors"
	"strconv"
	"strings"
)

// A minimal RFC 8941 structured-field parser and serializer: dictionaries,
// inner lists, parameters and the six bare item types. It is what
// Signature-Input, Signature, Content-Digest and Signature-Agent need, and
// it serializes back to the canonical form RFC 9421 signs (order kept).

type bareKind int

const (
	sfInteger bareKind = iota + 1
	sfDecimal
	sfString
	sfToken
	sfBytes
	sfBool
)

// bare is one bare item. s holds a string's or token's text, or a
// decimal's canonical serialization.
type bare struct {
	kind bareKind
	i    int64
	s    string
	b    []byte
	t    bool
}

type param struct {
	key string
	val bare
}

// params keeps RFC 8941's order: first appearance, a repeated key
// overwriting the value in place.
type params []param

func (ps params) get(key string) (bare, bool) {
	for _, p := range ps {
		if p.key == key {
			return p.val, true
		}
	}
	return bare{}, false
}

func (ps *params) set(key string, v bare) {
	for i := range *ps {
		if (*ps)[i].key == key {
			(*ps)[i].val = v
			return
		}
	}
	*ps = append(*ps, param{key, v})
}

type item struct {
	val    bare
	params params
}

// member is a dictionary member: an item, or an inner list (inner set) of
// items with the list's parameters in params.
type member struct {
	key    string
	inner  bool
	val    bare
	list   []item
	params params
}

type dict []member

func (d dict) get(key string) (member, bool) {
	for _, m := range d {
		if m.key == key {
			return m, true
		}
	}
	return member{}, false
}

var errSF = errors.New("malformed structured field")

type sfParser struct {
	s string
	i int
}

func (p *sfParser) eof() bool  { return p.i >= len(p.s) }
func (p *sfParser) peek() byte { return p.s[p.i] }
func (p *sfParser) skipSP() {
	for !p.eof() && p.peek() == ' ' {
		p.i++
	}
}
func (p *sfParser) skipOWS() {
	for !p.eof() && (p.peek() == ' ' || p.peek() == '\t') {
		p.i++
	}
}

// parseDict parses a whole field value as a dictionary (RFC 8941 §4.2).
func parseDict(s string) (dict, error) {
	p := &sfParser{s: s}
	p.skipSP()
	var d dict
	for !p.eof() {
		key, err := p.key()
		if err != nil {
			return nil, err
		}
		m := member{key: key}
		if !p.eof() && p.peek() == '=' {
			p.i++
			if err := p.itemOrInner(&m); err != nil {
				return nil, err
			}
		} else {
			m.val = bare{kind: sfBool, t: true}
			if m.params, err = p.params(); err != nil {
				return nil, err
			}
		}
		replaced := false
		for i := range d {
			if d[i].key == key {
				d[i] = m
				replaced = true
			}
		}
		if !replaced {
			d = append(d, m)
		}
		p.skipOWS()
		if p.eof() {
			return d, nil
		}
		if p.peek() != ',' {
			return nil, errSF
		}
		p.i++
		p.skipOWS()
		if p.eof() {
			return nil, errSF // trailing comma
		}
	}
	return d, nil
}

func (p *sfParser) itemOrInner(m *member) error {
	if !p.eof() && p.peek() == '(' {
		m.inner = true
		p.i++
		m.list = []item{}
		for {
			p.skipSP()
			if p.eof() {
				return errSF
			}
			if p.peek() == ')' {
				p.i++
				ps, err := p.params()
				m.params = ps
				return err
			}
			v, err := p.bare()
			if err != nil {
				return err
			}
			ps, err := p.params()
			if err != nil {
				return err
			}
			m.list = append(m.list, item{v, ps})
			if p.eof() || (p.peek() != ' ' && p.peek() != ')') {
				return errSF
			}
		}
	}
	v, err := p.bare()
	if err != nil {
		return err
	}
	m.val = v
	m.params, err = p.params()
	return err
}

func (p *sfParser) params() (params, error) {
	var ps params
	for !p.eof() && p.peek() == ';' {
		p.i++
		p.skipSP()
		key, err := p.key()
		if err != nil {
			return nil, err
		}
		v := bare{kind: sfBool, t: true}
		if !p.eof() && p.peek() == '=' {
			p.i++
			if v, err = p.bare(); err != nil {
				return nil, err
			}
		}
		ps.set(key, v)
	}
	return ps, nil
}

func isLCAlpha(c byte) bool { return c >= 'a' && c <= 'z' }
func isDigit(c byte) bool   { return c >= '0' && c <= '9' }
func isAlpha(c byte) bool   { return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') }

func (p *sfParser) key() (string, error) {
	if p.eof() || !(isLCAlpha(p.peek()) || p.peek() == '*') {
		return "", errSF
	}
	start := p.i
	for !p.eof() {
		c := p.peek()
		if !(isLCAlpha(c) || isDigit(c) || c == '_' || c == '-' || c == '.' || c == '*') {
			break
		}
		p.i++
	}
	return p.s[start:p.i], nil
}

func (p *sfParser) bare() (bare, error) {
	if p.eof() {
		return bare{}, errSF
	}
	switch c := p.peek(); {
	case c == '-' || isDigit(c):
		return p.number()
	case c == '"':
		return p.str()
	case c == '*' || isAlpha(c):
		return p.token(), nil
	case c == ':':
		return p.bytes()
	case c == '?':
		if p.i+1 >= len(p.s) || (p.s[p.i+1] != '0' && p.s[p.i+1] != '1') {
			return bare{}, errSF
		}
		v := p.s[p.i+1] == '1'
		p.i += 2
		return bare{kind: sfBool, t: v}, nil
	}
	return bare{}, errSF
}

// number follows RFC 8941 §4.2.4: at most 15 integer digits, or a decimal
// of at most 12 integer and 1–3 fractional digits.
func (p *sfParser) number() (bare, error) {
	neg := false
	if p.peek() == '-' {
		neg = true
		p.i++
	}
	if p.eof() || !isDigit(p.peek()) {
		return bare{}, errSF
	}
	start := p.i
	dot := -1
	for !p.eof() {
		c := p.peek()
		if isDigit(c) {
			p.i++
		} else if c == '.' && dot < 0 {
			if p.i-start > 12 {
				return bare{}, errSF
			}
			dot = p.i
			p.i++
		} else {
			break
		}
		if dot < 0 && p.i-start > 15 || dot >= 0 && p.i-start > 16 {
			return bare{}, errSF
		}
	}
	num := p.s[start:p.i]
	if dot < 0 {
		n, err := strconv.ParseInt(num, 10, 64)
		if err != nil {
			return bare{}, errSF
		}
		if neg {
			n = -n
		}
		return bare{kind: sfInteger, i: n}, nil
	}
	intPart, frac := num[:dot-start], num[dot-start+1:]
	if len(frac) == 0 || len(frac) > 3 {
		return bare{}, errSF
	}
	n, err := strconv.ParseInt(intPart, 10, 64)
	if err != nil {
		return bare{}, errSF
	}
	frac = strings.TrimRight(frac, "0")
	if frac == "" {
		frac = "0"
	}
	s := strconv.FormatInt(n, 10) + "." + frac
	if neg {
		s = "-" + s
	}
	return bare{kind: sfDecimal, s: s}, nil
}

func (p *sfParser) str() (bare, error) {
	p.i++ // opening quote
	var b strings.Builder
	for !p.eof() {
		c := p.peek()
		p.i++
		switch {
		case c == '\\':
			if p.eof() || (p.peek() != '"' && p.peek() != '\\') {
				return bare{}, errSF
			}
			b.WriteByte(p.peek())
			p.i++
		case c == '"':
			return bare{kind: sfString, s: b.String()}, nil
		case c < 0x20 || c > 0x7e:
			return bare{}, errSF
		default:
			b.WriteByte(c)
		}
	}
	return bare{}, errSF
}

func isTChar(c byte) bool {
	return isAlpha(c) || isDigit(c) || strings.IndexByte("!#$%&'*+-.^_`|~", c) >= 0
}

func (p *sfParser) token() bare {
	start := p.i
	p.i++
	for !p.eof() && (isTChar(p.peek()) || p.peek() == ':' || p.peek() == '/') {
		p.i++
	}
	return bare{kind: sfToken, s: p.s[start:p.i]}
}

func (p *sfParser) bytes() (bare, error) {
	p.i++
	end := strings.IndexByte(p.s[p.i:], ':')
	if end < 0 {
		return bare{}, errSF
	}
	enc := p.s[p.i : p.i+end]
	p.i += end + 1
	for i := 0; i < len(enc); i++ {
		c := enc[i]
		if !(isAlpha(c) || isDigit(c) || c == '+' || c == '/' || c == '=') {
			return bare{}, errSF
		}
	}
	// RFC 8941 §4.2.7: padding may be omitted; a parser may not fail
	// for that alone.
	b, err := base64.RawStdEncoding.DecodeString(strings.TrimRight(enc, "="))
	if err != nil {
		return bare{}, errSF
	}
	return bare{kind: sfBytes, b: b}, nil
}

// serialize writes the canonical RFC 8941 form of a bare item.
func (v bare) serialize(b *strings.Builder) {
	switch v.kind {
	case sfInteger:
		b.WriteString(strconv.FormatInt(v.i, 10))
	case sfDecimal, sfToken:
		b.WriteString(v.s)
	case sfString:
		b.WriteByte('"')
		for i := 0; i < len(v.s); i++ {
			if v.s[i] == '"' || v.s[i] == '\\' {
				b.WriteByte('\\')
			}
			b.WriteByte(v.s[i])
		}
		b.WriteByte('"')
	case sfBytes:
		b.WriteByte(':')
		b.WriteString(base64.StdEncoding.EncodeToString(v.b))
		b.WriteByte(':')
	case sfBool:
		if v.t {
			b.WriteString("?1")
		} else {
			b.WriteString("?0")
		}
	}
}

func (ps params) serialize(b *strings.Builder) {
	for _, p := range ps {
		b.WriteByte(';')
		b.WriteString(p.key)
		if p.val.kind == sfBool && p.val.t {
			continue
		}
		b.WriteByte('=')
		p.val.serialize(b)
	}
}

func (it item) serialize(b *strings.Builder) {
	it.val.serialize(b)
	it.params.serialize(b)
}

// serializeValue writes the member's value (without its key).
func (m member) serializeValue(b *strings.Builder) {
	if !m.inner {
		m.val.serialize(b)
		m.params.serialize(b)
		return
	}
	b.WriteByte('(')
	for i, it := range m.list {
		if i > 0 {
			b.WriteByte(' ')
		}
		it.serialize(b)
	}
	b.WriteByte(')')
	m.params.serialize(b)
}

// serialize writes the whole dictionary.
func (d dict) serialize() string {
	var b strings.Builder
	for i, m := range d {
		if i > 0 {
			b.WriteString(", ")
		}
		b.WriteString(m.key)
		if !m.inner && m.val.kind == sfBool && m.val.t {
			m.params.serialize(&b)
			continue
		}
		b.WriteByte('=')
		m.serializeValue(&b)
	}
	return b.String()
}
