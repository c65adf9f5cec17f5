//go:build !linux

package hash

import (
	"errors"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"syscall"
)

// Portable fallback for the Linux fast path in sys_linux.go: os.Root keeps
// every access beneath the root. It is slower (more syscalls per file) and
// the cache compares size, mtime and mode only.

type handle struct {
	f    *os.File
	root *os.Root
}

var noHandle = handle{}

func openRoot(path string) (handle, error) {
	r, err := os.OpenRoot(path)
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

func (h handle) stat() (fileStat, error) {
	fi, err := h.f.Stat()
	if err != nil {
		return fileStat{}, err
	}
	return statFromInfo(fi), nil
}

func lstatAt(root handle, rel string) (fileStat, error) {
	fi, err := root.root.Lstat(filepath.FromSlash(rel))
	if err != nil {
		return fileStat{}, err
	}
	return statFromInfo(fi), nil
}

func statBeneath(root handle, rel string) (fileStat, error) { return lstatAt(root, rel) }

func statFromInfo(fi fs.FileInfo) fileStat {
	return fileStat{size: fi.Size(), mtime: fi.ModTime().UnixNano(), mode: fi.Mode()}
}

func readDir(root handle, rel string, _ []byte) ([]dirent, fileStat, error) {
	d, err := openBeneath(root, rel, 0)
	if err != nil {
		return nil, fileStat{}, err
	}
	defer d.close()
	dst, err := d.stat()
	if err != nil {
		return nil, fileStat{}, err
	}
	if !dst.isDir() {
		return nil, fileStat{}, syscall.ENOTDIR
	}
	list, err := d.f.ReadDir(-1)
	if err != nil {
		return nil, fileStat{}, err
	}
	ents := make([]dirent, 0, len(list))
	for _, e := range list {
		ents = append(ents, dirent{name: e.Name(), kind: kindOf(e.Type())})
	}
	return ents, dst, nil
}

func isVanished(err error) bool {
	return errors.Is(err, fs.ErrNotExist) || errors.Is(err, syscall.ENOTDIR) || errors.Is(err, syscall.ELOOP)
}

const openFileFlags = 0

func statFromFileInfo(fi fs.FileInfo) (fileStat, bool) {
	if fi == nil {
		return fileStat{}, false
	}
	return statFromInfo(fi), true
}
