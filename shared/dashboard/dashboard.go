// Package dashboard is the network's web dashboard: plain HTML, CSS and
// JavaScript files (static/, embedded) that read only the public API and
// sign their requests in the browser with a key the user loads, as the awn
// CLI signs (docs/dashboard.md). The local harness mounts it at / with Mount,
// and only the harness also offers its own key at DevKeyPath; a deploy
// serves the same files as a static page from the API's origin.
package dashboard

import (
	"crypto/ed25519"
	"crypto/x509"
	"embed"
	"encoding/pem"
	"errors"
	"io/fs"
	"net"
	"net/http"
	"path"
	"strings"
)

//go:embed static
var files embed.FS

// Static returns the dashboard's files: index.html at the root and the
// assets it names under dashboard/ (the layout Mount serves and a static
// deploy uploads).
func Static() fs.FS {
	sub, err := fs.Sub(files, "static")
	if err != nil {
		// The embedded tree is fixed at build time: this cannot happen.
		panic(err)
	}
	return sub
}

// DevKeyPath is where the harness offers its key (PKCS#8 PEM) to a browser
// on the same machine. It is no route of the API: a deploy never serves it.
const DevKeyPath = "/_harness/dev-key"

// Options configure Mount.
type Options struct {
	// DevKey, when set, is served at DevKeyPath to loopback clients only:
	// the harness's network key, which owns the lobby and the fixtures.
	DevKey ed25519.PrivateKey
}

// Mount serves the dashboard at / (index.html) and /dashboard/* (its
// assets), the dev key when Options has one, and hands every other request
// to next (the API).
func Mount(next http.Handler, o Options) (http.Handler, error) {
	var devPEM []byte
	if o.DevKey != nil {
		if len(o.DevKey) != ed25519.PrivateKeySize {
			return nil, errors.New("dashboard: dev key is not an Ed25519 private key")
		}
		der, err := x509.MarshalPKCS8PrivateKey(o.DevKey)
		if err != nil {
			return nil, err
		}
		devPEM = pem.EncodeToMemory(&pem.Block{Type: "PRIVATE KEY", Bytes: der})
	}
	static := http.FileServerFS(Static())
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		p := r.URL.Path
		isRead := r.Method == http.MethodGet || r.Method == http.MethodHead
		switch {
		case p == "/" && isRead:
			headers(w)
			http.ServeFileFS(w, r, Static(), "index.html")
		case strings.HasPrefix(p, "/dashboard/") && isRead && path.Clean(p) == p:
			headers(w)
			static.ServeHTTP(w, r)
		case p == DevKeyPath && devPEM != nil && isRead:
			serveDevKey(w, r, devPEM)
		default:
			next.ServeHTTP(w, r)
		}
	}), nil
}

// headers are the dashboard's: its scripts are its own files, and it talks
// to its own origin only (the signature covers the Host it addresses).
func headers(w http.ResponseWriter) {
	w.Header().Set("Content-Security-Policy", "default-src 'self'; connect-src 'self'; img-src 'self' data:; base-uri 'none'; form-action 'none'; frame-ancestors 'none'")
	w.Header().Set("X-Content-Type-Options", "nosniff")
	w.Header().Set("Referrer-Policy", "no-referrer")
}

// serveDevKey answers the dev key to a client on this machine only: the
// harness may listen on another interface (-addr 0.0.0.0:8080), and the key
// owns the lobby and the fixtures.
func serveDevKey(w http.ResponseWriter, r *http.Request, devPEM []byte) {
	host, _, err := net.SplitHostPort(r.RemoteAddr)
	ip := net.ParseIP(host)
	w.Header().Set("Cache-Control", "no-store")
	if err != nil || ip == nil || !ip.IsLoopback() {
		http.Error(w, "the harness's dev key is offered to this machine only", http.StatusForbidden)
		return
	}
	w.Header().Set("Content-Type", "application/x-pem-file")
	_, _ = w.Write(devPEM)
}
