package main

import (
	"crypto/x509"
	"encoding/pem"
	"io"
	"net/http"
	"strings"
	"testing"

	"github.com/a2awire/a2awire/shared/dashboard"
)

// TestServesTheDashboard: `go run ./local` serves the dashboard at /, its
// network key as the dev key, and the API beside them.
func TestServesTheDashboard(t *testing.T) {
	h := startHarness(t)
	get := func(path string) (int, string) {
		t.Helper()
		resp, err := http.Get(h.url + path)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		return resp.StatusCode, string(b)
	}
	if status, body := get("/"); status != 200 || !strings.Contains(body, "a2awire dashboard") {
		t.Fatalf("GET /: %d %.200s", status, body)
	}
	status, body := get(dashboard.DevKeyPath)
	blk, _ := pem.Decode([]byte(body))
	if status != 200 || blk == nil {
		t.Fatalf("dev key: %d %.200s", status, body)
	}
	if _, err := x509.ParsePKCS8PrivateKey(blk.Bytes); err != nil {
		t.Fatalf("dev key: %v", err)
	}
	if status, body := get("/v0/worlds/lobby"); status != 200 || !strings.Contains(body, `"worldId":"lobby"`) {
		t.Fatalf("the API behind the dashboard: %d %.200s", status, body)
	}
}
