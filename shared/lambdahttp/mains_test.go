package lambdahttp_test

import (
	"go/ast"
	"go/parser"
	"go/token"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
)

// TestOnlyThisPackageWrapsHandlers: no package but this one imports
// aws-lambda-go-api-proxy's httpadapter outside tests, so no function wraps its handler with
// httpadapter itself, which would split task ids and signature headers on
// commas. (Every route function's builder returns Entry's Handler: the
// harness's tests check each one's type.)
func TestOnlyThisPackageWrapsHandlers(t *testing.T) {
	t.Parallel()
	var files []string
	for _, dir := range []string{"../../functions", "../../shared", "../../local", "../../cmd"} {
		err := filepath.WalkDir(dir, func(path string, d os.DirEntry, err error) error {
			if err != nil {
				return err
			}
			if !d.IsDir() && strings.HasSuffix(path, ".go") && !strings.HasSuffix(path, "_test.go") {
				files = append(files, path)
			}
			return nil
		})
		if err != nil {
			t.Fatal(err)
		}
	}
	if len(files) < 100 {
		t.Fatalf("found only %d Go files", len(files))
	}
	for _, path := range files {
		if filepath.Base(filepath.Dir(path)) == "lambdahttp" {
			continue
		}
		f, err := parser.ParseFile(token.NewFileSet(), path, nil, parser.ImportsOnly)
		if err != nil {
			t.Fatal(err)
		}
		for _, imp := range f.Imports {
			if p, _ := strconv.Unquote(imp.Path.Value); strings.HasSuffix(p, "aws-lambda-go-api-proxy/httpadapter") {
				t.Errorf("%s imports %s; wrap the handler with lambdahttp.Entry", path, p)
			}
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

// TestMainsColdStartDeps: every package a function links runs its package
// initialization at each cold start, before main. So no function links the
// DynamoDB Streams client (Lambda reads the stream; only the harness's
// dynamostream does), nor the DynamoDB client's schema-based serializers
// (service/dynamodb/schemas, about 1.3 ms of INIT: go.mod pins the last
// release without them), and no package of ours that a function links
// compiles a regular expression at package level (package ident instead).
func TestMainsColdStartDeps(t *testing.T) {
	t.Parallel()
	const module = "github.com/a2awire/a2awire/"
	out, err := exec.Command("go", "list", "-tags", "lambda.norpc", "-deps", "-f", "{{.ImportPath}}|{{.Dir}}|{{join .GoFiles \",\"}}", "../../functions/...").CombinedOutput()
	if err != nil {
		t.Fatalf("go list: %v\n%s", err, out)
	}
	// The Streams client itself; its types package comes in through
	// feature/dynamodb/attributevalue and costs nothing at start.
	forbidden := []string{
		"github.com/aws/aws-sdk-go-v2/service/dynamodbstreams",
		"github.com/aws/aws-sdk-go-v2/service/dynamodb/schemas",
		"github.com/aws/aws-sdk-go-v2/service/dynamodbstreams/schemas",
		module + "shared/store/dynamo/dynamostream",
	}
	ours := 0
	for _, line := range strings.Split(strings.TrimSpace(string(out)), "\n") {
		path, rest, _ := strings.Cut(line, "|")
		dir, files, _ := strings.Cut(rest, "|")
		for _, f := range forbidden {
			if path == f {
				t.Errorf("a function links %s", path)
			}
		}
		if !strings.HasPrefix(path, module) || files == "" {
			continue
		}
		ours++
		for _, name := range strings.Split(files, ",") {
			for _, hit := range packageLevelRegexps(t, filepath.Join(dir, name)) {
				t.Errorf("%s/%s compiles a regular expression at package level (%s); use package ident", path, name, hit)
			}
		}
	}
	if ours < 10 {
		t.Fatalf("go list found %d packages of this module behind the functions; the test is looking in the wrong place", ours)
	}
}

// TestPackageLevelRegexpsCatches: the source check finds a package-level
// regexp.MustCompile (in a var block too) and ignores one inside a function.
func TestPackageLevelRegexpsCatches(t *testing.T) {
	t.Parallel()
	src := filepath.Join(t.TempDir(), "x.go")
	code := "package x\n\nimport \"regexp\"\n\nvar a = regexp.MustCompile(`a`)\n\nvar (\n\tb, c = 1, regexp.MustCompile(`c`)\n)\n\nfunc f() { _ = regexp.MustCompile(`d`) }\n"
	if err := os.WriteFile(src, []byte(code), 0o600); err != nil {
		t.Fatal(err)
	}
	if hits := packageLevelRegexps(t, src); len(hits) != 2 {
		t.Fatalf("hits %v, want a and c", hits)
	}
}

// packageLevelRegexps returns the package-level variables of file whose
// initializer calls regexp.Compile or regexp.MustCompile (or their POSIX
// forms).
func packageLevelRegexps(t *testing.T, file string) []string {
	t.Helper()
	f, err := parser.ParseFile(token.NewFileSet(), file, nil, 0)
	if err != nil {
		t.Fatal(err)
	}
	var hits []string
	for _, decl := range f.Decls {
		gd, ok := decl.(*ast.GenDecl)
		if !ok || gd.Tok != token.VAR {
			continue
		}
		for _, spec := range gd.Specs {
			vs := spec.(*ast.ValueSpec)
			for i, v := range vs.Values {
				ast.Inspect(v, func(n ast.Node) bool {
					call, ok := n.(*ast.CallExpr)
					if !ok {
						return true
					}
					if sel, ok := call.Fun.(*ast.SelectorExpr); ok {
						if id, ok := sel.X.(*ast.Ident); ok && id.Name == "regexp" && strings.Contains(sel.Sel.Name, "Compile") {
							hits = append(hits, vs.Names[min(i, len(vs.Names)-1)].Name)
						}
					}
					return true
				})
			}
		}
	}
	return hits
}
