package access_test

import (
	"crypto/ed25519"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/a2awire/a2awire/shared/access"
	"github.com/a2awire/a2awire/shared/auth"
	"github.com/a2awire/a2awire/shared/httperr"
	"github.com/a2awire/a2awire/shared/strictjson"
)

// counted counts how often a body is decoded into it.
type counted struct{ n *atomic.Int32 }

func (c *counted) UnmarshalJSON([]byte) error {
	c.n.Add(1)
	return nil
}

// countedBody is a route's body: the key, and a field that counts decodes.
type countedBody struct {
	PublicKey *string `json:"publicKey"`
	Tick      counted `json:"tick"`
}

// TestBodyDecodedOnce: on a route whose body carries the signing key, the
// BodyKey decodes the body and the handler's Decode into the same type
// takes that value: one decode per request, and the handler sees every
// field.
func TestBodyDecodedOnce(t *testing.T) {
	var n atomic.Int32
	fresh := func() countedBody { return countedBody{Tick: counted{n: &n}} }
	d, err := access.New(access.Config{
		Function: "w",
		Table:    worldTable[1:],
		Routes: map[string]access.Route{"PUT /w/{world}": {
			BodyKey: func(r *http.Request) (ed25519.PublicKey, error) {
				in := fresh()
				if err := access.DecodeKey(r, &in, "publicKey"); err != nil {
					return nil, err
				}
				return auth.DecodePublicKey(*in.PublicKey)
			},
			Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				in := fresh()
				if err := access.Decode(r, &in); err != nil {
					httperr.WriteWorld(w, err)
					return
				}
				_, _ = fmt.Fprintf(w, "%s", *in.PublicKey)
			}),
		}},
		Verifier: verifier(t, time.Now),
		Render:   httperr.WriteWorld,
	})
	if err != nil {
		t.Fatal(err)
	}
	w := httptest.NewRecorder()
	body := fmt.Sprintf(`{"publicKey":%q,"tick":1}`, encodeKey(pub(known)))
	d.ServeHTTP(w, request(t, signer(t, known), "PUT", "/w/lobby", body))
	if w.Code != 200 || w.Body.String() != encodeKey(pub(known)) {
		t.Fatalf("%d %s", w.Code, w.Body)
	}
	if got := n.Load(); got != 1 {
		t.Errorf("the body was decoded %d times, want once", got)
	}
}

// TestUnknownFieldsPerSurface: a key that names no field is refused on a
// surface that says so (the worlds) — by the handler's Decode, after the
// signature verified, not by the BodyKey — and ignored elsewhere.
func TestUnknownFieldsPerSurface(t *testing.T) {
	for _, c := range []struct {
		unknown strictjson.Unknown
		status  int
	}{{strictjson.RefuseUnknown, 400}, {strictjson.IgnoreUnknown, 200}} {
		d, err := access.New(access.Config{
			Function: "w",
			Table:    worldTable[1:],
			Routes: map[string]access.Route{"PUT /w/{world}": {BodyKey: bodyKey, Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				var in struct {
					PublicKey *string `json:"publicKey"`
				}
				if err := access.Decode(r, &in); err != nil {
					httperr.WriteWorld(w, err)
				}
			})}},
			Verifier:      verifier(t, time.Now),
			Render:        httperr.WriteWorld,
			UnknownFields: c.unknown,
		})
		if err != nil {
			t.Fatal(err)
		}
		body := fmt.Sprintf(`{"publicKey":%q,"nmae":"x"}`, encodeKey(pub(known)))
		w := httptest.NewRecorder()
		d.ServeHTTP(w, request(t, signer(t, known), "PUT", "/w/lobby", body))
		if w.Code != c.status || (c.status == 400 && !strings.Contains(w.Body.String(), `unknown field \"nmae\"`)) {
			t.Errorf("unknown fields %v: %d %s, want %d", c.unknown, w.Code, w.Body, c.status)
		}
		// A stranger's signature over the same body is 401 first: the
		// BodyKey does not judge the other fields.
		w = httptest.NewRecorder()
		r := request(t, signer(t, unknown), "PUT", "/w/lobby", body)
		d.ServeHTTP(w, r)
		var e struct {
			Error struct{ Code string } `json:"error"`
		}
		_ = json.Unmarshal(w.Body.Bytes(), &e)
		if w.Code != 401 || e.Error.Code != "UNAUTHORIZED" {
			t.Errorf("unknown fields %v, another signer: %d %s, want 401", c.unknown, w.Code, w.Body)
		}
	}
}
