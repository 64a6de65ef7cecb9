// Package architecture holds only this test: the import rules of the
// module, checked in one place. Each rule is checked on the source tree
// (go/parser, so it runs while other packages are broken) or on what the go
// tool links (go list), and each checker is also run on a made-up violation
// so that it cannot pass by checking nothing.
//
// The rules:
//
//  1. Domain packages import no HTTP or Lambda package. The domain —
//     shared/world, shared/inbox, shared/registry, shared/ratelimit,
//     shared/idempotency, shared/webhook (the dispatcher, not its
//     delivery and signature subpackages, which are outbound HTTP),
//     shared/store and its item API, shared/ident, shared/jsonlen, the
//     one strict JSON reader shared/strictjson, the domain error
//     shared/apierror and the ledger's book
//     (functions/fixture-ledger/ledger/book.go, keyed.go) — imports,
//     directly, no net/http, no aws-lambda-go, no aws-lambda-go-api-proxy
//     and none of our HTTP layer (lambdahttp, access, httperr, worldhttp,
//     webhookhttp, registryapi, function/lambdamain). Statuses and error
//     bodies are the HTTP layer's: shared/httperr.
//     One exception: shared/store imports aws-lambda-go/events for the
//     DynamoDB Streams record type its change feed carries (a data type;
//     no Lambda runtime comes with it). A domain may import shared/auth
//     and shared/protocol for their keys and JSON rules; both are HTTP
//     libraries themselves, so the rule is on direct imports. shared/auth
//     imports no Lambda package: it takes raw header values (auth.Request).
//     Nor do the other HTTP libraries a domain or a client uses
//     (shared/protocol, shared/egress, shared/webhook/delivery and
//     signature): they import no aws-lambda-go, no api proxy, no
//     lambdahttp.
//  2. Engines import no domain, and no domain imports an engine: no
//     package under shared/store/{memory,bolt,dynamo,internal} reaches a
//     package that uses the item API, no such package outside the store
//     reaches an engine (only a function's main and the harness wire one
//     in), and no engine source mentions a domain word.
//  3. Each function's binary links only its own code: no package of
//     another function, of local/ or of cmd/; the DynamoDB client only
//     when its table access says so; never the Streams client, the
//     schema-based serializers or shared/store/dynamo/dynamostream; and no
//     package of ours it links compiles a regexp at package level (each
//     costs every cold start).
//  4. Only shared/lambdahttp imports aws-lambda-go-api-proxy's
//     httpadapter (which splits header values on commas), and lambdahttp
//     links no store.
//  5. The provider kit and buyer client, shared/protocol, links no store
//     and nothing of AWS: its errors take their statuses from the one
//     kind → status table (shared/httperr, over shared/apierror) and its
//     JSON rules from shared/strictjson, and those stay leaves that a
//     buyer's binary can link.
package architecture_test

import (
	"bufio"
	"fmt"
	"go/ast"
	"go/parser"
	"go/token"
	"io/fs"
	"maps"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/a2awire/a2awire/shared/routes"
)

// module is the module path, with the slash that starts a package under it.
const module = "github.com/a2awire/a2awire/"

// domainDirs are the domain packages of rule 1, relative to the module;
// domainFiles the domain files of packages that also hold a handler.
var (
	domainDirs = []string{
		"shared/world", "shared/inbox", "shared/registry", "shared/ratelimit", "shared/idempotency",
		"shared/webhook", "shared/store", "shared/ident", "shared/jsonlen", "shared/apierror",
		"shared/strictjson",
	}
	domainFiles = []string{
		"functions/fixture-ledger/ledger/book.go", "functions/fixture-ledger/ledger/keyed.go",
	}
)

// httpPrefixes are what a domain may not import (rule 1): an import path
// equal to one of them or under it.
var httpPrefixes = []string{
	"net/http",
	"github.com/aws/aws-lambda-go",
	"github.com/awslabs/aws-lambda-go-api-proxy",
	"shared/lambdahttp", "shared/access", "shared/worldhttp", "shared/webhookhttp", "shared/httperr",
	"functions/registry/registryapi", "shared/function/lambdamain",
}

// lambdaFree are the HTTP libraries of rule 1 that may import net/http but
// nothing of Lambda; lambdaPrefixes is what they may not import.
var (
	lambdaFree     = []string{"shared/auth", "shared/protocol", "shared/egress", "shared/webhook/delivery", "shared/webhook/signature"}
	lambdaPrefixes = []string{
		"github.com/aws/aws-lambda-go", "github.com/awslabs/aws-lambda-go-api-proxy",
		"shared/lambdahttp", "shared/function/lambdamain",
	}
)

// allowed are the exceptions to rule 1: a domain directory and an import
// it may make.
var allowed = map[string][]string{
	"shared/store": {"github.com/aws/aws-lambda-go/events"},
}

// enginePrefixes are the engine packages of rule 2, relative to the module.
var enginePrefixes = []string{"shared/store/memory", "shared/store/bolt", "shared/store/dynamo", "shared/store/internal"}

// domainWords may not appear in engine sources (case-insensitive).
var domainWords = regexp.MustCompile(`(?i)ledger|idem|escrow|webhook|inbox`)

// pkg is one package of the module: its directory relative to the module
// root, whether it is a main, its non-test imports within the module
// (relative to it), its non-test Go files, and each file's imports (the
// module's relative to it, others as written).
type pkg struct {
	dir         string
	main        bool
	imports     []string
	files       []string
	fileImports map[string][]string
}

// TestDomainImportsNoHTTPOrLambda checks rule 1 on the tree.
func TestDomainImportsNoHTTPOrLambda(t *testing.T) {
	t.Parallel()
	root, mod := moduleRoot(t)
	pkgs := scan(t, root, mod)
	for _, d := range domainDirs {
		if pkgs[d] == nil {
			t.Fatalf("domain package %s not found: the rule's list is stale", d)
		}
	}
	for _, f := range domainFiles {
		if pkgs[filepath.ToSlash(filepath.Dir(f))].fileImports[f] == nil {
			t.Fatalf("domain file %s not found: the rule's list is stale", f)
		}
	}
	for _, d := range lambdaFree {
		if pkgs[d] == nil {
			t.Fatalf("package %s not found: the rule's list is stale", d)
		}
	}
	for _, v := range httpViolations(pkgs) {
		t.Error(v)
	}
}

// TestDomainRuleCatches runs rule 1's checker on a made-up tree.
func TestDomainRuleCatches(t *testing.T) {
	t.Parallel()
	pkgs := map[string]*pkg{
		"shared/world": {dir: "shared/world", fileImports: map[string][]string{
			"shared/world/a.go": {"context", "net/http/httptest"}, "shared/world/b.go": {"shared/lambdahttp"}}},
		"shared/store": {dir: "shared/store", fileImports: map[string][]string{
			"shared/store/feed.go": {"github.com/aws/aws-lambda-go/events", "github.com/aws/aws-lambda-go/lambda"}}},
		"shared/inbox": {dir: "shared/inbox", fileImports: map[string][]string{
			"shared/inbox/inbox.go": {"github.com/aws/aws-lambda-go/events", "shared/protocol", "net/url"}}},
		"functions/fixture-ledger/ledger": {dir: "functions/fixture-ledger/ledger", fileImports: map[string][]string{
			"functions/fixture-ledger/ledger/book.go":   {"net/http"},
			"functions/fixture-ledger/ledger/ledger.go": {"shared/lambdahttp"}}},
		"shared/worldhttp": {dir: "shared/worldhttp", fileImports: map[string][]string{"shared/worldhttp/w.go": {"net/http"}}},
		"shared/auth": {dir: "shared/auth", fileImports: map[string][]string{
			"shared/auth/verifier.go": {"net/http", "shared/lambdahttp"}}},
	}
	got := httpViolations(pkgs)
	want := []string{
		"shared/world/a.go (domain) imports net/http/httptest",
		"shared/world/b.go (domain) imports shared/lambdahttp",
		"shared/store/feed.go (domain) imports github.com/aws/aws-lambda-go/lambda",
		"shared/inbox/inbox.go (domain) imports github.com/aws/aws-lambda-go/events",
		"functions/fixture-ledger/ledger/book.go (domain) imports net/http",
		"shared/auth/verifier.go (HTTP library) imports shared/lambdahttp",
	}
	slices.Sort(got)
	slices.Sort(want)
	if !slices.Equal(got, want) {
		t.Fatalf("violations:\n%s\nwant:\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}
}

// httpViolations lists every import of a domain file, or of an HTTP
// library's, that rule 1 forbids.
func httpViolations(pkgs map[string]*pkg) []string {
	var out []string
	check := func(dir, file string, imports []string) {
		for _, imp := range imports {
			if slices.Contains(allowed[dir], imp) {
				continue
			}
			for _, p := range httpPrefixes {
				if imp == p || strings.HasPrefix(imp, p+"/") {
					out = append(out, fmt.Sprintf("%s (domain) imports %s", file, imp))
				}
			}
		}
	}
	for _, dir := range domainDirs {
		if p := pkgs[dir]; p != nil {
			for _, file := range slices.Sorted(maps.Keys(p.fileImports)) {
				check(dir, file, p.fileImports[file])
			}
		}
	}
	for _, dir := range lambdaFree {
		if p := pkgs[dir]; p != nil {
			for _, file := range slices.Sorted(maps.Keys(p.fileImports)) {
				for _, imp := range p.fileImports[file] {
					for _, pre := range lambdaPrefixes {
						if imp == pre || strings.HasPrefix(imp, pre+"/") {
							out = append(out, fmt.Sprintf("%s (HTTP library) imports %s", file, imp))
						}
					}
				}
			}
		}
	}
	for _, file := range domainFiles {
		dir := filepath.ToSlash(filepath.Dir(file))
		if p := pkgs[dir]; p != nil {
			check(dir, file, p.fileImports[file])
		}
	}
	return out
}

// TestLayering checks rule 2 on the tree.
func TestLayering(t *testing.T) {
	t.Parallel()
	root, mod := moduleRoot(t)
	pkgs := scan(t, root, mod)
	if len(pkgs) < 10 || pkgs["shared/store/memory"] == nil || pkgs["shared/idempotency"] == nil {
		t.Fatalf("scanned %d packages, missing the ones this test is about", len(pkgs))
	}
	for _, v := range violations(pkgs) {
		t.Error(v)
	}
	for _, dir := range sortedKeys(pkgs) {
		p := pkgs[dir]
		if !isEngine(dir) {
			continue
		}
		for _, f := range p.files {
			for _, hit := range wordHits(t, filepath.Join(root, f)) {
				t.Errorf("%s: engine source mentions a domain: %s", f, hit)
			}
		}
	}
}

// TestLayeringCatches runs the checker on a made-up tree with every kind of
// violation, so that TestLayering cannot pass by checking nothing.
func TestLayeringCatches(t *testing.T) {
	t.Parallel()
	pkgs := map[string]*pkg{
		"shared/store":                        {dir: "shared/store"},
		"shared/store/memory":                 {dir: "shared/store/memory", imports: []string{"shared/store", "shared/util"}},
		"shared/util":                         {dir: "shared/util", imports: []string{"shared/idempotency"}},
		"shared/idempotency":                  {dir: "shared/idempotency", imports: []string{"shared/store"}},
		"shared/store/dynamo":                 {dir: "shared/store/dynamo", imports: []string{"shared/store"}},
		"functions/fixture-ledger":            {dir: "functions/fixture-ledger", main: true, imports: []string{"shared/store/dynamo", "functions/fixture-ledger/ledger"}},
		"functions/fixture-ledger/ledger":     {dir: "functions/fixture-ledger/ledger", imports: []string{"shared/store", "functions/fixture-ledger/ledger/sub"}},
		"functions/fixture-ledger/ledger/sub": {dir: "functions/fixture-ledger/ledger/sub", imports: []string{"shared/store/dynamo"}},
	}
	got := violations(pkgs)
	want := []string{
		"engine shared/store/memory imports domain shared/idempotency (via shared/store/memory → shared/util → shared/idempotency)",
		"domain functions/fixture-ledger/ledger imports engine shared/store/dynamo (via functions/fixture-ledger/ledger → functions/fixture-ledger/ledger/sub → shared/store/dynamo)",
		"domain functions/fixture-ledger/ledger/sub imports engine shared/store/dynamo (via functions/fixture-ledger/ledger/sub → shared/store/dynamo)",
	}
	slices.Sort(got)
	slices.Sort(want)
	if !slices.Equal(got, want) {
		t.Fatalf("violations:\n%s\nwant:\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}
	dir := t.TempDir()
	src := filepath.Join(dir, "x.go")
	if err := os.WriteFile(src, []byte("package x\n\n// Ledger entries go here.\nvar idemRecords = 1\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	if hits := wordHits(t, src); len(hits) != 2 {
		t.Fatalf("word hits %v, want 2", hits)
	}
}

// TestEachFunctionLinksOnlyItsOwnCode checks rule 3's first half: a
// function's binary (and cold start) carries nothing of the other
// functions, of the harness or of the CLIs, and only functions that touch
// the table link the DynamoDB client.
func TestEachFunctionLinksOnlyItsOwnCode(t *testing.T) {
	t.Parallel()
	out, err := exec.Command("go", "list", "-f", "{{.ImportPath}}|{{join .Deps \" \"}}", module+"functions/...").CombinedOutput()
	if err != nil {
		t.Fatalf("go list: %v\n%s", err, out)
	}
	deps := map[string][]string{}
	for _, line := range strings.Split(strings.TrimSpace(string(out)), "\n") {
		path, rest, _ := strings.Cut(line, "|")
		deps[path] = strings.Fields(rest)
	}
	fns := routes.Functions()
	if len(fns) < 10 {
		t.Fatalf("the route table names %d functions", len(fns))
	}
	for _, fn := range fns {
		ds, ok := deps[module+"functions/"+fn]
		if !ok {
			t.Errorf("go list did not list functions/%s", fn)
			continue
		}
		if v := foreignDeps(fn, ds); len(v) > 0 {
			t.Errorf("%s links %s", fn, strings.Join(v, ", "))
		}
		usesDynamo := slices.Contains(ds, "github.com/aws/aws-sdk-go-v2/service/dynamodb")
		if wantsTable := routes.TableAccess(fn) != routes.NoTable; usesDynamo != wantsTable {
			t.Errorf("%s: links the DynamoDB client = %v, but its table access is %v", fn, usesDynamo, routes.TableAccess(fn))
		}
	}
}

// TestForeignDepsCatches runs the link check on made-up dependencies.
func TestForeignDepsCatches(t *testing.T) {
	t.Parallel()
	got := foreignDeps("world-get", []string{
		"context", module + "shared/world", module + "functions/world-get", module + "functions/world-getx/h",
		module + "functions/world-put", module + "local/harness", module + "cmd/awn",
	})
	want := []string{module + "functions/world-getx/h", module + "functions/world-put", module + "local/harness", module + "cmd/awn"}
	if !slices.Equal(got, want) {
		t.Fatalf("foreign deps %v, want %v", got, want)
	}
}

// foreignDeps are the dependencies of function fn that are another
// function's, the harness's or a CLI's.
func foreignDeps(fn string, deps []string) []string {
	var out []string
	own := module + "functions/" + fn
	for _, d := range deps {
		other := strings.HasPrefix(d, module+"functions/") && d != own && !strings.HasPrefix(d, own+"/")
		if other || strings.HasPrefix(d, module+"local") || strings.HasPrefix(d, module+"cmd/") {
			out = append(out, d)
		}
	}
	return out
}

// TestMainsColdStartDeps checks rule 3's second half: every package a
// function links runs its package initialization at each cold start,
// before main. So no function links the DynamoDB Streams client (Lambda
// reads the stream; only the harness's dynamostream does), nor the
// DynamoDB client's schema-based serializers (service/dynamodb/schemas,
// about 1.3 ms of INIT: go.mod pins the last release without them), and no
// package of ours that a function links compiles a regular expression at
// package level (package ident instead).
func TestMainsColdStartDeps(t *testing.T) {
	t.Parallel()
	out, err := exec.Command("go", "list", "-tags", "lambda.norpc", "-deps", "-f", "{{.ImportPath}}|{{.Dir}}|{{join .GoFiles \",\"}}", module+"functions/...").CombinedOutput()
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
		if slices.Contains(forbidden, path) {
			t.Errorf("a function links %s", path)
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

// TestOnlyLambdaHTTPWrapsHandlers checks rule 4's first half: no package
// but shared/lambdahttp imports aws-lambda-go-api-proxy's httpadapter
// outside tests, so no function wraps its handler with httpadapter itself,
// which would split task ids and signature headers on commas. (Every
// route function's builder returns lambdahttp.Entry's Handler: the
// harness's tests check each one's type.)
func TestOnlyLambdaHTTPWrapsHandlers(t *testing.T) {
	t.Parallel()
	root, mod := moduleRoot(t)
	pkgs := scan(t, root, mod)
	files := 0
	for _, dir := range sortedKeys(pkgs) {
		for file, imports := range pkgs[dir].fileImports {
			files++
			if dir == "shared/lambdahttp" {
				continue
			}
			for _, imp := range imports {
				if strings.HasSuffix(imp, "aws-lambda-go-api-proxy/httpadapter") {
					t.Errorf("%s imports %s; wrap the handler with lambdahttp.Entry", file, imp)
				}
			}
		}
	}
	if files < 100 {
		t.Fatalf("found only %d Go files", files)
	}
}

// TestLambdaHTTPLinksNoStore checks rule 4's second half: the entry
// package links no DynamoDB client, so a function without table access
// stays free of it.
func TestLambdaHTTPLinksNoStore(t *testing.T) {
	t.Parallel()
	out, err := exec.Command("go", "list", "-deps", module+"shared/lambdahttp").CombinedOutput()
	if err != nil {
		t.Fatalf("go list: %v\n%s", err, out)
	}
	for _, dep := range strings.Fields(string(out)) {
		if strings.Contains(dep, "aws-sdk-go-v2/service/dynamodb") || strings.Contains(dep, "shared/store") {
			t.Errorf("lambdahttp depends on %s", dep)
		}
	}
}

// TestProtocolLinksNoStoreOrAWS checks rule 5 on what the go tool links.
func TestProtocolLinksNoStoreOrAWS(t *testing.T) {
	t.Parallel()
	out, err := exec.Command("go", "list", "-deps", module+"shared/protocol").CombinedOutput()
	if err != nil {
		t.Fatalf("go list: %v\n%s", err, out)
	}
	deps := strings.Fields(string(out))
	if !slices.Contains(deps, module+"shared/httperr") {
		t.Fatalf("shared/protocol does not link shared/httperr: its statuses are not the one table's")
	}
	for _, v := range kitViolations(deps) {
		t.Errorf("shared/protocol links %s", v)
	}
}

// TestKitViolationsCatches: the rule 5 checker finds a store and an AWS
// package among a kit's dependencies.
func TestKitViolationsCatches(t *testing.T) {
	got := kitViolations([]string{"fmt", module + "shared/apierror", module + "shared/store", "github.com/aws/aws-lambda-go/events"})
	if want := []string{module + "shared/store", "github.com/aws/aws-lambda-go/events"}; !slices.Equal(got, want) {
		t.Errorf("kitViolations = %v, want %v", got, want)
	}
}

// kitViolations are the dependencies of the provider kit that rule 5
// forbids.
func kitViolations(deps []string) []string {
	var out []string
	for _, dep := range deps {
		if strings.HasPrefix(dep, module+"shared/store") || strings.HasPrefix(dep, "github.com/aws/") {
			out = append(out, dep)
		}
	}
	return out
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

func isEngine(dir string) bool {
	for _, p := range enginePrefixes {
		if dir == p || strings.HasPrefix(dir, p+"/") {
			return true
		}
	}
	return false
}

// isDomain reports whether dir is a domain for rule 2: a shared/ package
// outside shared/store that uses the item API (imports shared/store), or
// any package under functions/.
func isDomain(pkgs map[string]*pkg, dir string) bool {
	p := pkgs[dir]
	if p == nil || isEngine(dir) || dir == "shared/store" || strings.HasPrefix(dir, "shared/store/") {
		return false
	}
	if strings.HasPrefix(dir, "functions/") {
		return true
	}
	// The harness (local/) and the CLI (cmd/) wire engines in; they are
	// not domains.
	return strings.HasPrefix(dir, "shared/") && slices.Contains(p.imports, "shared/store")
}

// violations lists every engine → domain and domain → engine dependency,
// with the import path that makes it.
func violations(pkgs map[string]*pkg) []string {
	var out []string
	for _, dir := range sortedKeys(pkgs) {
		switch {
		case isEngine(dir):
			for dep, path := range reach(pkgs, dir) {
				if isDomain(pkgs, dep) {
					out = append(out, fmt.Sprintf("engine %s imports domain %s (via %s)", dir, dep, strings.Join(path, " → ")))
				}
			}
		case isDomain(pkgs, dir) && !pkgs[dir].main:
			for dep, path := range reach(pkgs, dir) {
				if isEngine(dep) {
					out = append(out, fmt.Sprintf("domain %s imports engine %s (via %s)", dir, dep, strings.Join(path, " → ")))
				}
			}
		}
	}
	return out
}

// reach returns every package dir depends on (non-test imports,
// transitively), each with one import path from dir to it.
func reach(pkgs map[string]*pkg, dir string) map[string][]string {
	paths := map[string][]string{}
	queue := [][]string{{dir}}
	for len(queue) > 0 {
		path := queue[0]
		queue = queue[1:]
		p := pkgs[path[len(path)-1]]
		if p == nil {
			continue
		}
		for _, imp := range p.imports {
			if _, seen := paths[imp]; seen || imp == dir {
				continue
			}
			next := append(slices.Clip(path), imp)
			paths[imp] = next
			queue = append(queue, next)
		}
	}
	return paths
}

func sortedKeys(m map[string]*pkg) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	return keys
}

// moduleRoot finds go.mod above the working directory and reads the module
// path from it.
func moduleRoot(t *testing.T) (root, module string) {
	t.Helper()
	dir, err := os.Getwd()
	if err != nil {
		t.Fatal(err)
	}
	for {
		data, err := os.ReadFile(filepath.Join(dir, "go.mod"))
		if err == nil {
			for _, line := range strings.Split(string(data), "\n") {
				if m, ok := strings.CutPrefix(strings.TrimSpace(line), "module "); ok {
					return dir, strings.TrimSpace(m)
				}
			}
			t.Fatalf("%s/go.mod has no module line", dir)
		}
		parent := filepath.Dir(dir)
		if parent == dir {
			t.Fatal("no go.mod above the working directory")
		}
		dir = parent
	}
}

// scan parses the imports of every non-test Go file of the module (skipping
// other modules, testdata and directories the go tool ignores).
func scan(t *testing.T, root, module string) map[string]*pkg {
	t.Helper()
	pkgs := map[string]*pkg{}
	fset := token.NewFileSet()
	err := filepath.WalkDir(root, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		name := d.Name()
		if d.IsDir() {
			if path != root && (strings.HasPrefix(name, ".") || strings.HasPrefix(name, "_") || name == "testdata" || name == "node_modules") {
				return filepath.SkipDir
			}
			if _, err := os.Stat(filepath.Join(path, "go.mod")); err == nil && path != root {
				return filepath.SkipDir // another module (infra/)
			}
			return nil
		}
		if !strings.HasSuffix(name, ".go") || strings.HasSuffix(name, "_test.go") {
			return nil
		}
		f, err := parser.ParseFile(fset, path, nil, parser.ImportsOnly)
		if err != nil {
			return err
		}
		rel, err := filepath.Rel(root, path)
		if err != nil {
			return err
		}
		rel = filepath.ToSlash(rel)
		dir := filepath.ToSlash(filepath.Dir(rel))
		p := pkgs[dir]
		if p == nil {
			p = &pkg{dir: dir, fileImports: map[string][]string{}}
			pkgs[dir] = p
		}
		p.files = append(p.files, rel)
		if f.Name.Name == "main" {
			p.main = true
		}
		for _, imp := range f.Imports {
			ip, err := strconv.Unquote(imp.Path.Value)
			if err != nil {
				return err
			}
			if local, ok := strings.CutPrefix(ip, module+"/"); ok {
				ip = local
				if !slices.Contains(p.imports, local) {
					p.imports = append(p.imports, local)
				}
			}
			p.fileImports[rel] = append(p.fileImports[rel], ip)
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return pkgs
}

// wordHits returns the lines of file that contain a domain word.
func wordHits(t *testing.T, file string) []string {
	t.Helper()
	f, err := os.Open(file)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	var hits []string
	sc := bufio.NewScanner(f)
	sc.Buffer(make([]byte, 1<<20), 1<<20)
	for n := 1; sc.Scan(); n++ {
		if w := domainWords.FindString(sc.Text()); w != "" {
			hits = append(hits, fmt.Sprintf("line %d: %q", n, w))
		}
	}
	if err := sc.Err(); err != nil {
		t.Fatal(err)
	}
	return hits
}
