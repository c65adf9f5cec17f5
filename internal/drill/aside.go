package drill

import (
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"

	"github.com/hermesd/hermesd/internal/atomicfile"
)

// aside is a brain directory moved out of the way by the destructive drill:
// the safety net of the wipe.
type aside struct {
	brain     string // where the brain lives
	container string // .<name>.drill-XXXX beside it
	copy      string // container/<name>: the original brain
}

// moveAside renames brain to a sibling directory. A rename within one
// directory is atomic and copies nothing.
func moveAside(brain string) (*aside, error) {
	parent, name := filepath.Dir(brain), filepath.Base(brain)
	c, err := os.MkdirTemp(parent, "."+name+".drill-")
	if err != nil {
		return nil, fmt.Errorf("create aside directory: %w", err)
	}
	a := &aside{brain: brain, container: c, copy: filepath.Join(c, name)}
	if err := os.Rename(brain, a.copy); err != nil {
		os.Remove(c)
		return nil, fmt.Errorf("move brain aside: %w", err)
	}
	if err := atomicfile.SyncDir(parent); err != nil {
		return a, errors.Join(fmt.Errorf("sync %s: %w", parent, err), a.putBack(""))
	}
	return a, nil
}

// putBack undoes the wipe: whatever is at the brain's path now (a failed
// or partial restore) goes to failedDst (or is deleted when failedDst is ""
// or on another filesystem), and the original is renamed back.
func (a *aside) putBack(failedDst string) error {
	if _, err := os.Lstat(a.brain); err == nil {
		moved := false
		if failedDst != "" {
			moved = os.Rename(a.brain, failedDst) == nil
		}
		if !moved {
			if err := removeTree(a.brain); err != nil {
				return fmt.Errorf("remove the failed restore at %s: %w", a.brain, err)
			}
		}
	} else if !errors.Is(err, fs.ErrNotExist) {
		return err
	}
	if err := os.Rename(a.copy, a.brain); err != nil {
		return fmt.Errorf("rename %s back to %s: %w", a.copy, a.brain, err)
	}
	os.Remove(a.container)
	return atomicfile.SyncDir(filepath.Dir(a.brain))
}

// discard deletes the moved-aside original once the restore has proved
// identical.
func (a *aside) discard() error { return removeTree(a.container) }

// copyBack replaces rel in the brain with the moved-aside original's copy,
// atomically and with its mode; the original stays where it is until
// discard, so a later failure can still put everything back.
func (a *aside) copyBack(rel string) error {
	src := filepath.Join(a.copy, filepath.FromSlash(rel))
	in, err := os.Open(src)
	if err != nil {
		return err
	}
	defer in.Close()
	st, err := in.Stat()
	if err != nil {
		return err
	}
	out, err := atomicfile.Create(filepath.Join(a.brain, filepath.FromSlash(rel)), st.Mode().Perm())
	if err != nil {
		return err
	}
	defer out.Abort()
	if _, err := io.Copy(out, in); err != nil {
		return err
	}
	return out.Commit()
}

// removeTree is os.RemoveAll that also removes directories without write
// permission (a brain may hold read-only directories).
func removeTree(p string) error {
	if err := os.RemoveAll(p); err == nil {
		return nil
	}
	filepath.WalkDir(p, func(q string, d fs.DirEntry, err error) error {
		if err == nil && d.IsDir() {
			os.Chmod(q, 0o700)
		}
		return nil
	})
	return os.RemoveAll(p)
}
