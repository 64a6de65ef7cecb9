package registryapi_test

import (
	"crypto/sha256"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/a2awire/a2awire/shared/auth"
)

// TestRegisterRefusesDeceivingNames is the repro over HTTP: any key
// registered "a2awire-anything" and "a2awire-c1ean" (201); now the prefix
// is the network key's (403 name_reserved), a name reading like another
// key's is 409 name_confusable, and a description with U+202E is 400.
func TestRegisterRefusesDeceivingNames(t *testing.T) {
	network, alice, bob := key(7), key(8), key(9)
	a := newAPI(t, pubOf(network))
	if r := a.do(network, "POST", "/api/v1/agents", registration("a2awire-clean", network, "ping")); r.status != http.StatusCreated {
		t.Fatalf("network key registers a2awire-clean: %d %s", r.status, r.body)
	}
	for _, name := range []string{"a2awire-c1ean", "a2awire-anything"} {
		wantError(t, a.do(alice, "POST", "/api/v1/agents", registration(name, alice, "ping")), http.StatusForbidden, "name_reserved")
	}
	if r := a.do(alice, "POST", "/api/v1/agents", registration("mail-bot", alice, "ping")); r.status != http.StatusCreated {
		t.Fatalf("alice registers mail-bot: %d %s", r.status, r.body)
	}
	wantError(t, a.do(bob, "POST", "/api/v1/agents", registration("rnai1-bot", bob, "ping")), http.StatusConflict, "name_confusable")

	var body map[string]any
	_ = json.Unmarshal([]byte(registration("honest-bot", bob, "ping")), &body)
	body["description"] = "harmless \u202egpj.exe"
	b, _ := json.Marshal(body)
	wantError(t, a.do(bob, "POST", "/api/v1/agents", string(b)), http.StatusBadRequest, "invalid_input")
}

// TestRegisterRefusesSmallOrderKey is the repro of the identity key
// (0x01 and 31 zero bytes) registering with the forgery R = identity,
// S = 0: 400, the key named.
func TestRegisterRefusesSmallOrderKey(t *testing.T) {
	a := newAPI(t, nil)
	identity := append([]byte{1}, make([]byte, 31)...)
	forgery := append(append([]byte{1}, make([]byte, 31)...), make([]byte, 32)...)
	body := fmt.Sprintf(`{"name":"forger","description":"x","endpoint":"http://127.0.0.1:9/x","capabilities":["ping"],"public_key":"%s"}`,
		base64.StdEncoding.EncodeToString(identity))
	now := time.Now().Unix()
	sum := sha256.Sum256([]byte(body))
	r := a.do(nil, "POST", "/api/v1/agents", body,
		"Content-Digest", "sha-256=:"+base64.StdEncoding.EncodeToString(sum[:])+":",
		"Signature-Input", fmt.Sprintf(`sig1=("@method" "@authority" "@path" "@query" "content-digest");created=%d;expires=%d;nonce="forged-nonce-0123456789abcdef";keyid="%s";alg="ed25519";tag="web-bot-auth"`,
			now, now+60, auth.KeyID(identity)),
		"Signature", "sig1=:"+base64.StdEncoding.EncodeToString(forgery)+":")
	wantError(t, r, http.StatusBadRequest, "invalid_input")
	if m, _ := r.json(t)["message"].(string); !strings.Contains(m, "small-order") {
		t.Errorf("message %q does not name the key's flaw", m)
	}
}
