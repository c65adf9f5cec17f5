// Package atomicfile replaces files so that a crash leaves either the old
// content or the new, never a mix: write a temporary file in the same
// directory, fsync it, rename it over the target, fsync the directory.
package atomicfile

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
)

// File is a pending replacement of a file. Write to it, then Commit; Abort
// (safe after Commit, so it can be deferred) discards it.
type File struct {
	*os.File
	path string
	done bool
}

// Create starts replacing path. The temporary file lives beside it, so the
// final rename never crosses filesystems.
func Create(path string, perm os.FileMode) (*File, error) {
	dir, base := filepath.Split(path)
	if dir == "" {
		dir = "."
	}
	f, err := os.CreateTemp(dir, "."+base+".tmp-*")
	if err != nil {
		return nil, fmt.Errorf("create temp for %s: %w", base, err)
	}
	if err := f.Chmod(perm); err != nil {
		f.Close()
		os.Remove(f.Name())
		return nil, fmt.Errorf("chmod temp for %s: %w", base, err)
	}
	return &File{File: f, path: path}, nil
}

// Commit flushes the data to disk and renames it over the target.
func (f *File) Commit() error {
	if f.done {
		return errors.New("atomicfile: already committed or aborted")
	}
	f.done = true
	tmp := f.Name()
	if err := f.Sync(); err != nil {
		f.File.Close()
		os.Remove(tmp)
		return fmt.Errorf("sync %s: %w", f.path, err)
	}
	if err := f.File.Close(); err != nil {
		os.Remove(tmp)
		return fmt.Errorf("close %s: %w", f.path, err)
	}
	if err := os.Rename(tmp, f.path); err != nil {
		os.Remove(tmp)
		return fmt.Errorf("replace %s: %w", f.path, err)
	}
	return SyncDir(filepath.Dir(f.path))
}

// Abort discards the replacement. It does nothing after Commit.
func (f *File) Abort() {
	if f.done {
		return
	}
	f.done = true
	f.File.Close()
	os.Remove(f.Name())
}

// WriteFile atomically replaces path with data.
func WriteFile(path string, data []byte, perm os.FileMode) error {
	f, err := Create(path, perm)
	if err != nil {
		return err
	}
	defer f.Abort()
	if _, err := f.Write(data); err != nil {
		return fmt.Errorf("write %s: %w", path, err)
	}
	return f.Commit()
}

// SyncDir fsyncs a directory so that renames and creations in it are durable.
func SyncDir(dir string) error {
	d, err := os.Open(dir)
	if err != nil {
		return fmt.Errorf("open dir for sync: %w", err)
	}
	defer d.Close()
	if err := d.Sync(); err != nil {
		return fmt.Errorf("sync dir %s: %w", dir, err)
	}
	return nil
}
