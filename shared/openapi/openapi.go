// Package openapi serves the network's OpenAPI 3.1 document at
// GET /openapi.json: the committed openapi.json beside this file (the same
// bytes as docs/openapi.json), which package spec generates from the route
// table and the handlers' types. spec's tests fail when either file is
// stale; make openapi (go generate ./shared/openapi) rewrites both.
//
// It is a function of its own rather than one more route of the registry:
// the document is static bytes, so its function needs no table, no key and
// no configuration, links none of the handlers, and the registry's binary
// and cold start stay as they were.
package openapi

//go:generate go test ./spec -run TestCommittedDocumentIsCurrent -update

import (
	"crypto/sha256"
	_ "embed"
	"encoding/hex"
	"net/http"

	"github.com/a2awire/a2awire/shared/function"
	"github.com/a2awire/a2awire/shared/lambdahttp"
)

// document is the committed OpenAPI document.
//
//go:embed openapi.json
var document []byte

// Document returns a copy of the committed document.
func Document() []byte { return append([]byte(nil), document...) }

// Build is the openapi function's builder.
func Build(function.Env) (any, error) { return lambdahttp.Entry(Handler()), nil }

// Handler answers GET (and HEAD) with the document, an ETag and a
// five-minute cache; If-None-Match with the ETag answers 304.
func Handler() http.Handler {
	sum := sha256.Sum256(document)
	etag := `"` + hex.EncodeToString(sum[:16]) + `"`
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		h := w.Header()
		if r.Method != http.MethodGet && r.Method != http.MethodHead {
			h.Set("Allow", "GET, HEAD")
			http.Error(w, "method not allowed", http.StatusMethodNotAllowed)
			return
		}
		h.Set("ETag", etag)
		h.Set("Cache-Control", "max-age=300")
		if r.Header.Get("If-None-Match") == etag {
			w.WriteHeader(http.StatusNotModified)
			return
		}
		h.Set("Content-Type", "application/json")
		w.WriteHeader(http.StatusOK)
		if r.Method == http.MethodGet {
			_, _ = w.Write(document)
		}
	})
}
