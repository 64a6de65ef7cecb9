package main

import (
	"go/parser"
	"go/token"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
)

// allowedImports are the packages awn's own (non-test) files may import.
// awn speaks to the network only through package awn: no net/http, no
// request signing (shared/auth), no event stream parsing (shared/sse), no
// webhook or world internals. What is left is the command line (cobra),
// the provider kit's JSON rules and the conformance checklist, and the
// standard library's text, files and time.
var allowedImports = []string{
	"github.com/a2awire/a2awire/shared/awn",
	"github.com/a2awire/a2awire/shared/conform",
	"github.com/a2awire/a2awire/shared/protocol",
	"github.com/spf13/cobra",

	"bytes", "context", "crypto/ed25519", "encoding/json", "errors", "fmt", "io", "io/fs", "maps",
	"net/url", "os", "os/signal", "path/filepath", "runtime/debug", "slices", "strconv", "strings", "sync", "syscall",
	"text/tabwriter", "time", "unicode", "unicode/utf8",
}

// TestImports: every import of cmd/awn's non-test files is on the
// allow-list, so the CLI cannot grow HTTP, signing or cursor code of its
// own beside package awn's.
func TestImports(t *testing.T) {
	t.Parallel()
	files, err := filepath.Glob("*.go")
	if err != nil {
		t.Fatal(err)
	}
	fset := token.NewFileSet()
	checked := 0
	for _, f := range files {
		if strings.HasSuffix(f, "_test.go") {
			continue
		}
		src, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		file, err := parser.ParseFile(fset, f, src, parser.ImportsOnly)
		if err != nil {
			t.Fatal(err)
		}
		checked++
		for _, imp := range file.Imports {
			path, err := strconv.Unquote(imp.Path.Value)
			if err != nil {
				t.Fatal(err)
			}
			if !slices.Contains(allowedImports, path) {
				t.Errorf("%s imports %s, which awn may not: go through package awn (shared/awn)", f, path)
			}
		}
	}
	if checked < 10 {
		t.Fatalf("checked %d files; is the test running in cmd/awn?", checked)
	}
}

// TestImportRuleCatches: the rule itself refuses net/http and the signer.
func TestImportRuleCatches(t *testing.T) {
	t.Parallel()
	for _, p := range []string{"net/http", "net", "github.com/a2awire/a2awire/shared/auth", "github.com/a2awire/a2awire/shared/sse"} {
		if slices.Contains(allowedImports, p) {
			t.Errorf("%s is allowed", p)
		}
	}
}
