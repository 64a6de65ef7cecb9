// Package jsonlen measures text as encoding/json writes it inside a JSON
// string. It imports nothing of HTTP or Lambda, so a domain package (the
// inbox bounding a read's answer) can measure what a route will send.
package jsonlen

import "unicode/utf8"

// Escaped is how many bytes b takes inside a JSON string written by
// encoding/json with HTML escaping off (without its quotes), as the Lambda
// runtime writes a proxy response's body: '"' and '\' take 2 bytes, \b
// \f \n \r \t 2, other control bytes 6 (\u00XX), U+2028 and U+2029 6, a
// byte that is not UTF-8 6 (\ufffd), and everything else itself. A JSON
// body of stored text can grow up to seven times here (a '<' that the
// body's encoder wrote as \u003c becomes \\u003c), which is why a budget
// on stored bytes is not a budget on the response.
func Escaped[B []byte | string](b B) int {
	n := 0
	for i := 0; i < len(b); {
		c := b[i]
		if c < utf8.RuneSelf {
			switch {
			case c == '"' || c == '\\' || c == '\b' || c == '\f' || c == '\n' || c == '\r' || c == '\t':
				n += 2
			case c < 0x20:
				n += 6
			default:
				n++
			}
			i++
			continue
		}
		r, size := utf8.DecodeRuneInString(string(b[i:min(len(b), i+utf8.UTFMax)]))
		switch {
		case r == utf8.RuneError && size == 1:
			n += 6
		case r == '\u2028' || r == '\u2029':
			n += 6
		default:
			n += size
		}
		i += size
	}
	return n
}
