package main

import (
	"context"
	"encoding/json"
	"log/slog"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/a2awire/a2awire/local/harness"
	"github.com/a2awire/a2awire/shared/store/memory"
)

// escrowNetwork serves the local system with the fixtures seeded, as
// network does, and returns an AWN_HOME holding the network key as its
// key.pem: the operator's, as docs/escrow.md sets it up from
// `go run ./local -network-key FILE`.
func escrowNetwork(t *testing.T) (base string, operator map[string]string) {
	t.Helper()
	st := memory.New()
	t.Cleanup(func() { _ = st.Close() })
	h, err := harness.New(harness.Options{Log: slog.New(slog.DiscardHandler), Store: st})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = h.Close() })
	srv := httptest.NewServer(h)
	t.Cleanup(srv.Close)
	if _, err := harness.SeedFixtures(context.Background(), st, srv.URL, h.NetworkKey()); err != nil {
		t.Fatal(err)
	}
	operator = withHome(t, srv.URL)
	if err := os.MkdirAll(operator["AWN_HOME"], 0o700); err != nil {
		t.Fatal(err)
	}
	pem, err := encodeKey(h.NetworkKey())
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(operator["AWN_HOME"], keyFile), pem, 0o600); err != nil {
		t.Fatal(err)
	}
	return srv.URL, operator
}

// TestHireEndToEnd: as docs/escrow.md shows it — init, register, the
// operator's grant, awn hire word-count (discover → create → fund →
// verify → release, each step on stderr, the output on stdout), awn
// balance, awn escrow list and show; a hire beyond the balance is 402
// insufficient_funds (exit 1); messy's simulated failure stops before
// release, the escrow failed, and awn escrow refund takes it back.
func TestHireEndToEnd(t *testing.T) {
	t.Parallel()
	base, operator := escrowNetwork(t)
	buyer := withHome(t, base)
	if r := awn(t, buyer, "init"); r.code != 0 {
		t.Fatalf("init: %v", r)
	}
	if r := awn(t, buyer, "register", "--name", "hire-buyer", "--endpoint", base+"/agents/a2awire-clean/invoke", "--capability", "word-count"); r.code != 0 {
		t.Fatalf("register: %v", r)
	}
	var id identityJSON
	decodeStrict(t, awn(t, buyer, "--json", "whoami").stdout, &id)
	if r := awn(t, buyer, "grant", id.AWNID, "--amount", "100"); r.code != 1 || !strings.Contains(r.stderr, "forbidden") {
		t.Fatalf("a grant by the buyer: %v", r)
	}
	if r := awn(t, operator, "grant", id.AWNID, "--amount", "100", "--memo", "welcome"); r.code != 0 || r.stdout != "granted 100 to "+id.AWNID+" (balance 100)\n" {
		t.Fatalf("grant: %v", r)
	}
	r := awn(t, buyer, "hire", "word-count", "--input", `{"text":"one two three"}`, "--amount", "10", "--provider", "a2awire-clean")
	if r.code != 0 || !strings.Contains(r.stdout, `"words":3`) {
		t.Fatalf("hire: %v", r)
	}
	for _, want := range []string{"create:", "fund:", "funded", "verify:   delivered, output sha256 ", "release:", "released"} {
		if !strings.Contains(r.stderr, want) {
			t.Errorf("hire's steps lack %q: %v", want, r)
		}
	}
	r = awn(t, buyer, "--json", "hire", "word-count", "--input", `{"text":"four"}`, "--amount", "5")
	var e escrowView
	if err := json.Unmarshal([]byte(r.stdout), &e); r.code != 0 || e.State != "released" || !strings.Contains(r.stderr, "discover: ") {
		t.Fatalf("hire --json with discovery: %v (%v)", r, err)
	}
	if r := awn(t, buyer, "balance"); r.code != 0 || !strings.Contains(r.stdout, "balance:  85\n") || !strings.Contains(r.stdout, "held:     0\n") {
		t.Fatalf("balance: %v", r)
	}
	if r := awn(t, buyer, "hire", "word-count", "--input", `{"text":"x"}`, "--amount", "500", "--provider", "a2awire-clean"); r.code != 1 || !strings.Contains(r.stderr, "insufficient_funds") {
		t.Fatalf("a hire beyond the balance: %v", r)
	}
	r = awn(t, buyer, "hire", "messy-echo", "--input", `{"simulate":"upstream_error"}`, "--amount", "7", "--provider", "a2awire-messy")
	if r.code != 1 || !strings.Contains(r.stderr, "verify:   failed: ") || strings.Contains(r.stderr, "release:") {
		t.Fatalf("a hire whose delivery fails: %v", r)
	}
	r = awn(t, buyer, "--json", "escrow", "list", "--state", "failed")
	var list struct{ Escrows []escrowView }
	if err := json.Unmarshal([]byte(r.stdout), &list); err != nil || r.code != 0 || len(list.Escrows) != 1 {
		t.Fatalf("escrow list --state failed: %v", r)
	}
	failedID := list.Escrows[0].ID
	if r := awn(t, buyer, "escrow", "refund", failedID); r.code != 0 || !strings.Contains(r.stdout, "state:     refunded\n") {
		t.Fatalf("escrow refund: %v", r)
	}
	if r := awn(t, buyer, "escrow", "release", failedID); r.code != 1 || !strings.Contains(r.stderr, "invalid_transition") {
		t.Fatalf("escrow release of a refunded escrow: %v", r)
	}
	if r := awn(t, buyer, "escrow", "show", failedID); r.code != 0 || !strings.Contains(r.stdout, "failed → refunded") {
		t.Fatalf("escrow show: %v", r)
	}
	if r := awn(t, buyer, "escrow", "list"); r.code != 0 || strings.Count(r.stdout, "\n") != 5 {
		t.Fatalf("escrow list: %v", r)
	}
	// Step by step, with a dispute the operator resolves by refunding.
	r = awn(t, buyer, "--json", "escrow", "create", "a2awire-clean", "--capability", "word-count", "--input", `{"text":"a b"}`, "--amount", "3")
	if err := json.Unmarshal([]byte(r.stdout), &e); err != nil || r.code != 0 || e.State != "created" {
		t.Fatalf("escrow create: %v", r)
	}
	for _, step := range []string{"fund", "verify", "dispute"} {
		if r := awn(t, buyer, "escrow", step, e.ID); r.code != 0 {
			t.Fatalf("escrow %s: %v", step, r)
		}
	}
	if r := awn(t, operator, "escrow", "refund", e.ID); r.code != 0 || !strings.Contains(r.stdout, "disputed → refunded") {
		t.Fatalf("the operator's refund of a dispute: %v", r)
	}
	if r := awn(t, buyer, "balance"); r.code != 0 || !strings.Contains(r.stdout, "balance:  85\n") {
		t.Fatalf("balance after the refunds: %v", r)
	}
	if r := awn(t, buyer, "escrow", "create", "a2awire-clean", "--capability", "word-count", "--amount", "0"); r.code != 2 {
		t.Fatalf("escrow create --amount 0: %v", r)
	}
}
