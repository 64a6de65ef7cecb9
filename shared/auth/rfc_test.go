package auth

import (
	"bytes"
	"crypto/ed25519"
	"crypto/x509"
	"encoding/base64"
	"encoding/pem"
	"testing"
)

// The Ed25519 test key of RFC 9421 Appendix B.1.4.
const (
	rfcPrivatePEM = `-----BEGIN PRIVATE KEY-----
MC4CAQAwBQYDK2VwBCIEIJ+DYvh6SEqVTm50DFtMDoQikTmiCqirVv9mWG9qfSnF
-----END PRIVATE KEY-----`
	rfcPublicPEM = `-----BEGIN PUBLIC KEY-----
MCowBQYDK2VwAyEAJrQLj5P/89iXES9+vFgrIy29clF9CC/oPPsw3c5D0bs=
-----END PUBLIC KEY-----`
)

// RFC 9421 Appendix B.2.6: signing a request using ed25519.
const (
	b26Input     = `sig-b26=("date" "@method" "@path" "@authority" "content-type" "content-length");created=1618884473;keyid="test-key-ed25519"`
	b26Signature = `sig-b26=:wqcAqbmYJ2ji2glfAMaRy4gruYYnx2nEFN2HN6jrnDnQCK1u02Gb04v9EDgwUPiu4A0w6vuQv5lIp5WPpBKRCw==:`
	b26Base      = `"date": Tue, 20 Apr 2021 02:07:55 GMT
"@method": POST
"@path": /foo
"@authority": example.com
"content-type": application/json
"content-length": 18
"@signature-params": ("date" "@method" "@path" "@authority" "content-type" "content-length");created=1618884473;keyid="test-key-ed25519"`
)

func rfcKeys(t testing.TB) (ed25519.PrivateKey, ed25519.PublicKey) {
	t.Helper()
	blk, _ := pem.Decode([]byte(rfcPrivatePEM))
	k, err := x509.ParsePKCS8PrivateKey(blk.Bytes)
	if err != nil {
		t.Fatal(err)
	}
	blk, _ = pem.Decode([]byte(rfcPublicPEM))
	p, err := x509.ParsePKIXPublicKey(blk.Bytes)
	if err != nil {
		t.Fatal(err)
	}
	return k.(ed25519.PrivateKey), p.(ed25519.PublicKey)
}

func TestRFC9421B26(t *testing.T) {
	priv, pub := rfcKeys(t)
	if !bytes.Equal(priv.Public().(ed25519.PublicKey), pub) {
		t.Fatal("B.1.4 private and public keys do not match")
	}
	// The request of B.2.6 as a server sees it.
	headers := map[string]string{
		"date":           "Tue, 20 Apr 2021 02:07:55 GMT",
		"content-type":   "application/json",
		"content-digest": "sha-512=:WZDPaVn/7XgHaAy8pmojAkGWoRx2UFChF41A2svX+TaPm+AbwAgBWnrIiYllu7BNNyealdVLvRwEmTHWXvJwew==:",
		"content-length": "18",
	}
	msg := message{method: "POST", authority: "example.com", path: "/foo", query: "param=Value&Pet=dog",
		header: func(n string) (string, bool) { v, ok := headers[n]; return v, ok }}

	inputs, err := parseDict(b26Input)
	if err != nil {
		t.Fatal(err)
	}
	sig, ok := inputs.get("sig-b26")
	if !ok {
		t.Fatal("no sig-b26 in Signature-Input")
	}
	base, err := signatureBase(sig, msg)
	if err != nil {
		t.Fatal(err)
	}
	if string(base) != b26Base {
		t.Fatalf("signature base:\n%s\nwant:\n%s", base, b26Base)
	}
	sigs, err := parseDict(b26Signature)
	if err != nil {
		t.Fatal(err)
	}
	want, _ := sigs.get("sig-b26")
	if !ed25519.Verify(pub, base, want.val.b) {
		t.Fatal("B.2.6 signature does not verify over our base")
	}
	// Ed25519 is deterministic: signing our base gives the RFC's bytes.
	if got := ed25519.Sign(priv, base); !bytes.Equal(got, want.val.b) {
		t.Fatalf("signature %s, want %s", base64.StdEncoding.EncodeToString(got), base64.StdEncoding.EncodeToString(want.val.b))
	}
	// Both headers serialize back to the RFC's text.
	if got := inputs.serialize(); got != b26Input {
		t.Errorf("Signature-Input reserialized as %s", got)
	}
	if got := sigs.serialize(); got != b26Signature {
		t.Errorf("Signature reserialized as %s", got)
	}
}

func TestRFC7638ThumbprintOfRFC9421Key(t *testing.T) {
	_, pub := rfcKeys(t)
	if got, want := KeyID(pub), "poqkLGiymh_W0uP6PZFw-dvez3QJT5SolqXBCW38r0U"; got != want {
		t.Fatalf("KeyID = %s, want %s", got, want)
	}
	j := PublicJWK(pub)
	if j.X != "JrQLj5P_89iXES9-vFgrIy29clF9CC_oPPsw3c5D0bs" || j.Kid != KeyID(pub) || j.Kty != "OKP" || j.Crv != "Ed25519" {
		t.Fatalf("JWK = %+v", j)
	}
	back, err := j.PublicKey()
	if err != nil || !bytes.Equal(back, pub) {
		t.Fatalf("JWK round trip: %v", err)
	}
}
