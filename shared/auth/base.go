package auth

import (
	"strings"
)

// message is what a signature base is computed from: the request as the
// client addressed it, with header fields read as sent.
type message struct {
	method    string
	authority string
	path      string
	query     string // without "?"
	header    func(name string) (string, bool)
}

// componentError is a failure to compute one covered component; its text is
// a rule message.
type componentError string

func (e componentError) Error() string { return string(e) }

// componentValue returns the value of one covered component (RFC 9421
// §2.1–2.2): the derived components a request has without knowing its
// scheme, and header fields, whole or one dictionary member (";key").
func componentValue(id item, m message) (string, error) {
	if id.val.kind != sfString || id.val.s == "" || id.val.s != strings.ToLower(id.val.s) {
		return "", componentError("malformed component identifier")
	}
	name := id.val.s
	if strings.HasPrefix(name, "@") {
		if len(id.params) > 0 {
			return "", componentError("unsupported parameter on component " + name)
		}
		switch name {
		case "@method":
			return m.method, nil
		case "@authority":
			return m.authority, nil
		case "@path":
			return m.path, nil
		case "@query":
			return "?" + m.query, nil
		case "@request-target":
			if m.query == "" {
				return m.path, nil
			}
			return m.path + "?" + m.query, nil
		}
		return "", componentError("unsupported component " + name)
	}
	raw, ok := m.header(name)
	if !ok {
		return "", componentError("covered header " + name + " is missing")
	}
	// RFC 9421 §2.1: leading and trailing whitespace removed.
	v := strings.Trim(raw, " \t")
	if strings.ContainsAny(v, "\r\n") {
		return "", componentError("covered header " + name + " is malformed")
	}
	for _, p := range id.params {
		if p.key != "key" {
			return "", componentError("unsupported parameter on component " + name)
		}
	}
	if key, ok := id.params.get("key"); ok {
		if key.kind != sfString {
			return "", componentError("malformed component identifier")
		}
		d, err := parseDict(v)
		if err != nil {
			return "", componentError("covered header " + name + " is not a dictionary")
		}
		mem, ok := d.get(key.s)
		if !ok {
			return "", componentError("covered header " + name + " has no member " + key.s)
		}
		var b strings.Builder
		mem.serializeValue(&b)
		return b.String(), nil
	}
	return v, nil
}

// signatureBase builds the RFC 9421 §2.5 signature base of the signature
// whose Signature-Input member is sig: one line per covered component, then
// "@signature-params" with the member serialized as received (its
// parameters in the order sent).
func signatureBase(sig member, m message) ([]byte, error) {
	var b strings.Builder
	seen := make(map[string]bool, len(sig.list))
	for _, id := range sig.list {
		var idb strings.Builder
		id.serialize(&idb)
		ids := idb.String()
		if seen[ids] {
			return nil, componentError("component " + ids + " covered twice")
		}
		seen[ids] = true
		v, err := componentValue(id, m)
		if err != nil {
			return nil, err
		}
		b.WriteString(ids)
		b.WriteString(": ")
		b.WriteString(v)
		b.WriteByte('\n')
	}
	b.WriteString(`"@signature-params": `)
	sig.serializeValue(&b)
	return []byte(b.String()), nil
}
