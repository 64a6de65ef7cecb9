package cloud

import (
	"encoding/json"
	"slices"
	"strconv"
	"strings"
	"unicode/utf8"

	"github.com/aws/aws-lambda-go/events"
)

// This file serializes the gateway's events and parses the functions'
// answers without reflection. The bytes are the ones encoding/json would
// produce and accept (the tests and fuzz targets compare the two on every
// input): the JSON round trip Lambda does is kept, only the cost of
// encoding/json's reflection on the gateway's side of it is not.

// AppendEvent appends e as JSON to dst: byte for byte what json.Marshal(e)
// returns (field order, omitempty, map keys sorted, the same string
// escaping), written directly for the fixed payload-format-2.0 shape. An
// event with an authorizer (which carries free-form values) is handed to
// json.Marshal.
func AppendEvent(dst []byte, e *events.APIGatewayV2HTTPRequest) ([]byte, error) {
	if e.RequestContext.Authorizer != nil {
		// A copy, so that e itself does not escape to the heap on the
		// usual path.
		b, err := json.Marshal(*e)
		if err != nil {
			return dst, err
		}
		return append(dst, b...), nil
	}
	dst = append(dst, `{"version":`...)
	dst = appendJSONString(dst, e.Version)
	dst = append(dst, `,"routeKey":`...)
	dst = appendJSONString(dst, e.RouteKey)
	dst = append(dst, `,"rawPath":`...)
	dst = appendJSONString(dst, e.RawPath)
	dst = append(dst, `,"rawQueryString":`...)
	dst = appendJSONString(dst, e.RawQueryString)
	if len(e.Cookies) > 0 {
		dst = append(dst, `,"cookies":`...)
		dst = appendStrings(dst, e.Cookies)
	}
	dst = append(dst, `,"headers":`...)
	dst = appendStringMap(dst, e.Headers)
	if len(e.QueryStringParameters) > 0 {
		dst = append(dst, `,"queryStringParameters":`...)
		dst = appendStringMap(dst, e.QueryStringParameters)
	}
	if len(e.PathParameters) > 0 {
		dst = append(dst, `,"pathParameters":`...)
		dst = appendStringMap(dst, e.PathParameters)
	}
	rc := &e.RequestContext
	dst = append(dst, `,"requestContext":{"routeKey":`...)
	dst = appendJSONString(dst, rc.RouteKey)
	dst = append(dst, `,"accountId":`...)
	dst = appendJSONString(dst, rc.AccountID)
	dst = append(dst, `,"stage":`...)
	dst = appendJSONString(dst, rc.Stage)
	dst = append(dst, `,"requestId":`...)
	dst = appendJSONString(dst, rc.RequestID)
	dst = append(dst, `,"apiId":`...)
	dst = appendJSONString(dst, rc.APIID)
	dst = append(dst, `,"domainName":`...)
	dst = appendJSONString(dst, rc.DomainName)
	dst = append(dst, `,"domainPrefix":`...)
	dst = appendJSONString(dst, rc.DomainPrefix)
	dst = append(dst, `,"time":`...)
	dst = appendJSONString(dst, rc.Time)
	dst = append(dst, `,"timeEpoch":`...)
	dst = strconv.AppendInt(dst, rc.TimeEpoch, 10)
	h := &rc.HTTP
	dst = append(dst, `,"http":{"method":`...)
	dst = appendJSONString(dst, h.Method)
	dst = append(dst, `,"path":`...)
	dst = appendJSONString(dst, h.Path)
	dst = append(dst, `,"protocol":`...)
	dst = appendJSONString(dst, h.Protocol)
	dst = append(dst, `,"sourceIp":`...)
	dst = appendJSONString(dst, h.SourceIP)
	dst = append(dst, `,"userAgent":`...)
	dst = appendJSONString(dst, h.UserAgent)
	// encoding/json never omits a struct, omitempty or not.
	c := &rc.Authentication.ClientCert
	dst = append(dst, `},"authentication":{"clientCert":{"clientCertPem":`...)
	dst = appendJSONString(dst, c.ClientCertPem)
	dst = append(dst, `,"issuerDN":`...)
	dst = appendJSONString(dst, c.IssuerDN)
	dst = append(dst, `,"serialNumber":`...)
	dst = appendJSONString(dst, c.SerialNumber)
	dst = append(dst, `,"subjectDN":`...)
	dst = appendJSONString(dst, c.SubjectDN)
	dst = append(dst, `,"validity":{"notAfter":`...)
	dst = appendJSONString(dst, c.Validity.NotAfter)
	dst = append(dst, `,"notBefore":`...)
	dst = appendJSONString(dst, c.Validity.NotBefore)
	dst = append(dst, `}}}}`...)
	if len(e.StageVariables) > 0 {
		dst = append(dst, `,"stageVariables":`...)
		dst = appendStringMap(dst, e.StageVariables)
	}
	if e.Body != "" {
		dst = append(dst, `,"body":`...)
		dst = appendJSONString(dst, e.Body)
	}
	if e.IsBase64Encoded {
		dst = append(dst, `,"isBase64Encoded":true}`...)
	} else {
		dst = append(dst, `,"isBase64Encoded":false}`...)
	}
	return dst, nil
}

// appendStringMap writes m as json.Marshal does.
func appendStringMap(dst []byte, m map[string]string) []byte { return appendMap(dst, m, true) }

// appendMap writes m as encoding/json does: null when nil, keys in byte
// order, strings escaped as appendString does.
func appendMap(dst []byte, m map[string]string, html bool) []byte {
	if m == nil {
		return append(dst, "null"...)
	}
	// A fixed array keeps the key list of a usual event off the heap.
	var buf [32]string
	keys := buf[:0]
	for k := range m {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	dst = append(dst, '{')
	for i, k := range keys {
		if i > 0 {
			dst = append(dst, ',')
		}
		dst = appendString(dst, k, html)
		dst = append(dst, ':')
		dst = appendString(dst, m[k], html)
	}
	return append(dst, '}')
}

func appendStrings(dst []byte, s []string) []byte { return appendStringList(dst, s, true) }

const hexDigits = "0123456789abcdef"

// plainHTML and plainText mark the bytes encoding/json copies as they are,
// with HTML escaping (json.Marshal's default) and without; read-only.
var plainHTML, plainText = func() (html, text [256]bool) {
	for b := 0x20; b < utf8.RuneSelf; b++ {
		text[b] = b != '"' && b != '\\'
		html[b] = text[b] && b != '<' && b != '>' && b != '&'
	}
	return html, text
}()

// appendJSONString quotes s as json.Marshal does.
func appendJSONString(dst []byte, s string) []byte { return appendString(dst, s, true) }

// appendString quotes s as encoding/json does: the separators U+2028 and
// U+2029 escaped as \u sequences, and so the HTML characters <, > and &
// when html is set (json.Marshal's default), control characters as \b \f
// \n \r \t or \u00XX, and every byte that is not valid UTF-8 replaced by
// \ufffd.
func appendString(dst []byte, s string, html bool) []byte {
	dst = append(dst, '"')
	plain := &plainText
	if html {
		plain = &plainHTML
	}
	start := 0
	for i := 0; i < len(s); {
		b := s[i]
		if plain[b] {
			i++
			continue
		}
		if b < utf8.RuneSelf {
			dst = append(dst, s[start:i]...)
			switch b {
			case '\\', '"':
				dst = append(dst, '\\', b)
			case '\b':
				dst = append(dst, '\\', 'b')
			case '\f':
				dst = append(dst, '\\', 'f')
			case '\n':
				dst = append(dst, '\\', 'n')
			case '\r':
				dst = append(dst, '\\', 'r')
			case '\t':
				dst = append(dst, '\\', 't')
			default:
				dst = append(dst, '\\', 'u', '0', '0', hexDigits[b>>4], hexDigits[b&0xF])
			}
			i++
			start = i
			continue
		}
		c, size := utf8.DecodeRuneInString(s[i:])
		if c == utf8.RuneError && size == 1 {
			dst = append(dst, s[start:i]...)
			dst = append(dst, `\ufffd`...)
			i++
			start = i
			continue
		}
		if c == '\u2028' || c == '\u2029' {
			dst = append(dst, s[start:i]...)
			dst = append(dst, '\\', 'u', '2', '0', '2', hexDigits[c&0xF])
			i += size
			start = i
			continue
		}
		i += size
	}
	dst = append(dst, s[start:]...)
	return append(dst, '"')
}

// parseResponse reads a function's answer the way json.Unmarshal into an
// events.APIGatewayV2HTTPResponse would, for the answers functions give in
// practice: one object whose keys are the struct's own names, each at most
// once, with values of the field's JSON type or null. It reports false for
// anything else — other spellings of a key, unknown keys, nulls inside
// arrays or maps, numbers that are not plain integers, surrogate escapes,
// invalid UTF-8 or invalid JSON — and the caller hands those to
// json.Unmarshal, which decides them (and words the error).
//
// headers, when not nil, is an empty map to fill with the response's
// headers (the gateway's, reused across requests).
func parseResponse(data string, headers map[string]string) (events.APIGatewayV2HTTPResponse, bool) {
	var resp events.APIGatewayV2HTTPResponse
	p := respParser{data: data}
	if !p.consume('{') {
		return resp, false
	}
	var seen uint8
	next := 0
	if !p.consume('}') {
		for {
			key, ok := p.rawString()
			if !ok || !p.consume(':') {
				return resp, false
			}
			var bit uint8
			i := respFields.index(key, next)
			next = i + 1
			switch i {
			case 0:
				bit = 1
				if !p.null() {
					if resp.StatusCode, ok = p.integer(); !ok {
						return resp, false
					}
				}
			case 1:
				bit = 2
				if !p.null() {
					if resp.Headers, ok = p.stringMapInto(headers); !ok {
						return resp, false
					}
				}
			case 2:
				bit = 4
				if !p.null() {
					if resp.MultiValueHeaders, ok = p.stringsMap(); !ok {
						return resp, false
					}
				}
			case 3:
				bit = 8
				if !p.null() {
					if resp.Body, ok = p.str(); !ok {
						return resp, false
					}
				}
			case 4:
				bit = 16
				if !p.null() {
					if resp.IsBase64Encoded, ok = p.boolean(); !ok {
						return resp, false
					}
				}
			case 5:
				bit = 32
				if !p.null() {
					if resp.Cookies, ok = p.strings(); !ok {
						return resp, false
					}
				}
			default:
				return resp, false
			}
			if seen&bit != 0 {
				return resp, false
			}
			seen |= bit
			if p.consume(',') {
				continue
			}
			if p.consume('}') {
				break
			}
			return resp, false
		}
	}
	p.space()
	return resp, p.i == len(p.data)
}

// respParser is the cursor of parseResponse and parseEvent; every method
// skips leading white space and reports false on input it does not take.
// The input is a string so that a value without escapes is a substring of
// it rather than a copy of its own: one allocation per payload instead of
// one per value (the values keep the payload's few KB alive as long as
// any of them lives).
type respParser struct {
	data string
	i    int
}

func (p *respParser) space() {
	for p.i < len(p.data) {
		switch c := p.data[p.i]; {
		case c > ' ': // the usual case: no white space at all
			return
		case c == ' ', c == '\t', c == '\n', c == '\r':
			p.i++
		default:
			return
		}
	}
}

func (p *respParser) consume(c byte) bool {
	p.space()
	if p.i < len(p.data) && p.data[p.i] == c {
		p.i++
		return true
	}
	return false
}

func (p *respParser) literal(s string) bool {
	p.space()
	if len(p.data)-p.i >= len(s) && p.data[p.i:p.i+len(s)] == s {
		p.i += len(s)
		return true
	}
	return false
}

func (p *respParser) null() bool { return p.literal("null") }

func (p *respParser) boolean() (bool, bool) {
	if p.literal("true") {
		return true, true
	}
	return false, p.literal("false")
}

// integer takes a JSON number without fraction or exponent that fits an int.
func (p *respParser) integer() (int, bool) {
	p.space()
	start := p.i
	if p.i < len(p.data) && p.data[p.i] == '-' {
		p.i++
	}
	digits := p.i
	for p.i < len(p.data) && p.data[p.i] >= '0' && p.data[p.i] <= '9' {
		p.i++
	}
	n := p.i - digits
	if n == 0 || n > 18 || (n > 1 && p.data[digits] == '0') {
		return 0, false
	}
	if p.i < len(p.data) && (p.data[p.i] == '.' || p.data[p.i] == 'e' || p.data[p.i] == 'E') {
		return 0, false
	}
	v, err := strconv.Atoi(p.data[start:p.i])
	return v, err == nil
}

// rawString returns a string without escapes (object keys).
func (p *respParser) rawString() (string, bool) {
	p.space()
	if p.i >= len(p.data) || p.data[p.i] != '"' {
		return "", false
	}
	for j := p.i + 1; j < len(p.data); j++ {
		if c := p.data[j]; strStop[c] {
			if c != '"' {
				return "", false
			}
			s := p.data[p.i+1 : j]
			p.i = j + 1
			return s, true
		}
	}
	return "", false
}

// strStop marks the bytes str cannot copy as they are: the quote, the
// backslash, control characters, and the non-ASCII bytes whose UTF-8 it
// checks; read-only.
var strStop = func() (t [256]bool) {
	for b := range 256 {
		t[b] = b == '"' || b == '\\' || b < 0x20 || b >= utf8.RuneSelf
	}
	return t
}()

// str takes a JSON string: valid UTF-8, the escapes of RFC 8259 except
// surrogate pairs.
func (p *respParser) str() (string, bool) {
	p.space()
	if p.i >= len(p.data) || p.data[p.i] != '"' {
		return "", false
	}
	start := p.i + 1
	j := start
	ascii := true
	for ; j < len(p.data); j++ {
		c := p.data[j]
		if !strStop[c] {
			continue
		}
		if c == '"' {
			break
		}
		if c == '\\' {
			return p.escaped(start)
		}
		if c < 0x20 {
			return "", false
		}
		ascii = false
	}
	if j >= len(p.data) {
		return "", false
	}
	if !ascii && !utf8.ValidString(p.data[start:j]) {
		return "", false
	}
	p.i = j + 1
	return p.data[start:j], true
}

// escaped decodes a string with escapes whose contents start at start,
// into one allocation: the decoded text is never longer than its JSON
// form, so the closing quote found first bounds it.
func (p *respParser) escaped(start int) (string, bool) {
	end := start
	for end < len(p.data) && p.data[end] != '"' {
		if p.data[end] == '\\' {
			end++
		}
		end++
	}
	if end >= len(p.data) {
		return "", false
	}
	var out strings.Builder
	out.Grow(end - start)
	for j := start; j < end; {
		// The run up to the next escape is copied as it is.
		run := j
		for j < end && p.data[j] != '\\' {
			if p.data[j] < 0x20 {
				return "", false
			}
			j++
		}
		out.WriteString(p.data[run:j])
		if j == end {
			break
		}
		switch e := p.data[j+1]; e {
		case '"', '\\', '/':
			out.WriteByte(e)
		case 'b':
			out.WriteByte('\b')
		case 'f':
			out.WriteByte('\f')
		case 'n':
			out.WriteByte('\n')
		case 'r':
			out.WriteByte('\r')
		case 't':
			out.WriteByte('\t')
		case 'u':
			if j+6 > end {
				return "", false
			}
			v, err := strconv.ParseUint(p.data[j+2:j+6], 16, 16)
			if err != nil || (v >= 0xD800 && v < 0xE000) {
				return "", false
			}
			out.WriteRune(rune(v))
			j += 6
			continue
		default:
			return "", false
		}
		j += 2
	}
	s := out.String()
	if !utf8.ValidString(s) {
		return "", false
	}
	p.i = end + 1
	return s, true
}

func (p *respParser) strings() ([]string, bool) {
	if !p.consume('[') {
		return nil, false
	}
	out := []string{}
	if p.consume(']') {
		return out, true
	}
	for {
		s, ok := p.str()
		if !ok {
			return nil, false
		}
		out = append(out, s)
		if p.consume(',') {
			continue
		}
		return out, p.consume(']')
	}
}

// object calls value for each key of an object, whose value value reads.
func (p *respParser) object(value func(key string) bool) bool {
	if !p.consume('{') {
		return false
	}
	if p.consume('}') {
		return true
	}
	for {
		k, ok := p.str()
		if !ok || !p.consume(':') || !value(k) {
			return false
		}
		if p.consume(',') {
			continue
		}
		return p.consume('}')
	}
}

func (p *respParser) stringMap() (map[string]string, bool) { return p.stringMapInto(nil) }

// stringMapInto reads a string map into m, or into a new map when m is nil.
func (p *respParser) stringMapInto(m map[string]string) (map[string]string, bool) {
	if m == nil {
		m = map[string]string{}
	}
	ok := p.object(func(k string) bool {
		v, ok := p.str()
		m[k] = v
		return ok
	})
	return m, ok
}

func (p *respParser) stringsMap() (map[string][]string, bool) {
	m := map[string][]string{}
	ok := p.object(func(k string) bool {
		if p.null() {
			m[k] = nil
			return true
		}
		v, ok := p.strings()
		m[k] = v
		return ok
	})
	return m, ok
}

// fieldCursor walks an object whose keys are among names, each at most
// once and spelled exactly so; null for the whole object is taken as no
// object at all.
type fieldCursor struct {
	names  *fieldNames
	seen   uint64
	next   int // where names.index starts looking for the next key
	inside bool
}

// field reads the object's next key and returns its index, the value
// being next to read, or -1 once the object has ended; ok is false on
// input the cursor does not take. A loop over field, not a callback per
// value, so the struct being filled stays on the caller's stack.
func (p *respParser) field(c *fieldCursor) (i int, ok bool) {
	if !c.inside {
		c.inside = true
		if p.null() {
			return -1, true
		}
		if !p.consume('{') {
			return 0, false
		}
		if p.consume('}') {
			return -1, true
		}
	} else if !p.consume(',') {
		return -1, p.consume('}')
	}
	key, ok := p.rawString()
	if !ok || !p.consume(':') {
		return 0, false
	}
	i = c.names.index(key, c.next)
	if i < 0 || c.seen&(1<<i) != 0 {
		return 0, false
	}
	c.seen |= 1 << i
	c.next = i + 1
	return i, true
}

// into reads a string (null leaves *dst as it is, as encoding/json does).
func (p *respParser) into(dst *string) bool {
	if p.null() {
		return true
	}
	s, ok := p.str()
	*dst = s
	return ok
}

// mapInto reads a string map or null (a nil map).
func (p *respParser) mapInto(dst *map[string]string) bool {
	if p.null() {
		*dst = nil
		return true
	}
	m, ok := p.stringMap()
	*dst = m
	return ok
}

// fieldNames are an object's keys, in their struct's order, which is the
// order the gateway and lambda.NewHandler write them in: index looks for a
// key from where the previous one was found, and only a key out of that
// order costs a map lookup.
type fieldNames struct {
	list []string
	at   map[string]int
}

// index returns key's position, or -1; next is the position after the
// previous key's.
func (f *fieldNames) index(key string, next int) int {
	for i := next; i < len(f.list); i++ {
		if f.list[i] == key {
			return i
		}
	}
	if i, ok := f.at[key]; ok {
		return i
	}
	return -1
}

func names(keys ...string) *fieldNames {
	f := &fieldNames{list: keys, at: make(map[string]int, len(keys))}
	for i, k := range keys {
		f.at[k] = i
	}
	return f
}

// The keys of the event's and the response's objects; read-only.
var (
	respFields  = names("statusCode", "headers", "multiValueHeaders", "body", "isBase64Encoded", "cookies")
	eventFields = names("version", "routeKey", "rawPath", "rawQueryString", "cookies", "headers",
		"queryStringParameters", "pathParameters", "requestContext", "stageVariables", "body", "isBase64Encoded")
	contextFields = names("routeKey", "accountId", "stage", "requestId", "authorizer", "apiId", "domainName",
		"domainPrefix", "time", "timeEpoch", "http", "authentication")
	httpFields     = names("method", "path", "protocol", "sourceIp", "userAgent")
	authnFields    = names("clientCert")
	certFields     = names("clientCertPem", "issuerDN", "serialNumber", "subjectDN", "validity")
	validityFields = names("notAfter", "notBefore")
)

// parseEvent reads a payload-format-2.0 event as encoding/json would into
// an events.APIGatewayV2HTTPRequest, for events of the shape API Gateway
// sends without an authorizer; like parseResponse it reports false for
// anything else, which the caller hands to encoding/json. Its one copy of
// data backs every string of the event.
func parseEvent(data []byte) (e events.APIGatewayV2HTTPRequest, ok bool) {
	p := respParser{data: string(data)}
	if !p.event(&e) {
		return e, false
	}
	p.space()
	return e, p.i == len(p.data)
}

func (p *respParser) event(e *events.APIGatewayV2HTTPRequest) bool {
	c := fieldCursor{names: eventFields}
	for {
		i, ok := p.field(&c)
		if !ok {
			return false
		}
		switch i {
		case -1:
			return true
		case 0:
			ok = p.into(&e.Version)
		case 1:
			ok = p.into(&e.RouteKey)
		case 2:
			ok = p.into(&e.RawPath)
		case 3:
			ok = p.into(&e.RawQueryString)
		case 4:
			if !p.null() {
				e.Cookies, ok = p.strings()
			}
		case 5:
			ok = p.mapInto(&e.Headers)
		case 6:
			ok = p.mapInto(&e.QueryStringParameters)
		case 7:
			ok = p.mapInto(&e.PathParameters)
		case 8:
			ok = p.requestContext(&e.RequestContext)
		case 9:
			ok = p.mapInto(&e.StageVariables)
		case 10:
			ok = p.into(&e.Body)
		default:
			if !p.null() {
				e.IsBase64Encoded, ok = p.boolean()
			}
		}
		if !ok {
			return false
		}
	}
}

func (p *respParser) requestContext(rc *events.APIGatewayV2HTTPRequestContext) bool {
	c := fieldCursor{names: contextFields}
	for {
		i, ok := p.field(&c)
		if !ok {
			return false
		}
		switch i {
		case -1:
			return true
		case 0:
			ok = p.into(&rc.RouteKey)
		case 1:
			ok = p.into(&rc.AccountID)
		case 2:
			ok = p.into(&rc.Stage)
		case 3:
			ok = p.into(&rc.RequestID)
		case 4:
			ok = p.null() // an authorizer's free-form values are left to encoding/json
		case 5:
			ok = p.into(&rc.APIID)
		case 6:
			ok = p.into(&rc.DomainName)
		case 7:
			ok = p.into(&rc.DomainPrefix)
		case 8:
			ok = p.into(&rc.Time)
		case 9:
			if !p.null() {
				var v int
				v, ok = p.integer()
				rc.TimeEpoch = int64(v)
			}
		case 10:
			ok = p.httpDescription(&rc.HTTP)
		default:
			ok = p.authentication(&rc.Authentication)
		}
		if !ok {
			return false
		}
	}
}

func (p *respParser) httpDescription(h *events.APIGatewayV2HTTPRequestContextHTTPDescription) bool {
	c := fieldCursor{names: httpFields}
	for {
		i, ok := p.field(&c)
		if !ok {
			return false
		}
		switch i {
		case -1:
			return true
		case 0:
			ok = p.into(&h.Method)
		case 1:
			ok = p.into(&h.Path)
		case 2:
			ok = p.into(&h.Protocol)
		case 3:
			ok = p.into(&h.SourceIP)
		default:
			ok = p.into(&h.UserAgent)
		}
		if !ok {
			return false
		}
	}
}

func (p *respParser) authentication(a *events.APIGatewayV2HTTPRequestContextAuthentication) bool {
	c := fieldCursor{names: authnFields}
	for {
		i, ok := p.field(&c)
		if !ok {
			return false
		}
		if i == -1 {
			return true
		}
		if !p.clientCert(&a.ClientCert) {
			return false
		}
	}
}

func (p *respParser) clientCert(cert *events.APIGatewayV2HTTPRequestContextAuthenticationClientCert) bool {
	c := fieldCursor{names: certFields}
	for {
		i, ok := p.field(&c)
		if !ok {
			return false
		}
		switch i {
		case -1:
			return true
		case 0:
			ok = p.into(&cert.ClientCertPem)
		case 1:
			ok = p.into(&cert.IssuerDN)
		case 2:
			ok = p.into(&cert.SerialNumber)
		case 3:
			ok = p.into(&cert.SubjectDN)
		default:
			ok = p.validity(&cert.Validity)
		}
		if !ok {
			return false
		}
	}
}

func (p *respParser) validity(v *events.APIGatewayV2HTTPRequestContextAuthenticationClientCertValidity) bool {
	c := fieldCursor{names: validityFields}
	for {
		i, ok := p.field(&c)
		if !ok {
			return false
		}
		switch i {
		case -1:
			return true
		case 0:
			ok = p.into(&v.NotAfter)
		default:
			ok = p.into(&v.NotBefore)
		}
		if !ok {
			return false
		}
	}
}

// AppendResponse appends resp as JSON to dst: byte for byte what
// lambda.NewHandler's encoder writes for a handler's response (json.Encoder
// without HTML escaping, the trailing newline removed).
func AppendResponse(dst []byte, resp *events.APIGatewayV2HTTPResponse) []byte {
	dst = append(dst, `{"statusCode":`...)
	dst = strconv.AppendInt(dst, int64(resp.StatusCode), 10)
	dst = append(dst, `,"headers":`...)
	dst = appendMap(dst, resp.Headers, false)
	dst = append(dst, `,"multiValueHeaders":`...)
	if resp.MultiValueHeaders == nil {
		dst = append(dst, "null"...)
	} else {
		var buf [32]string
		keys := buf[:0]
		for k := range resp.MultiValueHeaders {
			keys = append(keys, k)
		}
		slices.Sort(keys)
		dst = append(dst, '{')
		for i, k := range keys {
			if i > 0 {
				dst = append(dst, ',')
			}
			dst = appendString(dst, k, false)
			dst = append(dst, ':')
			dst = appendStringList(dst, resp.MultiValueHeaders[k], false)
		}
		dst = append(dst, '}')
	}
	dst = append(dst, `,"body":`...)
	dst = appendString(dst, resp.Body, false)
	if resp.IsBase64Encoded {
		dst = append(dst, `,"isBase64Encoded":true`...)
	}
	dst = append(dst, `,"cookies":`...)
	dst = appendStringList(dst, resp.Cookies, false)
	return append(dst, '}')
}

func appendStringList(dst []byte, s []string, html bool) []byte {
	if s == nil {
		return append(dst, "null"...)
	}
	dst = append(dst, '[')
	for i, v := range s {
		if i > 0 {
			dst = append(dst, ',')
		}
		dst = appendString(dst, v, html)
	}
	return append(dst, ']')
}
