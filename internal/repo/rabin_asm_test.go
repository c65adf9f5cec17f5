package repo

import (
	"bytes"
	"os"
	"os/exec"
	"path/filepath"
	"testing"
)

// TestRabinAsmGenerated: the committed rabin_amd64.s is exactly what its
// generator (_asm, avo) writes, so the assembly is never edited by hand.
// It runs the generator with the go command (a module of its own: avo is
// not in hermesd's module graph).
func TestRabinAsmGenerated(t *testing.T) {
	goTool, err := exec.LookPath("go")
	if err != nil {
		t.Fatalf("the go command runs the generator: %v", err)
	}
	want, err := os.ReadFile("rabin_amd64.s")
	if err != nil {
		t.Fatal(err)
	}
	out := filepath.Join(t.TempDir(), "rabin_amd64.s")
	cmd := exec.Command(goTool, "-C", "_asm", "run", ".", "-out", out)
	cmd.Env = append(os.Environ(), "GOWORK=off", "GOFLAGS=")
	if b, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("go -C _asm run .: %v\n%s", err, b)
	}
	got, err := os.ReadFile(out)
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(got, want) {
		line := 1 + bytes.Count(want[:commonPrefix(got, want)], []byte("\n"))
		t.Fatalf("rabin_amd64.s differs from the generator's output from line %d: run go generate ./internal/repo", line)
	}
}

func commonPrefix(a, b []byte) int {
	n := 0
	for n < len(a) && n < len(b) && a[n] == b[n] {
		n++
	}
	return n
}
