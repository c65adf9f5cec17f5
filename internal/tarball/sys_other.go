//go:build !linux

package tarball

import (
	"errors"
	"io"
	"io/fs"
	"os"
	"syscall"
)

// Portable fallback for sys_linux.go, built on os.Root.

type handle struct {
	f    *os.File
	root *os.Root
}

var noHandle = handle{}

const openFileFlags = 0

func openRoot(p string) (handle, error) {
	r, err := os.OpenRoot(p)
	if err != nil {
		return noHandle, err
	}
	return handle{root: r}, nil
}

func openBeneath(root handle, rel string, _ int) (handle, error) {
	if rel == "" {
		rel = "."
	}
	fi, err := root.root.Lstat(rel)
	if err != nil {
		return noHandle, err
	}
	if fi.Mode()&fs.ModeSymlink != 0 {
		return noHandle, syscall.ELOOP
	}
	f, err := root.root.Open(rel)
	if err != nil {
		return noHandle, err
	}
	return handle{f: f}, nil
}

func (h handle) close() {
	if h.f != nil {
		h.f.Close()
	}
	if h.root != nil {
		h.root.Close()
	}
}

func (h handle) read(b []byte) (int, error) {
	n, err := h.f.Read(b)
	if err == io.EOF {
		err = nil
	}
	return n, err
}

type fileInfo struct{ fs.FileInfo }

func (h handle) stat(_ string, fi *fileInfo) error {
	st, err := h.f.Stat()
	if err != nil {
		return err
	}
	fi.FileInfo = st
	return nil
}

type dirent struct {
	name string
	typ  fs.FileMode
}

func readDir(root handle, rel string, _ []byte, dfi *fileInfo) ([]dirent, error) {
	d, err := openBeneath(root, rel, 0)
	if err != nil {
		return nil, err
	}
	defer d.close()
	if err := d.stat(rel, dfi); err != nil {
		return nil, err
	}
	if !dfi.IsDir() {
		return nil, syscall.ENOTDIR
	}
	list, err := d.f.ReadDir(-1)
	if err != nil {
		return nil, err
	}
	ents := make([]dirent, 0, len(list))
	for _, e := range list {
		ents = append(ents, dirent{name: e.Name(), typ: e.Type()})
	}
	return ents, nil
}

func isVanished(err error) bool {
	return errors.Is(err, fs.ErrNotExist) || errors.Is(err, syscall.ENOTDIR) || errors.Is(err, syscall.ELOOP)
}
