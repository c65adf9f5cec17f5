package repo

import (
	"bytes"
	"io"
	"os"
	"syscall"
	"testing"
)

// A pack's file holds it in one piece at Start, after a hole that takes
// no space; Window maps any part of it, one window at a time; the reader
// is a syscall.Conn positioned at the pack (for sendfile).
func TestPackFileWindow(t *testing.T) {
	keys := testKeys(t, testIdentity)
	pw, err := NewPackWriter(keys, t.TempDir(), 4<<20)
	if err != nil {
		t.Fatal(err)
	}
	for i := range 30 {
		id, obj, err := keys.Seal(TypeChunk, randomBytes(uint64(i), 1000+i*4099))
		if err != nil {
			t.Fatal(err)
		}
		if err := pw.Add(TypeChunk, id, obj); err != nil {
			t.Fatal(err)
		}
	}
	p, err := pw.Finish(nil)
	if err != nil {
		t.Fatal(err)
	}
	defer p.Discard()
	rc, err := p.Open()
	if err != nil {
		t.Fatal(err)
	}
	whole, err := io.ReadAll(rc)
	if err != nil || rc.Close() != nil || int64(len(whole)) != p.Size {
		t.Fatalf("read pack: %d bytes of %d, %v", len(whole), p.Size, err)
	}
	if p.Start <= 0 {
		t.Fatalf("pack at %d: its prefix should follow a hole", p.Start)
	}
	var st syscall.Stat_t
	if err := syscall.Stat(p.Path, &st); err != nil {
		t.Fatal(err)
	}
	if st.Size != p.Start+p.Size || st.Blocks*512 > p.Size+1<<20 {
		t.Fatalf("spool of %d bytes (pack at %d, %d long) occupies %d: the hole should take no space", st.Size, p.Start, p.Size, st.Blocks*512)
	}
	rc, err = p.Open()
	if err != nil {
		t.Fatal(err)
	}
	defer rc.Close()
	pf := rc.(*PackFile)
	if _, ok := rc.(syscall.Conn); !ok {
		t.Fatal("a pack reader is not a syscall.Conn: uploads would not use sendfile")
	}
	page := int64(os.Getpagesize())
	for _, w := range []struct{ off, n int64 }{
		{0, p.Size}, {0, 1}, {1, page}, {page - 1, 2}, {page, page}, {p.Size - 1, 1}, {p.Size / 3, p.Size / 3}, {0, 1},
	} {
		b, err := pf.Window(w.off, w.n)
		if err != nil {
			t.Fatalf("Window(%d, %d): %v", w.off, w.n, err)
		}
		if !bytes.Equal(b, whole[w.off:w.off+w.n]) {
			t.Fatalf("Window(%d, %d) maps other bytes", w.off, w.n)
		}
	}
	for _, w := range []struct{ off, n int64 }{{-1, 2}, {0, 0}, {p.Size, 1}, {p.Size - 1, 2}, {1, p.Size}} {
		if _, err := pf.Window(w.off, w.n); err == nil {
			t.Errorf("Window(%d, %d) outside a pack of %d bytes maps", w.off, w.n, p.Size)
		}
	}
	// ReadAt reads the pack's bytes at offsets from its start, whatever
	// the file's offset, and ends at the pack's end.
	for _, w := range []struct{ off, n int64 }{{0, 1}, {p.Size - 10, 10}, {p.Size / 2, 4096}} {
		b := make([]byte, w.n)
		if n, err := pf.ReadAt(b, w.off); n != len(b) || err != nil || !bytes.Equal(b, whole[w.off:w.off+w.n]) {
			t.Fatalf("ReadAt(%d bytes at %d): %d, %v", w.n, w.off, n, err)
		}
	}
	tail := make([]byte, 20)
	if n, err := pf.ReadAt(tail, p.Size-10); n != 10 || err != io.EOF || !bytes.Equal(tail[:10], whole[p.Size-10:]) {
		t.Fatalf("ReadAt past the pack's end: %d, %v (want 10 bytes and EOF)", n, err)
	}
	if _, err := pf.ReadAt(tail, p.Size); err != io.EOF {
		t.Fatalf("ReadAt at the pack's end: %v, want EOF", err)
	}
	// Reading still starts at the pack after windows and ReadAt.
	b, err := io.ReadAll(rc)
	if err != nil || !bytes.Equal(b, whole) {
		t.Fatalf("read after windows: %d bytes, %v", len(b), err)
	}
}
