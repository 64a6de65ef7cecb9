package main

import (
	"bytes"
	"os"
	"path/filepath"
	"testing"
)

// TestGeneratedFilesAreCurrent fails while a function's main or the
// harness's list of builders differs from what the route table generates:
// run `go generate ./shared/routes`.
func TestGeneratedFilesAreCurrent(t *testing.T) {
	files, err := Files()
	if err != nil {
		t.Fatal(err)
	}
	for _, f := range files {
		got, err := os.ReadFile(filepath.Join("..", "..", filepath.FromSlash(f.Path)))
		if err != nil {
			t.Errorf("%s: %v (run go generate ./shared/routes)", f.Path, err)
			continue
		}
		if !bytes.Equal(got, f.Content) {
			t.Errorf("%s is stale: run go generate ./shared/routes", f.Path)
		}
	}
}

// TestNoStaleRouteSample fails when events/routes holds a sample of a
// route the table no longer has (go generate removes them).
func TestNoStaleRouteSample(t *testing.T) {
	files, err := Files()
	if err != nil {
		t.Fatal(err)
	}
	want := map[string]bool{}
	for _, f := range files {
		want[f.Path] = true
	}
	held, err := filepath.Glob(filepath.Join("..", "..", "events", "routes", "*"))
	if err != nil {
		t.Fatal(err)
	}
	if len(held) == 0 {
		t.Fatal("events/routes is empty: run go generate ./shared/routes")
	}
	for _, path := range held {
		if name := "events/routes/" + filepath.Base(path); !want[name] {
			t.Errorf("%s is no route's sample: run go generate ./shared/routes", name)
		}
	}
}

// TestEveryFunctionFolderIsGenerated fails when a folder under functions/
// has no function in the route table (its main would never be rewritten).
func TestEveryFunctionFolderIsGenerated(t *testing.T) {
	files, err := Files()
	if err != nil {
		t.Fatal(err)
	}
	want := map[string]bool{}
	for _, f := range files {
		want[f.Path] = true
	}
	dirs, err := os.ReadDir(filepath.Join("..", "..", "functions"))
	if err != nil {
		t.Fatal(err)
	}
	for _, d := range dirs {
		if d.IsDir() && !want["functions/"+d.Name()+"/main.go"] {
			t.Errorf("functions/%s is no function of the route table", d.Name())
		}
	}
}

func TestParseBuilder(t *testing.T) {
	b, err := parseBuilder("world-send", "shared/worldhttp.BuildSend")
	if err != nil || b.importPath != module+"/shared/worldhttp" || b.pkg != "worldhttp" || b.fn != "BuildSend" {
		t.Fatalf("%+v %v", b, err)
	}
	for _, bad := range []string{"", "BuildSend", "shared/worldhttp.", ".BuildSend"} {
		if _, err := parseBuilder("x", bad); err == nil {
			t.Errorf("%q accepted", bad)
		}
	}
}
