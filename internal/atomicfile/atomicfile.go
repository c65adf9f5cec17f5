// Package atomicfile replaces files so that a crash leaves either the old
// content or the new, never a mix: write the new content to a temporary
// file in the same directory, fsync it, rename it over the target, fsync
// the directory.
//
// The brain directory is hashed by the agent runtime too (dotfiles
// included), so a temporary file must not be visible in it
// (docs/design.md §3).
// CreateOutside keeps the temporary file in the parent directory, when
// that is on the same filesystem and writable, and renames it into place:
// it never appears in the brain at all. Otherwise, and for Create, the
// temporary file is created unnamed (O_TMPFILE, on Linux) and linked under
// a temporary name only right before the rename, so it is visible for an
// instant and a crash while it is written leaves nothing behind. Where
// O_TMPFILE is not available a named temporary file is used; TempPrefix
// and OutsidePrefix say what the names look like, so that leftovers of a
// crash can be recognised.
package atomicfile

import (
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
)

// File is a pending replacement of a file. Write to it, then Commit; Abort
// (safe after Commit, so it can be deferred) discards it.
type File struct {
	*os.File
	path    string
	dir     string
	base    string
	perm    os.FileMode
	unnamed bool // O_TMPFILE: no directory entry until Commit
	done    bool
}

// TempPrefix returns the prefix of the temporary names used while
// replacing base: "." + base + ".tmp-".
func TempPrefix(base string) string { return "." + base + ".tmp-" }

// IsTemp reports whether name is a temporary name this package uses for
// some file (a leftover of a crash, when seen outside a Commit).
func IsTemp(name string) bool {
	return strings.HasPrefix(name, ".") && strings.Contains(name, ".tmp-")
}

// Create starts replacing path. The temporary file lives in the same
// directory, so the final rename never crosses filesystems.
func Create(path string, perm os.FileMode) (*File, error) {
	dir, base := filepath.Split(path)
	if dir == "" {
		dir = "."
	}
	af := &File{path: path, dir: dir, base: base, perm: perm}
	if f, err := openUnnamed(dir, perm); err == nil {
		af.File, af.unnamed = f, true
	} else {
		f, err := os.CreateTemp(dir, TempPrefix(base)+"*")
		if err != nil {
			return nil, fmt.Errorf("create temp for %s: %w", base, err)
		}
		af.File = f
	}
	// The mode must not depend on the umask.
	if err := af.Chmod(perm); err != nil {
		af.Abort()
		return nil, fmt.Errorf("chmod temp for %s: %w", base, err)
	}
	return af, nil
}

// OutsidePrefix returns the path prefix of the temporary files
// CreateOutside keeps outside path's directory: in its parent, named
// "." + the directory's name + "." + the file's name + ".tmp-".
func OutsidePrefix(path string) string {
	dir, base := filepath.Split(filepath.Clean(path))
	dir = filepath.Clean(dir)
	return filepath.Join(filepath.Dir(dir), "."+filepath.Base(dir)+"."+base+".tmp-")
}

// CreateOutside starts replacing path like Create, with the temporary file
// outside path's directory (see the package doc), so that whoever scans
// that directory never sees it.
func CreateOutside(path string, perm os.FileMode) (*File, error) {
	dir := filepath.Dir(filepath.Clean(path))
	parent := filepath.Dir(dir)
	if parent != dir && sameDevice(dir, parent) {
		prefix := OutsidePrefix(path)
		if f, err := os.CreateTemp(filepath.Dir(prefix), filepath.Base(prefix)+"*"); err == nil {
			af := &File{File: f, path: path, dir: dir, base: filepath.Base(path), perm: perm}
			if err := af.Chmod(perm); err != nil {
				af.Abort()
				return nil, fmt.Errorf("chmod temp for %s: %w", af.base, err)
			}
			return af, nil
		}
	}
	return Create(path, perm)
}

// Commit flushes the data to disk and renames it over the target.
func (f *File) Commit() error {
	if f.done {
		return errors.New("atomicfile: already committed or aborted")
	}
	f.done = true
	if err := f.Sync(); err != nil {
		f.discard()
		return fmt.Errorf("sync %s: %w", f.path, err)
	}
	tmp := f.Name()
	if f.unnamed {
		name, err := tempName(f.base)
		if err != nil {
			f.File.Close()
			return err
		}
		tmp = filepath.Join(f.dir, name)
		if err := linkUnnamed(f.File, tmp); err != nil {
			f.File.Close()
			return fmt.Errorf("link %s: %w", f.path, err)
		}
	}
	if err := f.File.Close(); err != nil {
		os.Remove(tmp)
		return fmt.Errorf("close %s: %w", f.path, err)
	}
	if err := os.Rename(tmp, f.path); err != nil {
		os.Remove(tmp)
		return fmt.Errorf("replace %s: %w", f.path, err)
	}
	if td := filepath.Dir(tmp); td != f.dir {
		if err := SyncDir(td); err != nil {
			return err
		}
	}
	return SyncDir(f.dir)
}

// Abort discards the replacement. It does nothing after Commit.
func (f *File) Abort() {
	if f.done {
		return
	}
	f.done = true
	f.discard()
}

func (f *File) discard() {
	name := f.Name()
	f.File.Close()
	if !f.unnamed {
		os.Remove(name)
	}
}

func tempName(base string) (string, error) {
	var b [8]byte
	if _, err := rand.Read(b[:]); err != nil {
		return "", err
	}
	return TempPrefix(base) + hex.EncodeToString(b[:]), nil
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
