package store_test

import (
	"bufio"
	"fmt"
	"go/parser"
	"go/token"
	"io/fs"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"
)

// The layering of the store (no engine knows any domain), checked on the
// source tree with go/parser (so it runs while other packages are broken):
//
//   - no engine package (shared/store/memory, bolt, dynamo, internal and
//     their subpackages) imports a domain package, directly or not;
//   - no domain package imports an engine, directly or not, outside its
//     tests; only a Lambda main (functions/<name>, package main) and the
//     harness wire an engine in;
//   - no non-test engine source mentions a domain word.
//
// A domain package is a shared/ package outside shared/store that uses the
// item API (imports shared/store), and everything under functions/.

// enginePrefixes are the engine packages, relative to the module.
var enginePrefixes = []string{"shared/store/memory", "shared/store/bolt", "shared/store/dynamo", "shared/store/internal"}

// domainWords may not appear in engine sources (case-insensitive).
var domainWords = regexp.MustCompile(`(?i)ledger|idem|escrow|webhook|inbox`)

// pkg is one package of the module: its directory relative to the module
// root, whether it is a main, its non-test imports within the module, and
// its non-test Go files.
type pkg struct {
	dir     string
	main    bool
	imports []string
	files   []string
}

func TestLayering(t *testing.T) {
	root, module := moduleRoot(t)
	pkgs := scan(t, root, module)
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

func isEngine(dir string) bool {
	for _, p := range enginePrefixes {
		if dir == p || strings.HasPrefix(dir, p+"/") {
			return true
		}
	}
	return false
}

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
			p = &pkg{dir: dir}
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
			if local, ok := strings.CutPrefix(ip, module+"/"); ok && !slices.Contains(p.imports, local) {
				p.imports = append(p.imports, local)
			}
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
