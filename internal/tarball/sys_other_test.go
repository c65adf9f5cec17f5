//go:build !unix

package tarball

import "errors"

// Without umask and fifos the tests that need them cannot show anything;
// umask only remembers its value.

var fakeUmask int

func umask(mask int) int {
	old := fakeUmask
	fakeUmask = mask
	return old
}

func mkfifo(string) error { return errors.ErrUnsupported }
