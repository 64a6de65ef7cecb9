package harness_test

import (
	"context"
	"crypto/ed25519"
	"encoding/base64"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/a2awire/a2awire/local/harness"
	"github.com/a2awire/a2awire/shared/auth"
	"github.com/a2awire/a2awire/shared/logging"
	"github.com/a2awire/a2awire/shared/store/memory"
)

// inputServer is the harness over real HTTP with the lobby seeded.
func inputServer(t *testing.T) string {
	t.Helper()
	st := memory.New()
	t.Cleanup(func() { _ = st.Close() })
	h := mustHarness(t, harness.Options{Log: logging.Discard(), Store: st})
	if _, _, err := harness.SeedLobby(context.Background(), st, h.NetworkKey()); err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer(h)
	t.Cleanup(srv.Close)
	return srv.URL
}

// signer is an agent that signs every request with its key.
type signer struct {
	key ed25519.PrivateKey
	c   *http.Client
}

func newSigner(t *testing.T, seed byte) signer {
	t.Helper()
	s := make([]byte, ed25519.SeedSize)
	s[0], s[1] = seed, 0x5a
	k := ed25519.NewKeyFromSeed(s)
	sg, err := auth.NewSigner(k)
	if err != nil {
		t.Fatal(err)
	}
	return signer{key: k, c: &http.Client{Transport: &auth.Transport{Signer: sg}}}
}

func (s signer) pub() string {
	return base64.StdEncoding.EncodeToString(s.key.Public().(ed25519.PublicKey))
}

func (s signer) awnID() string { return auth.AWNID(s.key.Public().(ed25519.PublicKey)) }

// send posts body (the bytes as given) with a JSON content type through
// c and returns the status and the decoded answer.
func send(t *testing.T, c *http.Client, method, url, body string) (int, map[string]any) {
	t.Helper()
	req, err := http.NewRequest(method, url, strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Content-Type", "application/json")
	resp, err := c.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	raw, _ := io.ReadAll(resp.Body)
	var m map[string]any
	if err := json.Unmarshal(raw, &m); err != nil {
		t.Fatalf("%s %s: %d, answer is not JSON: %q", method, url, resp.StatusCode, raw)
	}
	return resp.StatusCode, m
}

// worldError is a world answer's {code, message}.
func worldError(m map[string]any) (code, msg string) {
	e, _ := m["error"].(map[string]any)
	code, _ = e["code"].(string)
	msg, _ = e["message"].(string)
	return code, msg
}

// TestInvalidUTF8InvocationIs422: issue 27's repro — a byte that is not
// UTF-8 in a value or a key of an invocation's input is 422
// invalid_request, not a 200 echoing U+FFFD.
func TestInvalidUTF8InvocationIs422(t *testing.T) {
	base := inputServer(t)
	for _, body := range []string{
		"{\"task\":\"messy-echo\",\"input\":{\"echo\":{\"x\":\"\xff(\"}}}",
		"{\"task\":\"messy-echo\",\"input\":{\"echo\":{\"\xff\":\"x\"}}}",
	} {
		status, m := send(t, http.DefaultClient, "POST", base+"/agents/a2awire-messy/invoke", body)
		msg, _ := m["message"].(string)
		if status != 422 || m["error"] != "invalid_request" || !strings.Contains(msg, "not valid UTF-8") {
			t.Errorf("%q: %d %v, want 422 invalid_request naming UTF-8", body, status, m)
		}
	}
}

// TestInvalidUTF8OnSignedWorldRouteIs400: a signed join whose body holds a
// byte that is not UTF-8 is 400 INVALID_REQUEST saying so — the signature
// and content-digest cover the bytes the client sent, so it is not the
// misleading 401 "content-digest does not match the body" — and a valid
// join after it succeeds.
func TestInvalidUTF8OnSignedWorldRouteIs400(t *testing.T) {
	base := inputServer(t)
	a := newSigner(t, 1)
	for _, body := range []string{
		"{\"publicKey\":\"" + a.pub() + "\",\"metadata\":{\"name\":\"\xff(\"}}",
		"{\"publicKey\":\"" + a.pub() + "\",\"metadata\":{\"\xc3\":1}}",
	} {
		status, m := send(t, a.c, "POST", base+"/v0/worlds/lobby/join", body)
		code, msg := worldError(m)
		if status != 400 || code != "INVALID_REQUEST" || !strings.Contains(msg, "not valid UTF-8") {
			t.Errorf("%q: %d %v, want 400 INVALID_REQUEST naming UTF-8", body, status, m)
		}
	}
	if status, m := send(t, a.c, "POST", base+"/v0/worlds/lobby/join", `{"publicKey":"`+a.pub()+`"}`); status != 201 {
		t.Errorf("valid join: %d %v", status, m)
	}
}

// TestInvalidUTF8OnRegistryIs400: a signed registration whose body is not
// UTF-8 is the registry's 400 {error, message}, not a 401.
func TestInvalidUTF8OnRegistryIs400(t *testing.T) {
	base := inputServer(t)
	a := newSigner(t, 2)
	body := "{\"name\":\"utf8-probe\",\"description\":\"caf\xe9\",\"endpoint\":\"https://example.com/a2a\",\"capabilities\":[\"x\"],\"public_key\":\"" + a.pub() + "\"}"
	status, m := send(t, a.c, "POST", base+"/api/v1/agents", body)
	msg, _ := m["message"].(string)
	if status != 400 || m["error"] == nil || !strings.Contains(msg, "not valid UTF-8") {
		t.Errorf("%d %v, want 400 naming UTF-8", status, m)
	}
}
