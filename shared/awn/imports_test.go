package awn_test

import (
	"go/parser"
	"go/token"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
)

// serverPackages are the network's handlers and wiring: an agent's binary
// links none of them, so package awn imports none (it reads their shapes,
// held to theirs by shapes_internal_test.go).
var serverPackages = []string{
	"shared/access", "shared/escrowhttp", "shared/worldhttp", "shared/webhookhttp", "shared/lambdahttp",
	"shared/function", "shared/registry", "shared/webhook\"", "shared/inbox", "shared/escrow\"", "shared/credits",
	"local/",
}

// TestLinksNoServer: no non-test file of package awn imports a server package.
func TestLinksNoServer(t *testing.T) {
	t.Parallel()
	files, err := filepath.Glob("*.go")
	if err != nil {
		t.Fatal(err)
	}
	fset := token.NewFileSet()
	n := 0
	for _, f := range files {
		if strings.HasSuffix(f, "_test.go") {
			continue
		}
		file, err := parser.ParseFile(fset, f, nil, parser.ImportsOnly)
		if err != nil {
			t.Fatal(err)
		}
		n++
		for _, imp := range file.Imports {
			path, _ := strconv.Unquote(imp.Path.Value)
			for _, bad := range serverPackages {
				if strings.Contains(path+`"`, "/a2awire/"+bad) {
					t.Errorf("%s imports %s, a server package", f, path)
				}
			}
		}
	}
	if n < 5 {
		t.Fatalf("checked %d files", n)
	}
}
