//go:build !unix

package fsys

import (
	"errors"
	"os"
	"time"
)

// SetSymlinkMtime would set a symlink's own modification time; this
// system offers no way to (errors.ErrUnsupported): the link keeps the
// time it was made.
func SetSymlinkMtime(*os.Root, string, time.Time) error { return errors.ErrUnsupported }
