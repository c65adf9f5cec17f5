//go:build unix

package receipts

import (
	"errors"
	"fmt"
	"os"
	"syscall"
)

// openNoFollow opens path without following a symbolic link at its last
// element (a link planted there must not redirect hermesd's writes), and
// without blocking on a FIFO; callers check that they got a regular file.
func openNoFollow(path string, flag int, perm os.FileMode, sentinel error) (*os.File, error) {
	f, err := os.OpenFile(path, flag|syscall.O_NOFOLLOW|syscall.O_NONBLOCK, perm)
	if errors.Is(err, syscall.ELOOP) {
		return nil, fmt.Errorf("%w: %s is a symbolic link", sentinel, path)
	}
	return f, err
}
