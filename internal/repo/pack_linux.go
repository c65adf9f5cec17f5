package repo

import (
	"fmt"
	"os"

	"golang.org/x/sys/unix"
)

// Window returns bytes [off, off+n) of the pack, mapped read-only from its
// file and valid until the next Window or Close (which unmap them): the
// read-back check compares against them without reading the spool through
// a buffer. Windows keep what is mapped, and so counted in the process's
// resident set, small. The spool is the builder's own file, which nothing
// truncates while the pack lives.
func (r *PackFile) Window(off, n int64) ([]byte, error) {
	if r.unmap != nil {
		if err := r.unmap(); err != nil {
			return nil, err
		}
		r.unmap = nil
	}
	if off < 0 || n <= 0 || off > r.end-r.start-n {
		return nil, fmt.Errorf("repo: window [%d, +%d) outside a pack of %d bytes", off, n, r.end-r.start)
	}
	at := r.start + off
	base := at &^ (int64(os.Getpagesize()) - 1)
	rc, err := r.f.SyscallConn()
	if err != nil {
		return nil, err
	}
	var b []byte
	var merr error
	if err := rc.Control(func(fd uintptr) {
		b, merr = unix.Mmap(int(fd), base, int(at+n-base), unix.PROT_READ, unix.MAP_SHARED|unix.MAP_POPULATE)
	}); err != nil {
		return nil, err
	}
	if merr != nil {
		return nil, fmt.Errorf("repo: map pack spool: %w", merr)
	}
	r.unmap = func() error { return unix.Munmap(b) }
	return b[at-base:], nil
}
