package layering

import (
	"bytes"
	"encoding/json"
	"errors"
	"io"
	"os/exec"
	"slices"
	"strings"
	"testing"
)

const module = "github.com/sundialhq/sundial"

// libraries are the packages that must stay free of processes and metrics.
var libraries = []string{
	module + "/client",
	module + "/schedule",
	module + "/jobspec",
	module + "/audit",
}

// forbidden are import path prefixes no library may depend on.
var forbidden = []string{
	module + "/registry",
	module + "/trigger",
	module + "/dispatcher",
	module + "/runner",
	module + "/dagengine",
	module + "/store",
	module + "/enqueue",
	module + "/history",
	module + "/leasing",
	module + "/embedded",
	module + "/loadgen",
	module + "/bench",
	module + "/cmd",
	module + "/discovery",
	"github.com/prometheus/",
}

// isForbidden reports whether a package path is, or is inside, a forbidden
// one ("store" covers "store/cassandra", never "storefront").
func isForbidden(path string) bool {
	for _, f := range forbidden {
		if strings.HasSuffix(f, "/") && strings.HasPrefix(path, f) {
			return true
		}
		if path == f || strings.HasPrefix(path, f+"/") {
			return true
		}
	}
	return false
}

type pkg struct {
	ImportPath string
	Imports    []string
	Deps       []string
}

// list runs go list -deps -json on patterns and returns every package
// printed, by import path.
func list(t *testing.T, patterns ...string) map[string]pkg {
	t.Helper()
	goTool, err := exec.LookPath("go")
	if err != nil {
		t.Fatalf("the go command is needed to list dependencies: %v", err)
	}
	var stdout, stderr bytes.Buffer
	cmd := exec.Command(goTool, append([]string{"list", "-deps", "-json=ImportPath,Imports,Deps"}, patterns...)...)
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	if err := cmd.Run(); err != nil {
		t.Fatalf("go list -deps %s: %v\n%s", strings.Join(patterns, " "), err, stderr.String())
	}
	out := map[string]pkg{}
	for dec := json.NewDecoder(&stdout); ; {
		var p pkg
		if err := dec.Decode(&p); errors.Is(err, io.EOF) {
			break
		} else if err != nil {
			t.Fatalf("read go list's output: %v", err)
		}
		out[p.ImportPath] = p
	}
	return out
}

// violations returns, for lib, every forbidden package it depends on, with
// the direct import of lib that leads to it.
func violations(pkgs map[string]pkg, lib string) []string {
	var out []string
	for _, dep := range pkgs[lib].Deps {
		if !isForbidden(dep) {
			continue
		}
		via := dep
		for _, imp := range pkgs[lib].Imports {
			if imp == dep || slices.Contains(pkgs[imp].Deps, dep) {
				via = imp
				break
			}
		}
		out = append(out, dep+" (through the import of "+via+")")
	}
	return out
}

func TestLibrariesImportNoProcess(t *testing.T) {
	t.Parallel()
	pkgs := list(t, libraries...)
	for _, lib := range libraries {
		if _, ok := pkgs[lib]; !ok {
			t.Fatalf("go list did not report %s", lib)
		}
		for _, v := range violations(pkgs, lib) {
			t.Errorf("%s depends on %s: a library must not pull in a process package or Prometheus", lib, v)
		}
	}
}

// TestViolationsAreFound makes sure the check can fail: a made-up library
// that imports the registry through another package is reported.
func TestViolationsAreFound(t *testing.T) {
	t.Parallel()
	pkgs := map[string]pkg{
		module + "/client": {
			ImportPath: module + "/client",
			Imports:    []string{module + "/jobspec", "fmt"},
			Deps:       []string{"fmt", module + "/jobspec", module + "/registry", module + "/store/cassandra", "github.com/prometheus/client_golang/prometheus", module + "/storefront"},
		},
		module + "/jobspec": {
			ImportPath: module + "/jobspec",
			Deps:       []string{module + "/registry", module + "/store/cassandra", "github.com/prometheus/client_golang/prometheus"},
		},
	}
	got := violations(pkgs, module+"/client")
	want := []string{
		module + "/registry (through the import of " + module + "/jobspec)",
		module + "/store/cassandra (through the import of " + module + "/jobspec)",
		"github.com/prometheus/client_golang/prometheus (through the import of " + module + "/jobspec)",
	}
	if !slices.Equal(got, want) {
		t.Fatalf("violations:\n got  %q\n want %q", got, want)
	}
}
