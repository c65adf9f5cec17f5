// Package secretfile reads and writes the small files that hold hermesd's
// secrets: snapshot keys, Seal master and Sui keys, chain keys, keystore
// passwords, tokens. It is the one place that decides what such a file
// may look like, so every secret hermesd loads from disk is held to the
// same rule.
//
// The rule: a regular file (a symbolic link to one is followed, because
// Kubernetes mounts Secrets through links), not accessible in any way by
// others, not writable or executable by its group, and no larger than the
// caller's bound, so a wrong path (a log, a device) is harmless. Group read
// is allowed: systemd LoadCredential= and Kubernetes fsGroup mounts deliver
// secrets as 0440 or 0640. The file, and every symbolic link on the way to
// it, belongs to the user hermesd runs as or to root: the ownership rule
// of package fsys (fsys.CheckOwner), the same that holds for the state
// directory, since whoever owns a key file or a link to it can swap the
// key. A new secret file is created 0600, never over an existing one, and
// synced with its directory.
//
// The package imports only fsys of this module, so every leaf can use it.
package secretfile

import (
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"

	"github.com/hermesd/hermesd/internal/fsys"
)

var (
	// ErrNotRegular: the path is a directory, device, fifo or socket.
	ErrNotRegular = errors.New("not a regular file")
	// ErrMode: others can access the file, or its group can write or
	// execute it.
	ErrMode = errors.New("accessible by others or writable by its group")
	// ErrTooLarge: the file holds more than the caller's bound.
	ErrTooLarge = errors.New("larger than its bound")
)

// Allowed reports whether perm is acceptable for a secret file: any
// permission for the owner, read for the group, nothing for others.
func Allowed(perm fs.FileMode) bool { return perm.Perm()&0o037 == 0 }

// Read returns the contents of the secret file at path, at most max bytes.
// It refuses a file that is not regular (ErrNotRegular), one whose mode
// others can use or its group can write (ErrMode; the error says how to
// fix it), one larger than max (ErrTooLarge), and one that, or a link to
// which on the way, belongs to another user than hermesd's or root
// (fsys.ErrForeignOwner). The mode and owner are checked on the open
// file, so the file read is the file checked, and a fifo is opened
// without waiting for a writer. Errors name the path, never the contents.
func Read(path string, max int64) ([]byte, error) {
	if err := fsys.CheckLinkOwners(path); err != nil {
		return nil, fmt.Errorf("secret %s: %w", path, err)
	}
	f, err := os.OpenFile(path, os.O_RDONLY|nonblock, 0)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	fi, err := f.Stat()
	if err != nil {
		return nil, err
	}
	if !fi.Mode().IsRegular() {
		return nil, fmt.Errorf("%s: %w", path, ErrNotRegular)
	}
	if perm := fi.Mode().Perm(); !Allowed(perm) {
		return nil, fmt.Errorf("%s is %w (mode %04o); restrict it with 'chmod 600 %s'", path, ErrMode, perm, path)
	}
	if err := fsys.CheckOwner(path, fi); err != nil {
		return nil, err
	}
	b, err := io.ReadAll(io.LimitReader(f, max+1))
	if err != nil {
		return nil, fmt.Errorf("read %s: %w", path, err)
	}
	if int64(len(b)) > max {
		return nil, fmt.Errorf("%s is %w of %d bytes", path, ErrTooLarge, max)
	}
	return b, nil
}

// Create writes data to a new file at path with mode 0600 (whatever the
// umask), syncs it and its directory. It never overwrites: if path exists
// the error wraps fs.ErrExist. On failure nothing is left at path.
func Create(path string, data []byte) (err error) {
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o600)
	if err != nil {
		if errors.Is(err, fs.ErrExist) {
			return fmt.Errorf("%s: %w; refusing to overwrite it", path, fs.ErrExist)
		}
		return err
	}
	defer func() {
		if err != nil {
			f.Close()
			os.Remove(path)
		}
	}()
	// O_CREATE's mode is filtered by the umask, which can only remove bits;
	// Chmod makes the mode exact anyway, in case the file system disagrees.
	if err := f.Chmod(0o600); err != nil {
		return err
	}
	if _, err := f.Write(data); err != nil {
		return err
	}
	if err := f.Sync(); err != nil {
		return err
	}
	if err := f.Close(); err != nil {
		return err
	}
	d, err := os.Open(filepath.Dir(path))
	if err != nil {
		return err
	}
	defer d.Close()
	return d.Sync()
}
