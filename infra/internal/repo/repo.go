// Package repo finds the a2awire checkout that the infra module deploys.
//
// The CDK app and the emulator smoke test both run from somewhere inside
// infra/ (the CDK CLI runs the app in the directory holding cdk.json, go test
// runs each package in its own directory), but what they deploy and build
// lives in the root module: functions/*, build/*, .tools/. This package
// locates that root by its go.mod instead of trusting relative paths, and it
// does not import the CDK so the smoke test stays quick to compile.
package repo

import (
	"bufio"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
)

// Module is the root module's path; its go.mod marks the repository root.
const Module = "github.com/a2awire/a2awire"

// Root walks up from dir to the directory whose go.mod declares Module.
func Root(dir string) (string, error) {
	dir, err := filepath.Abs(dir)
	if err != nil {
		return "", err
	}
	for {
		if moduleOf(filepath.Join(dir, "go.mod")) == Module {
			return dir, nil
		}
		parent := filepath.Dir(dir)
		if parent == dir {
			return "", fmt.Errorf("no go.mod declaring module %s above the working directory", Module)
		}
		dir = parent
	}
}

// moduleOf returns the module path a go.mod declares, or "" when the file is
// missing or has no module line.
func moduleOf(gomod string) string {
	f, err := os.Open(gomod)
	if err != nil {
		return ""
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		if rest, ok := strings.CutPrefix(strings.TrimSpace(sc.Text()), "module "); ok {
			return strings.Trim(strings.TrimSpace(rest), `"`)
		}
	}
	return ""
}

// Functions lists the function folders under root/functions, sorted. Every
// folder is a Lambda function whether or not a route names it yet; folders
// the go tool ignores (names starting with "." or "_") are skipped too, so
// scratch directories never turn into deployed functions. A repository
// without a functions/ folder has no functions.
func Functions(root string) ([]string, error) {
	entries, err := os.ReadDir(filepath.Join(root, "functions"))
	if errors.Is(err, os.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	var names []string
	for _, e := range entries {
		if !e.IsDir() || strings.HasPrefix(e.Name(), ".") || strings.HasPrefix(e.Name(), "_") {
			continue
		}
		names = append(names, e.Name())
	}
	slices.Sort(names)
	return names, nil
}

// CDKContext returns the "context" object of root/infra/cdk.json: the stage
// default and the CDK feature flags. Tests synthesize with it so that they
// check the template `cdk synth` produces, flags included.
func CDKContext(root string) (map[string]any, error) {
	raw, err := os.ReadFile(filepath.Join(root, "infra", "cdk.json"))
	if err != nil {
		return nil, err
	}
	var doc struct {
		Context map[string]any `json:"context"`
	}
	if err := json.Unmarshal(raw, &doc); err != nil {
		return nil, fmt.Errorf("infra/cdk.json: %w", err)
	}
	if doc.Context == nil {
		return nil, errors.New("infra/cdk.json has no context object")
	}
	return doc.Context, nil
}
