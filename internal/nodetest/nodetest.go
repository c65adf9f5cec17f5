// Package nodetest runs the JavaScript peers of the interop tests (the
// pinned npm packages the set-up scripts install) with Node.js: one
// module from a package's testdata, JSON in on stdin, JSON out on stdout.
// Only test files import it.
package nodetest

import (
	"bytes"
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"testing"
)

// RunModule runs the ES module script (a file of the calling package,
// e.g. testdata/viem.mjs) beside modules, the directory whose
// node_modules its bare imports resolve from, with in as JSON on stdin,
// and decodes its standard output into out. need says what the test
// needs Node.js for, in the failure when it is missing.
func RunModule(t *testing.T, modules, script, need string, in, out any) {
	t.Helper()
	node, err := exec.LookPath("node")
	if err != nil {
		t.Fatalf("node not found (%v): %s needs Node.js 20+ on PATH", err, need)
	}
	src, err := os.ReadFile(script)
	if err != nil {
		t.Fatal(err)
	}
	// Bare imports resolve from the script's own directory: run a copy
	// from there.
	f, err := os.CreateTemp(modules, "."+filepath.Base(script)+"-*.mjs")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.Remove(f.Name()) })
	if _, err := f.Write(src); err != nil {
		t.Fatal(err)
	}
	if err := f.Close(); err != nil {
		t.Fatal(err)
	}
	input, err := json.Marshal(in)
	if err != nil {
		t.Fatal(err)
	}
	cmd := exec.CommandContext(t.Context(), node, f.Name())
	cmd.Dir = modules
	cmd.Stdin = bytes.NewReader(input)
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	stdout, err := cmd.Output()
	if err != nil {
		t.Fatalf("node %s: %v\n%s", filepath.Base(script), err, stderr.String())
	}
	if err := json.Unmarshal(stdout, out); err != nil {
		t.Fatalf("node %s: bad output (%v): %.500s", filepath.Base(script), err, stdout)
	}
}
