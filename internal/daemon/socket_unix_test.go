//go:build unix

package daemon

import (
	"io/fs"
	"os"
	"path/filepath"
	"sync/atomic"
	"syscall"
	"testing"
)

// TestSocketMode: the socket appears at its path with the configured
// mode, never with the umask's, even under umask 0 (a socket bound in
// place is 0777 until the chmod); it is removed on Close and leaves
// nothing beside it.
func TestSocketMode(t *testing.T) {
	old := syscall.Umask(0)
	defer syscall.Umask(old)
	dir := t.TempDir()
	p := filepath.Join(dir, "s.sock")
	for _, mode := range []fs.FileMode{0o600, 0o660} {
		// Watch the path while the socket is created.
		var wrong atomic.Uint32
		stop, done := make(chan struct{}), make(chan struct{})
		go func() {
			defer close(done)
			for {
				select {
				case <-stop:
					return
				default:
				}
				if st, err := os.Lstat(p); err == nil && st.Mode().Perm() != mode {
					wrong.Store(uint32(st.Mode().Perm()) | 1<<31)
				}
			}
		}()
		ln, err := listenUnix(p, mode)
		close(stop)
		<-done
		if err != nil {
			t.Fatal(err)
		}
		if w := wrong.Load(); w != 0 {
			t.Errorf("mode %04o: the socket was visible with mode %04o", mode, w&0o777)
		}
		st, err := os.Lstat(p)
		if err != nil || st.Mode().Type() != fs.ModeSocket || st.Mode().Perm() != mode {
			t.Errorf("mode %04o: %v %v", mode, st.Mode(), err)
		}
		if ln.Addr().String() != p {
			t.Errorf("Addr = %s, want %s", ln.Addr(), p)
		}
		if ents, _ := os.ReadDir(dir); len(ents) != 1 {
			t.Errorf("beside the socket: %v", ents)
		}
		ln.Close()
		if _, err := os.Lstat(p); err == nil {
			t.Errorf("socket left behind after Close")
		}
	}
	// A stale socket of an earlier run is replaced; a regular file is not.
	ln, err := listenUnix(p, 0o600)
	if err != nil {
		t.Fatal(err)
	}
	ln.(*unixListener).UnixListener.Close() // as if the process had died
	if ln, err = listenUnix(p, 0o600); err != nil {
		t.Fatalf("stale socket not replaced: %v", err)
	}
	if _, err := listenUnix(p, 0o600); err == nil {
		t.Error("a socket in use was replaced")
	}
	ln.Close()
	if err := os.WriteFile(p, []byte("not a socket"), 0o600); err != nil {
		t.Fatal(err)
	}
	if _, err := listenUnix(p, 0o600); err == nil {
		t.Error("a regular file was replaced by the socket")
	}
}
