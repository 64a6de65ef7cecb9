package repo

import (
	"os"
	"path/filepath"
	"slices"
	"testing"
)

func TestRootFromInfra(t *testing.T) {
	root, err := Root(".")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(filepath.Join(root, "infra", "go.mod")); err != nil {
		t.Errorf("root %s does not hold infra/go.mod: %v", root, err)
	}
}

func TestFunctions(t *testing.T) {
	root := t.TempDir()
	if got, err := Functions(root); err != nil || got != nil {
		t.Errorf("no functions/ folder: got %v, %v; want none", got, err)
	}
	for _, d := range []string{"zeta", "alpha", ".scratch", "_old"} {
		if err := os.MkdirAll(filepath.Join(root, "functions", d), 0o755); err != nil {
			t.Fatal(err)
		}
	}
	if err := os.WriteFile(filepath.Join(root, "functions", "README.md"), nil, 0o644); err != nil {
		t.Fatal(err)
	}
	got, err := Functions(root)
	if err != nil {
		t.Fatal(err)
	}
	if want := []string{"alpha", "zeta"}; !slices.Equal(got, want) {
		t.Errorf("Functions = %v, want %v", got, want)
	}
}

func TestRootNotFound(t *testing.T) {
	if _, err := Root(t.TempDir()); err == nil {
		t.Error("found a root above a temporary directory")
	}
}

func TestCDKContext(t *testing.T) {
	root, err := Root(".")
	if err != nil {
		t.Fatal(err)
	}
	ctx, err := CDKContext(root)
	if err != nil {
		t.Fatal(err)
	}
	if ctx["stage"] != "dev" {
		t.Errorf("cdk.json context stage = %v, want dev", ctx["stage"])
	}
	dir := t.TempDir()
	if err := os.MkdirAll(filepath.Join(dir, "infra"), 0o755); err != nil {
		t.Fatal(err)
	}
	for _, bad := range []string{`{"app": "go run ."}`, `{"context": [}`} {
		if err := os.WriteFile(filepath.Join(dir, "infra", "cdk.json"), []byte(bad), 0o644); err != nil {
			t.Fatal(err)
		}
		if _, err := CDKContext(dir); err == nil {
			t.Errorf("CDKContext accepted %s", bad)
		}
	}
}
