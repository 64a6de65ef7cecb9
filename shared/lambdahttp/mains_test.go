package lambdahttp_test

import (
	"go/ast"
	"go/parser"
	"go/token"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"github.com/a2awire/a2awire/shared/routes"
)

// TestEveryMainUsesEntry: each functions/*/main.go of a function that serves
// routes starts Lambda with lambdahttp.Entry and none wraps its handler with httpadapter itself, which
// would split task ids and signature headers on commas.
func TestEveryMainUsesEntry(t *testing.T) {
	t.Parallel()
	mains, err := filepath.Glob("../../functions/*/main.go")
	if err != nil || len(mains) == 0 {
		t.Fatalf("no function mains found: %v", err)
	}
	for _, path := range mains {
		f, err := parser.ParseFile(token.NewFileSet(), path, nil, 0)
		if err != nil {
			t.Fatal(err)
		}
		for _, imp := range f.Imports {
			if p, _ := strconv.Unquote(imp.Path.Value); strings.Contains(p, "aws-lambda-go-api-proxy") {
				t.Errorf("%s imports %s; wrap the handler with lambdahttp.Entry", path, p)
			}
		}
		uses := false
		ast.Inspect(f, func(n ast.Node) bool {
			if sel, ok := n.(*ast.SelectorExpr); ok {
				if id, ok := sel.X.(*ast.Ident); ok && id.Name == "lambdahttp" && sel.Sel.Name == "Entry" {
					uses = true
				}
			}
			return true
		})
		fn := filepath.Base(filepath.Dir(path))
		if !uses && len(routes.ForFunction(fn)) > 0 {
			t.Errorf("%s does not call lambdahttp.Entry", path)
		}
	}
}

// TestNoStoreClient: the entry package links no DynamoDB client, so a
// function without table access stays free of it.
func TestNoStoreClient(t *testing.T) {
	t.Parallel()
	out, err := exec.Command("go", "list", "-deps", ".").CombinedOutput()
	if err != nil {
		t.Fatalf("go list: %v\n%s", err, out)
	}
	for _, dep := range strings.Fields(string(out)) {
		if strings.Contains(dep, "aws-sdk-go-v2/service/dynamodb") || strings.Contains(dep, "shared/store") {
			t.Errorf("lambdahttp depends on %s", dep)
		}
	}
}
