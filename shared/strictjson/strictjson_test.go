package strictjson_test

import (
	"bytes"
	"encoding/json"
	"errors"
	"strings"
	"testing"
	"unicode/utf8"

	"github.com/a2awire/a2awire/shared/strictjson"
)

type item struct {
	Name string `json:"name"`
	Desc string `json:"description"`
}

type body struct {
	Name  string          `json:"name"`
	N     int             `json:"n"`
	Items []item          `json:"items"`
	Raw   json.RawMessage `json:"raw"`
	Any   any             `json:"any"`
	Tags  map[string]item `json:"tags"`
}

func kindOf(t *testing.T, err error) strictjson.Kind {
	t.Helper()
	var e *strictjson.Error
	if !errors.As(err, &e) {
		t.Fatalf("%v (%T) is no *strictjson.Error", err, err)
	}
	return e.Kind
}

// TestDecodeRules: each rule of the package refuses with its kind and a
// message that locates the problem.
func TestDecodeRules(t *testing.T) {
	for _, c := range []struct {
		in      string
		unknown strictjson.Unknown
		kind    strictjson.Kind
		msg     string
	}{
		{`{"name":"a","name":"b"}`, strictjson.IgnoreUnknown, strictjson.Syntax, `duplicate key "name"`},
		{`{"items":[{"name":"a","name":"b"}]}`, strictjson.IgnoreUnknown, strictjson.Syntax, `duplicate key "name"`},
		{"{\"name\":\"\xff\"}", strictjson.IgnoreUnknown, strictjson.BadUTF8, "not valid UTF-8 (at byte 9)"},
		{`{"name":"\ud800"}`, strictjson.IgnoreUnknown, strictjson.Syntax, "surrogate"},
		{`{"name":"a"} x`, strictjson.IgnoreUnknown, strictjson.Syntax, "data after"},
		{``, strictjson.IgnoreUnknown, strictjson.Syntax, "ends early"},
		{`[1]`, strictjson.IgnoreUnknown, strictjson.NotObject, "must be a JSON object"},
		{`{"name":1}`, strictjson.IgnoreUnknown, strictjson.WrongType, "name must be a JSON string"},
		{`{"items":[{"name":2}]}`, strictjson.IgnoreUnknown, strictjson.WrongType, "items.name must be a JSON string"},
		{`{"n":"x"}`, strictjson.RefuseUnknown, strictjson.WrongType, "n must be a JSON integer"},
		{`{"nmae":"x"}`, strictjson.RefuseUnknown, strictjson.UnknownField, `unknown field "nmae"`},
		{`{"NAME":"x"}`, strictjson.RefuseUnknown, strictjson.UnknownField, `unknown field "NAME"`},
		{`{"items":[{"name":"a"},{"desc":"x"}]}`, strictjson.RefuseUnknown, strictjson.UnknownField, `unknown field "items[1].desc"`},
		{`{"tags":{"k":{"nam":"x"}}}`, strictjson.RefuseUnknown, strictjson.UnknownField, `unknown field "tags.k.nam"`},
	} {
		var b body
		err := strictjson.Decode([]byte(c.in), &b, c.unknown)
		if err == nil {
			t.Errorf("%q: accepted", c.in)
			continue
		}
		if k := kindOf(t, err); k != c.kind || !strings.Contains(err.Error(), c.msg) {
			t.Errorf("%q: kind %d %q, want kind %d containing %q", c.in, k, err, c.kind, c.msg)
		}
	}
}

// TestDecodeKeysAreCaseExact: a key that differs from a field's name only
// in case never fills it (encoding/json alone would), and keys below a
// raw value or an interface are the client's, checked for nothing but
// strictness.
func TestDecodeKeysAreCaseExact(t *testing.T) {
	var b body
	in := `{"NAME":"x","Name":"y","name":"z","N":7,"items":[{"NAME":"q","name":"r"}],"raw":{"Name":1, "x" : [1]},"any":{"NAME":2}}`
	if err := strictjson.Decode([]byte(in), &b, strictjson.IgnoreUnknown); err != nil {
		t.Fatal(err)
	}
	if b.Name != "z" || b.N != 0 || len(b.Items) != 1 || b.Items[0].Name != "r" {
		t.Errorf("decoded %+v", b)
	}
	if string(b.Raw) != `{"Name":1, "x" : [1]}` {
		t.Errorf("raw = %s, want the bytes sent", b.Raw)
	}
	if m, _ := b.Any.(map[string]any); m["NAME"] != 2.0 {
		t.Errorf("any = %v", b.Any)
	}
	var only body
	if err := strictjson.Decode([]byte(`{"NAME":"x"}`), &only, strictjson.IgnoreUnknown); err != nil || only.Name != "" {
		t.Errorf("case variant alone: %v %q, want ignored", err, only.Name)
	}
}

// TestDecodeNeedsAPointer: a programming mistake is a plain error, not
// the client's.
func TestDecodeNeedsAPointer(t *testing.T) {
	var b body
	err := strictjson.Decode([]byte(`{}`), b, strictjson.IgnoreUnknown)
	var e *strictjson.Error
	if err == nil || errors.As(err, &e) {
		t.Errorf("non-pointer: %v", err)
	}
}

// FuzzCheck compares the strict checker with encoding/json: whatever it
// accepts is valid JSON and valid UTF-8, and it refuses valid UTF-8 JSON
// only for a repeated key, a lone surrogate escape or excessive nesting.
func FuzzCheck(f *testing.F) {
	for _, s := range []string{
		`{"a":1,"b":[true,false,null,"x\u00e9"]}`, `{"a":1,"a":2}`, `{"a":1,"\u0061":2}`, `"\ud83d\ude00"`, `"\ud800"`,
		"\"\xff\"", `[1,2]x`, `-0.0e-0`, `{"":{"":{"":[]}}}`, ` 1 `, `01`, `1e`, `"\/"`,
		`{"n":1e999999}`, `"<>&\u2028"`, "{\"\xff\":1}",
	} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		err := strictjson.Check(data)
		if err == nil {
			if !json.Valid(data) || !utf8.Valid(data) {
				t.Fatalf("Check accepted %q", data)
			}
			return
		}
		je, ok := err.(*strictjson.Error)
		if !ok || (je.Kind != strictjson.Syntax && je.Kind != strictjson.BadUTF8) || je.Offset < 0 || je.Offset > len(data) {
			t.Fatalf("Check(%q) = %#v", data, err)
		}
		if json.Valid(data) && utf8.Valid(data) && !strings.Contains(je.Msg, "duplicate key") &&
			!strings.Contains(je.Msg, "surrogate") && !strings.Contains(je.Msg, "nested") {
			t.Fatalf("Check refused valid JSON %q: %v", data, err)
		}
	})
}

// FuzzDecode: Decode accepts exactly what Check accepts (for a target that
// takes any object), and then agrees with encoding/json on every key that
// names a field exactly; a raw value is the client's text of it byte for
// byte, so sizes measured on it are the sizes sent.
func FuzzDecode(f *testing.F) {
	for _, s := range []string{
		`{"x":{"a":"<b>&"}}`, `{"x":"\u003c"}`, `{"x":[1, 2 ,"\u2028\u2029"]}`, `{"x":{"n":1e999999}}`,
		`{"y":1,"x":"‹"}`, `{"x":null}`, `{"X":1}`, `{}`, `{"X":1,"x":2}`, `{"x":1,"y":{"x":1,"x":2}}`,
	} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		var v struct {
			X json.RawMessage `json:"x"`
		}
		err := strictjson.Decode(data, &v, strictjson.IgnoreUnknown)
		isObject := bytes.HasPrefix(bytes.TrimLeft(data, " \t\r\n"), []byte("{"))
		if (err == nil) != (strictjson.Check(data) == nil && isObject) {
			t.Fatalf("Decode(%q) = %v, Check = %v", data, err, strictjson.Check(data))
		}
		if err != nil {
			return
		}
		var top map[string]json.RawMessage
		if err := json.Unmarshal(data, &top); err != nil {
			t.Fatalf("encoding/json refused what Decode accepted, %q: %v", data, err)
		}
		want, ok := top["x"]
		if !ok {
			if v.X != nil {
				t.Fatalf("Decode(%q) invented x = %q", data, v.X)
			}
			return
		}
		if !bytes.Equal(v.X, want) {
			t.Fatalf("Decode(%q): x = %q, want %q", data, v.X, want)
		}
	})
}
