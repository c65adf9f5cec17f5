// Package atomicfile replaces files so that a crash leaves either the old
// content or the new, never a mix: write the new content to a temporary
// file in the same directory, fsync it, rename it over the target, fsync
// the directory.
//
// The brain directory is hashed by the agent runtime too (dotfiles
// included), so a temporary file must not be visible in it under a name of
// its own for longer than an instant (DESIGN §3). On Linux the temporary
// file is therefore created unnamed (O_TMPFILE) and linked under a
// temporary name only right before the rename; a crash while it is being
// written leaves nothing behind. Where O_TMPFILE is not available (other
// systems, or a filesystem without it) a named temporary file is used, and
// TempPattern says what its name looks like so that leftovers of a crash
// can be recognised.
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
