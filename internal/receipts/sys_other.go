//go:build !unix

package receipts

import (
	"fmt"
	"os"
)

// openNoFollow refuses a symbolic link at path. Without O_NOFOLLOW the
// check and the open are two steps; unix systems use the flag.
func openNoFollow(path string, flag int, perm os.FileMode, sentinel error) (*os.File, error) {
	if st, err := os.Lstat(path); err == nil && st.Mode()&os.ModeSymlink != 0 {
		return nil, fmt.Errorf("%w: %s is a symbolic link", sentinel, path)
	}
	return os.OpenFile(path, flag, perm)
}
