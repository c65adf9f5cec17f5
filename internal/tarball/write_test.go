package tarball

import (
	"archive/tar"
	"bytes"
	"context"
	"crypto/sha256"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"reflect"
	"slices"
	"strings"
	"testing"
	"time"
)

func writeTar(t testing.TB, root string, opts WriteOptions) ([]byte, Manifest) {
	t.Helper()
	var buf bytes.Buffer
	m, err := Write(t.Context(), &buf, root, opts)
	if err != nil {
		t.Fatalf("Write: %v", err)
	}
	return buf.Bytes(), m
}

func TestWriteDeterministic(t *testing.T) {
	ents := testTree()
	a := filepath.Join(t.TempDir(), "a")
	b := filepath.Join(t.TempDir(), "b")

	old := umask(0o022)
	build(t, a, ents)
	// The second copy: reverse creation order, another umask, other mtimes
	// and, when we can, other owners.
	umask(0o077)
	rev := slices.Clone(ents)
	slices.Reverse(rev)
	build(t, b, rev)
	umask(old)
	i := 0
	filepath.WalkDir(b, func(p string, d fs.DirEntry, err error) error {
		i++
		when := time.Unix(1_000_000_000+int64(i)*7777, int64(i))
		if d.Type()&fs.ModeSymlink == 0 {
			os.Chtimes(p, when, when)
		}
		if os.Geteuid() == 0 {
			if err := os.Lchown(p, 1000+i, 2000+i); err != nil {
				t.Fatal(err)
			}
		}
		return nil
	})

	// The root's mode is archived ("./"), as any directory's: the same
	// tree has the same root mode.
	for _, r := range []string{a, b} {
		if err := os.Chmod(r, 0o750); err != nil {
			t.Fatal(err)
		}
	}
	ta, ma := writeTar(t, a, WriteOptions{})
	tb, mb := writeTar(t, b, WriteOptions{Workers: 1})
	if !bytes.Equal(ta, tb) {
		t.Fatalf("archives of the same tree differ (%d vs %d bytes)", len(ta), len(tb))
	}
	if !reflect.DeepEqual(ma, mb) {
		t.Fatalf("manifests differ:\n%+v\n%+v", ma, mb)
	}
	if again, _ := writeTar(t, a, WriteOptions{Workers: 3}); !bytes.Equal(ta, again) {
		t.Fatal("second write of the same tree differs")
	}

	// The format contract of the package documentation.
	var want []string
	for _, e := range ents {
		want = append(want, e.path)
	}
	slices.Sort(want)                      // byte order of full entry names
	want = append([]string{"./"}, want...) // the root first, with its own mode
	var got []string
	tr := tar.NewReader(bytes.NewReader(ta))
	for {
		h, err := tr.Next()
		if err == io.EOF {
			break
		}
		if err != nil {
			t.Fatal(err)
		}
		got = append(got, h.Name)
		spec := entry{mode: 0o750} // the root's (chmod above)
		for _, e := range ents {
			if e.path == h.Name {
				spec = e
			}
		}
		wantType := byte(tar.TypeReg)
		switch {
		case strings.HasSuffix(h.Name, "/"):
			wantType = tar.TypeDir
		case spec.link != "":
			// A symlink: its target verbatim, mode 0777 (a link has none
			// of its own).
			wantType, spec.mode = tar.TypeSymlink, 0o777
		}
		if h.Typeflag != wantType || h.Format != tar.FormatGNU || h.Uid != 0 || h.Gid != 0 ||
			h.Uname != "" || h.Gname != "" || h.ModTime.Unix() != 0 || !h.AccessTime.IsZero() ||
			!h.ChangeTime.IsZero() || h.PAXRecords != nil || fs.FileMode(h.Mode) != spec.mode ||
			h.Devmajor != 0 || h.Devminor != 0 || h.Linkname != spec.link {
			t.Errorf("header %s: %+v", h.Name, h)
		}
		if wantType == tar.TypeReg {
			body, _ := io.ReadAll(tr)
			if string(body) != spec.content {
				t.Errorf("%s: content differs", h.Name)
			}
		}
	}
	if !slices.Equal(got, want) {
		t.Fatalf("entry order:\n got %q\nwant %q", got, want)
	}
	if !bytes.Contains(ta, []byte("././@LongLink")) {
		t.Error("long name not written as a GNU long-name entry")
	}
	if bytes.Contains(ta, []byte("PaxHeaders")) {
		t.Error("PAX header written")
	}
	// Two zero blocks end the archive, with nothing after them.
	if len(ta)%512 != 0 || !bytes.Equal(ta[len(ta)-1024:], make([]byte, 1024)) {
		t.Error("archive does not end with two zero blocks")
	}
}

func TestWriteManifest(t *testing.T) {
	src := t.TempDir()
	build(t, src, testTree())
	if err := mkfifo(filepath.Join(src, "fifo")); err != nil {
		t.Fatal(err)
	}
	_, m := writeTar(t, src, WriteOptions{})
	checkManifest(t, src, m, "fifo")
	if len(m.Skipped) != 1 || m.Skipped[0] != (Skipped{"fifo", "fifo"}) {
		t.Errorf("skipped = %+v", m.Skipped)
	}
	var paths []string
	var total int64
	for _, f := range m.Files {
		paths = append(paths, f.Path)
		total += f.Size
	}
	if !slices.IsSorted(paths) || m.Bytes != total {
		t.Errorf("manifest files %q (%d bytes, want %d): not in archive order", paths, m.Bytes, total)
	}
	for _, name := range []string{"bundle.lock.json", "receipts.ndjson", ".hidden", longName} {
		if !slices.Contains(paths, name) {
			t.Errorf("%s not archived", name)
		}
	}
}

func TestWriteErrors(t *testing.T) {
	ctx := t.Context()

	t.Run("missing root", func(t *testing.T) {
		if _, err := Write(ctx, io.Discard, filepath.Join(t.TempDir(), "nope"), WriteOptions{}); err == nil {
			t.Fatal("want error")
		}
	})
	t.Run("invalid UTF-8 name", func(t *testing.T) {
		dir := t.TempDir()
		os.WriteFile(filepath.Join(dir, "bad\xff"), nil, 0o644)
		if _, err := Write(ctx, io.Discard, dir, WriteOptions{}); !errors.Is(err, ErrName) {
			t.Fatalf("err = %v, want ErrName", err)
		}
	})
	// The reader goroutines open and stat every file of a batch before the
	// writer emits the first one, and a big file is streamed in chunks of
	// pipeChunk bytes, the first of which reaches w (bufio passes a write
	// bigger than its buffer straight through) before the second is read:
	// changing b then is a change during the archive.
	big := strings.Repeat("b", 4*pipeChunk)
	for _, tt := range []struct {
		name   string
		change func(p string) error
	}{
		{"file grows", func(p string) error {
			f, err := os.OpenFile(p, os.O_APPEND|os.O_WRONLY, 0)
			if err != nil {
				return err
			}
			defer f.Close()
			_, err = f.WriteString("more")
			return err
		}},
		{"file shrinks", func(p string) error { return os.Truncate(p, smallMax) }},
	} {
		t.Run(tt.name, func(t *testing.T) {
			dir := t.TempDir()
			build(t, dir, []entry{{path: "a", mode: 0o644, content: "a"}, {path: "b", mode: 0o644, content: big}})
			w := &hookWriter{hook: func() {
				if err := tt.change(filepath.Join(dir, "b")); err != nil {
					t.Error(err)
				}
			}}
			_, err := Write(ctx, w, dir, WriteOptions{})
			if !errors.Is(err, ErrChanged) || !strings.Contains(err.Error(), "b") {
				t.Fatalf("err = %v, want ErrChanged naming b", err)
			}
		})
	}
	t.Run("file vanishes", func(t *testing.T) {
		// At most batchCount×batchJobs entries are read ahead. The first
		// write to w comes after 64 KiB of output, 64 one-byte files, so
		// the last file is listed but not yet opened then.
		dir := t.TempDir()
		n := batchCount*batchJobs + 200
		for i := range n {
			os.WriteFile(filepath.Join(dir, fmt.Sprintf("f%04d", i)), []byte("x"), 0o644)
		}
		last := fmt.Sprintf("f%04d", n-1)
		w := &hookWriter{hook: func() { os.Remove(filepath.Join(dir, last)) }}
		_, err := Write(ctx, w, dir, WriteOptions{})
		if !errors.Is(err, ErrChanged) || !strings.Contains(err.Error(), last) {
			t.Fatalf("err = %v, want ErrChanged naming %s", err, last)
		}
	})
	t.Run("canceled", func(t *testing.T) {
		dir := t.TempDir()
		build(t, dir, testTree())
		cctx, cancel := context.WithCancel(ctx)
		cancel()
		if _, err := Write(cctx, io.Discard, dir, WriteOptions{}); err == nil {
			t.Fatal("want error")
		}
	})
	t.Run("writer fails", func(t *testing.T) {
		dir := t.TempDir()
		build(t, dir, testTree())
		if _, err := Write(ctx, failWriter{}, dir, WriteOptions{}); err == nil {
			t.Fatal("want error")
		}
	})
}

// hookWriter runs hook once, on the first write that reaches it.
type hookWriter struct {
	hook func()
	done bool
}

func (w *hookWriter) Write(p []byte) (int, error) {
	if !w.done {
		w.done = true
		w.hook()
	}
	return len(p), nil
}

type failWriter struct{}

func (failWriter) Write([]byte) (int, error) { return 0, errors.New("disk full") }

func TestRoundTrip(t *testing.T) {
	src := t.TempDir()
	build(t, src, testTree())
	// A big file that goes through the hash pipes on both sides.
	os.WriteFile(filepath.Join(src, "memory.db"), bytes.Repeat([]byte("0123456789abcdef"), 300_000), 0o600)
	data, wm := writeTar(t, src, WriteOptions{})
	dst := filepath.Join(t.TempDir(), "restored")
	makeRemovable(t, dst)
	em, err := Extract(t.Context(), bytes.NewReader(data), dst, ExtractOptions{})
	if err != nil {
		t.Fatal(err)
	}
	want := state(t, src)
	if got := state(t, dst); fmt.Sprint(got) != fmt.Sprint(want) {
		t.Fatalf("restored tree differs:\n got %v\nwant %v", keys(got), keys(want))
	}
	if fmt.Sprint(em.Files) != fmt.Sprint(wm.Files) || fmt.Sprint(em.Dirs) != fmt.Sprint(wm.Dirs) || em.Bytes != wm.Bytes {
		t.Fatalf("manifests differ:\n%+v\n%+v", wm, em)
	}
	checkManifest(t, dst, em)
	for _, f := range em.Files {
		if f.Path == "memory.db" && f.SHA256 != sha256.Sum256(bytes.Repeat([]byte("0123456789abcdef"), 300_000)) {
			t.Error("memory.db hash wrong")
		}
	}
}

func keys(m map[string]string) []string {
	var out []string
	for k, v := range m {
		if len(v) > 40 {
			v = v[:40]
		}
		out = append(out, k+"="+v)
	}
	slices.Sort(out)
	return out
}
