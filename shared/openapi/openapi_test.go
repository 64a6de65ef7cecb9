package openapi_test

import (
	"bytes"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"testing"

	"github.com/a2awire/a2awire/shared/openapi"
)

// TestHandlerServesTheDocument: GET answers the embedded document as JSON
// with an ETag; If-None-Match with that ETag answers 304 with no body;
// HEAD answers headers only; other methods 405.
func TestHandlerServesTheDocument(t *testing.T) {
	h := openapi.Handler()
	rec := httptest.NewRecorder()
	h.ServeHTTP(rec, httptest.NewRequest(http.MethodGet, "/openapi.json", nil))
	if rec.Code != http.StatusOK || rec.Header().Get("Content-Type") != "application/json" {
		t.Fatalf("GET: %d %q", rec.Code, rec.Header().Get("Content-Type"))
	}
	if !bytes.Equal(rec.Body.Bytes(), openapi.Document()) {
		t.Fatal("GET: the body is not the embedded document")
	}
	var doc struct {
		OpenAPI string `json:"openapi"`
	}
	if err := json.Unmarshal(rec.Body.Bytes(), &doc); err != nil || doc.OpenAPI != "3.1.1" {
		t.Fatalf("GET: openapi = %q, %v", doc.OpenAPI, err)
	}
	etag := rec.Header().Get("ETag")
	if etag == "" {
		t.Fatal("GET: no ETag")
	}

	req := httptest.NewRequest(http.MethodGet, "/openapi.json", nil)
	req.Header.Set("If-None-Match", etag)
	rec = httptest.NewRecorder()
	h.ServeHTTP(rec, req)
	if rec.Code != http.StatusNotModified || rec.Body.Len() != 0 {
		t.Fatalf("If-None-Match: %d with %d bytes", rec.Code, rec.Body.Len())
	}

	rec = httptest.NewRecorder()
	h.ServeHTTP(rec, httptest.NewRequest(http.MethodHead, "/openapi.json", nil))
	if rec.Code != http.StatusOK || rec.Body.Len() != 0 {
		t.Fatalf("HEAD: %d with %d bytes", rec.Code, rec.Body.Len())
	}

	rec = httptest.NewRecorder()
	h.ServeHTTP(rec, httptest.NewRequest(http.MethodPost, "/openapi.json", nil))
	if rec.Code != http.StatusMethodNotAllowed || rec.Header().Get("Allow") != "GET, HEAD" {
		t.Fatalf("POST: %d Allow %q", rec.Code, rec.Header().Get("Allow"))
	}
}

// TestDocumentIsACopy: a caller changing the returned bytes does not
// change what is served.
func TestDocumentIsACopy(t *testing.T) {
	d := openapi.Document()
	d[0] = 'X'
	if openapi.Document()[0] == 'X' {
		t.Fatal("Document returned the embedded bytes themselves")
	}
}
