package atomicfile

import (
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"testing"
)

// entries lists dir's names.
func entries(t *testing.T, dir string) []string {
	t.Helper()
	es, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	var out []string
	for _, e := range es {
		out = append(out, e.Name())
	}
	return out
}

func TestNoVisibleTempWhileWriting(t *testing.T) {
	dir := t.TempDir()
	p := filepath.Join(dir, "receipts.ndjson")
	if err := os.WriteFile(p, []byte("old"), 0o644); err != nil {
		t.Fatal(err)
	}
	f, err := Create(p, 0o640)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := f.Write([]byte("new content")); err != nil {
		t.Fatal(err)
	}
	// While the replacement is being written, the directory shows only
	// the target (on Linux; elsewhere a named temporary file is allowed).
	if got := entries(t, dir); runtime.GOOS == "linux" && (len(got) != 1 || got[0] != "receipts.ndjson") {
		t.Fatalf("directory during the write: %v", got)
	}
	if err := f.Commit(); err != nil {
		t.Fatal(err)
	}
	b, err := os.ReadFile(p)
	if err != nil || string(b) != "new content" {
		t.Fatalf("after commit: %q %v", b, err)
	}
	if st, _ := os.Stat(p); st.Mode().Perm() != 0o640 {
		t.Errorf("mode %v", st.Mode().Perm())
	}
	if got := entries(t, dir); len(got) != 1 {
		t.Fatalf("directory after commit: %v", got)
	}
	f.Abort() // after Commit: nothing
	if _, err := os.Stat(p); err != nil {
		t.Fatal(err)
	}
}

func TestAbortLeavesTheOld(t *testing.T) {
	dir := t.TempDir()
	p := filepath.Join(dir, "bundle.lock.json")
	if err := WriteFile(p, []byte("one"), 0o644); err != nil {
		t.Fatal(err)
	}
	f, err := Create(p, 0o644)
	if err != nil {
		t.Fatal(err)
	}
	f.Write([]byte("two"))
	f.Abort()
	if b, _ := os.ReadFile(p); string(b) != "one" {
		t.Fatalf("after abort: %q", b)
	}
	if got := entries(t, dir); len(got) != 1 {
		t.Fatalf("directory after abort: %v", got)
	}
	if err := f.Commit(); err == nil {
		t.Fatal("commit after abort succeeded")
	}
}

func TestIsTemp(t *testing.T) {
	for name, want := range map[string]bool{
		".bundle.lock.json.tmp-0123abcd": true,
		".receipts.ndjson.tmp-1":         true,
		"bundle.lock.json":               false,
		"notes.tmp-1":                    false,
	} {
		if IsTemp(name) != want {
			t.Errorf("IsTemp(%q) = %v", name, !want)
		}
	}
}

// TestCreateOutsideNeverShowsInTheDirectory: the replacement of a brain
// file is never visible in the brain, not even for an instant.
func TestCreateOutsideNeverShowsInTheDirectory(t *testing.T) {
	parent := t.TempDir()
	brain := filepath.Join(parent, "brain")
	if err := os.Mkdir(brain, 0o755); err != nil {
		t.Fatal(err)
	}
	p := filepath.Join(brain, "bundle.lock.json")
	f, err := CreateOutside(p, 0o644)
	if err != nil {
		t.Fatal(err)
	}
	f.Write([]byte("{}"))
	if got := entries(t, brain); len(got) != 0 {
		t.Fatalf("brain during the write: %v", got)
	}
	if got := entries(t, parent); len(got) != 2 || !strings.HasPrefix(got[0], ".brain.bundle.lock.json.tmp-") {
		t.Fatalf("parent during the write: %v", got)
	}
	if !strings.HasPrefix(filepath.Join(parent, entries(t, parent)[0]), OutsidePrefix(p)) || !IsTemp(entries(t, parent)[0]) {
		t.Fatalf("temp %v does not match OutsidePrefix %s", entries(t, parent), OutsidePrefix(p))
	}
	if err := f.Commit(); err != nil {
		t.Fatal(err)
	}
	if got := entries(t, parent); len(got) != 1 || got[0] != "brain" {
		t.Fatalf("parent after commit: %v", got)
	}
	if b, _ := os.ReadFile(p); string(b) != "{}" {
		t.Fatalf("content %q", b)
	}
	// A parent it cannot write to: an unnamed file in the brain instead.
	if os.Getuid() != 0 {
		os.Chmod(parent, 0o555)
		defer os.Chmod(parent, 0o755)
		f, err := CreateOutside(p, 0o644)
		if err != nil {
			t.Fatal(err)
		}
		f.Write([]byte("x"))
		if err := f.Commit(); err != nil {
			t.Fatal(err)
		}
	}
}
