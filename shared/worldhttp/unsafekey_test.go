package worldhttp_test

import (
	"context"
	"crypto/ed25519"
	"crypto/sha256"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"testing"
	"time"

	"github.com/a2awire/a2awire/shared/auth"
	"github.com/a2awire/a2awire/shared/world"
)

// identityKey (0x01 and 31 zero bytes) and forgery (R = the identity,
// S = 0) satisfy crypto/ed25519 for every message: the repro.
var (
	identityKey = ed25519.PublicKey(append([]byte{1}, make([]byte, 31)...))
	forgery     = append(append([]byte{1}, make([]byte, 31)...), make([]byte, 32)...)
)

// forged returns the signature headers of a request "signed" by the
// identity key: a valid Signature-Input and Content-Digest, and the forgery.
func forged(body string) []string {
	now := time.Now().Unix()
	sum := sha256.Sum256([]byte(body))
	return []string{
		"Content-Digest", "sha-256=:" + base64.StdEncoding.EncodeToString(sum[:]) + ":",
		"Signature-Input", fmt.Sprintf(`sig1=("@method" "@authority" "@path" "@query" "content-digest");created=%d;expires=%d;nonce="%s";keyid="%s";alg="ed25519";tag="web-bot-auth"`,
			now, now+60, fmt.Sprintf("forged-nonce-%d-0123456789", time.Now().UnixNano()), auth.KeyID(identityKey)),
		"Signature", "sig1=:" + base64.StdEncoding.EncodeToString(forgery) + ":",
	}
}

// TestSmallOrderKeyRefused is the repro of the issue: PUT of a world and a
// join carrying the identity key, signed with the forgery, were 201; the
// key is now refused as invalid (400) before any signature is checked, and
// a member route whose stored key is the identity refuses the forgery
// (401).
func TestSmallOrderKeyRefused(t *testing.T) {
	f := newFake()
	f.PutWorldFn = func(_ context.Context, m world.Manifest, signer ed25519.PublicKey) (world.Manifest, bool, error) {
		out := m
		out.OwnerKey, out.OwnerKeyID, out.CreatedAt, out.UpdatedAt = signer, auth.KeyID(signer), created, created
		return out, true, nil
	}
	f.JoinFn = func(_ context.Context, w string, p ed25519.PublicKey, _ json.RawMessage) (world.Member, bool, error) {
		return world.Member{AWNID: auth.AWNID(p), Slot: 9, JoinedAt: created}, true, nil
	}
	f.MemberKeyFn = func(context.Context, string, string) (ed25519.PublicKey, string, error) {
		return identityKey, auth.AWNID(identityKey), nil
	}
	a := newAPI(t, f, nil)
	key := base64.StdEncoding.EncodeToString(identityKey)

	body := `{"publicKey":"` + key + `","name":"Mine"}`
	expectError(t, a.do(nil, "PUT", "/v0/worlds/mine", body, forged(body)...), 400, "INVALID_REQUEST", "small-order")
	body = `{"publicKey":"` + key + `"}`
	expectError(t, a.do(nil, "POST", "/v0/worlds/lobby/join", body, forged(body)...), 400, "INVALID_REQUEST", "small-order")
	expectError(t, a.do(nil, "GET", "/v0/worlds/lobby/agents", "", forged("")...), 401, "UNAUTHORIZED", "")
}
