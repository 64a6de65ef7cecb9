package dashboard_test

import (
	"crypto/ed25519"
	"crypto/rand"
	"crypto/x509"
	"encoding/pem"
	"io/fs"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/a2awire/a2awire/shared/dashboard"
)

// api stands for the API behind the dashboard: it answers what reaches it.
var api = http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
	w.Header().Set("X-Api", "1")
	w.WriteHeader(http.StatusNotFound)
})

func serve(t *testing.T, h http.Handler, method, path, remote string) *httptest.ResponseRecorder {
	t.Helper()
	r := httptest.NewRequest(method, path, nil)
	if remote != "" {
		r.RemoteAddr = remote
	}
	w := httptest.NewRecorder()
	h.ServeHTTP(w, r)
	return w
}

func TestMountServesThePageAndPassesTheRest(t *testing.T) {
	h, err := dashboard.Mount(api, dashboard.Options{})
	if err != nil {
		t.Fatal(err)
	}
	page := serve(t, h, "GET", "/", "")
	if page.Code != 200 || !strings.HasPrefix(page.Header().Get("Content-Type"), "text/html") || !strings.Contains(page.Body.String(), "a2awire dashboard") {
		t.Fatalf("GET /: %d %q", page.Code, page.Header().Get("Content-Type"))
	}
	if csp := page.Header().Get("Content-Security-Policy"); !strings.Contains(csp, "connect-src 'self'") {
		t.Errorf("GET /: CSP %q", csp)
	}
	for _, asset := range []string{"/dashboard/app.js", "/dashboard/sign.js", "/dashboard/style.css"} {
		if w := serve(t, h, "GET", asset, ""); w.Code != 200 || w.Header().Get("X-Api") != "" {
			t.Errorf("GET %s: %d", asset, w.Code)
		}
	}
	// Everything else is the API's, methods other than GET on / included,
	// and no dev key is offered without one.
	for _, c := range []struct{ method, path string }{
		{"POST", "/"}, {"GET", "/v0/worlds"}, {"GET", "/dashboard/../v0/worlds"}, {"GET", dashboard.DevKeyPath},
	} {
		if w := serve(t, h, c.method, c.path, ""); w.Header().Get("X-Api") != "1" {
			t.Errorf("%s %s did not reach the API (%d)", c.method, c.path, w.Code)
		}
	}
}

func TestDevKeyOnlyToThisMachine(t *testing.T) {
	_, key, err := ed25519.GenerateKey(rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	h, err := dashboard.Mount(api, dashboard.Options{DevKey: key})
	if err != nil {
		t.Fatal(err)
	}
	for _, remote := range []string{"127.0.0.1:5000", "[::1]:5000"} {
		w := serve(t, h, "GET", dashboard.DevKeyPath, remote)
		blk, _ := pem.Decode(w.Body.Bytes())
		if w.Code != 200 || blk == nil || blk.Type != "PRIVATE KEY" {
			t.Fatalf("dev key to %s: %d %q", remote, w.Code, w.Body.String())
		}
		got, err := x509.ParsePKCS8PrivateKey(blk.Bytes)
		if err != nil || !key.Equal(got) {
			t.Errorf("dev key to %s is not the harness's key (%v)", remote, err)
		}
		if w.Header().Get("Cache-Control") != "no-store" {
			t.Errorf("dev key cacheable: %q", w.Header().Get("Cache-Control"))
		}
	}
	for _, remote := range []string{"10.0.0.7:5000", "192.168.1.2:80", "[2001:db8::1]:1", "garbage"} {
		w := serve(t, h, "GET", dashboard.DevKeyPath, remote)
		if w.Code != http.StatusForbidden || strings.Contains(w.Body.String(), "PRIVATE KEY") {
			t.Errorf("dev key to %s: %d %q, want 403 without the key", remote, w.Code, w.Body.String())
		}
	}
	if _, err := dashboard.Mount(api, dashboard.Options{DevKey: key[:10]}); err == nil {
		t.Error("Mount accepted a truncated key")
	}
}

func TestStaticLayout(t *testing.T) {
	// A static deploy uploads this tree as it is: the page and the assets
	// it names.
	for _, name := range []string{"index.html", "dashboard/app.js", "dashboard/sign.js", "dashboard/style.css"} {
		if _, err := fs.Stat(dashboard.Static(), name); err != nil {
			t.Errorf("%s: %v", name, err)
		}
	}
}
