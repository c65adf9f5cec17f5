package fsys

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
)

// ErrSymlink matches a path that is, or passes through, a symbolic link.
var ErrSymlink = errors.New("path is or passes through a symbolic link")

// CheckNoSymlink fails with ErrSymlink, naming the link and its target,
// when the absolute path p or any of its parents is a symbolic link that
// someone other than root could have made or could change. Components
// that do not exist yet are fine (they will be created as directories).
// hermesd refuses such a brain or state directory unless the
// configuration allows it: a link swapped under a running daemon would
// make it snapshot, or write into, somewhere else entirely. A link that
// only root controls (owned by root, in a directory only root can write,
// such as macOS's /var -> /private/var) is part of the system, not an
// attack.
func CheckNoSymlink(p string) error {
	if !filepath.IsAbs(p) {
		return fmt.Errorf("%s: not an absolute path", p)
	}
	p = filepath.Clean(p)
	for cur := p; ; cur = filepath.Dir(cur) {
		st, err := os.Lstat(cur)
		switch {
		case errors.Is(err, fs.ErrNotExist):
		case err != nil:
			return err
		case st.Mode()&fs.ModeSymlink != 0 && !rootOnly(st, filepath.Dir(cur)):
			target, _ := os.Readlink(cur)
			return fmt.Errorf("%w: %s -> %s", ErrSymlink, cur, target)
		}
		if parent := filepath.Dir(cur); parent == cur {
			return nil
		}
	}
}

// MaxSymlinkLen bounds a symlink's target in bytes: Linux's limit
// (PATH_MAX less its NUL). hermesd stores and restores targets of 1 to
// MaxSymlinkLen bytes, verbatim (any bytes but NUL: absolute, with "..",
// not UTF-8), and never follows one.
const MaxSymlinkLen = 4095

// ErrSymlinkTarget matches a symlink target hermesd cannot keep: empty,
// longer than MaxSymlinkLen bytes, or holding a NUL byte (none of which
// the system can create).
var ErrSymlinkTarget = errors.New("symlink target cannot be created (empty, NUL, or longer than 4095 bytes)")

// errNotSymlink: Readlink found something else at the path (IsGone).
var errNotSymlink = errors.New("no longer a symlink")

// CheckSymlinkTarget checks that target can be created as a symlink's
// target: 1 to MaxSymlinkLen bytes, no NUL. Nothing else is refused:
// where a link points is the brain's business, and hermesd never follows
// one (errors match ErrSymlinkTarget).
func CheckSymlinkTarget(target string) error {
	if target == "" || len(target) > MaxSymlinkLen || strings.IndexByte(target, 0) >= 0 {
		return fmt.Errorf("%w: %d bytes", ErrSymlinkTarget, len(target))
	}
	return nil
}
