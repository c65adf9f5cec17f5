package fsys

import (
	"errors"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

// testTree builds base/root with a file, a directory, symlinks (to a file,
// to a directory, and out of the root) and a fifo, and base/outside/secret
// beside it. It returns root and the secret's contents.
func testTree(t *testing.T) (root, secret string) {
	t.Helper()
	base := t.TempDir()
	root = filepath.Join(base, "root")
	outside := filepath.Join(base, "outside")
	secret = "outside the root"
	for _, d := range []string{root, outside, filepath.Join(root, "d"), filepath.Join(root, "e")} {
		if err := os.Mkdir(d, 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.Chmod(d, 0o755); err != nil { // whatever the umask
			t.Fatal(err)
		}
	}
	files := map[string]string{
		filepath.Join(root, "f"):         "hello",
		filepath.Join(root, "d", "g"):    "world",
		filepath.Join(outside, "secret"): secret,
	}
	for p, c := range files {
		if err := os.WriteFile(p, []byte(c), 0o640); err != nil {
			t.Fatal(err)
		}
		if err := os.Chmod(p, 0o640); err != nil {
			t.Fatal(err)
		}
	}
	for name, target := range map[string]string{"lf": "f", "ld": "d", "out": outside, "up": ".."} {
		if err := os.Symlink(target, filepath.Join(root, name)); err != nil {
			t.Skipf("symlinks unavailable: %v", err)
		}
	}
	if err := mkfifo(filepath.Join(root, "p")); err != nil && !errors.Is(err, errors.ErrUnsupported) {
		t.Fatal(err)
	}
	return root, secret
}

func openRoot(t *testing.T, path string) Root {
	t.Helper()
	r, err := OpenRoot(path)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := r.Close(); err != nil {
			t.Error(err)
		}
	})
	return r
}

func TestReadDir(t *testing.T) {
	implementations(t, func(t *testing.T) {
		path, _ := testTree(t)
		r := openRoot(t, path)
		ents, info, err := r.ReadDir("")
		if err != nil {
			t.Fatal(err)
		}
		if !info.Mode.IsDir() {
			t.Errorf("root info %v, want a directory", info.Mode)
		}
		got := map[string]fs.FileMode{}
		for _, e := range ents {
			got[e.Name] = e.Type
		}
		want := map[string]fs.FileMode{"f": 0, "d": fs.ModeDir, "e": fs.ModeDir, "lf": fs.ModeSymlink,
			"ld": fs.ModeSymlink, "out": fs.ModeSymlink, "up": fs.ModeSymlink, "p": fs.ModeNamedPipe}
		if _, err := os.Lstat(filepath.Join(path, "p")); err != nil {
			delete(want, "p")
		}
		if !mapsEqual(got, want) {
			t.Errorf("ReadDir = %v, want %v", got, want)
		}
		ents, info, err = r.ReadDir("d")
		if err != nil || len(ents) != 1 || ents[0] != (Entry{Name: "g"}) || !info.Mode.IsDir() || info.Mode.Perm() != 0o755 {
			t.Errorf("ReadDir(d) = %v, %+v, %v", ents, info, err)
		}
		if ents, _, err := r.ReadDir("e"); err != nil || len(ents) != 0 {
			t.Errorf("ReadDir(e) = %v, %v", ents, err)
		}
		for _, bad := range []string{"ld", "out", "up", "f", "missing", "../outside", "ld/.."} {
			if ents, _, err := r.ReadDir(bad); err == nil {
				t.Errorf("ReadDir(%s) = %v, want an error", bad, ents)
			}
		}
	})
}

func mapsEqual(a, b map[string]fs.FileMode) bool {
	if len(a) != len(b) {
		return false
	}
	for k, v := range a {
		if w, ok := b[k]; !ok || w != v {
			return false
		}
	}
	return true
}

func TestOpen(t *testing.T) {
	implementations(t, func(t *testing.T) {
		path, secret := testTree(t)
		r := openRoot(t, path)
		for rel, want := range map[string]string{"f": "hello", "d/g": "world"} {
			f, err := r.Open(rel)
			if err != nil {
				t.Fatalf("Open(%s): %v", rel, err)
			}
			info, err := f.Stat()
			if err != nil || !info.Mode.IsRegular() || info.Size != int64(len(want)) || info.Mtime == 0 {
				t.Errorf("Stat(%s) = %+v, %v", rel, info, err)
			}
			b, err := io.ReadAll(f)
			if err != nil || string(b) != want {
				t.Errorf("read %s = %q, %v", rel, b, err)
			}
			if n, err := f.Read(make([]byte, 8)); n != 0 || err != io.EOF {
				t.Errorf("read at the end of %s = %d, %v; want 0, io.EOF", rel, n, err)
			}
			if err := f.Close(); err != nil {
				t.Error(err)
			}
		}
		// Nothing is followed and nothing outside the root is reached,
		// whatever the path says.
		for _, rel := range []string{"lf", "ld/g", "out/secret", "up/outside/secret", "../outside/secret",
			"d/../../outside/secret", "missing", "d/missing", "f/x"} {
			f, err := r.Open(rel)
			if err == nil {
				b, _ := io.ReadAll(f)
				f.Close()
				t.Errorf("Open(%s) succeeded and read %q", rel, b)
				continue
			}
			if strings.Contains(err.Error(), secret) {
				t.Errorf("Open(%s): %v", rel, err)
			}
		}
		for _, rel := range []string{"lf", "ld/g", "out/secret", "missing", "d/missing", "f/x"} {
			if _, err := r.Open(rel); !IsGone(err) {
				t.Errorf("Open(%s) = %v: a walker would not treat it as gone", rel, err)
			}
		}
	})
}

func TestOpenFifoDoesNotBlock(t *testing.T) {
	implementations(t, func(t *testing.T) {
		path, _ := testTree(t)
		if _, err := os.Lstat(filepath.Join(path, "p")); err != nil {
			t.Skip("no fifos here")
		}
		r := openRoot(t, path)
		// A file swapped for a fifo after the listing: the open must not
		// wait for a writer (the test would hang), and Stat tells.
		f, err := r.Open("p")
		if err != nil {
			t.Fatal(err)
		}
		defer f.Close()
		if info, err := f.Stat(); err != nil || info.Mode&fs.ModeNamedPipe == 0 {
			t.Errorf("Stat(p) = %v, %v", info.Mode, err)
		}
	})
}

func TestStat(t *testing.T) {
	implementations(t, func(t *testing.T) {
		path, _ := testTree(t)
		r := openRoot(t, path)
		for rel, want := range map[string]fs.FileMode{"": fs.ModeDir, "f": 0, "d": fs.ModeDir, "d/g": 0, "lf": fs.ModeSymlink, "out": fs.ModeSymlink} {
			for name, stat := range map[string]func(string) (Info, error){"Stat": r.Stat, "Lstat": r.Lstat} {
				info, err := stat(rel)
				if err != nil || info.Mode.Type() != want {
					t.Errorf("%s(%q) = %v, %v; want type %v", name, rel, info.Mode, err, want)
				}
			}
		}
		if info, err := r.Stat("f"); err != nil || info.Size != 5 || info.Mode.Perm() != 0o640 {
			t.Errorf("Stat(f) = %+v, %v", info, err)
		}
		for _, rel := range []string{"ld/g", "out/secret", "../outside", "missing"} {
			if info, err := r.Stat(rel); err == nil {
				t.Errorf("Stat(%s) = %+v, want an error", rel, info)
			}
		}
		// Lstat and Stat agree on a file reached safely.
		a, errA := r.Stat("d/g")
		b, errB := r.Lstat("d/g")
		if errA != nil || errB != nil || a != b {
			t.Errorf("Stat(d/g) = %+v, %v; Lstat = %+v, %v", a, errA, b, errB)
		}
	})
}

// TestSwappedForSymlink: a directory listed by the walker is replaced by a
// symlink out of the root before the walker descends into it.
func TestSwappedForSymlink(t *testing.T) {
	implementations(t, func(t *testing.T) {
		path, secret := testTree(t)
		r := openRoot(t, path)
		ents, _, err := r.ReadDir("")
		if err != nil || !slices.ContainsFunc(ents, func(e Entry) bool { return e.Name == "d" && e.Type.IsDir() }) {
			t.Fatalf("ReadDir: %v, %v", ents, err)
		}
		if err := os.RemoveAll(filepath.Join(path, "d")); err != nil {
			t.Fatal(err)
		}
		if err := os.Symlink(filepath.Join(filepath.Dir(path), "outside"), filepath.Join(path, "d")); err != nil {
			t.Fatal(err)
		}
		if ents, _, err := r.ReadDir("d"); !IsGone(err) {
			t.Errorf("ReadDir(d) after the swap = %v, %v; want a gone error", ents, err)
		}
		if f, err := r.Open("d/secret"); !IsGone(err) {
			b, _ := io.ReadAll(f)
			f.Close()
			t.Errorf("Open(d/secret) after the swap = %v, read %q; want a gone error (secret %q)", err, b, secret)
		}
	})
}

func TestOpenRoot(t *testing.T) {
	path, _ := testTree(t)
	link := filepath.Join(t.TempDir(), "link")
	if err := os.Symlink(path, link); err != nil {
		t.Fatal(err)
	}
	r := openRoot(t, link) // the root itself may be reached through a symlink
	if _, err := r.Stat("f"); err != nil {
		t.Errorf("Stat(f) through a linked root: %v", err)
	}
	for _, bad := range []string{filepath.Join(path, "f"), filepath.Join(path, "missing"), filepath.Join(path, "f", "x")} {
		if r, err := OpenRoot(bad); !IsGone(err) {
			r.Close()
			t.Errorf("OpenRoot(%s) = %v, want a gone error", bad, err)
		}
	}
	if err := (Root{}).Close(); err != nil {
		t.Errorf("zero Root: %v", err)
	}
	if err := (File{}).Close(); err != nil {
		t.Errorf("zero File: %v", err)
	}
}
