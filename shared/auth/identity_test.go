package auth

import (
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"strings"
	"testing"
)

func TestAWNIDAndDirectory(t *testing.T) {
	_, pub := rfcKeys(t)
	sum := sha256.Sum256(pub)
	if got, want := AWNID(pub), "aw:sha256:"+hex.EncodeToString(sum[:]); got != want || strings.ToLower(got) != got {
		t.Fatalf("AWNID = %s, want %s", got, want)
	}
	js, err := json.Marshal(NewDirectory(pub))
	if err != nil {
		t.Fatal(err)
	}
	want := `{"keys":[{"kty":"OKP","crv":"Ed25519","x":"JrQLj5P_89iXES9-vFgrIy29clF9CC_oPPsw3c5D0bs","kid":"poqkLGiymh_W0uP6PZFw-dvez3QJT5SolqXBCW38r0U"}]}`
	if string(js) != want {
		t.Fatalf("directory %s\nwant %s", js, want)
	}
	if DirectoryMediaType != "application/http-message-signatures-directory+json" {
		t.Fatal(DirectoryMediaType)
	}
}

func TestDecodePublicKey(t *testing.T) {
	_, pub := rfcKeys(t)
	got, err := DecodePublicKey(base64.StdEncoding.EncodeToString(pub))
	if err != nil || string(got) != string(pub) {
		t.Fatalf("round trip: %v", err)
	}
	for _, bad := range []string{"", "!!!!", base64.RawStdEncoding.EncodeToString(pub), base64.URLEncoding.EncodeToString(append(pub, 0xfb)), base64.StdEncoding.EncodeToString(pub[:31])} {
		if _, err := DecodePublicKey(bad); err == nil {
			t.Errorf("DecodePublicKey(%q) accepted", bad)
		}
	}
	if _, err := (JWK{Kty: "EC", Crv: "P-256", X: "AA"}).PublicKey(); err == nil {
		t.Error("EC JWK accepted")
	}
}
